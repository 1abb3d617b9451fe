"""benchmarks/regression.py's oracles on friedman: the CRPS formulas against their
definitions, and the oracle that knows the true law beats every distribution that
does not."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests._helpers import load_benchmark

R = load_benchmark("regression")
S = R.S

values = st.lists(st.floats(-100, 100), min_size=2, max_size=8)


@given(values, st.floats(-100, 100))
def test_fair_crps_is_its_definition(sample, y):
    pairs = sum(abs(a - b) for a, b in itertools.permutations(sample, 2))
    k = len(sample)
    want = sum(abs(a - y) for a in sample) / k - pairs / (2 * k * (k - 1))
    assert math.isclose(R._sample_crps(np.array(sample), y), want, rel_tol=1e-9, abs_tol=1e-9)


def _integral(t, v):
    return float(np.sum((v[1:] + v[:-1]) / 2 * np.diff(t)))


@settings(deadline=None)  # a numeric integral: slow under load
@given(st.floats(0, 30), st.floats(0.2, 5), st.floats(-50, 80))
def test_exp_crps_is_the_integral_of_the_squared_cdf_gap(f, s, y):
    def cdf(t):  # the law of f + s (E - 1)
        return np.where(t >= f - s, 1 - np.exp(-np.maximum(t - f + s, 0) / s), 0.0)

    below = np.linspace(min(f - s, y) - 1, y, 50001)  # F^2 below y, (1 - F)^2 above
    above = np.linspace(y, max(f + 40 * s, y) + 1, 50001)
    want = _integral(below, cdf(below) ** 2) + _integral(above, (1 - cdf(above)) ** 2)
    assert math.isclose(R._exp_crps(f, s, y), want, rel_tol=1e-3, abs_tol=1e-3)


@pytest.mark.slow  # 2-5 s
def test_the_true_law_is_sharper_than_the_law_given_yhat():
    bare = R.lr()
    r = S.score(R.ConformalPredictiveRegressor(R.lr()), bare, S.stream("friedman", 1600, seed=3),
                burn=600, oracles=R._FriedmanOracles(bare, 3, size=5000, k=200))  # fmt: skip
    # the true law given x is the best distribution there is; the law given yhat the best
    # of those around yhat, which the running Gaussian is one of
    assert r["oracle given x"] < r["oracle given yhat"] < 1.0
    assert r["oracle given yhat"] < r["ratio"]
