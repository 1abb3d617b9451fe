"""Sliding pre-trained Venn-Abers: the newest labels calibrate a model that never saw them.

This is the paper's pre-trained Venn-Abers predictor (Vovk & Petej 2014, section
"Pre-trained Venn-Abers predictors"; its corollary: a Venn predictor given the proper
training set) made online. The labelled stream is cut in two at a moving point:

* the model (the scoring function) has learned every object before the cut, and only
  those: it is the proper training set;
* every labelled object after the cut is in the calibration set, scored by that model.
  A new label joins the calibration set at once (one store insertion).

The cut moves only in batches, every ``refresh_every`` labels: the oldest calibration
objects beyond the newest ``window`` are then learned by the model, one by one in stream
order as it would have online, and the remaining ``window`` are rescored and the store
rebuilt. So the calibration set holds the newest ``window`` to ``window + refresh_every
- 1`` labels, between batches the scoring function is fixed, and it never saw a
calibration or test object: exchangeability of those given the past makes every
prediction a Venn predictor's, hence valid.

Until ``2 * window`` labels have been seen, only the newest half of them (rounded up)
is kept for calibration and the model catches up whenever that would at least double
what it has learned, so that it starts learning at once. The cut depends on counts
only, never on the data, so validity is kept.

Cost per labelled event: one model score (shared with the preceding prediction of the
same object), one store insertion; amortised, one ``learn_one`` and
``window / refresh_every`` rescorings.

Each batch goes through the model's guard (``streamcal.learner.guard``): the model is
pickled before it, and if the rescored calibration set or one more learning step on a
copy is not finite (or learning raises), the batch is undone, the objects to blame are
found by bisection and left unlearned (reported), and the others are learned again. The
objects left out had served in the calibration set; the scoring function is still made
of past objects only, so validity is kept. Cost: two pickles of the model and one extra
learning step per refresh.
"""

from __future__ import annotations

from collections import deque

from streamcal.learner.guard import MODEL_ERRORS, ModelGuard, lookahead
from streamcal.learner.minibatch import BatchRanges, learn_in_order, learns_in_batches
from streamcal.learner.scoring import batch_scores, score_sorted
from streamcal.learner.window import CalibrationWindow

__all__ = ["PretrainedVennAbers"]


