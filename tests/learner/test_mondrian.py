"""Mondrian Venn-Abers (``by=``): per-category calibration against brute force, validity
inside segments, river conventions, state round-trips, eviction and the pooled fallback."""

from __future__ import annotations

import copy
import math
import pickle
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from river import base, checks, compose, datasets, linear_model, preprocessing

from streamcal import VennAbersClassifier, venn_abers_bruteforce
from streamcal.learner import MODES
from streamcal.learner.modes import DEFAULT_MODE
from tests._helpers import examples
from tests.learner.test_bruteforce import score, trained

# Small max_categories churn on purpose here; the warning has tests of its own
pytestmark = pytest.mark.filterwarnings("ignore::streamcal.learner.churn.CategoryChurnWarning")


class FixedScorer(base.Classifier):
    """A scoring function that never learns: every mode then scores with the same function,
    so a category's pairs can be compared with a plain classifier's on its sub-stream."""

    def learn_one(self, x, y):
        pass

    def predict_proba_one(self, x):
        p = 1 / (1 + math.exp(-(x["a"] - 0.5 * x["b"])))
        return {False: 1 - p, True: p}


def lr():
    return preprocessing.StandardScaler() | linear_model.LogisticRegression()


def lr_ab():  # the category is not a feature of the model
    return compose.Discard("g") | lr()


def group(x):  # a named function: the classifier must stay picklable
    return x["https"] > 0.75


