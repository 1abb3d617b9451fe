"""decode_event's shortcut for all-number features equals the checked way, errors included."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcal.stream.messages import (
    BadInput,
    Event,
    Fields,
    _features,
    _plain_numbers,
    decode_event,
)
from tests._helpers import examples

values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=1e307, max_value=1.7e308),  # sums that overflow
    st.integers(),
    st.integers(min_value=10**300, max_value=10**400),  # beyond float range
    st.booleans(),
    st.text(max_size=3),
    st.none(),
    st.lists(st.integers(), max_size=1),
)
features = st.dictionaries(st.text(min_size=1, max_size=3), values, min_size=1, max_size=6)


def checked_way(feats):
    """What decode_event gave before the shortcut: every value through ``_features``."""
    try:
        return _features(feats)
    except BadInput as exc:
        return str(exc)


@settings(max_examples=examples(300), deadline=None)
@given(features)
def test_decode_event_equals_the_checked_way(feats):
    try:
        value = orjson.dumps({"id": "e", "features": feats})
    except orjson.JSONEncodeError:  # ints beyond 64 bits cannot be sent
        return
    want = checked_way(orjson.loads(value)["features"])  # NaN/inf arrive as null
    try:
        got = decode_event(value, Fields())
    except BadInput as exc:
        assert str(exc) == want
    else:
        assert type(got) is Event and got.x == want and list(got.x) == list(want)
        assert all(type(got.x[k]) is type(want[k]) for k in want)


@pytest.mark.parametrize(
    "feats, shortcut",
    [
        ({"a": 1.0, "b": 2}, True),
        ({"a": 1.0, "b": float("inf")}, False),
        ({"a": float("-inf"), "b": 1.0}, False),
        ({"a": float("nan")}, False),
        ({"a": float("inf"), "b": float("-inf")}, False),
        ({"a": 1e308, "b": 1e308}, False),  # the sum overflows: checked one by one, accepted
        ({"a": 10**400, "b": 1.0}, False),  # an int beyond float range: accepted the long way
        ({"a": True, "b": 2}, False),
        ({"a": "red"}, False),
    ],
)
def test_shortcut_takes_only_what_the_checked_way_copies_unchanged(feats, shortcut):
    # orjson refuses 1e999 and NaN on the wire, so the non-finite cases are direct calls
    x = _plain_numbers(feats)
    assert (x is feats) if shortcut else (x is None)
    if shortcut:
        assert checked_way(feats) == feats


def test_number_features_decode_without_a_copy_but_strings_are_encoded():
    ev = decode_event(b'{"id": "e", "features": {"b": 2, "a": 0.5}}', Fields())
    assert ev == Event("e", {"b": 2, "a": 0.5}, None) and list(ev.x) == ["b", "a"]
    ev = decode_event(b'{"id": "e", "features": {"b": true, "c": "x", "a": 1}}', Fields())
    assert ev.x == {"b": 1.0, "c=x": 1.0, "a": 1} and type(ev.x["b"]) is float
