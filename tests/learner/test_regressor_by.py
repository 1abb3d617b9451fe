"""The regressor's ``by`` (issue 40): the keys kept (``max_categories``, least recently
labelled evicted), the pooled answer (``min_category``, ``fallback``), against brute-force
oracles; the memory bound with many ids; the churn warning; pickling, clone, the rules."""

import pickle
import warnings
from collections import OrderedDict, deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from river import base, checks

from streamcal import ConformalPredictiveRegressor
from streamcal.learner.churn import CategoryChurnWarning
from streamcal.learner.residuals import FIRST_FIT, ResidualStores


def _held(store) -> list[float]:
    return [store.select(k) for k in range(len(store))]


class _Oracle:
    """What the stores should hold, kept the plain way: per key its newest ``window``
    (yhat, residual) since it was last admitted, keys in the order of their last label,
    and the newest ``window`` of the stream."""

    def __init__(self, window, max_categories):
        self.window, self.max_categories = window, max_categories
        self.keys: OrderedDict = OrderedDict()
        self.stream: deque = deque(maxlen=window)

    def add(self, key, y_hat, r):
        gone = None
        if key in self.keys:
            self.keys.move_to_end(key)
        else:
            if len(self.keys) == self.max_categories:
                k, q = self.keys.popitem(last=False)
                gone = (k, len(q))
            self.keys[key] = deque(maxlen=self.window)
        self.keys[key].append((y_hat, r))
        self.stream.append((y_hat, r))
        return gone

    @staticmethod
    def in_bin(items, edges, b):
        from bisect import bisect_right

        return sorted(r for y_hat, r in items if bisect_right(edges, y_hat) == b)


@settings(deadline=None)
@given(
    ops=st.lists(st.tuples(st.integers(0, 5), st.sampled_from([-1.0, 0.0, 0.5, 2.0]),
                           st.integers(-20, 20).map(float)), max_size=2 * FIRST_FIT + 30),
    bins=st.sampled_from([1, 2]),
    window=st.one_of(st.none(), st.integers(1, 8)),
    max_categories=st.integers(1, 4),
    min_category=st.integers(0, 4),
    pooled=st.booleans(),
)  # fmt: skip
def test_the_stores_answer_as_the_brute_force_oracle(ops, bins, window, max_categories,
                                                     min_category, pooled):  # fmt: skip
    stores = ResidualStores(bins, window, "python", 0, max_categories=max_categories,
                            pooled=pooled, min_category=min_category)  # fmt: skip
    oracle = _Oracle(window, max_categories)
    for key, y_hat, r in ops:
        assert stores.add(key, y_hat, r) == oracle.add(key, y_hat, r)
        assert list(stores.sizes.items()) == [(k, len(q)) for k, q in oracle.keys.items()]
    edges = stores.edges
    for key in range(6):
        for b, y_hat in enumerate([-2.0] + [e + 1e-9 for e in edges]):
            own = _Oracle.in_bin(oracle.keys.get(key, ()), edges, b)
            if pooled and len(own) < min_category or pooled and key not in oracle.keys:
                want = _Oracle.in_bin(oracle.stream, edges, b)  # the pooled answer
            else:
                want = own
            assert _held(stores.store(key, y_hat)) == want, (key, b)
    assert len(stores) == sum(len(q) for q in oracle.keys.values())


class _Frozen(base.Regressor):
    """A model that has stopped learning: each key's residuals are then its own labels'."""

    def learn_one(self, x, y):
        pass

    def predict_one(self, x):
        return 2.0 * x["a"]


def _answer(dist):
    return dist.n, dist.interval(0.8), [dist.quantile(q) for q in (0.1, 0.5, 0.9)]


@settings(deadline=None)
@given(
    labels=st.lists(st.tuples(st.integers(0, 4), st.integers(-3, 3).map(float),
                              st.integers(-30, 30).map(float)), max_size=120),
    window=st.integers(3, 30),
    max_categories=st.integers(1, 3),
    min_category=st.integers(0, 6),
)  # fmt: skip
def test_a_key_answers_as_a_regressor_of_its_own_labels_and_a_cold_one_as_the_pooled(
    labels, window, max_categories, min_category
):
    by = ConformalPredictiveRegressor(_Frozen(), bins=1, by="g", window=window,
                                      max_categories=max_categories, min_category=min_category)
    pooled = ConformalPredictiveRegressor(_Frozen(), bins=1, window=window)  # every label
    own: dict = {}  # key -> a regressor fed its labels since it was last admitted
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CategoryChurnWarning)
        for g, a, y in labels:
            if g not in by.categories:
                own[g] = ConformalPredictiveRegressor(_Frozen(), bins=1, window=window)
            by.learn_one({"a": a, "g": g}, y)
            own[g].learn_one({"a": a}, y)
            pooled.learn_one({"a": a}, y)
    for g in range(5):
        x = {"a": 1.0, "g": g}
        got = _answer(by.predict_distribution_one(x))
        warm = g in by.categories and own[g].calibration_size >= min_category
        want = _answer((own[g] if warm else pooled).predict_distribution_one({"a": 1.0}))
        assert got == want, (g, warm)
    assert len(by.categories) <= max_categories


