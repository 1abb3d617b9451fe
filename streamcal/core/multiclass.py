"""Multiclass Venn-Abers: K-class probabilities from sets of binary score stores.

The paper is binary. Each scheme here reduces a K-class problem to binary ones and keeps
one exact ``ScoreStore`` per binary problem, so every store answers exactly what the
binary store answers on its own (score, label) pairs. Classes are the integers
``0 .. n_classes - 1`` (the learner maps labels to them); an object's scores are a
sequence of per-class scores, e.g. a model's softmax, and a class it does not score
(shorter sequence) has score 0.

* ``TopLabel`` (Johansson, Lofstrom & Bostrom 2021): one store of (score of the
  predicted class, 1 if the prediction was right). Its (p0, p1) is a Venn-Abers pair for
  "the predicted class is right", the number most consumers act on.
* ``OneVsRest``: store k holds (score of class k, 1 if y = k) for every object. Per-class
  pairs; the merged probabilities are normalised to sum to 1.
* ``OneVsOne`` (Manokhin 2017): store (i, j), i < j, holds the objects labelled i or j
  with score s_j / (s_i + s_j) (0.5 if both are 0) and label 1 if y = j. The merged
  pairwise probabilities are combined by ``couple``.

``OneVsRest.proba`` and ``OneVsOne.proba`` give the numbers venn-abers 1.5.4's
``predict_proba_prefitted_va`` gives on the same calibration scores (tested), with
``predicted_class`` ties going to the lowest class. ``venn_abers_multiclass`` is the
batch form (one ``venn_abers`` call per store), for tests and benchmarks.

>>> S = [[0.7, 0.2, 0.1], [0.2, 0.5, 0.3], [0.1, 0.3, 0.6], [0.6, 0.3, 0.1]]
>>> y = [0, 1, 2, 1]
>>> ovr = OneVsRest.from_arrays(S, y, n_classes=3)
>>> [round(p, 3) for p in ovr.proba([0.5, 0.4, 0.1])]
[0.294, 0.529, 0.176]
>>> top = TopLabel.from_arrays(S, y, n_classes=3)
>>> top.query([0.5, 0.4, 0.1])   # class 0 predicted; (p0, p1) that it is right
(0, 0.5, 0.75)
"""

from __future__ import annotations

import numpy as np

from streamcal.core.batch import venn_abers
from streamcal.core.merge import SCALAR_MERGES
from streamcal.core.store import ScoreStore

__all__ = [
    "SCHEMES",
    "OneVsOne",
    "OneVsRest",
    "TopLabel",
    "couple",
    "pair_score",
    "predicted_class",
    "scheme_class",
    "venn_abers_multiclass",
]

SCHEMES = ("top-label", "one-vs-rest", "one-vs-one")
STATE_FORMAT = 1


def predicted_class(scores) -> int:
    """Index of the highest score, the lowest index on ties (0 for no scores).

    >>> predicted_class([0.2, 0.5, 0.5]), predicted_class([])
    (1, 0)
    """
    best, k = -np.inf, 0
    for i, s in enumerate(scores):
        if s > best:
            best, k = s, i
    return k


def pair_score(si: float, sj: float) -> float:
    """The one-vs-one score of class j against class i: s_j / (s_i + s_j), 0.5 if both are 0.

    >>> pair_score(0.2, 0.6), pair_score(0.0, 0.0)
    (0.75, 0.5)
    """
    total = si + sj
    return sj / total if total > 0 else 0.5


def couple(pairwise) -> np.ndarray:
    """Pairwise coupling: class probabilities from pairwise ones, as venn-abers does it.

    ``pairwise[..., i, j]`` is p_{i|ij}, the probability of class i given that the label
    is i or j (the diagonal is ignored). p_i = 1 / (sum over j != i of 1 / p_{i|ij} -
    (K - 2)), then normalised to sum 1. Any leading axes are a batch.

    >>> q = np.array([[0.0, 0.6, 0.8], [0.4, 0.0, 0.7], [0.2, 0.3, 0.0]])
    >>> couple(q).round(3).tolist()
    [0.522, 0.342, 0.136]
    >>> couple(np.zeros((1, 1))).tolist()  # one class: probability 1
    [1.0]
    """
    q = np.asarray(pairwise, dtype=float)
    k = q.shape[-1]
    if k == 1:
        return np.ones(q.shape[:-1])
    off = ~np.eye(k, dtype=bool)
    with np.errstate(divide="ignore"):
        inv = np.where(off, 1.0 / np.where(off, q, 1.0), 0.0)
    p = 1.0 / (inv.sum(axis=-1) - (k - 2))
    return p / p.sum(axis=-1, keepdims=True)


def _padded(scores, k: int) -> list[float]:
    s = [float(v) for v in scores]
    if len(s) > k:
        raise ValueError(f"got {len(s)} scores for {k} classes")
    return s + [0.0] * (k - len(s))


