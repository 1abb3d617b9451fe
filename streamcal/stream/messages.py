"""Decoding and validating input messages: bytes in, a typed record or a ``BadInput`` reason out.

Decoding touches no state, so a rejected message leaves the processor exactly as it was.
String features are one-hot encoded (``{"color": "red"}`` -> ``{"color=red": 1.0}``) so
that every preset model sees numbers only.

>>> fields = Fields()
>>> decode_event(b'{"id": "e1", "features": {"x": 0.5, "color": "red"}}', fields)
Event(id='e1', x={'x': 0.5, 'color=red': 1.0}, ts=None)
>>> decode_label(b'{"id": "e1", "label": true}', fields)
Label(id='e1', y=True)
>>> decode_event(b'{"id": "e1", "features": {"x": null}}', fields)
Traceback (most recent call last):
...
streamcal.stream.messages.BadInput: feature 'x' is not a number or a string: None
"""

from __future__ import annotations

import math
from typing import NamedTuple

import orjson

__all__ = ["BadInput", "Event", "Label", "Fields", "decode_event", "decode_label"]


class BadInput(ValueError):
    """A message that cannot be processed; the message is the dead-letter reason."""


class Event(NamedTuple):
    id: str
    x: dict
    ts: float | None


class Label(NamedTuple):
    id: str
    y: bool


class Fields(NamedTuple):
    """Names of the JSON fields (configurable)."""

    id: str = "id"
    features: str = "features"
    label: str = "label"
    timestamp: str = "ts"


def _load(value) -> dict:
    if value is None:
        raise BadInput("empty message (no value)")
    try:
        obj = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise BadInput(f"malformed JSON: {exc}") from None
    if type(obj) is not dict:
        raise BadInput(f"message is not a JSON object but {type(obj).__name__}")
    return obj


def _id(obj: dict, field: str) -> str:
    eid = obj.get(field)
    if type(eid) is str:
        if eid:
            return eid
        raise BadInput(f"empty id in field {field!r}")
    if type(eid) is int:  # ids given as numbers are accepted and used as strings
        return str(eid)
    if eid is None:
        raise BadInput(f"missing id field {field!r}")
    raise BadInput(f"id field {field!r} is not a string: {eid!r}")


def decode_event(value: bytes | None, fields: Fields) -> Event:
    """Decode an event message or raise ``BadInput``."""
    obj = _load(value)
    eid = _id(obj, fields.id)
    feats = obj.get(fields.features)
    if feats is None:
        raise BadInput(f"missing features field {fields.features!r}")
    if type(feats) is not dict:
        raise BadInput(f"features field {fields.features!r} is not an object")
    if not feats:
        raise BadInput("no features")
    x = _plain_numbers(feats)
    if x is None:
        x = _features(feats)
    ts = obj.get(fields.timestamp)
    if ts is not None:
        if type(ts) not in (int, float) or not math.isfinite(ts):
            raise BadInput(f"timestamp field {fields.timestamp!r} is not a finite number: {ts!r}")
        ts = float(ts)
    return _new_record(Event, (eid, x, ts))


_new_record = tuple.__new__  # Event(...), Label(...) without their Python-level __new__
_NUMBERS = frozenset((float, int))


def _plain_numbers(feats: dict) -> dict | None:
    """``feats`` itself if every value is a finite float or an int (the common case, which
    ``_features`` would copy unchanged), else None. Any NaN or infinity makes the sum
    non-finite; a sum that overflows only sends the message the long way."""
    values = feats.values()
    if not {*map(type, values)} <= _NUMBERS:
        return None
    try:
        return feats if math.isfinite(sum(values)) else None
    except OverflowError:  # ints beyond float range: the long way accepts them
        return None


def _features(feats: dict) -> dict:
    """The model's features from the message's, each value checked; raises ``BadInput``."""
    x = {}
    for k, v in feats.items():
        t = type(v)
        if t is float:
            if v - v != 0.0:  # NaN or +-inf (orjson turns 1e999 into inf)
                raise BadInput(f"feature {k!r} is not finite: {v!r}")
            x[k] = v
        elif t is int:
            x[k] = v
        elif t is str:
            x[f"{k}={v}"] = 1.0
        elif t is bool:
            x[k] = 1.0 if v else 0.0
        else:
            raise BadInput(f"feature {k!r} is not a number or a string: {v!r}")
    return x


def decode_label(value: bytes | None, fields: Fields) -> Label:
    """Decode a label message or raise ``BadInput``; labels are 0/1 or true/false."""
    obj = _load(value)
    eid = _id(obj, fields.id)
    if fields.label not in obj:
        raise BadInput(f"missing label field {fields.label!r}")
    y = obj[fields.label]
    if y is True or y is False:
        return _new_record(Label, (eid, y))
    if type(y) is int and y in (0, 1):
        return _new_record(Label, (eid, y == 1))
    raise BadInput(f"label is not binary (0/1 or true/false): {y!r}")
