"""Mondrian Venn-Abers: one calibration set per category, one shared scoring model.

A Mondrian taxonomy (Vovk, Gammerman & Shafer, *Algorithmic Learning in a Random
World*, section 4.5) splits the calibration set by a category of the object (country,
merchant, device...). Each category's (p0, p1) is computed from that category's pairs
only, so Corollary 1 holds inside every category, not just on average: the stream need
only be exchangeable within each category. The model that scores is shared.

Every category keeps the state of the chosen mode (``streamcal.learner.pretrained``,
``sva`` or ``va``), with the same window and refresh rules applied to its own labels.
The mode objects all score with the one model; what the modes do to the model is
shared as follows:

* ``"pretrained"``: a category's calibration set holds its newest ``window`` to
  ``window + refresh_every - 1`` labels: it cuts its surplus as the plain mode does on
  its own sub-stream, but the objects beyond the cut wait instead of being learned. Once
  they number ``refresh_every`` times the number of categories (or, at the start, once
  they would at least double what the model has learned), every category also hands
  over its objects beyond its newest ``window`` (as the plain mode does at a refresh),
  the model learns all waiting objects in stream order, and every category is
  rescored. The cuts depend on counts only, and between those moments the scoring
  function is fixed and has never seen a calibration or test object: each category is
  a pre-trained Venn predictor, valid per category. The amortised cost per event is
  about the plain mode's (one learn, one rescoring); the price is a model lagging about
  ``refresh_every`` labels per category behind.
* ``"sva"`` and ``"va"``: the model learns every label at once, as in the plain modes;
  the window (and, for ``"sva"``, the rescoring) is per category.

The category of an object is ``by(x)`` for a function, else its feature ``x[by]``. An
object without that feature has category None (as ``x.get(by)``: river's learners take
objects whose features come and go), and the first such object brings a
``MissingCategoryWarning``, once per classifier, so that a misspelt ``by`` does not pass
silently (``categories`` then shows None as the only category).

At most ``max_categories`` categories keep a state; the least recently labelled one is
evicted when a new one arrives (``evictions`` counts them). Nothing of an evicted
category stays: under ``"pretrained"`` its calibration objects wait for the model,
which has never seen them, with the objects the categories cut; the model learns all
waiting objects (and every category is rescored) once they number
``max(refresh_every, calibration_size)``, so the waiting objects never outnumber the
calibration sets by much, and memory stops growing once ``max_categories`` categories
are held, however many values the key has. The rule depends on counts and on the
sequence of categories only, never on labels, so each category stays a pre-trained
Venn predictor: an evicted category's objects are past objects for every category, and
a category that comes back starts an empty calibration set of its own.

The pooled answer (``fallback="pooled"``, ``"pretrained"`` only): the pooled calibration
set is every labelled object the model has not learned (the union of the categories'
calibration sets and the objects waiting for the model), scored by the same model, so it
stays as large as the categories' sets however fast they are evicted. A category without a
state (never labelled, or evicted) is answered from it, and so is one with fewer than
``min_category`` calibration pairs. **Such an answer has only the pooled guarantee**
(calibrated on average over the objects so answered, as without ``by``, insofar as the
categories held represent them), not the per-category one; an answer from a category's
own set (``min_category`` pairs or more: a count, so the choice does not look at the
labels) has the per-category guarantee. Without the fallback such a category gets the
(0, 1) pair. A key that churns (most evicted categories had fewer than ``min_category``
pairs) brings a ``CategoryChurnWarning`` (``streamcal.learner.churn``).
"""

from __future__ import annotations

import warnings
from collections import OrderedDict, deque

import numpy as np

from streamcal.core import ScoreStore
from streamcal.learner.churn import CategoryChurn
from streamcal.learner.guard import MODEL_ERRORS, ModelGuard
from streamcal.learner.minibatch import BatchRanges, learns_in_batches, pairs_row_by_row
from streamcal.learner.pretrained import PretrainedVennAbers, learn_guarded
from streamcal.learner.scoring import FeatureOrder, score_many, score_sorted
from streamcal.learner.settings import DEFAULT_MAX_CATEGORIES, DEFAULT_MIN_CATEGORY
from streamcal.learner.sva import SimplifiedVennAbers
from streamcal.learner.va import VennAbers

