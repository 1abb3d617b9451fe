"""The pre-trained mode for multiclass models: the binary mode's window and cut, with a
score vector per object and the multiclass stores of ``streamcal.core.multiclass``.

Everything that makes the binary pre-trained mode a Venn predictor carries over: the
model learns an object only once it has left the calibration set, in batches, and the
set is rescored after each batch (``streamcal.learner.pretrained``). What changes:

* an object's score is the model's probability of every class known so far (a class
  the model does not return has score 0), in the order the classes were first seen;
* the label is that order's index; the model learns the label itself;
* the store is a ``Stores``: the top-label store, always (it calibrates the predicted
  class), and the chosen scheme's stores.

Classes that first appear mid-stream: a class enters ``Classes`` when a label or the
model's output first names it. The stores are then rebuilt from the calibration set with
one more class. The objects already there count as not of that class (for one-vs-rest)
with the score the model gave it, 0 if it did not know it: exactly what the stores
would hold had the class been known from the start, so validity is kept.

Mondrian (``by``) reuses ``streamcal.learner.mondrian``: ``MulticlassMondrian`` only
swaps the category's class and the label the model learns.
"""

from __future__ import annotations

import math
from collections import deque

from streamcal.core.multiclass import TopLabel, scheme_class
from streamcal.learner.minibatch import BatchRanges
from streamcal.learner.mondrian import MondrianVennAbers, _Category
from streamcal.learner.pretrained import PretrainedVennAbers
from streamcal.learner.scoring import NonFiniteScore, unscorable
from streamcal.learner.settings import DEFAULT_MIN_CATEGORY

__all__ = ["Classes", "MulticlassMondrian", "MulticlassPretrained", "Stores", "score_vector"]


class Classes:
    """The classes seen so far, in order of first appearance: label <-> index.

    >>> c = Classes()
    >>> c.index("cat"), c.index("dog"), c.index("cat"), c.labels
    (0, 1, 0, ['cat', 'dog'])
    """

    def __init__(self, labels=()):
        self.labels: list = []
        self._index: dict = {}
        for label in labels:
            self.index(label)

    def index(self, label) -> int:
        """The index of ``label``, registering it if it is new (``TypeError`` if unhashable)."""
        i = self._index.get(label)
        if i is None:
            try:
                hash(label)
            except TypeError:
                raise TypeError(f"a class label must be hashable, got {label!r}") from None
            i = self._index[label] = len(self.labels)
            self.labels.append(label)
        return i

    def __len__(self) -> int:
        return len(self.labels)

    def __contains__(self, label) -> bool:
        return label in self._index


def score_vector(model, x, classes: Classes) -> tuple[float, ...]:
    """The model's probability of each known class for ``x`` (canonical), 0 for a class it
    does not return; a class it returns that is new is registered first."""
    try:
        proba = model.predict_proba_one(x)
    except ArithmeticError as exc:  # as ``score_sorted``
        raise NonFiniteScore(unscorable(x, exc)) from None
    index = classes._index
    for c in proba:
        if c not in index:
            classes.index(c)
    get = proba.get
    s = tuple([float(get(c, 0.0)) for c in classes.labels])
    if not math.isfinite(sum(s)):  # finite unless an entry is not (or they overflow)
        for v in s:
            if not math.isfinite(v):
                raise NonFiniteScore(f"the wrapped model returned a probability {v!r}, not finite")
    return s


class Stores:
    """The top-label store and the scheme's stores, over the same objects.

    >>> st = Stores("one-vs-rest", 2, [(0.8, 0.2), (0.3, 0.7)], [0, 1])
    >>> st.top.query((0.6, 0.4)), len(st.rest.stores)
    ((0, 0.0, 1.0), 2)
    """

    def __init__(self, scheme: str, n_classes: int, scores=(), labels=()):
        self.scheme, self.n_classes = scheme, n_classes
        self.top = TopLabel.from_arrays(scores, labels, n_classes)
        rest = None if scheme == "top-label" else scheme_class(scheme)
        self.rest = None if rest is None else rest.from_arrays(scores, labels, n_classes)

    def add(self, s, y: int) -> None:
        self.top.add(s, y)
        if self.rest is not None:
            self.rest.add(s, y)

    def remove(self, s, y: int) -> None:
        self.top.remove(s, y)
        if self.rest is not None:
            self.rest.remove(s, y)