def _check_class(label, k: int) -> int:
    if isinstance(label, bool) or not isinstance(label, (int, np.integer)) or not 0 <= label < k:
        raise ValueError(f"label must be a class index in 0..{k - 1}, got {label!r}")
    return int(label)


class _Scheme:
    """Shared parts: a fixed set of stores keyed by ``keys()``; subclasses say which
    binary pairs an object (scores, label) gives each store (``_pairs``)."""

    scheme = ""

    def __init__(self, n_classes: int = 0, *, backend: str | None = None):
        if isinstance(n_classes, bool) or not isinstance(n_classes, int) or n_classes < 0:
            raise ValueError(f"n_classes must be a non-negative integer, got {n_classes!r}")
        self.n_classes = n_classes
        self.stores = {key: ScoreStore(backend=backend) for key in self.keys()}

    def keys(self) -> list:
        """The stores' keys, in a fixed order."""
        raise NotImplementedError

    def _pairs(self, s: list[float], y: int):
        """(store key, binary score, binary label) for each store the object joins."""
        raise NotImplementedError

    def add(self, scores, label) -> None:
        """Add one object: its scores (one per class, missing ones 0) and class index."""
        s = _padded(scores, self.n_classes)
        for key, score, bit in self._pairs(s, _check_class(label, self.n_classes)):
            self.stores[key].add(score, bit)

    def remove(self, scores, label) -> None:
        """Remove one object added before (``ValueError`` if a store does not hold it)."""
        s = _padded(scores, self.n_classes)
        for key, score, bit in self._pairs(s, _check_class(label, self.n_classes)):
            self.stores[key].remove(score, bit)

    def binary_pairs(self, scores, labels) -> dict:
        """For each store key, the (scores, labels) arrays the store holds after adding
        the objects ``scores`` (rows) with class indices ``labels``."""
        out = {key: ([], []) for key in self.keys()}
        for row, y in zip(scores, labels, strict=True):
            for key, score, bit in self._pairs(_padded(row, self.n_classes), int(y)):
                out[key][0].append(score)
                out[key][1].append(bit)
        return {k: (np.array(v[0], float), np.array(v[1], np.int64)) for k, v in out.items()}

    @classmethod
    def from_arrays(cls, scores, labels, n_classes: int, *, backend: str | None = None):
        """The scheme holding the objects ``scores`` (rows) with class indices ``labels``,
        each store built with one sort."""
        self = cls(n_classes, backend=backend)
        for y in labels:
            _check_class(y, n_classes)
        for key, (s, b) in self.binary_pairs(scores, labels).items():
            self.stores[key] = ScoreStore.from_arrays(s, b, backend=backend)
        return self

    def __len__(self) -> int:
        """Number of objects held (the top-label and one-vs-rest stores hold each once)."""
        if self.scheme == "one-vs-one":
            total = sum(len(st) for st in self.stores.values())
            return total // max(1, self.n_classes - 1)
        return len(next(iter(self.stores.values()))) if self.stores else 0

    def to_state(self) -> dict:
        """Plain data: the scheme, the number of classes and each store's state in key order."""
        return {
            "format": STATE_FORMAT,
            "scheme": self.scheme,
            "n_classes": self.n_classes,
            "stores": [self.stores[k].to_state() for k in self.keys()],
        }

    @classmethod
    def from_state(cls, state: dict, *, backend: str | None = None):
        """The scheme ``to_state`` described (any scheme: the state names it)."""
        if state.get("format") != STATE_FORMAT:
            raise ValueError(f"multiclass state has format {state.get('format')!r}, expected 1")
        self = scheme_class(state["scheme"])(state["n_classes"], backend=backend)
        if len(state["stores"]) != len(self.stores):
            raise ValueError("multiclass state: wrong number of stores for its scheme")
        for key, st in zip(self.keys(), state["stores"], strict=True):
            self.stores[key] = ScoreStore.from_state(st, backend=backend)
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n_classes={self.n_classes}, n={len(self)})"


class TopLabel(_Scheme):
    """One store: (score of the predicted class, 1 if the label is that class).

    >>> top = TopLabel(2, backend="python")
    >>> for s, y in [([0.9, 0.1], 0), ([0.8, 0.2], 1), ([0.3, 0.7], 1)]:
    ...     top.add(s, y)
    >>> top.query([0.6, 0.4])
    (0, 0.0, 0.6666666666666666)
    """

    scheme = "top-label"

    def keys(self) -> list:
        return ["top"]

    def _pairs(self, s, y):
        k = predicted_class(s)
        return (("top", s[k] if s else 0.0, int(k == y)),)

    def query(self, scores) -> tuple[int, float, float]:
        """(predicted class, p0, p1): the pair for "the predicted class is right"."""
        s = _padded(scores, self.n_classes)
        k = predicted_class(s)
        p0, p1 = self.stores["top"].query(s[k] if s else 0.0)
        return k, p0, p1


