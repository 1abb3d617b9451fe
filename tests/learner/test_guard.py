"""No single record breaks the model (issue 29): a feature that is not finite is refused
by name; an object whose learning would leave the model's output non-finite (a feature of
1e300 or 1e160 squared by river's StandardScaler) is undone, reported by name and left
out, in every mode, and every later object gets a finite prediction, also after the
classifier is saved and restored.

The guard's bisection is checked against a brute-force reference: with any set of bad
items in a batch (loud ones, which break the output at once, and silent ones, which
break it at the next step), exactly the bad ones are left out and the model has learned
exactly the good ones, in order."""

from __future__ import annotations

import math
import pickle
import random
import warnings

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from river import base, linear_model, naive_bayes, preprocessing

from streamcal import UnlearnedWarning, VennAbersClassifier, VennAbersMultiClassifier
from streamcal.core.validate import check_features
from streamcal.learner.guard import ModelGuard, learn_checked, lookahead
from streamcal.learner.scoring import score_sorted
from tests._helpers import examples

POISON = [1e300, 1e160, -1e300]
MODES = [
    pytest.param({"mode": "pretrained"}, id="pretrained"),
    pytest.param({"mode": "sva"}, id="sva"),
    pytest.param({"mode": "sva", "refresh_every": 7}, id="sva-refresh"),
    pytest.param({"mode": "va", "window": 15}, id="va"),
    pytest.param({"mode": "pretrained", "by": "g"}, id="mondrian-pretrained"),
    pytest.param({"mode": "sva", "by": "g"}, id="mondrian-sva"),
    pytest.param({"mode": "pretrained", "protect": True}, id="protected"),
]


def lr():
    return preprocessing.StandardScaler() | linear_model.LogisticRegression()


def stream(n: int, seed: int = 0, poison_at=None, value=None):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        x = {"a": rng.gauss(0, 1), "b": rng.gauss(0, 1), "g": i % 2}
        y = x["a"] + 0.5 * rng.gauss(0, 1) > 0
        if i == poison_at:
            x["a"] = value
        out.append((x, y))
    return out


def run(clf, data, predicted=None):
    """The prequential loop; the predictions made (every one must be finite)."""
    ps = []
    for x, y in data:
        p = clf.predict_proba_one(x)[True]
        assert math.isfinite(p)
        ps.append(p)
        clf.learn_one(x, y)
    return ps


# ---------------------------------------------------------------- features not finite
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 10**400])
@pytest.mark.parametrize("multi", [False, True])
def test_a_feature_that_is_not_finite_is_refused_by_name_and_changes_nothing(value, multi):
    if multi:
        clf = VennAbersMultiClassifier(naive_bayes.GaussianNB(), window=10)
        data = [({"a": float(i % 3), "b": 1.0}, "xyz"[i % 3]) for i in range(30)]
    else:
        clf = VennAbersClassifier(lr(), window=10)
        data = [(x, y) for x, y in stream(30)]
    for x, y in data:
        clf.learn_one(x, y)
    before = pickle.dumps(clf._state.to_state())
    bad = {"a": 0.5, "b": value}
    for call in (clf.predict_proba_one, clf.predict_one, clf.predict_interval_one):
        with pytest.raises(ValueError, match="feature 'b' is (not finite|beyond the float)"):
            call(bad)
    with pytest.raises(ValueError, match="feature 'b'"):
        clf.learn_one(bad, data[0][1])
    assert pickle.dumps(clf._state.to_state()) == before


