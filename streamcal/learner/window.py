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

from streamcal.core import ScoreStore
from streamcal.learner.scoring import FeatureOrder, OrdersFeatures, score_many

__all__ = ["CalibrationWindow"]


class CalibrationWindow(OrdersFeatures):
    """Base of the store-backed modes; subclasses add their own pairs and counters."""

    def __init__(self, model, window: int | None, refresh_every: int | None):
        self.model = model
        self.window = window
        self.refresh_every = refresh_every
        self.store = ScoreStore()
        self._order = FeatureOrder()

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
    def _from_window_state(cls, state: dict, *, model):
        """A mode object with the shared parts of ``state``; the caller restores the rest."""
        self = cls(model, state["window"], state["refresh_every"])
        self.store = ScoreStore.from_arrays(*state["store"])
        return self