feature = st.sampled_from([-1.0, 0.0, 0.5, 2.0])
obj = st.fixed_dictionaries({"a": feature, "b": feature, "g": st.sampled_from("xyz")})
streams = st.lists(st.tuples(obj, st.integers(0, 1)), min_size=1, max_size=50)
common = settings(
    max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def category_stream(stream, c):
    return [(x, y) for x, y in stream if x["g"] == c]


def replay_cut(stream, window, refresh):
    """The "pretrained" cut restated: (positions the model learned, in its order; positions
    waiting for it). Each category hands over its surplus beyond its newest labels as the
    plain mode would; the waiting objects are learned, in stream order, once they number
    max(refresh, the calibration pairs held) or would double what the model learned, every
    category first handing over everything beyond its newest window."""
    seen, left, mine = {}, {}, {}  # per category: labels, handed over, positions
    waiting, learned = [], []
    for n, (x, _) in enumerate(stream):
        c = x["g"]
        seen[c] = seen.get(c, 0) + 1
        left.setdefault(c, 0)
        mine.setdefault(c, []).append(n)
        surplus = seen[c] - left[c] - min(window, (seen[c] + 1) // 2)
        if surplus > 0 and surplus >= min(refresh, max(1, left[c])):
            waiting += mine[c][left[c] : left[c] + surplus]
            left[c] += surplus
        held = n + 1 - len(learned) - len(waiting)
        if waiting and len(waiting) >= min(max(refresh, held), max(1, len(learned))):
            for d in seen:
                keep = min(window, (seen[d] + 1) // 2)
                waiting += mine[d][left[d] : seen[d] - keep]
                left[d] = max(left[d], seen[d] - keep)
            learned += sorted(waiting)
            waiting = []
    return learned, waiting


def calibration_of(stream, c, gone):
    return [stream[i] for i in range(len(stream)) if stream[i][0]["g"] == c and i not in gone]


@common
@given(streams, obj, st.sampled_from(MODES), st.integers(1, 6), st.integers(1, 4))
def test_each_category_equals_a_plain_classifier_on_its_own_pairs(
    stream, x_test, mode, window, refresh
):
    """Same scores (a fixed scorer): category c's pair is a plain classifier's fed only c's
    calibration pairs, and the brute-force pair of those. Under "sva" and "va" those are
    c's newest labels, as the plain mode on c's sub-stream keeps them; under "pretrained"
    the replayed cut says which."""
    kw = {"mode": mode, "window": window, "refresh_every": None if mode == "va" else refresh}
    clf = VennAbersClassifier(FixedScorer(), by="g", fallback="off", **kw)
    for x, y in stream:
        clf.learn_one(x, y)
    learned, waiting = replay_cut(stream, window, refresh)
    for c in "xyz":
        sub = category_stream(stream, c)
        if mode == "pretrained":
            cal = calibration_of(stream, c, set(learned) | set(waiting))
            plain = VennAbersClassifier(FixedScorer(), mode="sva", window=None)
            for x, y in cal:
                plain.learn_one(x, y)
        else:
            plain = VennAbersClassifier(FixedScorer(), **kw)
            for x, y in sub:
                plain.learn_one(x, y)
            cal = sub[len(sub) - plain.calibration_size :]
        probe = {**x_test, "g": c}
        got, want = clf.predict_interval_one(probe), plain.predict_interval_one(probe)
        assert (got.p0, got.p1, got.score) == (want.p0, want.p1, want.score)
        s = score(FixedScorer(), probe)
        assert (got.p0, got.p1) == venn_abers_bruteforce(
            [score(FixedScorer(), x) for x, _ in cal], [y for _, y in cal], s
        )


@common
@given(streams, obj, st.integers(1, 6), st.integers(1, 4))
def test_pretrained_with_a_learning_model_equals_replay(stream, x_test, window, refresh):
    """A model that learns: it has learned exactly the replayed objects, in stream order,
    and each category calibrates with the rest of its labels, scored by that model."""
    clf = VennAbersClassifier(
        lr_ab(), by="g", window=window, refresh_every=refresh, fallback="off"
    )
    for x, y in stream:
        clf.learn_one(x, y)
    learned, waiting = replay_cut(stream, window, refresh)
    gone = set(learned) | set(waiting)
    assert clf.calibration_size == len(stream) - len(gone)
    m = trained(lr_ab, [stream[i] for i in learned])
    for c in "xyz":
        probe = {**x_test, "g": c}
        cal = calibration_of(stream, c, gone)
        iv = clf.predict_interval_one(probe)
        expected = venn_abers_bruteforce(
            [score(m, x) for x, _ in cal], [y for _, y in cal], score(m, probe)
        )
        assert (iv.p0, iv.p1) == expected
        assert iv.score == score(m, probe)
        if c in clf._state.categories:
            assert clf._state.categories[c].calibration_size == len(cal) < window + refresh


def segments(n=6000, seed=3, shift=1.2):
    """Segments 0 and 1, x ~ N(0, 1); P(y = 1) = sigmoid(x + shift) in segment 1 and
    sigmoid(x - shift) in segment 0: a model of x alone is calibrated overall only."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n)
    seg = rng.integers(0, 2, n)
    p = 1 / (1 + np.exp(-(x + np.where(seg == 1, shift, -shift))))
    y = rng.random(n) < p
    return [({"x": float(a), "seg": int(s)}, bool(t)) for a, s, t in zip(x, seg, y, strict=True)]


def band_misses(clf, stream):
    """Per segment: how many standard errors the frequency lies outside [mean p0, mean p1]."""
    rows = {0: [], 1: []}
    for x, y in stream:
        iv = clf.predict_interval_one(x)
        rows[x["seg"]].append((iv.p0, iv.p1, float(y)))
        clf.learn_one(x, y)
    out = {}
    for s, r in rows.items():
        p0, p1, y = np.array(r).T
        d0, d1 = y - p0, p1 - y
        out[s] = max(
            -d0.mean() / (d0.std(ddof=1) / math.sqrt(len(d0))),
            -d1.mean() / (d1.std(ddof=1) / math.sqrt(len(d1))),
        )
    return out


def test_mondrian_holds_in_every_segment_where_pooled_does_not():
    stream = segments()  # i.i.d., hence exchangeable within each segment; shuffled anyway
    random.Random(4).shuffle(stream)
    model = compose.Select("x") | preprocessing.StandardScaler() | linear_model.LogisticRegression()
    pooled = band_misses(VennAbersClassifier(model.clone(), window=300), stream)
    mondrian = band_misses(VennAbersClassifier(model.clone(), window=300, by="seg"), stream)
    assert max(pooled.values()) > 3, pooled
    assert max(mondrian.values()) <= 3, mondrian


# river's checks take 1-2 s per mode: the inner loop checks the default mode with by (the
# classifier's own checks cover every mode without), the full run every mode.
@pytest.mark.parametrize(
    "mode",
    [pytest.param(m, marks=[] if m == DEFAULT_MODE else [pytest.mark.slow]) for m in MODES],
)
# river's checks drop features, the by one included: the warning is expected
@pytest.mark.filterwarnings("ignore::streamcal.learner.mondrian.MissingCategoryWarning")
def test_check_estimator_with_by(mode):
    kw = {"window": 20} if mode == "va" else {}
    checks.check_estimator(VennAbersClassifier(lr(), mode=mode, by="age_of_domain", **kw))


def run(clf, stream):
    return [(iv.p0, iv.p1, iv.score) for iv in _run(clf, stream)]


def _run(clf, stream):
    for x, y in stream:
        yield clf.predict_interval_one(x)
        clf.learn_one(x, y)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("copier", ["pickle", "deepcopy"])
def test_pickling_and_copying_keep_every_category(mode, copier):
    stream = list(datasets.Phishing().take(400))
    kw = {"window": 10} if mode == "va" else {"window": 30}
    clf = VennAbersClassifier(lr(), mode=mode, by=group, max_categories=5, **kw)
    run(clf, stream[:250])
    dup = pickle.loads(pickle.dumps(clf)) if copier == "pickle" else copy.deepcopy(clf)
    assert list(dup._state.categories) == list(clf._state.categories)  # LRU order too
    assert set(clf._state.categories) == {False, True}
    for st_ in dup._state.categories.values():
        assert st_.model is dup.model  # still one shared model
    assert run(dup, stream[250:]) == run(clf, stream[250:])


def test_least_recently_labelled_category_is_evicted_and_counted():
    clf = VennAbersClassifier(FixedScorer(), by="g", window=3, max_categories=2)
    x = {"a": 0.5, "b": 0.0}
    for g in "xyxz":  # z evicts y, the least recently labelled
        clf.learn_one({**x, "g": g}, 1)
    assert list(clf._state.categories) == ["x", "z"] and clf.evictions == 1
    iv = clf.predict_interval_one({**x, "g": "y"})  # y has no pairs: the pooled set answers
    s = score(FixedScorer(), x)
    assert (iv.p0, iv.p1) == venn_abers_bruteforce([s, s], [1, 1], s)
    clf.learn_one({**x, "g": "y"}, 1)
    assert list(clf._state.categories) == ["z", "y"] and clf.evictions == 2


@given(st.lists(st.tuples(obj, st.integers(0, 1)), max_size=60), st.integers(1, 3))
@common
def test_pretrained_loses_no_label_when_evicting(stream, max_categories):
    """Every labelled object calibrates its category, waits for the model, or was learned."""
    clf = VennAbersClassifier(
        lr_ab(), by="g", window=3, refresh_every=2, max_categories=max_categories
    )
    for x, y in stream:
        clf.learn_one(x, y)
        state = clf._state
        assert len(state.categories) <= max_categories
        assert state.calibration_size + len(state.waiting) + state.n_learned == state.n_seen


@common
@given(streams, obj, st.one_of(st.none(), st.integers(0, 5)), st.integers(1, 3))
def test_pooled_fallback_below_min_category(stream, x_test, min_category, max_categories):
    """A category without a state (never labelled, or evicted) or with fewer than
    min_category pairs (by default the window, 4, here) answers as brute force on the
    union of the categories' calibration sets; the others on their own pairs."""
    clf = VennAbersClassifier(
        FixedScorer(), by="g", window=4, min_category=min_category,
        max_categories=max_categories,
    )  # fmt: skip
    for x, y in stream:
        clf.learn_one(x, y)
    state = clf._state  # the pooled set: every pair the model has not learned
    pooled = [p for st_ in state.categories.values() for p in st_.calibration]
    pooled += [(x, y, score(FixedScorer(), x)) for _, x, y in state.waiting]
    least = 4 if min_category is None else min_category
    for c in "xyz":
        probe = {**x_test, "g": c}
        st_ = clf._state.categories.get(c)
        own = [] if st_ is None else list(st_.calibration)
        pairs = own if st_ is not None and len(own) >= least else pooled
        s = score(FixedScorer(), probe)
        iv = clf.predict_interval_one(probe)
        assert (iv.p0, iv.p1) == venn_abers_bruteforce(
            [p[2] for p in pairs], [p[1] for p in pairs], s
        )
        sub = category_stream(stream, c)
        newest = sub[len(sub) - len(own) :]  # the category's own pairs are its newest labels
        if st_ is None or max_categories < 3:
            continue  # evictions: its newest labels may have gone with an earlier state
        assert [p[2] for p in own] == [score(FixedScorer(), x) for x, _ in newest]
        assert [p[1] for p in own] == [y for _, y in newest]


@pytest.mark.parametrize(
    "kw",
    [
        {"fallback": "off", "min_category": 5},  # min_category without the fallback
        {"fallback": "pooled", "by": None},
        {"min_category": 5, "by": None},
        {"fallback": "mine", "min_category": 5},
        {"min_category": -1},
        {"max_categories": 0},
        {"by": ["g"]},
    ],
)
def test_bad_mondrian_settings_are_refused(kw):
    kw = {"by": "g", **kw}
    with pytest.raises((ValueError, TypeError)):
        VennAbersClassifier(FixedScorer(), **kw)


@pytest.mark.parametrize("mode", ["sva", "va"])
def test_fallback_needs_the_pretrained_mode(mode):
    with pytest.raises(ValueError, match="pretrained"):
        VennAbersClassifier(lr_ab(), mode=mode, by="g", min_category=3, fallback="pooled")
    with pytest.raises(ValueError, match="pretrained"):
        VennAbersClassifier(lr_ab(), mode=mode, by="g", min_category=3)
    VennAbersClassifier(lr_ab(), mode=mode, by="g")  # no fallback there by default


def test_unhashable_category_is_a_clear_error():
    clf = VennAbersClassifier(FixedScorer(), by=lambda x: [x["a"]])
    with pytest.raises(TypeError, match="hashable"):
        clf.learn_one({"a": 1.0, "b": 0.0}, 1)


@given(
    st.lists(st.tuples(obj, st.integers(0, 1)), max_size=60),
    st.sampled_from(MODES),
    st.integers(1, 3),
)
@common
def test_calibration_size_is_the_sum_over_categories_after_every_label(
    stream, mode, max_categories
):
    """The running total equals the sum over the categories, through evictions, refreshes
    and a pickle round trip."""
    window = None if mode == "sva" else 3
    clf = VennAbersClassifier(
        lr_ab(), mode=mode, by="g", window=window, max_categories=max_categories,
        **({"refresh_every": 2} if mode == "pretrained" else {}),
    )  # fmt: skip
    for i, (x, y) in enumerate(stream):
        clf.learn_one(x, y)
        if i % 7 == 3:
            clf = pickle.loads(pickle.dumps(clf))
        state = clf._state
        assert state.calibration_size == sum(
            s.calibration_size for s in state.categories.values()
        )
