"""What the two store-backed modes ("sva" and "pretrained") share: a scoring model, a
window of calibration pairs whose scores a ``ScoreStore`` holds, and how often the
window is re-scored; and the plain-data state of those parts.

>>> from river import linear_model
>>> from streamcal.learner.sva import SimplifiedVennAbers
>>> va = SimplifiedVennAbers(linear_model.LogisticRegression(), window=3, refresh_every=None)
>>> va.learn({"a": 1.0}, 1)
>>> sorted(va.to_state())
['n_seen', 'pairs', 'refresh_every', 'store', 'window']
"""

from __future__ import annotations

from collections import deque

import numpy as np

from streamcal.core import ScoreStore, venn_abers
from streamcal.learner.scoring import (
    FeatureOrder,
    batch_scores,
    near_held,
    score_many,
)

__all__ = ["CalibrationWindow"]


class CalibrationWindow:
    """Base of the store-backed modes; subclasses add their own pairs and counters."""

    def __init__(self, model, window: int | None, refresh_every: int | None):
        self.model = model
        self.window = window
        self.refresh_every = refresh_every
        self.store = ScoreStore()
        self._order = FeatureOrder()

    def _exact_score(self, x) -> float:
        """The score ``predict`` gives ``x`` (the subclass's)."""
        raise NotImplementedError

    def pairs_many(self, batch) -> tuple[np.ndarray, np.ndarray]:
        """(p0, p1) arrays of every row of ``batch``, equal to ``predict``'s row by row:
        one batched scoring where the model has one (rows that it cannot place exactly
        against the held scores are scored one by one, see ``batch_scores``), then one
        pass over the store: the batch form ``venn_abers`` (the same exact fractions as
        the store's queries) for a batch of at least 1/8 of the store, else a query per
        row in one call."""
        held = None
        found = batch_scores(self.model, batch)
        if found is None:
            scores = np.array([self._exact_score(x) for x in batch.rows()], dtype=np.float64)
        else:
            scores, bounds = found
            if bounds.any():  # an exact batched scorer (bounds 0) places every row itself
                held = self.store.to_arrays()
                near = np.flatnonzero(near_held(held[0], scores, bounds))
                if len(near):
                    scores = scores.copy()
                    for i in near.tolist():
                        scores[i] = self._exact_score(batch.row(i))
        if len(scores) == 0:
            return np.zeros(0), np.zeros(0)
        if 8 * len(scores) >= len(self.store):
            held = self.store.to_arrays() if held is None else held
            return venn_abers(held[0], held[1], scores)
        return self.store.query_many(scores)

    def _window_state(self, **own) -> dict:
        """Plain data of the shared parts, plus the subclass's ``own`` entries."""
        scores, labels = self.store.to_arrays()
        return {
            "window": self.window,
            "refresh_every": self.refresh_every,
            "store": (scores, labels),
            **own,
        }

    def _rescored(self, items) -> deque:
        """``items`` (features, label, score) with their scores by the model as it is now;
        the store rebuilt from them."""
        scores = score_many(self.model, [c[0] for c in items])
        self.store = ScoreStore.from_arrays(scores, [c[1] for c in items])
        return deque((c[0], c[1], s) for c, s in zip(items, scores, strict=True))

    @classmethod
    def _from_window_state(cls, state: dict, *, model, **more):
        """A mode object with the shared parts of ``state`` (``more``: the subclass's own
        constructor arguments); the caller restores the rest."""
        self = cls(model, state["window"], state["refresh_every"], **more)
        self.store = ScoreStore.from_arrays(*state["store"])
        return self