class OneVsRest(_Scheme):
    """K stores: store k holds (score of class k, 1 if y = k) for every object."""

    scheme = "one-vs-rest"

    def keys(self) -> list:
        return list(range(self.n_classes))

    def _pairs(self, s, y):
        return ((k, s[k], int(k == y)) for k in range(self.n_classes))

    def intervals(self, scores) -> list[tuple[float, float]]:
        """(p0, p1) of "the label is k" for each class k."""
        s = _padded(scores, self.n_classes)
        # The stores in key order (the dict's: built and replaced in it), without a lookup
        # each: this runs for every prediction.
        return [store.query(score) for store, score in zip(self.stores.values(), s, strict=True)]

    def proba(self, scores, merge: str = "log") -> list[float]:
        """Each class's merged pair, normalised to sum 1."""
        m = SCALAR_MERGES[merge]
        p = [m(p0, p1) for p0, p1 in self.intervals(scores)]
        total = sum(p)
        return [v / total for v in p]


class OneVsOne(_Scheme):
    """K(K-1)/2 stores: store (i, j), i < j, holds the objects labelled i or j, with
    score ``pair_score(s_i, s_j)`` and label 1 if y = j.

    >>> ovo = OneVsOne.from_arrays([[0.7, 0.3], [0.4, 0.6]], [0, 1], n_classes=2)
    >>> ovo.intervals([0.5, 0.5])[(0, 1)]
    (0.0, 1.0)
    """

    scheme = "one-vs-one"

    def keys(self) -> list:
        k = self.n_classes
        return [(i, j) for i in range(k) for j in range(i + 1, k)]

    def _pairs(self, s, y):
        for k in range(self.n_classes):
            if k < y:
                yield (k, y), pair_score(s[k], s[y]), 1
            elif k > y:
                yield (y, k), pair_score(s[y], s[k]), 0

    def intervals(self, scores) -> dict[tuple[int, int], tuple[float, float]]:
        """(p0, p1) of "the label is j" given it is i or j, for each pair (i, j), i < j."""
        s = _padded(scores, self.n_classes)
        return {(i, j): st.query(pair_score(s[i], s[j])) for (i, j), st in self.stores.items()}

    def proba(self, scores, merge: str = "log") -> list[float]:
        """The merged pairwise probabilities, coupled (``couple``)."""
        m = SCALAR_MERGES[merge]
        q = np.zeros((self.n_classes, self.n_classes))
        for (i, j), (p0, p1) in self.intervals(scores).items():
            pj = m(p0, p1)
            q[j, i] = pj
            q[i, j] = 1.0 - pj
        return couple(q).tolist()


_CLASSES = {"top-label": TopLabel, "one-vs-rest": OneVsRest, "one-vs-one": OneVsOne}


def scheme_class(scheme: str) -> type[_Scheme]:
    """The class of a scheme's name.

    >>> scheme_class("one-vs-one").__name__
    'OneVsOne'
    >>> scheme_class("ovo")
    Traceback (most recent call last):
    ...
    ValueError: scheme must be one of top-label, one-vs-rest, one-vs-one; got 'ovo'
    """
    if scheme not in _CLASSES:
        raise ValueError(f"scheme must be one of {', '.join(SCHEMES)}; got {scheme!r}")
    return _CLASSES[scheme]


def venn_abers_multiclass(cal_scores, cal_labels, test_scores, scheme: str, merge: str = "log"):
    """Batch form: the class probabilities (m x K) of ``scheme`` ("one-vs-rest" or
    "one-vs-one") for the rows of ``test_scores``, one ``venn_abers`` call per store.

    >>> S = np.array([[0.7, 0.2, 0.1], [0.2, 0.5, 0.3], [0.1, 0.3, 0.6], [0.6, 0.3, 0.1]])
    >>> venn_abers_multiclass(S, [0, 1, 2, 1], [[0.5, 0.4, 0.1]], "one-vs-rest").round(3)
    array([[0.294, 0.529, 0.176]])
    """
    S = np.asarray(cal_scores, dtype=float)
    y = np.asarray(cal_labels)
    T = np.asarray(test_scores, dtype=float)
    k = T.shape[1]
    m = SCALAR_MERGES[merge]
    if scheme == "one-vs-rest":
        p = np.column_stack([m(*venn_abers(S[:, c], y == c, T[:, c])) for c in range(k)])
        return p / p.sum(axis=1, keepdims=True)
    if scheme != "one-vs-one":
        raise ValueError(f"the batch form is for one-vs-rest and one-vs-one, got {scheme!r}")
    q = np.zeros((len(T), k, k))
    for i in range(k):
        for j in range(i + 1, k):
            rows = (y == i) | (y == j)
            cal = _pair_scores(S[rows, i], S[rows, j])
            pj = m(*venn_abers(cal, y[rows] == j, _pair_scores(T[:, i], T[:, j])))
            q[:, j, i] = pj
            q[:, i, j] = 1.0 - pj
    return couple(q)


def _pair_scores(si, sj) -> np.ndarray:
    total = si + sj
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total > 0, sj / np.where(total > 0, total, 1.0), 0.5)
