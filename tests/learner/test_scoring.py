"""The scoring shortcuts equal the plain way float for float: ``ordered`` and ``LearnScore``."""

from __future__ import annotations

import copy
import pickle
import random

import pytest
from river import compose, linear_model, naive_bayes, preprocessing

from streamcal.learner.scoring import LearnScore, canonical, ordered, score_sorted


def models():
    return {
        "scaled lr": lambda: preprocessing.StandardScaler() | linear_model.LogisticRegression(),
        "two transformers": lambda: (
            preprocessing.MinMaxScaler()
            | preprocessing.StandardScaler()
            | linear_model.LogisticRegression()
        ),
        "union (plain way)": lambda: (
            compose.TransformerUnion(preprocessing.StandardScaler(), preprocessing.MaxAbsScaler())
            | linear_model.LogisticRegression()
        ),
        "bare lr": linear_model.LogisticRegression,
        "gnb": naive_bayes.GaussianNB,
    }


def stream(seed, n=300):
    rng = random.Random(seed)
    for _ in range(n):
        x = {k: rng.choice([-1.0, 0.0, 0.5, rng.gauss(0, 3)]) for k in "bca"}
        yield canonical(x), rng.random() < 0.4


@pytest.mark.parametrize("name", list(models()))
def test_learn_score_equals_learn_then_score(name):
    make = models()[name]
    fast, plain = make(), make()
    learn_score = LearnScore(fast)
    for i, (x, y) in enumerate(stream(seed=len(name))):
        s = learn_score(x, y)
        plain.learn_one(x, y)
        assert s == score_sorted(plain, x), i
        assert score_sorted(fast, x) == s, i  # the model itself learned x, once


def test_learn_score_survives_copies():
    model = preprocessing.StandardScaler() | linear_model.LogisticRegression()
    learn_score = LearnScore(model)
    data = list(stream(seed=7, n=50))
    for x, y in data[:20]:
        learn_score(x, y)
    for other in (copy.deepcopy(learn_score), pickle.loads(pickle.dumps(learn_score))):
        assert other.model is not model
        twin = copy.deepcopy(model)
        for x, y in data[20:]:
            twin.learn_one(x, y)
            assert other(x, y) == score_sorted(twin, x)
        assert other._split is not None and other._split[1] is other.model["LogisticRegression"]


def test_learn_score_respects_learn_during_predict():
    model = preprocessing.StandardScaler() | linear_model.LogisticRegression()
    twin = copy.deepcopy(model)
    learn_score = LearnScore(model)
    with compose.learn_during_predict():
        for x, y in stream(seed=3, n=30):
            twin.learn_one(x, y)
            assert learn_score(x, y) == score_sorted(twin, x)
    assert model["StandardScaler"].counts == twin["StandardScaler"].counts


def test_ordered_copies_only_when_out_of_order():
    x = {"a": 1.0, "b": 2.0}
    assert ordered(x) is x
    y = {"b": 2.0, "a": 1.0}
    for _ in range(2):  # the second time from the remembered key order
        assert ordered(y) is not y and list(ordered(y)) == ["a", "b"] and ordered(y) == y
        assert ordered(x) is x
    z = {2: 0.0, "a": 1.0}  # names that do not compare: by repr, "'a'" < "2"
    assert list(ordered(z)) == ["a", 2]


def test_each_mode_object_remembers_its_own_key_order():
    """The key-order cache is per object: one classifier's stream does not touch another's."""
    from streamcal import VennAbersClassifier

    a = VennAbersClassifier(linear_model.LogisticRegression(), window=5)
    b = VennAbersClassifier(linear_model.LogisticRegression(), window=5)
    a.learn_one({"v": 1.0, "u": 2.0}, 1)
    b.learn_one({"u": 1.0, "v": 2.0}, 0)
    assert a._state._order is not b._state._order
    assert a._state._order._last[0] == ("v", "u")
    assert b._state._order._last[0] == ("u", "v")
    copy = pickle.loads(pickle.dumps(a))
    assert copy._state._order._last == a._state._order._last
