"""PredictiveDistribution: the conformal predictive distribution of one object's label.

What ``ConformalPredictiveRegressor.predict_distribution_one`` returns: the model's
prediction ``y_hat``, the difficulty ``sigma``, and the residual store of the object's
category, read through ``streamcal.core.cps``. Every method costs O(log n).

It answers from the store as it is: once the regressor has learned another label the
distribution is stale, and asking it raises ``RuntimeError`` (ask before learning, as a
prequential evaluation does).
"""

from __future__ import annotations

import math
from numbers import Real

from streamcal.core.cps import cdf_value, interval_ranks, quantile_rank, tau_of

__all__ = ["PredictiveDistribution"]


class PredictiveDistribution:
    """The predictive distribution of a label (see the module docstring).

    ``cdf(y)`` is the smoothed conformal CDF Q(y, tau), with the tau drawn for this
    prediction (a hash of the regressor's seed and count: a replay draws the same);
    under exchangeability Q(y_true) is uniform. ``quantile(q)`` is the least predictive
    point with P(y <= it) >= q; ``interval(coverage)`` the central interval covering
    with probability >= coverage (infinite ends while the category holds too few
    residuals); ``crps(y)`` the CRPS of the empirical distribution of the n predictive
    points y_hat + sigma * alpha_i; ``median`` and ``mean`` theirs. With no residual yet
    (n = 0) ``median`` and ``mean`` are y_hat.
    """

    __slots__ = ("y_hat", "sigma", "n", "_draw", "_store", "_owner", "_version")

    def __init__(self, y_hat: float, sigma: float, draw: tuple, store, owner, version: int):
        self.y_hat = y_hat
        self.sigma = sigma
        self._draw = draw  # (seed, count) of tau, drawn when first asked for
        self.n = len(store)
        self._store = store
        self._owner = owner
        self._version = version

    @property
    def tau(self) -> float:
        """This prediction's tau: a hash of the regressor's seed and query count."""
        return tau_of(*self._draw)

    def _fresh(self):
        if self._owner._version != self._version:
            raise RuntimeError("this predictive distribution is stale: the regressor has "
                               "learned since it was given; ask before learning")  # fmt: skip
        return self._store

    def _score(self, y) -> float:
        if isinstance(y, bool) or not isinstance(y, Real) or not math.isfinite(y):
            raise ValueError(f"y must be a finite number, got {y!r}")
        return (y - self.y_hat) / self.sigma

    def _point(self, rank: int) -> float:
        if rank <= 0:
            return -math.inf
        if rank > self.n:
            return math.inf
        store = self._store  # the kernel itself: rank is in range, checked above
        return self.y_hat + self.sigma * float(store._k.select(store._I, store._F, store._meta,
                                                               rank - 1))  # fmt: skip

    def cdf(self, y, tau: float | None = None) -> float:
        """Q(y, tau): the predictive probability that the label is below y (ties count
        tau of their mass); ``tau`` defaults to this prediction's draw."""
        return cdf_value(self._fresh(), self._score(y), self.tau if tau is None else tau)

    def quantile(self, q: float) -> float:
        """The q-quantile: the least predictive point with P(y <= it) >= q."""
        self._fresh()
        return self._point(quantile_rank(self.n, q))

    def interval(self, coverage: float = 0.9) -> tuple[float, float]:
        """(lo, hi) covering the label with probability >= ``coverage``."""
        self._fresh()
        low, high = interval_ranks(self.n, coverage)
        return self._point(low), self._point(high)

    def crps(self, y) -> float:
        """The CRPS of the predictive points at the label y (nan when n = 0)."""
        return self.sigma * self._fresh().crps(self._score(y))

    @property
    def median(self) -> float:
        """The 0.5-quantile (y_hat when n = 0)."""
        return self.y_hat if self.n == 0 else self.quantile(0.5)

    @property
    def mean(self) -> float:
        """The mean of the predictive points (y_hat when n = 0)."""
        store = self._fresh()
        return self.y_hat if self.n == 0 else self.y_hat + self.sigma * store.total / self.n

    def __repr__(self) -> str:
        return (f"PredictiveDistribution(y_hat={self.y_hat!r}, sigma={self.sigma!r}, "
                f"n={self.n})")  # fmt: skip
