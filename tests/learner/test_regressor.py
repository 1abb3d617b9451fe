"""ConformalPredictiveRegressor: river's checks, its distribution against the naive
conformal formulas, replay, pickling, bad input, Mondrian keys, window and alarm."""

import math
import pickle
import random

import numpy as np
import pandas as pd
import pytest
from river import checks, linear_model, preprocessing

from streamcal import ConformalPredictiveRegressor, PredictiveDistribution
from tests._helpers import load_benchmark

S = load_benchmark("_regression_streams")


def lr():
    return preprocessing.StandardScaler() | linear_model.LinearRegression()


def run(model, data):
    out = []
    for x, y in data:
        d = model.predict_distribution_one(x)
        crps = d.crps(y) if d.n else None  # nan != nan
        out.append((d.y_hat, d.cdf(y), d.interval(0.8), crps, d.median, d.mean))
        model.learn_one(x, y)
    return out


@pytest.mark.parametrize("params", list(ConformalPredictiveRegressor._unit_test_params()))
def test_check_estimator(params):
    checks.check_estimator(ConformalPredictiveRegressor(**params))


def test_distribution_is_the_conformal_one_of_the_prequential_residuals():
    # bins=1: one pool; the residuals are those of a bare copy of the model, before it learns
    model, bare = ConformalPredictiveRegressor(lr(), bins=1), lr()
    residuals = []
    for x, y in S.stream("lognormal", 300, seed=4):
        d = model.predict_distribution_one(x)
        y_hat = bare.predict_one(x)
        assert d.y_hat == y_hat and d.n == len(residuals)
        pts = sorted(y_hat + r for r in residuals)
        n = len(pts)
        below = sum(p < y for p in pts)
        assert d.cdf(y, tau=0.25) == pytest.approx((below + 0.25) / (n + 1))
        lo, hi = d.interval(0.8)
        low = math.floor(0.1 * (n + 1) + 1e-9)
        assert (lo, hi) == ((pts[low - 1], pts[n - low]) if low else (-math.inf, math.inf))
        if n:
            assert (
                d.quantile(0.3) == pts[min(math.ceil(0.3 * (n + 1) - 1e-9), n + 1) - 1]
                or math.ceil(0.3 * (n + 1) - 1e-9) > n
            )
            naive = (math.fsum(abs(p - y) for p in pts) / n
                     - math.fsum(abs(a - b) for a in pts for b in pts) / (2 * n * n))  # fmt: skip
            assert d.crps(y) == pytest.approx(naive, rel=1e-9, abs=1e-9)
            assert d.mean == pytest.approx(sum(pts) / n)
        residuals.append(y - y_hat)
        model.learn_one(x, y)
        bare.learn_one(x, y)


def test_replay_and_pickle_give_the_same_answers():
    data = list(S.stream("spread", 700, seed=2))
    kw = {"bins": 3, "window": 300, "alarm_alpha": 0.01}
    first = ConformalPredictiveRegressor(lr(), difficulty=lr(), **kw)
    a = run(first, data[:400])
    again = ConformalPredictiveRegressor(lr(), difficulty=lr(), **kw)
    assert run(again, data[:400]) == a  # taus from a seeded hash: a replay is deterministic
    copy = pickle.loads(pickle.dumps(first))
    assert run(copy, data[400:]) == run(first, data[400:])
    fresh = first.clone()
    assert fresh.calibration_size == 0 and fresh.window == 300


def test_mondrian_bins_and_keys_hold_their_own_residuals():
    model = ConformalPredictiveRegressor(lr(), bins=4, by=lambda x: x["x3"] > 0)
    for x, y in S.stream("lognormal", 1000, seed=5):
        model.learn_one(x, y)
    assert len(model.bin_edges) == 3 and model.bin_edges == sorted(model.bin_edges)
    sizes = model._residuals.categories
    assert {k for k, _ in sizes} == {False, True} and len(sizes) == 8
    assert sum(sizes.values()) == 1000
    # a prediction reads the store of its own key and bin
    x = {"x0": 2.0, "x1": 0.0, "x2": 0.0, "x3": 1.0}
    d = model.predict_distribution_one(x)
    assert d.n == sizes[(True, sum(e <= d.y_hat for e in model.bin_edges))]


