"""EventKey, the one identity of an event for the protection, the horizon and the delay watch:
equal exactly when the (category, features) are equal, whatever the feature order
(hypothesis against the dicts themselves), across pickles; pickles of the tuple keys it
replaced (development versions' before the first release) are refused in one line."""

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamcal.learner.event_key import EventKey, FeatureOrder, event_key
from streamcal.learner.protection import Protection

names = st.sampled_from(["a", "b", "c", "d"])
values = st.one_of(st.integers(-3, 3), st.floats(-2, 2, allow_nan=False), st.booleans())
objects = st.dictionaries(names, values, max_size=4)
categories = st.one_of(st.none(), st.sampled_from(["x", "y"]))


def shuffled(x: dict, seed: int) -> dict:
    keys = sorted(x)
    keys = keys[seed % (len(keys) or 1) :] + keys[: seed % (len(keys) or 1)]
    return {k: x[k] for k in reversed(keys)}


@given(objects, objects, categories, categories, st.integers(0, 5))
def test_keys_are_equal_exactly_when_category_and_features_are(x1, x2, c1, c2, seed):
    order = FeatureOrder()  # one order for both, as each user of the keys keeps its own
    k1, k2 = event_key(order, c1, x1), event_key(order, c2, shuffled(x2, seed))
    assert (k1 == k2) == ((c1, x1) == (c2, x2))
    if k1 == k2:
        assert hash(k1) == hash(k2)
    assert {k1: 1}.get(k2) == (1 if (c1, x1) == (c2, x2) else None)


def test_an_unhashable_value_or_category_gives_no_key():
    order = FeatureOrder()
    assert event_key(order, None, {"a": [1.0]}) is None
    assert event_key(order, ["x"], {"a": 1.0}) is None


def test_a_pickled_key_hashes_again_and_equals_the_original():
    k = event_key(FeatureOrder(), "x", {"b": 2.0, "a": 1.0})
    back = pickle.loads(pickle.dumps(k))
    assert back == k and hash(back) == hash(k) and {k: 1}[back] == 1
    assert back.names == ("a", "b") and back.values == (1.0, 2.0) and back.category == "x"


def _refused(load) -> None:
    with pytest.raises(ValueError, match="before the first release") as err:
        load()
    assert "\n" not in str(err.value)


def test_pre_release_pickles_of_the_protection_and_the_feature_order_are_refused():
    prot = Protection({})
    prot.remember(None, {"a": 1.0, "b": 2.0}, 0.3)
    old = {(k.category, k.names, k.values): p for k, p in prot._given.items()}
    prot._given = old  # as a protection pickled before EventKey held it
    _refused(lambda: pickle.loads(pickle.dumps(prot)))
    no_alarm = Protection({})
    del no_alarm.alarm  # as one pickled before the conformal alarm
    _refused(lambda: pickle.loads(pickle.dumps(no_alarm)))
    order = FeatureOrder()
    order.names_values({"b": 1, "a": 2})
    sorted_order, keys, in_order = order.__reduce_ex__(2)[2][1]["_last"]
    fresh = FeatureOrder.__new__(FeatureOrder)
    _refused(lambda: fresh.__setstate__((None, {"_last": (sorted_order, list(keys), in_order)})))
    again = pickle.loads(pickle.dumps(order))  # the current form loads
    assert again.names_values({"b": 1, "a": 2}) == (("a", "b"), (2, 1))


def test_the_state_round_trip_keeps_the_given_p_as_plain_data():
    prot = Protection({})
    prot.remember("x", {"a": 1.0}, 0.25)
    state = prot.to_state()
    assert state["given"] == [["x", ["a"], [1.0], 0.25]]
    back = Protection.from_state(state)
    assert isinstance(next(iter(back._given)), EventKey)
    assert back.recall("x", {"a": 1.0}) == 0.25
