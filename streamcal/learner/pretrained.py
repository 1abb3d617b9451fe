"""Sliding pre-trained Venn-Abers: the newest labels calibrate a model that never saw them.

This is the paper's pre-trained Venn-Abers predictor (Vovk & Petej 2014, section
"Pre-trained Venn-Abers predictors"; Corollary: a Venn predictor given the proper
training set) made online:

* the newest labelled objects form the calibration set, scored by the current model;
* an object leaves the calibration set (oldest first) when it is more than ``window``
  objects old, and waits in a pending queue;
* the model learns pending objects, in stream order, only in batches: when they would
  at least double what it has learned (the start) or reach ``refresh_every``. Right after
  that the whole calibration set is rescored, so between batches the scoring function
  is fixed and was trained only on objects older than every calibration object.

Until ``2 * window`` labels have been seen, the calibration set is the newest half of
them (rounded up) so that the model starts learning at once; the split depends on the
count only, never on the data, so validity is kept.

Cost per labelled event: one model score (shared with the preceding prediction of the
same object), one store update, and amortised one ``learn_one`` plus
``window / refresh_every`` rescorings.
"""

from __future__ import annotations

from collections import deque

from streamcal.core import ScoreStore
from streamcal.learner.scoring import canonical, score_many, score_sorted

__all__ = ["PretrainedVennAbers"]


class PretrainedVennAbers:
    """State of the sliding pre-trained mode (see the module docstring).

    >>> from river import linear_model
    >>> va = PretrainedVennAbers(linear_model.LogisticRegression(), window=2, refresh_every=2)
    >>> for i in range(6):
    ...     va.learn({"a": float(i)}, i % 2)
    >>> va.calibration_size, va.n_learned, len(va.pending)
    (2, 4, 0)
    """

    def __init__(self, model, window: int, refresh_every: int):
        self.model = model
        self.window = window
        self.refresh_every = refresh_every
        self.store = ScoreStore()
        self.calibration: deque = deque()  # (features, label, score), oldest first
        self.pending: deque = deque()  # (features, label) out of the window, not yet learned
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
        cx = canonical(x)
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
        target = min(self.window, (self.n_seen + 1) // 2)
        while len(self.calibration) > target:
            xo, yo, so = self.calibration.popleft()
            self.store.remove(so, yo)
            self.pending.append((xo, yo))
        if self.pending and len(self.pending) >= min(self.refresh_every, max(1, self.n_learned)):
            self._refresh()

    def _refresh(self) -> None:
        # The model learns the pending objects one by one, in stream order, exactly as it
        # would have online; then the calibration set is rescored with the new model.
        while self.pending:
            xo, yo = self.pending.popleft()
            self.model.learn_one(xo, bool(yo))
            self.n_learned += 1
        self.version += 1
        scores = score_many(self.model, [c[0] for c in self.calibration])
        self.calibration = deque(
            (c[0], c[1], s) for c, s in zip(self.calibration, scores, strict=True)
        )
        self.store = ScoreStore.from_arrays(scores, [c[1] for c in self.calibration])