def test_window_forgets_the_oldest():
    model = ConformalPredictiveRegressor(lr(), bins=1, window=50)
    for x, y in S.stream("spread", 200, seed=1):
        model.learn_one(x, y)
    assert model.calibration_size == 50


def test_the_window_is_per_key():
    """A rare key keeps its newest ``window`` residuals however many the others add."""
    model = ConformalPredictiveRegressor(lr(), bins=1, window=40, by="rare")
    bare, rare = lr(), []  # the same model alone: the residuals it should hold
    for i, (x, y) in enumerate(S.stream("spread", 1200, seed=2)):
        x = {**x, "rare": i % 20 == 0}
        if x["rare"]:
            rare.append(y - bare.predict_one(x))
        bare.learn_one(x, y)
        model.learn_one(x, y)
    assert model._residuals.categories == {(False, 0): 40, (True, 0): 40}
    store = model._residuals.store(True, 0.0)
    assert [store.select(k) for k in range(40)] == sorted(rare[-40:])


def test_a_stale_distribution_refuses_to_answer():
    model = ConformalPredictiveRegressor(lr())
    x, y = next(S.stream("spread", 1))
    d = model.predict_distribution_one(x)
    assert isinstance(d, PredictiveDistribution) and d.median == d.y_hat
    assert d.interval(0.9) == (-math.inf, math.inf)
    model.learn_one(x, y)
    with pytest.raises(RuntimeError, match="stale"):
        d.cdf(y)


@pytest.mark.parametrize("bad", [math.nan, math.inf, "3", None, True])
def test_a_bad_label_changes_nothing(bad):
    model = ConformalPredictiveRegressor(lr(), alarm_alpha=0.01)
    x, y = next(S.stream("spread", 1))
    model.learn_one(x, y)
    before = pickle.dumps(model)
    with pytest.raises(ValueError, match="finite number"):
        model.learn_one(x, bad)
    assert pickle.dumps(model) == before


@pytest.mark.parametrize("kw", [{"bins": 0}, {"window": 0}, {"alarm_alpha": 1.5},
                                {"seed": -1}, {"bins": 2.5}])  # fmt: skip
def test_bad_parameters_are_named(kw):
    with pytest.raises(ValueError, match=next(iter(kw))):
        ConformalPredictiveRegressor(lr(), **kw)


def test_bad_levels_are_named():
    model = ConformalPredictiveRegressor(lr())
    d = model.predict_distribution_one({"a": 1.0})
    with pytest.raises(ValueError, match="coverage"):
        d.interval(1.5)
    with pytest.raises(ValueError, match="q must be"):
        d.quantile(-0.1)


def test_many_is_one_by_one():
    data = list(S.stream("spread", 300, seed=3))
    X = pd.DataFrame([x for x, _ in data])
    y = pd.Series([v for _, v in data])
    one, many = ConformalPredictiveRegressor(lr()), ConformalPredictiveRegressor(lr())
    for x, v in data[:200]:
        one.learn_one(x, v)
    many.learn_many(X[:200], y[:200])
    expected = [one.predict_one(x) for x, _ in data[200:]]
    assert many.predict_many(X[200:]).tolist() == expected
    with pytest.raises(ValueError, match="finite number"):
        many.learn_many(X[:2], pd.Series([1.0, math.nan]))
    assert many.calibration_size == 200