class _MulticlassWindow:
    """What the multiclass pre-trained states change in ``PretrainedVennAbers``."""

    scheme: str
    classes: Classes

    def _stores(self, items=()) -> Stores:
        items = list(items)
        return Stores(self.scheme, len(self.classes), [c[2] for c in items], [c[1] for c in items])

    def _model_label(self, y: int):
        return self.classes.labels[y]

    def _score(self, x):
        cache = self._cache
        if cache is not None and cache[1] == self.version and cache[0] == x:
            return cache[0], cache[2]
        cx = self._order.canonical(x)
        s = score_vector(self.model, cx, self.classes)
        self._cache = (cx, self.version, s)
        return cx, s

    def _batch_score(self, x):
        return score_vector(self.model, x, self.classes)

    def _grown(self) -> None:
        if self.store.n_classes < len(self.classes):  # a new class: rebuild (see the module)
            self.store = self._stores(self.calibration)

    def predict(self, x):
        """(score vector, the ``Stores`` that answer it)."""
        s = self._score(x)[1]
        self._grown()
        return s, self.store

    def learn(self, x, y: int) -> None:
        self._score(x)  # registers the classes the model knows before the stores grow
        self._grown()
        super().learn(x, y)

    def _rescored(self, items) -> deque:
        rescored = deque((c[0], c[1], score_vector(self.model, c[0], self.classes)) for c in items)
        self.store = self._stores(rescored)
        return rescored

    def _window_state(self, **own) -> dict:
        # the stores are rebuilt from the calibration set, which holds every score
        return {"window": self.window, "refresh_every": self.refresh_every, **own}

    def _restore(self, state: dict) -> None:
        self.calibration = deque((c[0], c[1], tuple(c[2])) for c in state["calibration"])
        self.n_seen, self.n_learned = state["n_seen"], state["n_learned"]
        self.version = state["version"]
        if state.get("batches"):
            self.batches = BatchRanges.from_state(state["batches"])
        self.store = self._stores(self.calibration)


class MulticlassPretrained(_MulticlassWindow, PretrainedVennAbers):
    """The pre-trained mode over a multiclass model (see the module docstring).

    >>> from river import naive_bayes
    >>> va = MulticlassPretrained(naive_bayes.GaussianNB(), 4, 4, "one-vs-one", Classes())
    >>> for i in range(9):
    ...     va.learn({"a": float(i % 3)}, va.classes.index("abc"[i % 3]))
    >>> va.calibration_size, va.n_learned, len(va.store.rest.stores)
    (5, 4, 3)
    """

    def __init__(self, model, window: int, refresh_every: int, scheme: str, classes: Classes):
        super().__init__(model, window, refresh_every)
        self.scheme, self.classes = scheme, classes
        self.store = self._stores()

    @classmethod
    def from_state(cls, state: dict, *, model, scheme: str, classes: Classes):
        """The mode object ``to_state`` described, scoring with ``model``."""
        self = cls(model, state["window"], state["refresh_every"], scheme, classes)
        self._restore(state)
        return self


class _MulticlassCategory(_MulticlassWindow, _Category):
    """One category of ``MulticlassMondrian``."""

    def __init__(self, owner: MulticlassMondrian):
        super().__init__(owner)
        self.scheme, self.classes = owner.scheme, owner.classes
        self.store = self._stores()

    @classmethod
    def from_state(cls, state: dict, *, owner: MulticlassMondrian):
        self = cls(owner)
        self._restore(state)
        self.positions = deque(state["positions"])
        return self


class MulticlassMondrian(MondrianVennAbers):
    """Mondrian calibration of the multiclass pre-trained mode (``mode="pretrained"``):
    one calibration set per category, one shared model. Categories without a state, or
    with fewer than ``min_category`` pairs (by default ``DEFAULT_MIN_CATEGORY`` or the
    window if smaller), are answered from the pooled set, as in the binary default."""

    _category_type = _MulticlassCategory

    def __init__(self, model, *, scheme: str, classes: Classes, **settings):
        self.scheme, self.classes = scheme, classes
        settings.setdefault("fallback", "pooled")
        settings.setdefault("min_category", min(DEFAULT_MIN_CATEGORY, settings["window"]))
        super().__init__(model, **settings)

    def _model_label(self, y: int):
        return self.classes.labels[y]

    def _cold_score(self, x):
        return score_vector(self.model, self._order.canonical(x), self.classes)

    def _answer(self, s, stores):
        return s, Stores(self.scheme, len(self.classes)) if stores is None else stores

    def _pooled_from(self, items) -> Stores:
        items = list(items)
        return Stores(self.scheme, len(self.classes), [c[2] for c in items], [c[1] for c in items])

    def _pool_stale(self) -> bool:
        return self.pooled.n_classes < len(self.classes)

    @classmethod
    def from_state(cls, state: dict, *, model, scheme: str, classes: Classes, **settings):
        """The object ``to_state`` described (see ``MondrianVennAbers.from_state``)."""
        return super().from_state(state, model=model, scheme=scheme, classes=classes, **settings)
