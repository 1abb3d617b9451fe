"""Venn-Abers predictor (Vovk & Petej 2014, Algorithm 1) over a window of labelled objects.

For a test object x and each hypothetical label y in {0, 1}, a copy of the current model
learns (x, y); the copy then scores x and every object of the window, and p_y is the
isotonic calibrator of the window plus (x, y) read at x's score. The model itself learns
each labelled object when the label comes, and the window keeps the last ``window``
labelled objects with their features.

This is Algorithm 1 with the window as training set, the model's earlier history acting
as fixed prior knowledge. It is exactly a Venn predictor, hence valid, when the model's
state after learning the window and x does not depend on their order (e.g. Gaussian naive
Bayes: sums of sufficient statistics); for order-dependent learners such as SGD it is the
faithful online reading of Algorithm 1. Cost per prediction: two model copies, two
``learn_one`` and 2 * (window + 1) scores, i.e. O(window).

The model's learning goes through its guard (``streamcal.learner.guard``): after each
step the learned object is scored, and scored again after one more step on a copy (the
check: a prediction teaches copies of the model the test object, so a model broken
silently would fail the next prediction); a label whose step fails is undone and refused
(it does not enter the window). Cost: one model copy, one ``learn_one`` and two scores
per label, next to the O(window) of each prediction.
"""

from __future__ import annotations

import pickle
from collections import deque

import numpy as np

from streamcal.core import venn_abers
from streamcal.learner.guard import (
    MODEL_ERRORS,
    ModelGuard,
    learn_and_look,
    model_error,
)
from streamcal.learner.linear import FeatureMatrix, check_finite, linear_parts, score_rows
from streamcal.learner.minibatch import learns_in_batches, pairs_row_by_row
from streamcal.learner.scoring import FeatureOrder, score_many, score_sorted

__all__ = ["VennAbers"]


class VennAbers:
    """State of the "va" mode (see the module docstring).

    >>> from river import naive_bayes
    >>> va = VennAbers(naive_bayes.GaussianNB(), window=4)
    >>> for i in range(6):
    ...     va.learn({"a": float(i)}, i % 2)
    >>> va.calibration_size
    4
    """

    def __init__(self, model, window: int, guard: ModelGuard | None = None):
        self.model = model
        self.guard = ModelGuard(model) if guard is None else guard  # with by: the owner's
        self.window = window
        self.objects: deque = deque()  # (features, label), oldest first
        # (Scaled) logistic regression: the window is also kept as a matrix and rescored
        # with numpy (see streamcal.learner.linear).
        self.matrix = FeatureMatrix(window) if linear_parts(model) is not None else None
        self.labels = np.zeros(window, dtype=np.int64)  # ring, aligned with the matrix rows
        self.version = 0  # bumped at every learn; guards the prediction cache
        self._cache = None  # (features, version, prediction) of the last object predicted
        self._order = FeatureOrder()
        self._pickled = None  # (version, the model's pickle), taken by the guard's check

    @property
    def calibration_size(self) -> int:
        return len(self.objects)

    def predict(self, x) -> tuple[float, float, float]:
        # predict_proba_one then predict_one on the same object costs one computation.
        cache = self._cache
        if cache is not None and cache[1] == self.version and cache[0] == x:
            return cache[2]
        x = self._order.canonical(x)
        s = score_sorted(self.model, x)
        if self.matrix is None:
            xs = [o[0] for o in self.objects]
            xs.append(x)
            labels = np.fromiter((o[1] for o in self.objects), dtype=np.int64, count=len(xs) - 1)
        # A pickle round-trip copies the exact state, 2-3x faster than deepcopy for river
        # models; the guard's check of the last learning step pickled it already.
        pickled = self._pickled
        if pickled is not None and pickled[0] == self.version:
            model_bytes = pickled[1]
        else:
            model_bytes = pickle.dumps(self.model, protocol=pickle.HIGHEST_PROTOCOL)
        p = []
        for y in (0, 1):
            m = pickle.loads(model_bytes)
            try:
                m.learn_one(x, bool(y))
            except MODEL_ERRORS as exc:  # a copy: nothing to undo
                raise model_error(exc, [x]) from exc
            if self.matrix is not None:
                columns, X = self.matrix.with_row(x)
                scores = check_finite(score_rows(linear_parts(m), columns, X))
                labels = self.labels[: len(self.matrix)]
            else:
                scores = np.asarray(score_many(m, xs), dtype=float)
            py = venn_abers(scores[:-1], labels, scores[-1:])[y]
            p.append(float(py[0]))
        self._cache = (x, self.version, (s, p[0], p[1]))
        return s, p[0], p[1]

    def to_state(self) -> dict:
        """Plain data (the model is the classifier's to keep); see ``from_state``."""
        m = self.matrix
        return {
            "window": self.window,
            "objects": [list(o) for o in self.objects],
            "matrix": None if m is None else m.to_state(),
            "labels": self.labels.copy(),
            "version": self.version,
        }

    @classmethod
    def from_state(cls, state: dict, *, model, guard: ModelGuard | None = None) -> VennAbers:
        """The mode object ``to_state`` described, scoring with ``model`` (guarded by
        ``guard``, with ``by`` the owner's)."""
        self = cls(model, state["window"], guard)
        self.objects = deque(tuple(o) for o in state["objects"])
        if state["matrix"] is not None:
            self.matrix = FeatureMatrix.from_state(state["matrix"])
        self.labels = np.array(state["labels"], dtype=np.int64)
        self.version = state["version"]
        return self

    def learn(self, x, y: int) -> None:
        x = self._order.canonical(x)  # a copy, in the order the model always sees
        checked = self.guard.learn_step(x, bool(y), learn_and_look)
        if checked is None:  # refused: not in the window; the model may have changed
            self.version += 1
            return
        self._keep(x, y)
        self._pickled = (self.version, checked[1])

    def learn_many(self, rows, labels, batch=None) -> None:
        """A model with river's ``learn_many`` learns the batch at once (rows to blame for
        breaking it refused), then the window takes every other row in order; else
        ``learn`` row by row."""
        if not learns_in_batches(self.model):
            for x, y in zip(rows, labels, strict=True):
                self.learn(x, y)
            return
        xs = [self._order.canonical(x) for x in rows]
        for x, y, _ in self.guard.learn_rows(xs, labels):
            self._keep(x, y)
        self.version += 1  # the rows refused are not kept, but the model has changed

    def pairs_many(self, batch):
        """(p0, p1) arrays of every row of ``batch``: ``predict`` row by row."""
        return pairs_row_by_row(self.predict, batch)

    def _keep(self, x, y: int) -> None:
        """The window takes the learned object ``x`` (canonical)."""
        self.version += 1
        self.objects.append((x, y))
        if self.matrix is not None:
            self.labels[self.matrix.append(x)] = y
        if len(self.objects) > self.window:
            self.objects.popleft()
