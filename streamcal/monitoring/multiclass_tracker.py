"""The multiclass tracker: losses and calibration statistics of multiclass predictions.

A multiclass Venn-Abers prediction (``streamcal.learner.VennAbersMultiClassifier``) is a
predicted class with its top-label pair (p0, p1) and merged p, a probability for every
class, and with one-vs-rest a pair per class. Three things are checked here:

* the top label, "the predicted class is right", is a binary stream: a
  ``CalibrationTracker`` takes it as it is (p0, p1, p, the model's probability of the
  predicted class as the raw score, 1 if the prediction was right). Its fields are the
  usual ones: ECE and reliability bins of the top label, and Corollary 1 as
  ``mean_p0 <= frequency (the accuracy) <= mean_p1``. With ``category`` per category;
* the whole vector: multiclass log loss (-log of the true class's probability, clamped as
  river's ``CrossEntropy``) and the Brier score (the squared distance to the one-hot
  label, summed over the classes), calibrated and raw, cumulative and over the last
  window (``schema.MULTICLASS_KEYS``);
* one Corollary 1 band per class (one-vs-rest pairs): mean p0 of class k <= frequency of
  k <= mean p1 of k, over the predictions that carried a pair for k (a class first seen
  mid-stream counts from its first pair on) (``class_snapshots``).
"""

from __future__ import annotations

import math
from collections import deque

from streamcal.monitoring.schema import CLASS, MULTICLASS_KEYS
from streamcal.monitoring.tracker import (
    _EPS,
    CalibrationTracker,
    _Means,
    add_terms,
    means_state,
    restore_means,
)

__all__ = ["MulticlassTracker", "multiclass_losses"]


def multiclass_losses(proba: dict, y) -> tuple[float, float]:
    """(log loss, Brier score) of the class probabilities ``proba`` for the label ``y``:
    -log of ``proba[y]`` clamped to [1e-15, 1 - 1e-15] (0 if ``y`` is not in it), and the
    sum over the classes of (probability - 1 if the class is ``y`` else 0)^2.

    >>> log, brier = multiclass_losses({"a": 0.7, "b": 0.2, "c": 0.1}, "a")
    >>> round(log, 6), round(brier, 6)  # -log 0.7; 0.3^2 + 0.2^2 + 0.1^2
    (0.356675, 0.14)
    >>> round(multiclass_losses({"a": 1.0}, "b")[1], 6)  # a class it did not know
    2.0
    """
    q = proba.get(y, 0.0)
    q = min(max(q, _EPS), 1.0 - _EPS)
    square = sum(v * v for c, v in proba.items() if c != y)
    square += (1.0 - proba.get(y, 0.0)) ** 2
    return -math.log(q), square


def _check_vector(name: str, proba) -> None:
    if not isinstance(proba, dict):
        raise ValueError(f"{name} must be a dict of class probabilities, got {proba!r}")
    for c, v in proba.items():
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0.0 <= v <= 1.0:
            raise ValueError(f"{name}[{c!r}] must be a probability in [0, 1], got {v!r}")


