"""Mondrian calibration on a key with more values than ``max_categories`` (issue 35):
memory stays bounded, cold and evicted categories answer from the pooled set (binary and
multiclass), the churn warning is given once, and the state survives round trips."""

from __future__ import annotations

import math
import pickle
import random
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from river import compose, linear_model, naive_bayes, preprocessing

from streamcal import CategoryChurnWarning, VennAbersClassifier, VennAbersMultiClassifier
from streamcal.learner.multiclass import Stores
from streamcal.stream.config import ProcessorConfig
from tests._helpers import examples

quiet = pytest.mark.filterwarnings("ignore::streamcal.learner.churn.CategoryChurnWarning")


def lr_id():  # the id is the Mondrian key, never a feature of the model
    return (
        compose.Discard("id") | preprocessing.StandardScaler() | linear_model.LogisticRegression()
    )


def gnb_id():
    return compose.Discard("id") | naive_bayes.GaussianNB()


def id_stream(n, ids, seed=0, classes=2):
    """x ~ U(-1, 1)^2 with a random id of ``ids`` values; y from a noisy boundary."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = rng.uniform(-1, 1), rng.uniform(-1, 1)
        y = int((a + 0.5 * b + rng.gauss(0, 0.5)) > 0)
        if classes > 2:
            y = (
                min(classes - 1, int((a + 1) / 2 * classes))
                if rng.random() < 0.8
                else rng.randrange(classes)
            )
        out.append(({"a": a, "b": b, "id": f"u{rng.randrange(ids)}"}, y))
    return out


def learn(clf, stream):
    for x, y in stream:
        clf.learn_one(x, y)
    return clf


@quiet
def test_pickle_size_stops_growing_once_max_categories_are_held():
    clf = VennAbersClassifier(lr_id(), by="id", window=20, max_categories=30)
    stream = id_stream(6000, ids=5000)
    sizes = []  # it swings as objects wait for the model: compare the highs
    for i in range(0, 6000, 200):
        learn(clf, stream[i : i + 200])
        sizes.append(len(pickle.dumps(clf)))
    assert clf.evictions > 5000  # the key churns
    assert max(sizes[15:]) <= 1.05 * max(sizes[:15]), sizes
    state = clf._state
    assert len(state.categories) <= 30 and len(state.waiting) < 20 + state.calibration_size


@quiet
@settings(max_examples=examples(20), deadline=None)
@given(st.integers(1, 5), st.integers(1, 4), st.integers(1, 4), st.integers(0, 99))
def test_waiting_objects_stay_fewer_than_the_calibration_sets_after_every_label(
    max_categories, window, refresh, seed
):
    """Whatever the number of categories evicted: the objects waiting for the model are
    fewer than max(refresh_every, calibration_size) after every label, and none is lost."""
    clf = VennAbersClassifier(
        lr_id(), by="id", window=window, refresh_every=refresh, max_categories=max_categories
    )
    for x, y in id_stream(120, ids=12, seed=seed):
        clf.learn_one(x, y)
        state = clf._state
        assert len(state.waiting) < max(refresh, state.calibration_size)
        assert state.calibration_size + len(state.waiting) + state.n_learned == state.n_seen


@quiet
def test_the_pooled_set_calibrates_cold_categories_as_well_as_no_by():
    """Nearly every category is evicted before its next label: the log loss is that of
    the same learner without by (it was ln 2, every answer (0, 1), before the pooled set)."""
    stream = id_stream(6000, ids=5000, seed=1)
    clfs = {
        "by": VennAbersClassifier(lr_id(), by="id", window=100, max_categories=200),
        "none": VennAbersClassifier(lr_id(), window=100),
    }
    loss = dict.fromkeys(clfs, 0.0)
    for x, y in stream:
        for name, clf in clfs.items():
            p = clf.predict_proba_one(x)[True]
            loss[name] -= math.log(p if y else 1 - p)
            clf.learn_one(x, y)
    assert clfs["by"].evictions > 5000
    assert loss["by"] <= 1.02 * loss["none"], loss


@quiet
def test_multiclass_cold_categories_answer_from_the_pooled_stores():
    clf = VennAbersMultiClassifier(gnb_id(), window=10, by="id", max_categories=4)
    learn(clf, id_stream(600, ids=200, seed=2, classes=3))
    state = clf._state
    probe = {"a": 0.3, "b": -0.2, "id": "never seen"}
    s, stores = state.predict(probe)
    items = [c for st_ in state.categories.values() for c in st_.calibration]
    items += [(x, y, state._cold_score(x)) for _, x, y in state.waiting]
    assert items and len(stores.top.stores["top"]) == len(items)
    union = Stores(clf.scheme, len(clf.classes), [c[2] for c in items], [c[1] for c in items])
    assert stores.top.query(s) == union.top.query(s)
    assert pickle.loads(pickle.dumps(clf)).predict_proba_one(probe) == clf.predict_proba_one(probe)


@pytest.mark.slow  # ~5 s: the binary bound is in the inner loop
@quiet
def test_multiclass_memory_is_bounded_too():
    clf = VennAbersMultiClassifier(gnb_id(), window=10, by="id", max_categories=20)
    stream = id_stream(3000, ids=2000, seed=3, classes=3)
    learn(clf, stream[:1000])
    first = len(pickle.dumps(clf))
    learn(clf, stream[1000:])
    assert len(pickle.dumps(clf)) <= 1.1 * first
    assert len(clf._state.waiting) < max(20, clf._state.calibration_size)


def test_a_churning_key_is_warned_once_naming_it():
    clf = VennAbersClassifier(lr_id(), by="id", window=10, max_categories=5)
    with pytest.warns(CategoryChurnWarning, match="by='id'.*max_categories=5") as caught:
        learn(clf, id_stream(300, ids=200))
    assert sum(issubclass(w.category, CategoryChurnWarning) for w in caught) == 1
    text = str(next(w.message for w in caught if w.category is CategoryChurnWarning))
    assert "raise max_categories" in text.lower() and "drop by" in text


def test_a_key_that_fits_is_not_warned():
    clf = VennAbersClassifier(lr_id(), by="id", window=10, max_categories=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CategoryChurnWarning)
        learn(clf, id_stream(500, ids=5))
    assert clf.evictions == 0


@pytest.mark.parametrize("copier", ["state", "pickle"])
def test_state_round_trip_keeps_answers_and_the_warning(copier):
    stream = id_stream(900, ids=400, seed=5)
    clf = VennAbersClassifier(lr_id(), by="id", window=10, max_categories=8)
    with pytest.warns(CategoryChurnWarning):
        learn(clf, stream[:500])
    if copier == "state":
        dup = VennAbersClassifier.from_state(clf.to_state())
    else:
        dup = pickle.loads(pickle.dumps(clf))
    assert (
        dup._state.churn.to_state()
        == clf._state.churn.to_state()
        == {"cold": clf._state.churn.cold, "warned": True}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", CategoryChurnWarning)  # given once, not again
        for x, y in stream[500:]:
            assert dup.predict_interval_one(x) == clf.predict_interval_one(x)
            clf.learn_one(x, y)
            dup.learn_one(x, y)
    state = clf._state
    assert (
        len(dup._state.pooled) == len(state.pooled) == state.calibration_size + len(state.waiting)
    )


@quiet
def test_fallback_off_answers_cold_categories_with_the_vacuous_pair():
    clf = VennAbersClassifier(lr_id(), by="id", window=10, max_categories=5, fallback="off")
    learn(clf, id_stream(300, ids=200))
    iv = clf.predict_interval_one({"a": 0.1, "b": 0.1, "id": "new"})
    assert (iv.p0, iv.p1) == (0.0, 1.0)
    assert clf._state.pooled is None


def test_the_processor_takes_the_fallback_flags():
    assert ProcessorConfig.build(by="g").classifier_settings().pooled
    off = ProcessorConfig.build(by="g", fallback="off").classifier_settings()
    assert not off.pooled and off.category_minimum == 0
    assert ProcessorConfig.build(by="g", min_category=7).classifier_settings().category_minimum == 7
    with pytest.raises(ValueError, match="multiclass takes neither"):
        ProcessorConfig.build(by="g", task="multiclass", min_category=7)


@quiet
@pytest.mark.filterwarnings("ignore::streamcal.learner.guard.UnlearnedWarning")
def test_a_model_error_at_a_refresh_leaves_the_pooled_set_whole():
    """A programming error of the model (a string feature) is raised at a refresh, the
    objects still waiting: the pooled set holds them and every category's pairs."""
    model = preprocessing.StandardScaler() | linear_model.LogisticRegression()
    clf = VennAbersClassifier(model, window=4, by="id", max_categories=2)
    stream = [({**x, "country": "fr"}, y) for x, y in id_stream(40, ids=3, seed=1)]
    with pytest.raises(TypeError):  # at the first refresh: the model learns
        learn(clf, stream)
    state = clf._state
    assert state.waiting
    held = [(c[2], c[1]) for st_ in state.categories.values() for c in st_.calibration]
    held += [(state._cold_score(x), y) for _, x, y in state.waiting]
    scores, labels = state.pooled.to_arrays()
    assert sorted(zip(scores.tolist(), labels.tolist(), strict=True)) == sorted(held)