__all__ = [
    "FROM_X",
    "MissingCategoryWarning",
    "MondrianVennAbers",
    "category_of",
    "hashable_category",
]

FROM_X = object()  # no category given: derive it from x with ``by``
_FEW = 32  # calibration pairs a category's store is rebuilt from one by one (_rescored)


class MissingCategoryWarning(UserWarning):
    """An object lacks the feature ``by`` names: its category is None. Issued at the first
    such object of a classifier (a misspelt ``by`` shows at once)."""


def category_of(by, x):
    """The category of ``x``: ``by(x)`` if ``by`` is callable, else the feature ``x[by]``
    (``None`` when ``x`` lacks it).

    >>> category_of("country", {"country": "fr", "amount": 3.0})
    'fr'
    >>> category_of(lambda x: x["amount"] > 10, {"amount": 3.0})
    False
    >>> category_of("country", {"amount": 3.0}) is None
    True
    """
    return hashable_category(by(x) if callable(by) else x.get(by))


def hashable_category(c):
    """``c``, if a category can be it (hashable); else a ``TypeError`` naming it."""
    try:
        hash(c)
    except TypeError:
        raise TypeError(f"the category of an object must be hashable, got {c!r}") from None
    return c


def _key(c):
    """A category as read back from plain data: JSON-like formats turn tuples into lists."""
    return tuple(_key(v) for v in c) if isinstance(c, list) else c


class _Category(PretrainedVennAbers):
    """The pre-trained mode's state for one category: it decides its own cut as the plain
    mode does, but hands the objects beyond the cut to the shared model (``owner``)
    instead of learning them itself."""

    def __init__(self, owner: MondrianVennAbers):
        super().__init__(owner.model, owner.window, owner.refresh_every)
        self.owner = owner
        self.guard = owner.guard  # the model's: the owner's learning goes through it
        self.positions: deque = deque()  # stream position of each calibration object

    def _refresh(self, k: int) -> None:
        for _ in range(k):
            item = self.calibration.popleft()
            self.store.remove(item[2], item[1])
            self.owner._leave(self.positions.popleft(), item)
        self.n_learned += k

    def _rescored(self, items) -> deque:
        if len(items) > _FEW:
            return super()._rescored(items)
        # A key with many values holds many categories of a pair or two, all rescored at
        # each model update: adding them is 2-7 times cheaper than building a store.
        scores = score_many(self.model, [c[0] for c in items])
        self.store = ScoreStore()
        for s, c in zip(scores, items, strict=True):
            self.store.add(s, c[1])
        return deque((c[0], c[1], s) for c, s in zip(items, scores, strict=True))

    def to_state(self) -> dict:
        return {**super().to_state(), "positions": list(self.positions)}

    @classmethod
    def from_state(cls, state: dict, *, owner: MondrianVennAbers) -> _Category:
        """The category ``to_state`` described, handing over to ``owner``."""
        self = cls(owner)
        plain = PretrainedVennAbers.from_state(state, model=owner.model)
        for k in ("store", "calibration", "n_seen", "n_learned", "version"):
            setattr(self, k, getattr(plain, k))
        self.positions = deque(state["positions"])
        return self