class MulticlassTracker:
    """Top-label, whole-vector and per-class statistics of a stream of multiclass
    predictions (see the module docstring). Its keyword arguments (``window``, ``bins``,
    ``top_k``, ``max_categories``) are ``CalibrationTracker``'s: its top-label tracker
    takes and checks them.

    >>> t = MulticlassTracker(window=2, bins=2)
    >>> t.update("a", 0.5, 0.7, 0.6, {"a": 0.6, "b": 0.4}, "a",
    ...          scores={"a": 0.9, "b": 0.1}, intervals={"a": (0.5, 0.7), "b": (0.3, 0.5)})
    >>> t.update("a", 0.4, 0.8, 0.6, {"a": 0.6, "b": 0.4}, "b",
    ...          intervals={"a": (0.4, 0.8), "b": (0.2, 0.6)})
    >>> s = t.snapshot()
    >>> s["labels"], s["frequency"], s["mean_p0"], s["classes"]  # frequency: the accuracy
    (2, 0.5, 0.45, 2)
    >>> # (-log 0.6 - log 0.4) / 2, and -log 0.9 (the second update has no scores)
    >>> round(s["multiclass_log_loss"], 6), round(s["raw_multiclass_log_loss"], 6)
    (0.713558, 0.105361)
    >>> [(r["class"], r["labels"], r["frequency"], r["mean_p1"]) for r in t.class_snapshots()]
    [('a', 2, 0.5, 0.75), ('b', 2, 0.5, 0.55)]
    """

    def __init__(self, **settings):
        # window, bins, top_k, max_categories: the top label's tracker checks and keeps them
        self.top = CalibrationTracker(**settings)
        self.window = self.top.window
        self.classes: list = []  # every class seen (labels, predictions), in order
        self._known: set = set()
        self._all = _Means()  # log, square; raw log, raw square (width unused: 0)
        self._recent = _Means()
        self._terms: deque = deque()
        # class -> [predictions with a pair for it, of them labelled it, sum p0, sum p1]
        self._bands: dict = {}

    @property
    def labels(self) -> int:
        """The labelled predictions tracked (the top label's)."""
        return self.top.labels

    def _see(self, classes) -> None:
        for c in classes:
            if c not in self._known:
                self._known.add(c)
                self.classes.append(c)

    def update(self, label, p0, p1, p, proba: dict, y, scores=None, intervals=None,
               category=None) -> None:  # fmt: skip
        """Add one labelled prediction: the predicted class ``label`` with its top-label
        pair (p0, p1) and p, the class probabilities ``proba``, the true class ``y``, the
        model's own probabilities ``scores`` (or None) and the one-vs-rest pairs
        ``intervals`` ({class: (p0, p1)}, or None). ValueError (state unchanged) on bad
        input."""
        _check_vector("proba", proba)
        if scores is not None:
            _check_vector("scores", scores)
        for c, pair in (intervals or {}).items():
            if len(pair) != 2 or not all(
                isinstance(v, int | float) and not isinstance(v, bool) and 0.0 <= v <= 1.0
                for v in pair
            ):
                raise ValueError(f"intervals[{c!r}] must be a pair in [0, 1], got {pair!r}")
        score = None if scores is None else scores.get(label, 0.0)
        # checks p0, p1, p, score; the first change of state
        self.top.update(p0, p1, label == y, score=score, p=p, category=category)
        log, square = multiclass_losses(proba, y)
        raw_log = raw_square = None
        if scores is not None:
            raw_log, raw_square = multiclass_losses(scores, y)
        terms = (log, square, 0.0, raw_log, raw_square)
        add_terms(self._all, self._recent, self._terms, self.window, terms)
        self._see((label, y, *proba))
        for c, (c0, c1) in (intervals or {}).items():
            band = self._bands.get(c)
            if band is None:
                band = self._bands[c] = [0, 0, 0.0, 0.0]
            band[0] += 1
            band[1] += c == y
            band[2] += float(c0)
            band[3] += float(c1)

    def update_protection(self, log_martingale, alarm, alarm_at=None, alpha=0.01, category=None,
                          alarm_onset=None) -> None:  # fmt: skip
        """Record the alarm's state after a label (``CalibrationTracker.update_protection``;
        no protection here, so no gain). The alarm tests the stream of objects and their
        classes, not the top label; its fields (``ALARM_KEYS``) join the snapshot and,
        with ``category``, that category's line.

        >>> t = MulticlassTracker()
        >>> t.update_protection(1.5, False, None, alpha=0.01)
        >>> t.snapshot()["log_martingale"], "protection_gain" in t.snapshot()
        (1.5, False)
        """
        self.top.update_protection(log_martingale, alarm, alarm_at, alpha, category=category,
                                   alarm_onset=alarm_onset)  # fmt: skip

    def snapshot(self, reliability: bool = False) -> dict:
        """The top label's ``CalibrationTracker.snapshot`` (with the alarm's fields once
        recorded) then the ``MULTICLASS_KEYS``."""
        out = self.top.snapshot(reliability=reliability)
        a, w = self._all, self._recent
        values = {
            "classes": len(self.classes),
            "multiclass_log_loss": a.get("log"),
            "recent_multiclass_log_loss": w.get("log"),
            "multiclass_square_loss": a.get("square"),
            "recent_multiclass_square_loss": w.get("square"),
            "raw_multiclass_log_loss": a.get("raw_log"),
            "recent_raw_multiclass_log_loss": w.get("raw_log"),
            "raw_multiclass_square_loss": a.get("raw_square"),
            "recent_raw_multiclass_square_loss": w.get("raw_square"),
        }
        out.update((k, values[k]) for k in MULTICLASS_KEYS)
        return out

    def class_snapshots(self) -> list[dict]:
        """Per-class lines, one per class with one-vs-rest pairs, in order of first
        appearance: ``{"class": str, "labels", "mean_p0", "frequency", "mean_p1"}``
        (``labels``: the predictions that carried a pair for the class)."""
        rows = []
        for c in self.classes:
            band = self._bands.get(c)
            if band is None:
                continue
            n, ones, s0, s1 = band
            rows.append({CLASS: str(c), "labels": n, "mean_p0": s0 / n,
                         "frequency": ones / n, "mean_p1": s1 / n})  # fmt: skip
        return rows

    def category_snapshots(self) -> list[dict]:
        """The top label's per-category lines (``CalibrationTracker.category_snapshots``)."""
        return self.top.category_snapshots()

    def to_state(self) -> dict:
        """The tracker as plain data; ``from_state`` rebuilds it."""
        return {
            "top": self.top.to_state(),
            "classes": list(self.classes),
            **means_state(self._all, self._recent, self._terms),
            "bands": [(c, list(b)) for c, b in self._bands.items()],
        }

    @classmethod
    def from_state(cls, state: dict) -> MulticlassTracker:
        """The tracker ``to_state`` described.

        >>> t = MulticlassTracker()
        >>> t.update("a", 0.5, 0.7, 0.6, {"a": 0.6, "b": 0.4}, "b", intervals={"a": (0.5, 0.7)})
        >>> copy = MulticlassTracker.from_state(t.to_state())
        >>> copy.snapshot() == t.snapshot(), copy.class_snapshots() == t.class_snapshots()
        (True, True)
        """
        top = CalibrationTracker.from_state(state["top"])
        self = cls(window=top.window, bins=top.bins)
        self.top = top
        self._see(state["classes"])
        self._terms = restore_means(state, self._all, self._recent)
        self._bands = {c: list(b) for c, b in state["bands"]}
        return self

    def __repr__(self):
        return f"MulticlassTracker(window={self.window}, classes={len(self.classes)})"