@pytest.mark.parametrize("multi", [False, True])
def test_a_mini_batch_with_nan_is_refused_naming_column_and_row(multi):
    clf = VennAbersMultiClassifier(naive_bayes.GaussianNB()) if multi else VennAbersClassifier(lr())
    X = pd.DataFrame({"a": [1.0, float("nan")], "b": [1.0, 2.0]}, index=["r0", "r1"])
    y = pd.Series(["u", "v"] if multi else [True, False])
    for call in (lambda: clf.learn_many(X, y), lambda: clf.predict_proba_many(X),
                 lambda: clf.predict_many(X)):  # fmt: skip
        with pytest.raises(ValueError, match=r"feature 'a' is not finite: nan \(row 'r1'\)"):
            call()
    assert clf.calibration_size == 0
    strings = pd.DataFrame({"a": [1.0, 2.0], "c": ["red", float("inf")]})
    with pytest.raises(ValueError, match=r"feature 'c' is not finite: inf \(row 1\)"):
        clf.predict_proba_many(strings)


def test_strings_and_huge_sums_pass_the_check():
    clf = VennAbersClassifier(naive_bayes.GaussianNB(), mode="sva", window=5)
    clf.learn_one({"a": 1e308, "b": 1e308}, True)  # each finite: the sum overflows
    assert clf.calibration_size == 1
    assert check_features({"a": 1.0, "c": "red", "d": None}) == {"a": 1.0, "c": "red", "d": None}


# ---------------------------------------------------------------- poison undone
@pytest.mark.parametrize("value", POISON)
@pytest.mark.parametrize("settings_", MODES)
def test_one_poisoned_object_costs_only_itself(settings_, value):
    data = stream(160, poison_at=40, value=value)
    clf = VennAbersClassifier(lr(), **{"window": 20, **settings_})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run(clf, data)
    found = [w for w in caught if issubclass(w.category, UnlearnedWarning)]
    assert len(found) == 1, [str(w.message) for w in caught]
    assert f"its feature 'a' = {value!r}" in str(found[0].message)
    (report,) = clf.unlearned
    assert report.x["a"] == value and report.feature == "a" and report.value == value
    probe = {"a": 0.3, "b": -0.2, "g": 0}
    assert lookahead(clf.model, probe, True) is None  # not broken, even one step later


@pytest.mark.parametrize("settings_", [{"mode": "sva"}, {"mode": "va", "window": 15}])
def test_the_model_has_learned_every_other_object_in_order(settings_):
    data = stream(120, poison_at=30, value=1e300)
    clf = VennAbersClassifier(lr(), **{"window": 20, **settings_})
    with pytest.warns(UnlearnedWarning):
        run(clf, data)
    ref = lr()
    for i, (x, y) in enumerate(data):
        if i != 30:
            ref.learn_one(x, y)
    probes = [x for x, _ in stream(20, seed=1)]
    assert [clf.model.predict_proba_one(x) for x in probes] == [
        ref.predict_proba_one(x) for x in probes
    ]


def test_pretrained_learns_the_rest_of_the_batch_again():
    data = stream(200, poison_at=30, value=1e160)
    clf = VennAbersClassifier(lr(), window=20)
    with pytest.warns(UnlearnedWarning, match="1e\\+160"):
        run(clf, data)
    n = clf._state.n_learned
    ref = lr()
    for i, (x, y) in enumerate(data[:n]):
        if i != 30:
            ref.learn_one(dict(sorted(x.items())), y)
    probes = [dict(sorted(x.items())) for x, _ in stream(20, seed=1)]
    assert [clf.model.predict_proba_one(x) for x in probes] == [
        ref.predict_proba_one(x) for x in probes
    ]
    assert clf.unlearned[0].taken and clf.unlearned[0].labels_ago > 0


@pytest.mark.parametrize("value", [1e300, 1e160])
@pytest.mark.parametrize("front_door", [False, True])
def test_multiclass_poison_is_undone(value, front_door):
    rng = random.Random(3)
    data = []
    for _ in range(150):
        k = rng.randrange(3)
        x = {"a": k + rng.gauss(0, 0.5), "b": rng.gauss(0, 1)}
        data.append((x, "xyz"[k]))
    data[40][0]["a"] = value
    model = preprocessing.StandardScaler() | linear_model.SoftmaxRegression()
    make = VennAbersClassifier if front_door else VennAbersMultiClassifier
    clf = make(model, window=15, refresh_every=15)
    with pytest.warns(UnlearnedWarning, match="'a'"):
        for x, y in data:
            assert all(math.isfinite(p) for p in clf.predict_proba_one(x).values())
            clf.learn_one(x, y)
    assert len(clf.unlearned) == 1