class MondrianVennAbers:
    """Per-category state of any mode, sharing one model (see the module docstring).

    >>> from river import linear_model
    >>> va = MondrianVennAbers(linear_model.LogisticRegression(), mode="pretrained", window=2,
    ...                        refresh_every=2, by="g", max_categories=2, fallback="pooled")
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     for i in range(12):
    ...         va.learn({"a": float(i), "g": i % 3}, i % 2)
    >>> list(va.categories), va.evictions, len(va.pooled), va.calibration_size
    ([1, 2], 10, 2, 2)
    >>> va.predict({"a": 1.0, "g": 7})[1:]  # no pairs of its own: the pooled set answers
    (0.0, 0.5)
    >>> [w.category.__name__ for w in caught]  # three categories, two kept: it churns
    ['CategoryChurnWarning']
    """

    # What a subclass (the multiclass one) changes: the pre-trained category's class, and
    # the label the model learns for a stored label (binary: 0/1 stored, bool learned).
    _category_type = _Category
    _model_label = staticmethod(bool)
    # Positions learned by learn_many the model has still to learn (as in the plain mode)
    batches: BatchRanges | None = None
    _warned = False  # the MissingCategoryWarning was given
    _pool_dirty = False  # the pooled store missed changes: rebuilt when next read

    def __init__(
        self,
        model,
        *,
        mode: str,
        window: int | None,
        refresh_every: int | None,
        by,
        min_category: int = 0,
        fallback: str | None = None,
        max_categories: int = DEFAULT_MAX_CATEGORIES,
    ):
        self.model, self.mode, self.by = model, mode, by
        self.window, self.refresh_every = window, refresh_every
        self.min_category, self.max_categories = min_category, max_categories
        self.categories: OrderedDict = OrderedDict()  # category -> mode state, LRU first
        self.evictions = 0
        self.n_seen = 0
        self.n_learned = 0  # objects the model has learned ("pretrained")
        self.waiting: list = []  # (position, features, label): left calibration, not learned
        self.pooled = self._pooled_from(()) if fallback == "pooled" else None
        # cold: fewer pairs than answer on their own (without a fallback, as by default)
        cold = min(DEFAULT_MIN_CATEGORY, window) if window else DEFAULT_MIN_CATEGORY
        self.churn = CategoryChurn(min_category or cold)
        self._n_model_learns = 0  # "va": invalidates the per-category prediction caches
        self._order = FeatureOrder()  # for categories without a state yet
        self.guard = ModelGuard(model)  # one for the shared model, whichever mode

    # The sum of the categories' calibration sizes, kept as labels come (read for every
    # prediction: a sum over the categories would make each one O(categories)); None:
    # to recompute.
    _size: int | None = None

    @property
    def calibration_size(self) -> int:
        if self._size is None:
            self._size = sum(st.calibration_size for st in self.categories.values())
        return self._size

    def _new_state(self):
        if self.mode == "pretrained":
            return self._category_type(self)
        if self.mode == "sva":
            return SimplifiedVennAbers(self.model, self.window, self.refresh_every, self.guard)
        return VennAbers(self.model, self.window, self.guard)

    def category(self, x):
        """The category of ``x`` (see the module docstring): ``category_of``, warning at
        the first object without the feature ``by``."""
        by = self.by
        if callable(by):
            return hashable_category(by(x))
        try:
            return hashable_category(x[by])
        except KeyError:
            if not self._warned:
                self._warned = True
                warnings.warn(
                    f"an object has no feature {by!r} (by={by!r}): its category is None; a "
                    "misspelt by? (warned once; a function of x as by= decides itself)",
                    MissingCategoryWarning,
                    stacklevel=4,
                )
            return None

    def predict(self, x, category=FROM_X) -> tuple[float, float, float]:
        c = self.category(x) if category is FROM_X else hashable_category(category)
        st = self.categories.get(c)
        if st is None:  # never labelled, or evicted
            return self._answer(self._cold_score(x), self._pool())
        if self.pooled is not None and st.calibration_size < self.min_category:
            s = st._score(x)[1]
            return self._answer(s, self._pool())
        if self.mode == "va" and st._seen != self._n_model_learns:
            st._cache, st._pickled = None, None  # another category taught it
            st._seen = self._n_model_learns
        return st.predict(x)

    def pairs_many(self, batch):
        """(p0, p1) arrays of every row of ``batch``: ``predict`` row by row."""
        return pairs_row_by_row(self.predict, batch)

    def learn_many(self, rows, labels, batch=None) -> None:
        """``learn`` of every row in order. In the default mode a model with river's
        ``learn_many`` learns the rows in this batch once they leave their categories'
        calibration sets (``streamcal.learner.minibatch``); modes "sva" and "va" learn
        row by row here."""
        self.begin_batch(len(rows))
        for x, y in zip(rows, labels, strict=True):
            self.learn(x, y)

    def begin_batch(self, n: int) -> None:
        """The next ``n`` labels are one mini-batch (the default mode, a model with river's
        ``learn_many``: it will learn them with one call, those that leave together)."""
        if self.mode == "pretrained" and learns_in_batches(self.model):
            if self.batches is None:
                self.batches = BatchRanges()
            self.batches.add(self.n_seen + 1, n)

    def learn(self, x, y: int, category=FROM_X) -> None:
        c = self.category(x) if category is FROM_X else hashable_category(category)
        st = self.categories.get(c)
        if st is None:
            if len(self.categories) >= self.max_categories:
                self._evict()
            st = self.categories[c] = self._new_state()
            st._seen = self._n_model_learns
        else:
            self.categories.move_to_end(c)
        self.n_seen += 1
        before = st.calibration_size
        if self.mode != "pretrained":
            st.learn(x, y)
            self._n_model_learns += 1
            self._resized(st, before)
            return
        st.positions.append(self.n_seen)
        try:
            st.learn(x, y)
        except BaseException:  # the model could not score x: nothing was taken
            st.positions.pop()
            self.n_seen -= 1
            raise
        self._resized(st, before)
        if self.pooled is not None:
            self._pool_change(self.pooled.add, st.calibration[-1][2], y)
        # bounded by the calibration sets, whatever the number of categories evicted; one
        # rescoring per waiting object at most, amortised (see the module docstring)
        due = max(self.refresh_every, self.calibration_size)
        if self.waiting and len(self.waiting) >= min(due, max(1, self.n_learned)):
            self._learn_waiting()

    def _resized(self, st, before: int) -> None:
        if self._size is not None:
            self._size += st.calibration_size - before

    def _leave(self, position: int, item) -> None:
        """A calibration object leaves its category ("pretrained"): the model will learn it.
        Until then it stays in the pooled set: the model has not seen it either."""
        self.waiting.append((position, item[0], item[1]))

    def _learn_waiting(self) -> None:
        for st in self.categories.values():  # the plain mode's cut at a refresh
            k = len(st.calibration) - min(self.window, (st.n_seen + 1) // 2)
            for _ in range(max(0, k)):  # no store updates: all are rebuilt below
                item = st.calibration.popleft()
                self.waiting.append((st.positions.popleft(), item[0], item[1]))
            st.n_learned += max(0, k)
        self.waiting.sort(key=lambda w: w[0])  # in stream order, as the model would online
        label = self._model_label
        items = [(pos, xo, label(yo)) for pos, xo, yo in self.waiting]
        try:
            learn_guarded(self, items, self._rescore_all)
        except MODEL_ERRORS:  # raised, the model as it was: the cut sets' stores rebuilt by
            self._rescore_all()  # it, the objects still waiting for a later refresh
            if self.pooled is not None:  # still waiting: in the pooled set too
                self._rebuild_pool()
            self._size = None
            raise
        self.n_learned += len(self.waiting)
        self.waiting = []
        self._size = None  # every category was cut: recomputed when read

    def _rescore_all(self) -> None:
        """Rescore every category with the model as it is (and the pooled store, without
        the waiting objects: the model is learning them)."""
        for st in self.categories.values():
            st.rescore()
        if self.pooled is not None:
            self._rebuild_pool(waiting=False)

    # ------------------------------------------------------------------ the pooled set
    def _cold_score(self, x):
        """The score of ``x`` for a category without a state."""
        return score_sorted(self.model, self._order.ordered(x))

    @staticmethod
    def _answer(s, store) -> tuple[float, float, float]:
        """The prediction of score ``s`` from ``store`` (None: no pairs, the (0, 1) pair)."""
        if store is None:
            return s, 0.0, 1.0
        p0, p1 = store.query(s)
        return s, p0, p1

    def _pooled_from(self, items):
        """A pooled store of calibration items ``(x, y, score)``."""
        items = list(items)
        return ScoreStore.from_arrays(
            np.array([c[2] for c in items], dtype=float), np.array([c[1] for c in items], dtype=int)
        )

    def _pool_stale(self) -> bool:
        """Whether the pooled store no longer fits the scores (the multiclass one: a class
        came)."""
        return False

    def _pool_change(self, change, s, y) -> None:
        """``change(s, y)`` on the pooled store, or leave it to be rebuilt if stale."""
        if self._pool_dirty or self._pool_stale():
            self._pool_dirty = True
        else:
            change(s, y)

    def _pool(self):
        """The pooled store, up to date (None without the fallback)."""
        if self.pooled is not None and (self._pool_dirty or self._pool_stale()):
            self._rebuild_pool()
        return self.pooled

    def _rebuild_pool(self, waiting: bool = True) -> None:
        """The pooled store: the union of the categories' calibration sets and (``waiting``)
        of the objects waiting for the model, scored anew (the model has not changed since
        they left)."""
        items = [item for st in self.categories.values() for item in st.calibration]
        if waiting:
            items += [(x, y, self._cold_score(x)) for _, x, y in self.waiting]
        self.pooled = self._pooled_from(items)
        self._pool_dirty = False

    def _evict(self) -> None:
        _, st = self.categories.popitem(last=False)
        self.evictions += 1
        self.churn.evicted(st.calibration_size, self.evictions, self.by, self.max_categories)
        if self._size is not None:
            self._size -= st.calibration_size
        if self.mode == "pretrained":  # never learned by the model: it may learn them now
            for position, item in zip(st.positions, st.calibration, strict=True):
                self._leave(position, item)

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict:
        """Plain data (the model and the settings are the classifier's to keep): each
        category's mode state, least recently labelled first, and the objects waiting for
        the model. A callable ``by`` is not data: ``by`` is None then, and the caller
        passes it again to ``from_state``."""
        state = {
            "by": None if callable(self.by) else self.by,
            "categories": [[c, st.to_state()] for c, st in self.categories.items()],
            "evictions": self.evictions,
            "n_seen": self.n_seen,
            "n_learned": self.n_learned,
            "waiting": [[position, x, y] for position, x, y in self.waiting],
            "n_model_learns": self._n_model_learns,
            "churn": self.churn.to_state(),
        }
        if self.batches:  # only after learn_many: else the state is what it always was
            state["batches"] = self.batches.to_state()
        return state

    @classmethod
    def from_state(cls, state: dict, *, model, **settings) -> MondrianVennAbers:
        """The object ``to_state`` described, scoring with ``model``; ``settings`` are the
        constructor's keywords (the classifier keeps them)."""
        self = cls(model, **settings)
        for c, st_state in state["categories"]:
            if self.mode == "pretrained":
                st = self._category_type.from_state(st_state, owner=self)
            elif self.mode == "sva":
                st = SimplifiedVennAbers.from_state(st_state, model=model, guard=self.guard)
            else:
                st = VennAbers.from_state(st_state, model=model, guard=self.guard)
            st._seen = state["n_model_learns"]  # the restored caches are empty anyway
            self.categories[_key(c)] = st
        self.evictions = state["evictions"]
        self.n_seen, self.n_learned = state["n_seen"], state["n_learned"]
        self.waiting = [(position, x, y) for position, x, y in state["waiting"]]
        self._n_model_learns = state["n_model_learns"]
        if state.get("batches"):
            self.batches = BatchRanges.from_state(state["batches"])
        self.churn = CategoryChurn.from_state(state.get("churn"), self.churn.threshold)
        if self.pooled is not None:
            self._rebuild_pool()
        return self
