"""Conformal predictive systems: the predictive distribution of a label from a store of
conformity scores, each answer a rank or a select (Vovk, Shen, Manokhin & Xie 2017).

The scores are the normalised residuals alpha_i = (y_i - yhat_i) / sigma_i of n earlier
labels, held in a ``RankStore``. For a new object with prediction yhat and difficulty
sigma, the label y has score a = (y - yhat) / sigma, and the (split, smoothed) conformal
predictive distribution is

    Q(y, tau) = (#{alpha_i < a} + tau * (#{alpha_i = a} + 1)) / (n + 1),   tau in [0, 1].

Under exchangeability of (object, label) pairs scored by a fixed model, Q(y_true, tau) with
tau uniform is exactly uniform on [0, 1] (its PIT; Vovk et al., Theorem 1), whatever n.

* ``cdf_value``: Q, a rank;
* ``quantile_rank``: the rank k such that yhat + sigma * alpha_(k) is the q-quantile with
  P(y <= it) >= q (k = ceil(q (n + 1)), 1-based): a select;
* ``interval_ranks``: the two ranks of the central interval whose coverage is at least
  ``coverage``: [alpha_(l), alpha_(n + 1 - l)] with l = floor((1 - coverage)(n + 1) / 2)
  covers with probability (n + 1 - 2l) / (n + 1) >= coverage; rank 0 is -inf and rank
  n + 1 is +inf (too few scores for a finite bound);
* the CRPS of the empirical distribution of the n predictive points yhat + sigma * alpha_i
  is sigma times the store's ``crps(a)``.

``tau`` comes from ``tau_of(seed, i)``, a hash of a count: a replay of the same stream
draws the same taus, and they are independent of the data.

>>> from streamcal.core.rank_store import RankStore
>>> store = RankStore.from_arrays([-1.0, 0.0, 1.0], backend="python")
>>> cdf_value(store, 0.5, tau=0.5), cdf_value(store, 0.0, tau=1.0)
(0.625, 0.75)
>>> quantile_rank(3, 0.5), quantile_rank(3, 0.9), interval_ranks(3, 0.5)
(2, 4, (1, 3))
>>> 0.0 <= tau_of(1, 0) < 1.0 and tau_of(1, 0) != tau_of(1, 1) and tau_of(1, 0) == tau_of(1, 0)
True
"""

from __future__ import annotations

import math

__all__ = ["cdf_value", "interval_ranks", "quantile_rank", "tau_of"]

_MASK = (1 << 64) - 1
_EPS = 1e-9  # q (n + 1) is computed in floats: 0.9 * 1001 must count as 900.9, not 901


def tau_of(seed: int, i: int) -> float:
    """A uniform draw in [0, 1) that is a fixed function of (seed, i): splitmix64."""
    z = (seed * 0x9E3779B97F4A7C15 + (i + 1) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return ((z ^ (z >> 31)) >> 11) / 9007199254740992.0


def cdf_value(store, a: float, tau: float) -> float:
    """Q(y, tau) for the score a of y (module docstring)."""
    below, equal = store.rank(a)
    return (below + tau * (equal + 1)) / (len(store) + 1)


def _check_level(name: str, q) -> float:
    if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0.0 <= q <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], got {q!r}")
    return float(q)


def quantile_rank(n: int, q: float) -> int:
    """The 1-based rank k of the q-quantile among n scores: 0 means -inf, n + 1 +inf."""
    q = _check_level("q", q)
    return min(max(math.ceil(q * (n + 1) - _EPS), 0), n + 1)


def interval_ranks(n: int, coverage: float) -> tuple[int, int]:
    """The 1-based ranks (l, n + 1 - l) of the central interval with at least
    ``coverage`` (rank 0: -inf, rank n + 1: +inf)."""
    coverage = _check_level("coverage", coverage)
    low = math.floor((1.0 - coverage) * (n + 1) / 2 + _EPS)
    return low, n + 1 - low
