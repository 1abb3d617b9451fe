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
"""

from __future__ import annotations

from collections import deque

from streamcal.learner.scoring import score_sorted
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

    def __init__(self, model, window: int, refresh_every: int):
        super().__init__(model, window, refresh_every)
        self.calibration: deque = deque()  # (features, label, score), oldest first
        self.n_seen = 0
        self.n_learned = 0
        self.version = 0  # bumped whenever the model changes; guards the score cache
        self._cache = None  # (features, version, score) of the last object scored

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

    def learn(self, x, y: int) -> None:
        cx, s = self._score(x)
        self.calibration.append((cx, y, s))
        self.store.add(s, y)
        self.n_seen += 1
        surplus = len(self.calibration) - min(self.window, (self.n_seen + 1) // 2)
        if surplus > 0 and surplus >= min(self.refresh_every, max(1, self.n_learned)):
            self._refresh(surplus)

    def to_state(self) -> dict:
        """Plain data (the model is the classifier's to keep); see ``from_state``."""
        return self._window_state(
            calibration=[list(c) for c in self.calibration],
            n_seen=self.n_seen,
            n_learned=self.n_learned,
            version=self.version,
        )

    @classmethod
    def from_state(cls, state: dict, *, model) -> PretrainedVennAbers:
        """The mode object ``to_state`` described, scoring with ``model``."""
        self = cls._from_window_state(state, model=model)
        self.calibration = deque(tuple(c) for c in state["calibration"])
        self.n_seen, self.n_learned = state["n_seen"], state["n_learned"]
        self.version = state["version"]
        return self

    def _refresh(self, k: int) -> None:
        for _ in range(k):
            xo, yo, _ = self.calibration.popleft()
            self.model.learn_one(xo, bool(yo))
        self.n_learned += k
        self.rescore()

    def rescore(self) -> None:
        """Score the calibration set with the (new) model and rebuild the store."""
        self.version += 1  # invalidates the score cache
        self.calibration = self._rescored(self.calibration)
