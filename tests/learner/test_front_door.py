"""One front door: VennAbersClassifier on binary and multiclass streams (integer classes
whose first labels are 0 and 1 too), predict_one as the argmax of predict_proba_one, and
what a user cannot get wrong silently (a misspelt by, a missing label, a string class
after binary labels)."""

from __future__ import annotations

import pickle
import random
import warnings

import numpy as np
import pandas as pd
import pytest
from river import datasets, linear_model, naive_bayes, preprocessing, tree

from streamcal import VennAbersClassifier, VennAbersMultiClassifier
from streamcal.learner.mondrian import MissingCategoryWarning


def lr():
    return preprocessing.StandardScaler() | linear_model.LogisticRegression()


def segments(n=400, seed=0):
    data = list(datasets.ImageSegments())
    random.Random(seed).shuffle(data)
    return data[:n]


def test_a_multiclass_stream_goes_through_the_multiclass_machinery():
    """VennAbersClassifier(GaussianNB()) on ImageSegments answers exactly as
    VennAbersMultiClassifier(GaussianNB()) with the same settings, from its first label
    on (before it, it answers as binary: {False: 0.5, True: 0.5})."""
    front = VennAbersClassifier(naive_bayes.GaussianNB(), window=50)
    multi = VennAbersMultiClassifier(naive_bayes.GaussianNB(), window=50)
    assert front.predict_proba_one({"a": 1.0}) == {False: 0.5, True: 0.5}
    for i, (x, y) in enumerate(segments()):
        if i:
            assert front.predict_proba_one(x) == multi.predict_proba_one(x)
            assert front.predict_one(x) == multi.predict_one(x)
        front.learn_one(x, y)
        multi.learn_one(x, y)
    assert front.task == "multiclass" and front.classes == multi.classes
    assert front.predict_interval_one(x) == multi.predict_interval_one(x)
    assert front.calibration_size == multi.calibration_size
    assert front.alarm is False and front.log_martingale is None


def test_binary_labels_keep_the_binary_path_and_its_state():
    clf = VennAbersClassifier(naive_bayes.GaussianNB(), window=50)
    for x, y in datasets.Phishing().take(100):
        clf.learn_one(x, y)
    assert clf.task == "binary" and clf.classes == [False, True]
    state = clf.to_state()
    assert "task" not in state
    assert sorted(state) == sorted(
        ["mode", "merge", "window", "refresh_every", "by", "mondrian", "min_category",
         "fallback", "max_categories", "protect", "protection", "model", "mode_state"]
    )  # fmt: skip
    assert sorted(clf.predict_proba_one(x)) == [False, True]


def test_two_string_classes_take_the_multiclass_path():
    clf = VennAbersClassifier(naive_bayes.GaussianNB(), window=30)
    for i in range(120):
        x = {"a": float(i % 7), "b": float(i % 3)}
        clf.learn_one(x, "spam" if (i % 7) > 3 else "ham")
    proba = clf.predict_proba_one({"a": 6.0, "b": 1.0})
    assert clf.task == "multiclass" and sorted(proba) == ["ham", "spam"]
    assert abs(sum(proba.values()) - 1.0) < 1e-12


def test_a_string_class_after_binary_labels_fails_loudly_and_changes_nothing():
    """An integer class after 0 and 1 turns the classifier multiclass (below); a string
    one is refused as a likely mistake (2 and "2" mixed), changing nothing."""
    clf = VennAbersClassifier(naive_bayes.GaussianNB(), window=20)
    for x, y in segments(60):
        clf.learn_one(x, int(y == "sky"))  # 0 and 1 first
    before = pickle.dumps(clf)
    with pytest.raises(ValueError, match="'2' is not an integer.*VennAbersMultiClassifier"):
        clf.learn_one(x, "2")
    assert pickle.dumps(clf) == before


@pytest.mark.parametrize(
    ("kwargs", "model", "match"),
    [
        ({"protect": True}, naive_bayes.GaussianNB, "protect= is for binary labels"),
        ({"mode": "sva"}, naive_bayes.GaussianNB, "mode 'sva' is binary only"),
        ({}, lr, "LogisticRegression is binary only"),
    ],
)
def test_what_the_multiclass_side_lacks_is_refused_at_the_first_label(kwargs, model, match):
    clf = VennAbersClassifier(model(), **kwargs)
    x, y = segments(1)[0]
    before = pickle.dumps(clf)
    with pytest.raises(ValueError, match=match):
        clf.learn_one(x, y)
    assert pickle.dumps(clf) == before and clf.task == "binary"


@pytest.mark.parametrize(
    ("label", "match"),
    [(None, "None is missing"), (0.5, "0.5 is a float"), (float("nan"), "nan is missing"),
     (np.float32("nan"), "nan is missing"), (pd.NA, "<NA> is missing"), (2.0, "2.0 is a float")],
)  # fmt: skip
def test_missing_and_float_labels_are_refused_before_anything_is_learned(label, match):
    for clf in (VennAbersClassifier(naive_bayes.GaussianNB()),
                VennAbersMultiClassifier(naive_bayes.GaussianNB())):  # fmt: skip
        with pytest.raises(ValueError, match=f"label {match}"):
            clf.learn_one({"a": 1.0}, label)
        assert clf.calibration_size == 0 and clf.classes in ([], [False, True])