def test_memory_stays_bounded_with_many_ids_and_the_churn_is_said_once():
    from river import linear_model

    model = ConformalPredictiveRegressor(linear_model.LinearRegression(), bins=2, by="user",
                                         max_categories=50, alarm_alpha=0.01, alarm_period=20)
    sizes = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(1, 12_001):
            x = {"a": (i % 17) / 17}  # every label a new id, not a feature of the model
            model.learn_one(x, 3 * x["a"] + (i % 5) / 5, category=f"u{i}")
            if i in (3_000, 12_000):
                sizes[i] = len(pickle.dumps(model))
    assert len(model.categories) == 50 and model.evictions == 12_000 - 50
    assert len(model.alarms) <= 50
    assert sizes[12_000] < 1.1 * sizes[3_000]
    churn = [w for w in caught if w.category is CategoryChurnWarning]
    assert len(churn) == 1 and "by='user'" in str(churn[0].message)
    assert "residuals of their own" in str(churn[0].message)
    assert churn[0].filename == __file__  # said where learn_one was called
    # a new id is answered from the pooled residuals: the stream's newest window
    assert model.predict_distribution_one({"a": 0.5}, category="new").n > 400


def test_fallback_off_answers_a_cold_key_from_its_own_residuals_only():
    from river import linear_model

    kw = dict(bins=1, by="g", window=100)
    on = ConformalPredictiveRegressor(linear_model.LinearRegression(), **kw)
    off = ConformalPredictiveRegressor(linear_model.LinearRegression(), fallback="off", **kw)
    for i in range(300):
        for model in (on, off):
            model.learn_one({"a": float(i % 3), "g": i % 2}, float(i % 7))
    x = {"a": 1.0, "g": 99}  # never labelled
    assert off.predict_distribution_one(x).n == 0
    assert off.predict_distribution_one(x).interval(0.9) == (float("-inf"), float("inf"))
    assert on.predict_distribution_one(x).n == 100
    # a warm key answers the same either way
    assert _answer(on.predict_distribution_one({"a": 1.0, "g": 1})) == _answer(
        off.predict_distribution_one({"a": 1.0, "g": 1}))  # fmt: skip


def test_a_category_given_is_the_key_derived():
    from river import compose, linear_model

    a, b = (ConformalPredictiveRegressor(compose.Select("a") | linear_model.LinearRegression(),
                                         bins=1, by="g", min_category=10) for _ in range(2))
    for i in range(200):
        a.learn_one({"a": float(i % 3), "g": i % 4}, float(i % 7))
        b.learn_one({"a": float(i % 3)}, float(i % 7), category=i % 4)
    assert a._residuals.categories == b._residuals.categories == {(k, 0): 50 for k in range(4)}
    assert _answer(a.predict_distribution_one({"a": 1.0, "g": 2})) == _answer(
        b.predict_distribution_one({"a": 1.0}, category=2))  # fmt: skip
    with pytest.raises(TypeError, match="must be hashable"):
        b.predict_distribution_one({"a": 1.0}, category=[1])


def test_pickle_and_clone_keep_the_keys_and_the_settings():
    from river import linear_model

    model = ConformalPredictiveRegressor(linear_model.LinearRegression(), bins=2, by="g",
                                         max_categories=3, min_category=4)  # fmt: skip
    rows = [({"a": float(i % 5), "g": i % 5}, float(i % 7)) for i in range(400)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CategoryChurnWarning)
        for x, y in rows[:200]:
            model.learn_one(x, y)
        copy = pickle.loads(pickle.dumps(model))
        for m in (model, copy):
            for x, y in rows[200:]:
                m.learn_one(x, y)
    assert copy.categories == model.categories and copy.evictions == model.evictions > 0
    probe = {"a": 2.0, "g": 9}
    assert _answer(copy.predict_distribution_one(probe)) == _answer(
        model.predict_distribution_one(probe))  # fmt: skip
    fresh = model.clone()
    assert (fresh.max_categories, fresh.min_category, fresh.by) == (3, 4, "g")
    assert fresh.categories == [] and fresh.evictions == 0


def test_a_pickle_from_before_the_bound_is_refused_in_one_line():
    # a development version's before the first release: no bound on the keys, one window
    from river import linear_model

    model = ConformalPredictiveRegressor(linear_model.LinearRegression(), bins=1, by="g")
    for i in range(50):
        model.learn_one({"a": float(i % 3), "g": i % 2}, float(i % 7))
    state = model.__getstate__()
    del state["_churn"]
    stores = {k: v for k, v in state["_residuals"].__dict__.items() if k != "sizes"}
    for cls, old in ((ConformalPredictiveRegressor, state), (ResidualStores, stores)):
        with pytest.raises(ValueError, match="before the first release") as err:
            cls.__new__(cls).__setstate__(old)
        assert "\n" not in str(err.value)


@pytest.mark.parametrize("kw, message", [
    (dict(min_category=5), "min_category=5 needs by"),
    (dict(fallback="pooled"), "fallback='pooled' needs by"),
    (dict(by="g", fallback="off", min_category=3), "min_category needs the pooled fallback"),
    (dict(by="g", max_categories=0), "max_categories must be a positive integer"),
    (dict(by="g", fallback="nearest"), "fallback must be 'pooled' or 'off'"),
])  # fmt: skip
def test_the_rules_are_the_classifiers(kw, message):
    from river import linear_model

    with pytest.raises(ValueError, match=message):
        ConformalPredictiveRegressor(linear_model.LinearRegression(), **kw)


def test_check_estimator_with_by_and_churn():
    from river import linear_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CategoryChurnWarning)
        checks.check_estimator(ConformalPredictiveRegressor(
            linear_model.LinearRegression(), by="gallup", max_categories=2, min_category=2))