def test_the_alarm_fires_on_a_shift_and_stays_quiet_without():
    quiet = ConformalPredictiveRegressor(lr(), bins=1, alarm_alpha=0.01)
    shifted = ConformalPredictiveRegressor(lr(), bins=1, alarm_alpha=0.01)
    rng = random.Random(0)
    for i, (x, y) in enumerate(S.stream("spread", 3000, seed=6)):
        quiet.learn_one(x, y)
        # from label 2000 on the noise is 4 times larger
        shifted.learn_one(x, y if i < 2000 else y + 3.0 * rng.gauss(0.0, 1.0) * 2)
    assert not quiet.alarm and quiet.log_martingale < math.log(100)
    assert shifted.alarm and 2000 < shifted.alarm_at < 2300
    assert 1800 <= shifted.alarm_onset <= shifted.alarm_at
    assert set(shifted.alarms) == {None}


def validity(name, **kw):
    if name in S.PUBLIC:
        pytest.importorskip("statsmodels")  # the dev and bench extras have it
    model = ConformalPredictiveRegressor(lr(), **kw)  # the defaults: 10 bins, window 1000
    # the public data sets whole (20,190 and 6,366 rows), shuffled
    return S.score(model, lr(), S.stream(name, 11000 if name in S.STREAMS else 10**6, seed=1),
                   burn=1000)  # fmt: skip


def test_intervals_cover_on_a_skewed_heteroscedastic_stream():
    r = S.score(ConformalPredictiveRegressor(lr()), lr(), S.stream("lognormal", 5000, seed=2))
    assert 0.88 <= r["cover90"] <= 0.92 and 0.47 <= r["cover50"] <= 0.53
    assert r["ratio"] <= 0.9  # bins of yhat: much sharper than a Gaussian


@pytest.mark.slow
@pytest.mark.parametrize("name", S.STREAMS + S.PUBLIC)
def test_validity_after_1000_labels(name):
    r = validity(name)
    assert 0.88 <= r["cover90"] <= 0.92, r
    assert 0.47 <= r["cover50"] <= 0.53, r
    assert r["ks"] <= 0.02, r


@pytest.mark.slow
@pytest.mark.parametrize("name", ["spread", "lognormal", *S.PUBLIC])
def test_sharper_than_the_gaussian_baseline(name):
    assert validity(name)["ratio"] <= 0.97


def test_numpy_labels_are_numbers():
    model = ConformalPredictiveRegressor(lr())
    model.learn_one({"a": 1.0}, np.float32(2.5))
    assert model.calibration_size == 1


def test_difficulty_widens_the_intervals_of_hard_objects():
    # spread's noise grows with exp(0.7 x2), which the mean (and so yhat) ignores
    def widths(model):
        easy, hard = [], []
        for i, (x, y) in enumerate(S.stream("spread", 4000, seed=8)):
            if i >= 2000 and abs(x["x2"]) > 1:
                lo, hi = model.predict_distribution_one(x).interval(0.8)
                (hard if x["x2"] > 0 else easy).append(hi - lo)
            model.learn_one(x, y)
        return np.mean(hard) / np.mean(easy)

    assert widths(ConformalPredictiveRegressor(lr(), bins=1)) < 1.2
    assert widths(ConformalPredictiveRegressor(lr(), bins=1, difficulty=lr())) > 2.0


class _Broken:
    """A regressor whose predictions are not numbers."""

    def predict_one(self, x):
        return math.nan

    def learn_one(self, x, y):
        pass


def test_a_prediction_that_is_not_a_number_counts_as_zero():
    model = ConformalPredictiveRegressor(_Broken(), bins=1)
    model.learn_one({"a": 1.0}, 2.0)
    d = model.predict_distribution_one({"a": 1.0})
    assert d.y_hat == 0.0 and d.median == 2.0


def test_an_object_the_model_refuses_changes_nothing_else():
    model = ConformalPredictiveRegressor(lr(), bins=1, alarm_alpha=0.01)
    for x, y in S.stream("spread", 20, seed=1):
        model.learn_one(x, y)
    before = (model.calibration_size, model._alarm.n, model._version)
    with pytest.raises(TypeError):  # river's scaler cannot subtract from a string
        model.learn_one({"x0": "red", "x1": 0.0, "x2": 0.0}, 1.0)
    assert (model.calibration_size, model._alarm.n, model._version) == before