class PretrainedVennAbers(CalibrationWindow):
    """State of the sliding pre-trained mode (see the module docstring).

    >>> from river import linear_model
    >>> va = PretrainedVennAbers(linear_model.LogisticRegression(), window=2, refresh_every=3)
    >>> sizes = []
    >>> for i in range(12):
    ...     va.learn({"a": float(i)}, i % 2)
    ...     sizes.append(va.calibration_size)
    >>> sizes, va.n_learned
    ([1, 1, 2, 2, 3, 2, 3, 4, 2, 3, 4, 2], 10)
    """

    # the label the model learns for a stored one (binary: 0/1 stored, bool learned)
    _model_label = staticmethod(bool)
    # The positions learned by ``learn_many`` that the model has still to learn, in its
    # batches (``streamcal.learner.minibatch``); None until then, so that a state learned
    # one by one (the stream processor's) is what it always was.
    batches: BatchRanges | None = None

    def __init__(self, model, window: int, refresh_every: int):
        super().__init__(model, window, refresh_every)
        self.calibration: deque = deque()  # (features, label, score), oldest first
        self.n_seen = 0
        self.n_learned = 0
        self.version = 0  # bumped whenever the model changes; guards the score cache
        self._cache = None  # (features, version, score) of the last object scored
        self.guard = ModelGuard(model)

    @property
    def calibration_size(self) -> int:
        return len(self.calibration)

    def _score(self, x) -> tuple[dict, float]:
        """(canonical copy of x, its score), reusing the last one if x and the model match."""
        cache = self._cache
        if cache is not None and cache[1] == self.version and cache[0] == x:
            return cache[0], cache[2]
        cx = self._order.canonical(x)
        s = score_sorted(self.model, cx)
        self._cache = (cx, self.version, s)
        return cx, s

    def predict(self, x) -> tuple[float, float, float]:
        s = self._score(x)[1]
        p0, p1 = self.store.query(s)
        return s, p0, p1

    def _exact_score(self, x) -> float:
        return self._score(x)[1]

    def learn_many(self, rows, labels, batch=None) -> None:
        """``learn`` of every row in order; a model with river's ``learn_many`` will learn
        them in this batch (see ``streamcal.learner.minibatch``). ``rows`` are the
        batch's own dicts in canonical order (``Batch.rows``), kept without a copy; an
        exact batched scorer (``batch_scores``, bounds 0) scores them all at once while
        the model stays as it is."""
        self.begin_batch(len(rows))
        scores = None
        if batch is not None:
            found = batch_scores(self.model, batch)
            if found is not None and not found[1].any():
                scores = found[0].tolist()
        version = self.version
        for i, (x, y) in enumerate(zip(rows, labels, strict=True)):
            if scores is None or self.version != version:
                s = self._batch_score(x)
            else:
                s = scores[i]
            self._cache = (x, self.version, s)  # learn's _score: no copy, no second score
            self.learn(x, y)

    def _batch_score(self, x):
        """The score of ``x`` (canonical) by the model as it is: ``_score`` without the
        copy or the cache."""
        return score_sorted(self.model, x)

    def begin_batch(self, n: int) -> None:
        """The next ``n`` labels are one mini-batch: a model with river's ``learn_many``
        will learn them with one call (those that leave at one refresh)."""
        if learns_in_batches(self.model):
            if self.batches is None:
                self.batches = BatchRanges()
            self.batches.add(self.n_seen + 1, n)

    def learn(self, x, y: int) -> None:
        cx, s = self._score(x)
        self.calibration.append((cx, y, s))
        self.store.add(s, y)
        self.n_seen += 1
        surplus = len(self.calibration) - min(self.window, (self.n_seen + 1) // 2)
        if surplus > 0 and surplus >= min(self.refresh_every, max(1, self.n_learned)):
            try:
                self._refresh(surplus)
            except MODEL_ERRORS:  # the model's programming error (guard): this label too is undone
                self.calibration.pop()
                self.store.remove(s, y)
                self.n_seen -= 1
                raise

    def to_state(self) -> dict:
        """Plain data (the model is the classifier's to keep); see ``from_state``. The
        mini-batches still to learn (``batches``) only if there are any."""
        own = {}
        if self.batches:
            own["batches"] = self.batches.to_state()
        return self._window_state(
            calibration=[list(c) for c in self.calibration],
            n_seen=self.n_seen,
            n_learned=self.n_learned,
            version=self.version,
            **own,
        )

    @classmethod
    def from_state(cls, state: dict, *, model) -> PretrainedVennAbers:
        """The mode object ``to_state`` described, scoring with ``model``."""
        self = cls._from_window_state(state, model=model)
        self.calibration = deque(tuple(c) for c in state["calibration"])
        self.n_seen, self.n_learned = state["n_seen"], state["n_learned"]
        self.version = state["version"]
        if state.get("batches"):
            self.batches = BatchRanges.from_state(state["batches"])
        return self

    def _refresh(self, k: int) -> None:
        first = self.n_seen - len(self.calibration) + 1  # the oldest one's position
        label = self._model_label
        left = [self.calibration.popleft() for _ in range(k)]
        items = [(first + i, c[0], label(c[1])) for i, c in enumerate(left)]
        try:
            learn_guarded(self, items, self.rescore)
        except MODEL_ERRORS:  # raised with the model as it was: so is the calibration set
            self.calibration.extendleft(reversed(left))
            self.rescore()
            raise
        self.n_learned += k

    def rescore(self) -> None:
        """Score the calibration set with the (new) model and rebuild the store."""
        self.version += 1  # invalidates the score cache
        self.calibration = self._rescored(self.calibration)


def learn_guarded(owner, items: list, rescore) -> None:
    """``owner``'s model learns ``items`` (``(position, x, y)`` in stream order, its
    mini-batches from ``owner.batches`` learned with one call each) through its guard,
    checked by ``rescore()`` (which raises ``NonFiniteScore`` if a score is not finite)
    and one more step with the last object; ``rescore()`` has been done on the final
    model when this returns. ``owner``: the pre-trained mode, or the Mondrian one."""
    model, ranges = owner.model, owner.batches

    def learn(part):  # each attempt consumes a copy of the ranges: it may be undone
        learn_in_order(model, part, ranges.copy() if ranges else None)

    def check(part):
        rescore()
        return lookahead(model, *part[-1][1:]) if part else None

    if owner.guard.learn_batch(items, learn, check, owner.n_seen):  # some left out
        rescore()
    if ranges:  # every item has left, learned or not
        ranges.forget(p for p, _, _ in items)
