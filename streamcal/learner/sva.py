"""Simplified Venn-Abers (Vovk & Petej 2014, Algorithm 2) online, over a window.

The model learns every labelled object at once; the object is then scored by the model
that has just learned it (in-sample, as in Algorithm 2, where the scoring function is
trained on the whole training set) and its (score, label) pair enters the store. Scores
are never recomputed unless ``refresh_every`` is set: then, every ``refresh_every``
labels, the whole window is rescored with the current model, which makes the store
exactly Algorithm 2 over the window at that moment.

No validity guarantee: in-sample scores are not those of a Venn predictor (Proposition
2 of the paper), and stale scores from an online model that keeps changing its scale
can be badly biased. Cost per labelled event: one ``learn_one``, one score, one store
update (plus ``window / refresh_every`` rescorings when refreshing).

Every step goes through the model's guard (``streamcal.learner.guard``): the in-sample
score is the check, and a label whose step leaves it non-finite is undone and refused
(nothing of it is stored); one found later to have broken the model silently is undone
too, its pair staying in the store.
"""

from __future__ import annotations

from collections import deque

from streamcal.learner.guard import ModelGuard
from streamcal.learner.minibatch import learns_in_batches
from streamcal.learner.scoring import LearnScore, score_sorted
from streamcal.learner.window import CalibrationWindow

__all__ = ["SimplifiedVennAbers"]


class SimplifiedVennAbers(CalibrationWindow):
    """State of the "sva" mode (see the module docstring).

    ``window=None`` keeps every pair (no forgetting, and no features are kept).

    >>> from river import linear_model
    >>> va = SimplifiedVennAbers(linear_model.LogisticRegression(), window=3, refresh_every=None)
    >>> for i in range(5):
    ...     va.learn({"a": float(i)}, i % 2)
    >>> va.calibration_size
    3
    """

    def __init__(self, model, window: int | None, refresh_every: int | None,
                 guard: ModelGuard | None = None):  # fmt: skip
        super().__init__(model, window, refresh_every)
        # (features or None, label, score), oldest first; unused when window is None
        self.pairs: deque = deque()
        self.n_seen = 0
        self._learn_score = LearnScore(model)
        self.guard = ModelGuard(model) if guard is None else guard  # with by: the owner's

    @property
    def calibration_size(self) -> int:
        return len(self.store)

    def to_state(self) -> dict:
        """Plain data (the model is the classifier's to keep); see ``from_state``."""
        return self._window_state(pairs=[list(p) for p in self.pairs], n_seen=self.n_seen)

    @classmethod
    def from_state(cls, state: dict, *, model, guard: ModelGuard | None = None):
        """The mode object ``to_state`` described, scoring with ``model`` (guarded by
        ``guard``, with ``by`` the owner's)."""
        self = cls._from_window_state(state, model=model, guard=guard)
        self.pairs = deque(tuple(p) for p in state["pairs"])
        self.n_seen = state["n_seen"]
        return self

    def predict(self, x) -> tuple[float, float, float]:
        s = score_sorted(self.model, self._order.ordered(x))
        p0, p1 = self.store.query(s)
        return s, p0, p1

    def _exact_score(self, x) -> float:
        return score_sorted(self.model, self._order.ordered(x))

    def learn(self, x, y: int) -> None:
        keep = self.refresh_every and self.window is not None
        # the order the model always sees; a copy, kept by the guard until its next pickle
        cx = self._order.canonical(x) if keep else self._order.ordered(x)
        s = self.guard.learn_step(cx if cx is not x else dict(x), bool(y), self._step)
        if s is not None:  # else refused: nothing of it is kept
            self._add(cx, y, s, keep)

    def _step(self, model, x, y) -> float:
        """The guarded step: learn, then the in-sample score (its check)."""
        return self._learn_score(x, y)

    def learn_many(self, rows, labels, batch=None) -> None:
        """A model with river's ``learn_many`` learns the batch at once, then every row
        is scored in sample and stored in order (Algorithm 2 with the batch); else
        ``learn`` row by row."""
        if not learns_in_batches(self.model):
            for x, y in zip(rows, labels, strict=True):
                self.learn(x, y)
            return
        keep = self.refresh_every and self.window is not None
        xs = [self._order.canonical(x) for x in rows]
        for x, y, s in self.guard.learn_rows(xs, labels):
            self._add(x, y, s, keep)

    def _add(self, x, y: int, s: float, keep) -> None:
        """Store the pair of ``x`` (learned, scored ``s``): the window and its rescoring."""
        self.store.add(s, y)
        self.n_seen += 1
        if self.window is None:
            return
        self.pairs.append((x if keep else None, y, s))
        if len(self.pairs) > self.window:
            _, yo, so = self.pairs.popleft()
            self.store.remove(so, yo)
        if self.refresh_every and self.n_seen % self.refresh_every == 0:
            self.pairs = self._rescored(self.pairs)