def test_warn_unlearned_reaches_the_multiclass_side_whenever_it_is_set():
    """The front door's flag is the multiclass side's once it turned multiclass: set after
    the switch, or on a classifier restored from a multiclass state, it still holds."""
    rng = random.Random(5)
    ks = [rng.randrange(3) for _ in range(150)]
    data = [({"a": k + rng.gauss(0, 0.5)}, "xyz"[k]) for k in ks]
    data[40] = ({"a": 1e300}, data[40][1])
    model = preprocessing.StandardScaler() | linear_model.SoftmaxRegression()
    clf = VennAbersClassifier(model, window=15, refresh_every=15)
    for x, y in data[:30]:
        clf.learn_one(x, y)
    for made in (clf, VennAbersClassifier.from_state(clf.to_state())):
        assert made.warn_unlearned is True
        made.warn_unlearned = False
        assert made.warn_unlearned is False and made._multi.warn_unlearned is False
        with warnings.catch_warnings():
            warnings.simplefilter("error", UnlearnedWarning)
            for x, y in data[30:]:
                made.learn_one(x, y)
        assert made.unlearned  # reported, not warned


@pytest.mark.parametrize("mode", ["pretrained", "sva", "va"])
def test_a_mini_batch_with_a_poisoned_row(mode):
    data = stream(100, poison_at=25, value=1e300)
    clf = VennAbersClassifier(lr(), mode=mode, window=20)
    X = pd.DataFrame([x for x, _ in data])
    y = pd.Series([y for _, y in data])
    with pytest.warns(UnlearnedWarning, match="1e\\+300"):
        for i in range(0, 100, 25):
            clf.learn_many(X[i : i + 25], y[i : i + 25])
        ps = clf.predict_proba_many(X[50:])
    assert ps.notna().all().all()
    (report,) = clf.unlearned
    # sva and va learn a mini-batch at once: the row is refused; pretrained calibrated it
    assert report.taken == (mode == "pretrained")
    assert clf.calibration_size == (20 if mode == "va" else clf.calibration_size)


# ---------------------------------------------------------------- saved and restored
@pytest.mark.parametrize("mode", ["pretrained", "sva", "va"])
def test_saved_right_after_the_poison_the_model_restored_is_not_broken(mode):
    data = stream(120, poison_at=50, value=1e300)
    clf = VennAbersClassifier(lr(), mode=mode, window=20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnlearnedWarning)
        run(clf, data[:51])  # the poison's label is the last one learned
        state = clf.to_state()  # sva: its step left the output finite; found here
    copy = VennAbersClassifier.from_state(state)
    assert lookahead(copy.model, {"a": 0.1, "b": 0.2, "g": 0}, True) is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnlearnedWarning)
        run(copy, data[51:])
    if mode != "pretrained":  # the default mode learns it later, after the restore
        assert len(clf.unlearned) == 1


# ---------------------------------------------------------------- models that raise
class Picky(base.Classifier):
    """Learns a running mean of x; raises on x = 13 (a model's own refusal of a value: a
    ValueError, which the guard undoes; a TypeError is a programming error, raised)."""

    def __init__(self):
        self.n, self.s = 0, 0.0

    def learn_one(self, x, y):
        if x["a"] == 13.0:
            raise ValueError("thirteen")
        self.n += 1
        self.s += x["a"]

    def predict_proba_one(self, x):
        p = 1 / (1 + math.exp(-(x["a"] - self.s / max(self.n, 1))))
        return {True: p, False: 1 - p}


