"""The mini-batch methods: pandas in, pandas out, and the same answers as one by one.

predict_proba_many equals predict_proba_one row by row on the same state (a hypothesis
test over modes, models, by, protection and streams with many ties, where a batched score
a few ulps off would change the answer); learn_many feeds the calibration set every row
in order, and the model learns in river's batches only where it has learn_many."""

from __future__ import annotations

import pickle
import random

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from river import base, datasets, linear_model, naive_bayes, preprocessing, tree

from streamcal import FieldScore, VennAbersClassifier, VennAbersMultiClassifier
from tests._helpers import examples


def lr():
    return preprocessing.StandardScaler() | linear_model.LogisticRegression()


MODELS = {
    "lr": lr,
    "gnb": naive_bayes.GaussianNB,
    "ht": lambda: tree.HoeffdingTreeClassifier(grace_period=20),
    "field": lambda: FieldScore("a"),
}
CONFIGS = [
    ("lr", {}),
    ("lr", {"mode": "sva", "refresh_every": 7}),
    ("lr", {"by": "g"}),
    ("lr", {"protect": {"burn_in": 0}}),
    ("lr", {"by": "g", "protect": {"burn_in": 0}, "min_category": 5, "fallback": "pooled"}),
    ("lr", {"mode": "va", "window": 8}),
    ("gnb", {}),
    ("ht", {"mode": "sva"}),
    ("field", {}),
]


def stream(rng: random.Random, n: int, levels: int):
    """Features with few values (ties and repeated objects), a category, a label."""
    out = []
    for _ in range(n):
        a = rng.randrange(levels) / levels
        b = float(rng.randrange(3))
        x = {"a": a, "b": b, "g": rng.randrange(3)}
        out.append((x, rng.random() < 0.2 + 0.6 * a))
    return out


def frame(rows):
    return pd.DataFrame([x for x, _ in rows], index=[f"r{i}" for i in range(len(rows))])


@settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    config=st.sampled_from(CONFIGS),
    seed=st.integers(0, 10_000),
    n=st.integers(0, 120),
    levels=st.sampled_from([2, 5, 50]),
    batch=st.integers(1, 150),
)
def test_predict_proba_many_equals_predict_proba_one_row_by_row(config, seed, n, levels, batch):
    name, kw = config
    kw = {"window": 20, **kw}
    rng = random.Random(seed)
    clf = VennAbersClassifier(MODELS[name](), **kw)
    for x, y in stream(rng, n, levels):
        clf.predict_proba_one(x)
        clf.learn_one(x, y)
    test = stream(rng, batch, levels)
    test += test[: batch // 3]  # objects the batch holds twice
    X = frame(test)
    twin = pickle.loads(pickle.dumps(clf))  # the same state, for the one-by-one answers
    many = clf.predict_proba_many(X)
    labels = clf.predict_many(X)
    assert list(many.columns) == [False, True] and list(many.index) == list(X.index)
    for i, (x, _) in enumerate(test):
        one = twin.predict_proba_one(x)
        assert abs(many[True].iloc[i] - one[True]) <= 1e-9
        assert abs(many[False].iloc[i] - one[False]) <= 1e-9
        assert labels.iloc[i] == twin.predict_one(x)


def test_the_batched_scoring_is_exact_for_the_store_on_tied_objects():
    """Phishing repeats many objects: rows tied with held scores are scored one by one,
    so every answer equals predict_proba_one's float for float, not only within 1e-9."""
    data = list(datasets.Phishing())
    clf = VennAbersClassifier(lr(), window=300)
    for x, y in data[:900]:
        clf.learn_one(x, y)
    X = pd.DataFrame([x for x, _ in data[900:]])
    many = clf.predict_proba_many(X)[True].tolist()
    assert many == [clf.predict_proba_one(x)[True] for x, _ in data[900:]]


def test_multiclass_many_equals_one_row_by_row():
    data = list(datasets.ImageSegments())
    random.Random(2).shuffle(data)
    clf = VennAbersMultiClassifier(naive_bayes.GaussianNB(), window=100)
    for x, y in data[:500]:
        clf.learn_one(x, y)
    X = pd.DataFrame([x for x, _ in data[500:600]])
    many, labels = clf.predict_proba_many(X), clf.predict_many(X)
    assert list(many.columns) == clf.classes
    for i, (x, _) in enumerate(data[500:600]):
        assert many.iloc[i].to_dict() == clf.predict_proba_one(x)
        assert labels.iloc[i] == clf.predict_one(x)


def calibration(clf):
    """The calibration set's objects and labels, in order."""
    return [(x, y) for x, y, _ in clf._state.calibration]


@pytest.mark.parametrize("model", ["ht", "gnb-multiclass"])
def test_learn_many_of_a_row_by_row_model_equals_learn_one(model):
    if model == "ht":
        data = list(datasets.Phishing().take(400))
        make = lambda: VennAbersClassifier(tree.HoeffdingTreeClassifier(), window=50)  # noqa: E731
    else:
        data = list(datasets.ImageSegments().take(400))
        make = lambda: VennAbersMultiClassifier(  # noqa: E731
            tree.HoeffdingTreeClassifier(), window=50
        )
    one, many = make(), make()
    for x, y in data:
        one.learn_one(x, y)
    for i in range(0, len(data), 37):
        chunk = data[i : i + 37]
        many.learn_many(pd.DataFrame([x for x, _ in chunk]), pd.Series([y for _, y in chunk]))
    probe = [x for x, _ in data[:50]]
    assert [many.predict_proba_one(x) for x in probe] == [one.predict_proba_one(x) for x in probe]
    # the calibration set: the same objects, labels and scores, in order (a DataFrame may
    # hold an integer feature as a float: equal values)
    assert list(many._state.calibration) == list(one._state.calibration)
    assert many._state.n_learned == one._state.n_learned


class Spy(linear_model.LogisticRegression):
    """A logistic regression that records how it was taught."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.calls = []

    def learn_one(self, x, y, **kw):
        self.calls.append(1)
        super().learn_one(x, y, **kw)

    def learn_many(self, X, y, **kw):
        self.calls.append(len(X))
        super().learn_many(X, y, **kw)


@pytest.mark.parametrize("by", [None, "g"])
def test_learn_many_feeds_every_row_and_the_model_learns_in_the_users_batches(by):
    rng = random.Random(5)
    data = stream(rng, 600, 50)
    one = VennAbersClassifier(Spy(), window=40, by=by)
    many = VennAbersClassifier(Spy(), window=40, by=by)
    for x, y in data:
        one.learn_one(x, y)
    for i in range(0, len(data), 25):
        chunk = data[i : i + 25]
        many.learn_many(pd.DataFrame([x for x, _ in chunk]), [y for _, y in chunk])
    if by is None:
        assert calibration(many) == calibration(one)  # every row, in order
    else:
        for c in one._state.categories:
            assert calibration_of(many, c) == calibration_of(one, c)
    assert set(one.model.calls) == {1}
    assert sum(many.model.calls) == sum(one.model.calls)  # the same objects learned...
    assert max(many.model.calls) > 1 and max(many.model.calls) <= 25  # ...in batches


def calibration_of(clf, c):
    return [(x, y) for x, y, _ in clf._state.categories[c].calibration]


def test_a_state_with_batches_to_learn_round_trips_and_continues_identically():
    rng = random.Random(6)
    data = stream(rng, 300, 50)
    clf = VennAbersClassifier(lr(), window=40)
    clf.learn_many(frame(data[:130]), [y for _, y in data[:130]])
    assert "batches" in clf.to_state()["mode_state"]
    copy = VennAbersClassifier.from_state(clf.to_state())
    for i in range(130, 300, 17):
        chunk = data[i : i + 17]
        for c in (clf, copy):
            c.learn_many(frame(chunk), [y for _, y in chunk])
        assert copy.predict_proba_many(frame(chunk)).equals(clf.predict_proba_many(frame(chunk)))


def test_learn_one_alone_leaves_no_batches_in_the_state():
    clf = VennAbersClassifier(lr(), window=20)
    for x, y in datasets.Phishing().take(100):
        clf.learn_one(x, y)
    assert "batches" not in clf.to_state()["mode_state"]


def test_bad_labels_in_a_batch_change_nothing():
    data = list(datasets.Phishing().take(60))
    clf = VennAbersClassifier(lr(), window=20)
    clf.learn_many(pd.DataFrame([x for x, _ in data[:30]]), [y for _, y in data[:30]])
    before = pickle.dumps(clf)
    labels = [y for _, y in data[30:]]
    labels[17] = 2
    with pytest.raises(ValueError, match="label 2 makes.*LogisticRegression is binary only"):
        clf.learn_many(pd.DataFrame([x for x, _ in data[30:]]), labels)
    for bad, match in [(float("nan"), "nan is missing"), (0.5, "0.5 is a float")]:
        labels[17] = bad
        X = pd.DataFrame([x for x, _ in data[30:]], index=range(100, 130))
        with pytest.raises(ValueError, match=f"label {match}.*\\(row 117\\)"):
            clf.learn_many(X, labels)
    with pytest.raises(ValueError, match="y has 29 labels for 30 rows"):
        clf.learn_many(pd.DataFrame([x for x, _ in data[30:]]), labels[1:])
    assert pickle.dumps(clf) == before


def test_a_batch_of_integer_classes_turns_a_fresh_classifier_multiclass():
    data = list(datasets.ImageSegments().take(200))
    codes = {c: i for i, c in enumerate(sorted({y for _, y in data}))}
    clf = VennAbersClassifier(naive_bayes.GaussianNB(), window=30)
    clf.learn_many(pd.DataFrame([x for x, _ in data]), pd.Series([codes[y] for _, y in data]))
    assert clf.task == "multiclass" and sorted(clf.classes) == sorted(codes.values())


def test_inputs_that_are_not_frames_or_keywords_are_refused():
    clf = VennAbersClassifier(lr())
    with pytest.raises(TypeError, match="X must be a pandas DataFrame"):
        clf.predict_proba_many([{"a": 1.0}])
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        clf.predict_proba_many(pd.DataFrame({"a": [1.0]}), category="x")


def test_an_empty_batch():
    clf = VennAbersClassifier(lr())
    empty = pd.DataFrame({"a": np.zeros(0)})
    assert clf.predict_proba_many(empty).shape == (0, 2)
    assert len(clf.predict_many(empty)) == 0
    clf.learn_many(empty, [])
    assert clf.calibration_size == 0


def test_the_classifiers_are_river_mini_batch_classifiers():
    assert isinstance(VennAbersClassifier(lr()), base.MiniBatchClassifier)
    assert isinstance(VennAbersMultiClassifier(naive_bayes.GaussianNB()), base.MiniBatchClassifier)
