"""Labels and inputs as a user sends them (issue 35, item 4): integer classes whose first
labels are 0 and 1, a batch checked whole before any row is learned, and a pipeline that
does not fit the data raised at once, naming the feature."""

from __future__ import annotations

import math
import pickle
import random

import numpy as np
import pandas as pd
import pytest
from river import datasets, linear_model, metrics, naive_bayes, preprocessing, tree

from streamcal import VennAbersClassifier, VennAbersMultiClassifier


def lr():
    return preprocessing.StandardScaler() | linear_model.LogisticRegression()


def nb():
    return preprocessing.StandardScaler() | naive_bayes.GaussianNB()


def three_classes(n, seed=0):
    """Integer classes 0, 1, 2 of two features; only 0 and 1 in the first third."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        k = rng.randrange(2 if i < n // 3 else 3)
        out.append(({"a": k + rng.gauss(0, 0.7), "b": rng.gauss(k, 1.0)}, k))
    return out


@pytest.mark.parametrize("batched", [False, True])
def test_a_third_integer_class_carries_the_binary_state_over(batched):
    """After the switch the front door answers exactly as the multiclass classifier that
    had the stream from the start, with the binary refresh period: nothing learned is
    lost, and the calibration set is what it would have been (validity kept)."""
    window = 20
    front = VennAbersClassifier(nb(), window=window)
    multi = VennAbersMultiClassifier(nb(), window=window, refresh_every=window)
    data = [({"a": 0.0, "b": 0.0}, 0), *three_classes(300)]  # classes in the order 0, 1, 2
    first = next(i for i, (_, y) in enumerate(data) if y == 2)
    if batched:  # the switch inside a mini-batch, binary labels before it in the batch
        X = pd.DataFrame([x for x, _ in data[: first + 5]], index=range(first + 5))
        y = pd.Series([y for _, y in data[: first + 5]])
        front.learn_one(*data[0])
        multi.learn_one(*data[0])
        front.learn_many(X.iloc[1:], y.iloc[1:])
        multi.learn_many(X.iloc[1:], y.iloc[1:])
        start = first + 5
    else:
        for x, y in data[:first]:
            front.learn_one(x, y)
            multi.learn_one(x, y)
        assert front.task == "binary" and front.calibration_size > 0
        start = first
    for x, y in data[start:]:
        front.learn_one(x, y)
        multi.learn_one(x, y)
        assert front.predict_proba_one(x) == multi.predict_proba_one(x)
    assert front.task == "multiclass" and front.classes == [0, 1, 2] == multi.classes
    assert front.calibration_size == multi.calibration_size
    assert front.predict_interval_one(x) == multi.predict_interval_one(x)
    copy = VennAbersClassifier.from_state(front.to_state())
    assert copy.predict_proba_one(x) == front.predict_proba_one(x)


def test_the_switch_carries_every_category_over():
    window = 10
    front = VennAbersClassifier(nb(), window=window, by="g")
    multi = VennAbersMultiClassifier(nb(), window=window, refresh_every=window, by="g")
    data = [({"a": 0.0, "b": 0.0}, 0), *three_classes(400, seed=3)]
    data = [({**x, "g": i % 3}, y) for i, (x, y) in enumerate(data)]
    for x, y in data:
        front.learn_one(x, y)
        multi.learn_one(x, y)
        if front.task == "multiclass":
            assert front.predict_proba_one(x) == multi.predict_proba_one(x)
    assert front.task == "multiclass" and front.categories == multi.categories
    assert sorted(front.categories) == [0, 1, 2]
    assert front.calibration_size == multi.calibration_size


def test_true_and_false_are_the_classes_1_and_0_after_the_switch():
    clf = VennAbersClassifier(naive_bayes.GaussianNB(), window=10)
    for x, y in three_classes(40):
        clf.learn_one(x, bool(y) if y < 2 else y)
    assert clf.classes == [0, 1, 2] and sorted(clf.predict_proba_one(x)) == [0, 1, 2]


def test_a_binary_only_model_refuses_the_third_class_and_changes_nothing():
    clf = VennAbersClassifier(lr(), window=10)
    data = three_classes(60)
    first = next(i for i, (_, y) in enumerate(data) if y == 2)
    for x, y in data[:first]:
        clf.learn_one(x, y)
    before = pickle.dumps(clf)
    with pytest.raises(ValueError, match="label 2 makes.*LogisticRegression is binary only"):
        clf.learn_one(*data[first])
    assert pickle.dumps(clf) == before and clf.task == "binary"


def progressive_log_loss(clf, stream):
    loss = metrics.CrossEntropy()
    for x, y in stream:
        loss.update(y, clf.predict_proba_one(x))
        clf.learn_one(x, y)
    return loss.get()


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10))
def test_waveform_goes_through_the_front_door(seed):
    """river's Waveform (classes 0, 1, 2) on every seed; it failed on 8 of 10 when 0 and 1
    came first. Measured: 0.40-0.47 against 0.77-0.96 for the bare model (ln 3 = 1.10)."""
    stream = list(datasets.synth.Waveform(seed=seed).take(3000))
    clf = VennAbersClassifier(nb())
    loss = progressive_log_loss(clf, stream)
    bare = progressive_log_loss(nb(), stream)
    assert clf.task == "multiclass" and sorted(clf.classes) == [0, 1, 2]
    assert loss < 0.55 and loss < bare


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(5))
def test_random_rbf_of_five_classes_goes_through_the_front_door(seed):
    stream = datasets.synth.RandomRBF(seed_model=seed, seed_sample=seed, n_classes=5)
    data = list(stream.take(3000))
    loss = progressive_log_loss(VennAbersClassifier(tree.HoeffdingTreeClassifier()), data)
    bare = progressive_log_loss(tree.HoeffdingTreeClassifier(), data)
    assert loss < math.log(5) and loss < 1.01 * bare


# ---------------------------------------------------------------- a batch checked whole
@pytest.mark.parametrize("multiclass", [False, True])
@pytest.mark.parametrize(
    ("column", "bad", "match"),
    [
        ("a", pd.NA, "feature 'a' is missing: pd.NA \\(row 'r3'\\)"),
        ("a", np.inf, "feature 'a' is not finite: inf \\(row 'r3'\\)"),
        ("label", None, "label None is missing.*\\(row 'r3'\\)"),
        ("label", 0.25, "label 0.25 is a float.*\\(row 'r3'\\)"),
    ],
)
def test_a_bad_row_in_learn_many_leaves_the_learner_unchanged(multiclass, column, bad, match):
    data = three_classes(80) if multiclass else [(x, y % 2) for x, y in three_classes(80)]
    cls = VennAbersMultiClassifier if multiclass else VennAbersClassifier
    clf = cls(nb(), window=10)
    for x, y in data[:30]:
        clf.learn_one(x, y)
    probe = clf.predict_proba_one(data[0][0])
    before = pickle.dumps(clf)
    rows = data[30:80]
    X = pd.DataFrame([x for x, _ in rows], index=[f"r{i}" for i in range(50)]).astype(object)
    y = pd.Series([y for _, y in rows], index=X.index, dtype=object)
    if column == "label":
        y.iloc[3] = bad
    else:
        X.iloc[3, X.columns.get_loc(column)] = bad
    with pytest.raises(ValueError, match=match):
        clf.learn_many(X, y)
    assert pickle.dumps(clf) == before and clf.predict_proba_one(data[0][0]) == probe


def test_a_pd_na_feature_is_refused_by_learn_one_naming_it():
    clf = VennAbersClassifier(lr())
    with pytest.raises(ValueError, match="feature 'b' is missing: pd.NA"):
        clf.learn_one({"a": 1.0, "b": pd.NA}, 1)
    assert clf.calibration_size == 0


# ---------------------------------------------------------------- programming errors
@pytest.mark.parametrize("mode", ["pretrained", "sva", "va"])
def test_a_string_feature_before_a_numeric_model_raises_naming_it(mode):
    """Bare river raises TypeError at event 0; the default mode gave thousands of
    UnlearnedWarnings blaming 'x1' and a model that never learned."""
    clf = VennAbersClassifier(lr(), mode=mode, window=50)
    rng = random.Random(0)
    seen = []
    with pytest.raises(TypeError, match="feature 'country' = 'fr' is not a number") as info:
        for _ in range(10):
            x = {"x1": rng.random(), "country": "fr"}
            seen.append(x)
            clf.predict_proba_one(x)
            clf.learn_one(x, x["x1"] > 0.5)
    assert len(seen) <= 2 and not clf.unlearned  # within the first events, nothing undone
    assert "'str' and 'float'" in str(info.value)  # river's own message comes first


def test_the_label_whose_learning_raised_is_not_taken():
    clf = VennAbersClassifier(lr(), window=50)
    clf.learn_one({"x1": 0.2, "country": "fr"}, 0)
    st = clf._state

    def kept():  # not the model's bytes: river's scaler adds keys to a defaultdict as it scores
        proba = clf.model.predict_proba_one({"x1": 0.5})
        return proba, list(st.calibration), st.n_seen, st.n_learned

    before, pairs = kept(), st.store.to_arrays()
    with pytest.raises(TypeError):
        clf.learn_one({"x1": 0.7, "country": "fr"}, 1)  # the first refresh: the model learns
    assert kept() == before and all(map(np.array_equal, st.store.to_arrays(), pairs))


def test_a_string_feature_with_by_raises_and_leaves_the_stores_consistent():
    clf = VennAbersClassifier(lr(), window=4, by="g")
    rng = random.Random(1)
    raised = 0
    for i in range(40):
        x = {"x1": rng.random(), "g": i % 2, "country": "fr"}
        try:
            clf.learn_one(x, x["x1"] > 0.5)
        except TypeError as exc:
            assert "'country' = 'fr' is not a number" in str(exc)
            raised += 1
    assert raised > 0 and not clf.unlearned
    for st in clf._state.categories.values():  # each store holds its calibration set
        scores = sorted(c[2] for c in st.calibration)
        assert sorted(st.store.to_arrays()[0].tolist()) == scores


def test_integer_column_names_in_learn_many_raise_naming_them():
    """river's linear models cannot learn integer column names in a mini-batch: the default
    mode undid every batch and ended with a constant guess (log loss ln 2)."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(100, 3)))
    y = pd.Series(X[0] > 0)
    clf = VennAbersClassifier(lr(), window=20)
    with pytest.raises(TypeError, match="feature name 0 is not a string"):
        for _ in range(3):
            clf.learn_many(X, y)