def test_nan_labels_never_become_classes():
    """NaN != NaN: taken as classes, three NaN labels made three classes."""
    clf = VennAbersMultiClassifier(naive_bayes.GaussianNB(), window=5)
    clf.learn_one({"a": 1.0}, "x")
    for _ in range(3):
        with pytest.raises(ValueError, match="missing"):
            clf.learn_one({"a": 1.0}, float("nan"))
    X = pd.DataFrame({"a": [1.0, 2.0, 3.0]})
    with pytest.raises(ValueError, match="label nan is missing.*row 1"):
        clf.learn_many(X, pd.Series(["x", None, "y"]))  # pandas makes None NaN in a float row
    assert clf.classes == ["x"] and clf.calibration_size == 1


@pytest.mark.parametrize("zero, one", [(0.0, 1.0), (np.float64(0.0), np.float64(1.0))])
def test_float_zero_and_one_are_the_binary_labels(zero, one):
    """pandas upcasts 0/1 labels to floats when one is NaN: 0.0/1.0 are 0/1, in learn_one
    and learn_many, answering exactly as the integer labels do."""
    data = list(datasets.Phishing().take(120))
    clfs = [VennAbersClassifier(lr(), window=30) for _ in range(4)]
    for x, y in data[:100]:
        clfs[0].learn_one(x, int(y))
        clfs[1].learn_one(x, one if y else zero)
    X = pd.DataFrame([x for x, _ in data[:100]])
    clfs[2].learn_many(X, pd.Series([int(y) for _, y in data[:100]]))
    clfs[3].learn_many(X, pd.Series([one if y else zero for _, y in data[:100]]))
    for x, _ in data[100:]:
        assert clfs[1].predict_proba_one(x) == clfs[0].predict_proba_one(x)
        assert clfs[3].predict_proba_one(x) == clfs[2].predict_proba_one(x)
    assert all(clf.task == "binary" for clf in clfs)


def test_a_multiclass_none_label_is_refused_and_changes_nothing():
    multi = VennAbersMultiClassifier(naive_bayes.GaussianNB(), window=20)
    front = VennAbersClassifier(naive_bayes.GaussianNB(), window=20)
    for x, y in segments(30):
        multi.learn_one(x, y)
        front.learn_one(x, y)
    for clf in (multi, front):
        before = pickle.dumps(clf)
        with pytest.raises(ValueError, match="label None is missing"):
            clf.learn_one(x, None)
        assert pickle.dumps(clf) == before


def test_a_model_that_already_knows_classes_turns_it_multiclass_before_any_label():
    model = naive_bayes.GaussianNB()
    for x, y in segments(50, seed=1):
        model.learn_one(x, y)
    clf = VennAbersClassifier(model)
    proba = clf.predict_proba_one(x)
    assert clf.task == "multiclass" and set(proba) == set(model.predict_proba_one(x))


@pytest.mark.parametrize("how", ["state", "pickle"])
def test_a_multiclass_front_door_round_trips(how):
    clf = VennAbersClassifier(naive_bayes.GaussianNB(), window=20, by="region-centroid-col")
    stream = segments(150)
    for x, y in stream[:100]:
        clf.learn_one(x, {"a": 1.0}.get(y, y))
    if how == "state":
        copy = VennAbersClassifier.from_state(clf.to_state())
    else:
        copy = pickle.loads(pickle.dumps(clf))
    assert copy.task == "multiclass"
    for x, y in stream[100:]:
        assert copy.predict_proba_one(x) == clf.predict_proba_one(x)
        copy.learn_one(x, y)
        clf.learn_one(x, y)


def _cases():
    yield "lr", lambda: VennAbersClassifier(lr(), window=50), datasets.Phishing().take(300)
    yield "protected", (
        lambda: VennAbersClassifier(lr(), window=50, protect={"burn_in": 0})
    ), datasets.Phishing().take(300)
    yield "va", lambda: VennAbersClassifier(lr(), mode="va", window=10), datasets.Phishing().take(
        60
    )
    yield "multiclass", lambda: VennAbersClassifier(tree.HoeffdingTreeClassifier(), window=50), (
        segments(300)
    )


@pytest.mark.parametrize(("name", "make", "stream"), list(_cases()), ids=lambda c: c)
def test_predict_one_is_the_argmax_of_predict_proba_one(name, make, stream):
    clf = make()
    for x, y in stream:
        proba = clf.predict_proba_one(x)
        # river's rule: the first key of highest probability (False on a binary tie)
        assert clf.predict_one(x) == (max(proba, key=proba.get) if proba else None)
        clf.learn_one(x, y)


def test_a_misspelt_by_warns_once_and_shows_in_categories():
    clf = VennAbersClassifier(lr(), window=50, by="htps")
    stream = list(datasets.Phishing().take(50))
    with pytest.warns(MissingCategoryWarning, match="no feature 'htps'"):
        clf.learn_one(*stream[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning
        for x, y in stream[1:]:
            clf.predict_proba_one(x)
            clf.learn_one(x, y)
    assert clf.categories == [None]


def test_categories_lists_the_categories_seen_least_recently_labelled_first():
    clf = VennAbersClassifier(lr(), window=50, by="https")
    assert clf.categories == []
    last = {}
    for i, (x, y) in enumerate(datasets.Phishing().take(200)):
        clf.learn_one(x, y)
        last[x["https"]] = i
    assert clf.categories == sorted(last, key=last.get)
    assert VennAbersClassifier(lr()).categories == []