def test_pretrained_batch_with_an_object_the_model_refuses_learns_the_others():
    clf = VennAbersClassifier(Picky(), window=5)
    xs = [float(i % 20) for i in range(60)]
    with pytest.warns(UnlearnedWarning, match="raised ValueError\\('thirteen'\\)"):
        for a in xs:
            clf.learn_one({"a": a}, a > 9)
    learned = clf._state.n_learned
    refused = sum(1 for a in xs[:learned] if a == 13.0)
    assert clf.model.n == learned - refused and len(clf.unlearned) == refused > 0


def test_sva_step_that_raises_leaves_the_model_as_it_was():
    clf = VennAbersClassifier(Picky(), mode="sva", window=5)
    for a in range(12):
        clf.learn_one({"a": float(a)}, a > 5)
    before = (clf.model.n, clf.model.s, clf.calibration_size)
    with pytest.raises(ValueError, match="thirteen"):
        clf.learn_one({"a": 13.0}, True)
    assert (clf.model.n, clf.model.s, clf.calibration_size) == before
    clf.learn_one({"a": 1.0}, False)
    assert clf.model.n == 13 and not clf.unlearned


# ---------------------------------------------------------------- bisection vs brute force
class Toy(base.Classifier):
    """Remembers what it learned. A loud bad item makes its output NaN at once; a silent
    one only once it learns anything after it (as the scaler given 1e300)."""

    def __init__(self):
        self.seen = []

    def learn_one(self, x, y):
        self.seen.append(x["i"])

    def predict_proba_one(self, x):
        broken = False
        for k, i in enumerate(self.seen):
            kind = BAD.get(i)
            if kind == "loud" or (kind == "silent" and k < len(self.seen) - 1):
                broken = True
        return {True: math.nan if broken else 0.5, False: 0.5}


BAD: dict = {}


@settings(max_examples=examples(200), deadline=None)
@given(
    n=st.integers(1, 40),
    bad=st.dictionaries(st.integers(0, 39), st.sampled_from(["loud", "silent"]), max_size=6),
)
def test_bisection_leaves_out_exactly_the_bad_items(n, bad):
    BAD.clear()
    BAD.update(bad)
    model = Toy()
    model.seen = [-1]  # learned before: good
    items = [({"i": i}, True) for i in range(n)]

    def learn(part):
        for x, y in part:
            model.learn_one(x, y)

    def check(part):
        for x, _ in part:
            score_sorted(model, x)  # raises NonFiniteScore
        return lookahead(model, *part[-1]) if part else None

    left = learn_checked(model, items, learn, check)
    want_bad = [i for i in range(n) if i in bad]
    assert [x["i"] for (x, _), _ in left] == want_bad
    assert model.seen == [-1] + [i for i in range(n) if i not in bad]


@settings(max_examples=examples(100), deadline=None)
@given(
    n=st.integers(1, 250),
    bad=st.dictionaries(st.integers(0, 249), st.sampled_from(["loud", "silent"]), max_size=4),
    period=st.integers(1, 30),
)
def test_every_label_guard_leaves_out_exactly_the_bad_labels(n, bad, period):
    """learn_step with its pickle every ``period`` labels, then a settle (as to_state)."""
    BAD.clear()
    BAD.update(bad)
    model = Toy()
    guard = ModelGuard(model, period=period)

    def step(m, x, y):
        m.learn_one(x, y)
        return score_sorted(m, x)

    for i in range(n):
        guard.learn_step({"i": i}, True, step)
    guard.settle()
    assert model.seen == [i for i in range(n) if i not in bad]
    assert sorted(r.x["i"] for r in guard.unlearned) == sorted(i for i in bad if i < n)
    loud = {r.x["i"]: r.taken for r in guard.unlearned}
    assert all(not taken for i, taken in loud.items() if bad[i] == "loud")
