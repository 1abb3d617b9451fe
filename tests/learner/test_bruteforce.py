"""Each mode of VennAbersClassifier equals a brute-force replay of its definition.

The replays rebuild, from scratch and by hand, what the scoring model has learned and
which pairs calibrate, then call the reference ``venn_abers_bruteforce`` (two PAVA fits).
Streams are drawn by hypothesis with few distinct feature values, so scores tie often.
The comparisons are exact (==): the same model learning the same objects in the same
order computes the same floats.
"""

from __future__ import annotations

import pickle

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from river import linear_model, naive_bayes, preprocessing, tree

from streamcal import VennAbersClassifier, venn_abers_bruteforce
from tests._helpers import examples


def lr():
    return preprocessing.StandardScaler() | linear_model.LogisticRegression()


MODELS = {
    "lr": lr,
    "gnb": naive_bayes.GaussianNB,
    "ht": lambda: tree.HoeffdingTreeClassifier(grace_period=5, delta=0.5),
}


def sorted_x(x):
    return {k: x[k] for k in sorted(x)}


def score(model, x):
    """P(True), 0.5 for {} (independent re-statement of the learner's scoring rule)."""
    proba = model.predict_proba_one(sorted_x(x))
    if not proba:
        return 0.5
    return proba[True] if True in proba else 1.0 - proba[False]


def trained(make, pairs):
    m = make()
    for x, y in pairs:
        m.learn_one(sorted_x(x), bool(y))
    return m


# Features on a coarse grid, in random key order: many ties, and order must not matter.
feature = st.sampled_from([-1.0, 0.0, 0.5, 2.0])
obj = st.fixed_dictionaries({"a": feature, "b": feature, "c": st.sampled_from([0.0, 1.0])}).map(
    lambda x: dict(reversed(list(x.items()))) if x["c"] else x
)
streams = st.lists(st.tuples(obj, st.integers(0, 1)), min_size=1, max_size=40)
common = settings(
    max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def checkpoints(n):
    return sorted({1, n // 3, n // 2, n - 1, n} - {0})


@common
@given(streams, obj, st.sampled_from(sorted(MODELS)), st.integers(1, 8), st.integers(1, 6))
def test_pretrained_equals_replay(stream, x_test, model, window, refresh):
    clf = VennAbersClassifier(MODELS[model](), window=window, refresh_every=refresh)
    n_learned = 0  # the cut, restated: the model catches up on the objects beyond the newest
    # window (newest half at the start) when they would double its training set or number
    # refresh_every; every later labelled object calibrates
    marks = checkpoints(len(stream))
    for n, (x, y) in enumerate(stream, start=1):
        clf.learn_one(x, y)
        surplus = n - n_learned - min(window, (n + 1) // 2)
        if surplus > 0 and surplus >= min(refresh, max(1, n_learned)):
            n_learned += surplus
        if n not in marks:
            continue
        m = trained(MODELS[model], stream[:n_learned])
        cal = stream[n_learned:n]
        expected = venn_abers_bruteforce(
            [score(m, c) for c, _ in cal], [c for _, c in cal], score(m, x_test)
        )
        iv = clf.predict_interval_one(x_test)
        assert (iv.p0, iv.p1) == expected
        assert iv.score == score(m, x_test)
        assert clf.calibration_size == n - n_learned


@common
@given(
    streams,
    obj,
    st.sampled_from(sorted(MODELS)),
    st.one_of(st.none(), st.integers(1, 8)),
    st.one_of(st.none(), st.integers(1, 6)),
)
def test_sva_equals_replay(stream, x_test, model, window, refresh):
    if window is None:
        refresh = None
    clf = VennAbersClassifier(MODELS[model](), mode="sva", window=window, refresh_every=refresh)
    m = MODELS[model]()
    scores = []  # each object's score when it was learned, replaced at every refresh
    marks = checkpoints(len(stream))
    for n, (x, y) in enumerate(stream, start=1):
        clf.learn_one(x, y)
        m.learn_one(sorted_x(x), bool(y))
        scores.append(score(m, x))
        if refresh and n % refresh == 0:
            lo = max(0, n - window)
            scores[lo:] = [score(m, c) for c, _ in stream[lo:n]]
        if n not in marks:
            continue
        lo = 0 if window is None else max(0, n - window)
        expected = venn_abers_bruteforce(
            scores[lo:n], [c for _, c in stream[lo:n]], score(m, x_test)
        )
        iv = clf.predict_interval_one(x_test)
        assert (iv.p0, iv.p1) == expected
        assert clf.calibration_size == n - lo


@common
@given(streams, obj, st.sampled_from(sorted(MODELS)), st.integers(1, 8))
def test_va_equals_algorithm_1_over_the_window(stream, x_test, model, window):
    clf = VennAbersClassifier(MODELS[model](), mode="va", window=window)
    marks = checkpoints(len(stream))
    for n, (x, y) in enumerate(stream, start=1):
        clf.learn_one(x, y)
        if n not in marks:
            continue
        m = trained(MODELS[model], stream[:n])
        cal = stream[max(0, n - window) : n]
        p = []
        for label in (0, 1):
            m_y = pickle.loads(pickle.dumps(m))
            m_y.learn_one(sorted_x(x_test), bool(label))
            p.append(
                venn_abers_bruteforce(
                    [score(m_y, c) for c, _ in cal], [c for _, c in cal], score(m_y, x_test)
                )[label]
            )
        iv = clf.predict_interval_one(x_test)
        assert (iv.p0, iv.p1) == tuple(p)
        assert iv.score == score(m, x_test)


sparse_obj = st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), feature, max_size=4)


@common
@given(st.lists(st.tuples(sparse_obj, st.integers(0, 1)), min_size=1, max_size=30), sparse_obj)
def test_va_vectorised_linear_path_equals_object_by_object(stream, x_test):
    """Features appear and disappear; the numpy path must give the same pairs."""
    fast = VennAbersClassifier(lr(), mode="va", window=6)
    slow = VennAbersClassifier(lr(), mode="va", window=6)
    slow._state.matrix = None  # force scoring object by object through predict_proba_one
    assert fast._state.matrix is not None
    for x, y in stream:
        a, b = fast.predict_interval_one(x), slow.predict_interval_one(x)
        assert (a.p0, a.p1, a.score) == (b.p0, b.p1, b.score)
        fast.learn_one(x, y)
        slow.learn_one(x, y)
    a, b = fast.predict_interval_one(x_test), slow.predict_interval_one(x_test)
    assert (a.p0, a.p1) == (b.p0, b.p1)
