"""Calibration statistics per category (Mondrian monitoring): top-k by volume plus "other".

A Mondrian calibrator promises Corollary 1 inside every category, so that is where it is
checked. ``CategoryBreakdown`` keeps, per category, sums that add up (labels, ones,
p0, p1, loss terms, reliability bins); a row is therefore a category's own statistics,
and the ``"(other)"`` row is the sum of every category outside the top ``k`` by volume.
Memory is bounded: the first ``max_categories`` categories are counted one by one, any
later one only in ``"(other)"``.
"""

from __future__ import annotations

from streamcal.learner.settings import DEFAULT_MAX_CATEGORIES
from streamcal.monitoring.reliability import ReliabilityBins
from streamcal.monitoring.schema import CATEGORY_KEYS

__all__ = ["CategoryBreakdown", "OTHER"]

OTHER = "(other)"  # the row of the categories outside the top k


class _Sums:
    """Additive statistics of one category (or of several, summed)."""

    __slots__ = ("labels", "ones", "p0", "p1", "log", "square", "bins")

    def __init__(self, bins: int):
        self.labels = self.ones = 0
        self.p0 = self.p1 = self.log = self.square = 0.0
        self.bins = ReliabilityBins(bins)

    def update(self, p0, p1, y, p, log, square) -> None:
        self.labels += 1
        self.ones += y
        self.p0 += p0
        self.p1 += p1
        self.log += log
        self.square += square
        self.bins.update(p, y)

    def add(self, other: _Sums) -> None:
        for k in ("labels", "ones", "p0", "p1", "log", "square"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        b, o = self.bins, other.bins
        for i in range(b.bins):
            b.counts[i] += o.counts[i]
            b.ones[i] += o.ones[i]
            b.sums[i] += o.sums[i]

    def row(self, category: str) -> dict:
        n = self.labels
        mean = (lambda v: v / n) if n else (lambda v: None)
        values = {
            "labels": n,
            "log_loss": mean(self.log),
            "square_loss": mean(self.square),
            "mean_width": mean(self.p1 - self.p0),
            "ece": self.bins.ece(),
            "mean_p0": mean(self.p0),
            "frequency": mean(self.ones),
            "mean_p1": mean(self.p1),
        }
        return {"category": category, **{k: values[k] for k in CATEGORY_KEYS}}

    def __getstate__(self):
        return {k: getattr(self, k) for k in self.__slots__}

    def to_state(self) -> dict:
        state = self.__getstate__()
        state["bins"] = [list(v) if isinstance(v, list) else v for v in self.bins.__getstate__()]
        return state

    @classmethod
    def from_state(cls, state: dict) -> _Sums:
        self = cls.__new__(cls)
        self.__setstate__({**state, "bins": ReliabilityBins.__new__(ReliabilityBins)})
        self.bins.__setstate__(tuple(list(v) if isinstance(v, list) else v for v in state["bins"]))
        return self

    def __setstate__(self, state):
        for k in self.__slots__:
            setattr(self, k, state[k])


class CategoryBreakdown:
    """Per-category calibration statistics (see the module docstring).

    >>> b = CategoryBreakdown(top_k=1, bins=2)
    >>> for c, (p0, p1, y) in zip("aab", [(0.2, 0.4, 0), (0.6, 0.8, 1), (0.1, 0.3, 1)]):
    ...     b.update(c, p0, p1, y, p=0.5, log=0.7, square=0.25)
    >>> [(r["category"], r["labels"], r["mean_p0"], r["frequency"]) for r in b.rows()]
    [('a', 2, 0.4, 0.5), ('(other)', 1, 0.1, 1.0)]
    """

    def __init__(
        self, top_k: int = 10, bins: int = 10, max_categories: int = DEFAULT_MAX_CATEGORIES
    ):
        for name, v in (("top_k", top_k), ("max_categories", max_categories)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        self.top_k = top_k
        self.bins = bins
        self.max_categories = max_categories
        self.sums: dict[str, _Sums] = {}
        self.untracked = _Sums(bins)  # categories beyond max_categories

    def update(self, category, p0, p1, y, p, log, square) -> None:
        """One labelled prediction of ``category`` (any value; rows name it by ``str``)."""
        key = str(category)
        s = self.sums.get(key)
        if s is None:
            if len(self.sums) >= self.max_categories:
                s = self.untracked
            else:
                s = self.sums[key] = _Sums(self.bins)
        s.update(p0, p1, y, p=p, log=log, square=square)

    def rows(self) -> list[dict]:
        """The top ``k`` categories by labels (ties by name), then ``"(other)"`` if any
        labels fell outside them: each a dict ``{"category", *CATEGORY_KEYS}``."""
        ranked = sorted(self.sums.items(), key=lambda kv: (-kv[1].labels, kv[0]))
        out = [s.row(c) for c, s in ranked[: self.top_k]]
        other = _Sums(self.bins)
        for _, s in ranked[self.top_k :]:
            other.add(s)
        other.add(self.untracked)
        if other.labels:
            out.append(other.row(OTHER))
        return out

    def to_state(self) -> dict:
        """Plain data; ``from_state`` rebuilds it."""
        return {
            "top_k": self.top_k,
            "bins": self.bins,
            "max_categories": self.max_categories,
            "sums": [[c, s.to_state()] for c, s in self.sums.items()],
            "untracked": self.untracked.to_state(),
        }

    @classmethod
    def from_state(cls, state: dict) -> CategoryBreakdown:
        """The breakdown ``to_state`` described.

        >>> b = CategoryBreakdown(top_k=1, bins=2)
        >>> b.update("a", 0.2, 0.4, 1, p=0.3, log=1.2, square=0.49)
        >>> CategoryBreakdown.from_state(b.to_state()).rows() == b.rows()
        True
        """
        self = cls(state["top_k"], state["bins"], state["max_categories"])
        self.sums = {c: _Sums.from_state(s) for c, s in state["sums"]}
        self.untracked = _Sums.from_state(state["untracked"])
        return self
