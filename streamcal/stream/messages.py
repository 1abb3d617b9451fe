"""Decoding and validating input messages: bytes in, a typed record or a ``BadInput`` reason out.

Decoding touches no state, so a rejected message leaves the processor exactly as it was.
String features are one-hot encoded (``{"color": "red"}`` -> ``{"color=red": 1.0}``) so
that every preset model sees numbers only.

Hostile input gets a bounded cost and a short reason: values longer than
``Fields.max_bytes`` are refused before parsing, orjson refuses nesting deeper than 1024
levels, events with more than ``Fields.max_features`` features and ids or feature names
longer than ``Fields.max_string`` characters are refused, and a reason never quotes more
than ~80 characters of the input (a repr of a deeply nested value could even overflow the
stack).

>>> fields = Fields()
>>> decode_event(b'{"id": "e1", "features": {"x": 0.5, "color": "red"}}', fields)
Event(id='e1', x={'x': 0.5, 'color=red': 1.0}, ts=None)
>>> decode_event(b'{"id": "e1", "features": {"x": 0.5}, "shop": "s7"}', fields._replace(by="shop"))
CategorizedEvent(id='e1', x={'x': 0.5}, ts=None, category='s7')
>>> decode_label(b'{"id": "e1", "label": true}', fields)
Label(id='e1', y=True)
>>> decode_event(b'{"id": "e1", "features": {"x": null}}', fields)
Traceback (most recent call last):
...
streamcal.stream.messages.BadInput: feature 'x' is not a number or a string: None
>>> decode_label(None, fields)
Traceback (most recent call last):
...
streamcal.stream.messages.BadInput: tombstone (the record's value is null)
"""

from __future__ import annotations

import math
from typing import NamedTuple

import orjson

from streamcal.core.validate import binary_label, class_label
from streamcal.core.validate import short_repr as _short
from streamcal.errors import InputError

__all__ = [
    "BadInput",
    "CategorizedEvent",
    "Event",
    "Label",
    "Fields",
    "Rejected",
    "decode_event",
    "decode_class_label",
    "decode_label",
]


class BadInput(InputError, ValueError):
    """A message that cannot be processed; the message is the dead-letter reason."""


class Event(NamedTuple):
    id: str
    x: dict
    ts: float | None


class CategorizedEvent(NamedTuple):
    """An event with its Mondrian category (``Fields.by`` set)."""

    id: str
    x: dict
    ts: float | None
    category: str | int | float | bool | None


class Label(NamedTuple):
    id: str
    y: bool | str  # a class name (a string) with ``decode_class_label``


class Fields(NamedTuple):
    """Names of the JSON fields and the limits of a message (all configurable)."""

    id: str = "id"
    features: str = "features"
    label: str = "label"
    timestamp: str = "ts"
    max_bytes: int = 1_048_576  # of a value
    max_features: int = 1000  # per event
    max_string: int = 1024  # characters of an id or a feature name (``k=v`` for strings)
    # Mondrian category: the event's feature of this name, or else its top-level field
    by: str | None = None

    @classmethod
    def of(cls, config) -> Fields:
        """The fields and limits of a ``ProcessorConfig``."""
        return cls(
            id=config.id_field,
            features=config.features_field,
            label=config.label_field,
            timestamp=config.timestamp_field,
            max_bytes=config.max_message_bytes,
            max_features=config.max_features,
            max_string=config.max_string_length,
            by=config.by,
        )


class Rejected:
    """A record's value refused before decoding (by the input's gate, e.g. a record
    timestamp far in the future, or an unreadable batch): a typed value, never decoded
    (``streamcal.stream.intake`` makes ``reason`` its dead letter's reason); the dead
    letter keeps ``original`` (bytes or None) and, for an unreadable batch, ``skipped``:
    the (first, last) offsets it stands for."""

    __slots__ = ("reason", "original", "skipped")

    def __init__(self, reason: str, original: bytes | None = None, skipped=None):
        self.reason = reason
        self.original = original
        self.skipped = skipped

    def __repr__(self) -> str:
        return f"Rejected({self.reason!r})"


def _load(value, limit: int) -> dict:
    if value is None:
        raise BadInput("tombstone (the record's value is null)")
    if len(value) > limit:
        raise BadInput(f"value too large: {len(value)} bytes > max_message_bytes={limit}")
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
    raise BadInput(f"id field {field!r} is not a string or an integer: {_short(eid)}")


def decode_event(value: bytes | None, fields: Fields) -> Event:
    """Decode an event message or raise ``BadInput``."""
    obj = _load(value, fields.max_bytes)
    eid = _id(obj, fields.id)
    feats = obj.get(fields.features)
    if feats is None:
        raise BadInput(f"missing features field {fields.features!r}")
    if type(feats) is not dict:
        raise BadInput(f"features field {fields.features!r} is not an object")
    if not feats:
        raise BadInput("no features")
    if len(feats) > fields.max_features:
        raise BadInput(f"too many features: {len(feats)} > max_features={fields.max_features}")
    x = _plain_numbers(feats)
    if x is None:
        x = _features(feats)
    if len(value) > fields.max_string:  # else no string in it can be longer
        _check_lengths(eid, x, fields.max_string)
    ts = obj.get(fields.timestamp)
    if ts is not None:
        if type(ts) not in (int, float) or not math.isfinite(ts):
            raise BadInput(
                f"timestamp field {fields.timestamp!r} is not a finite number: {_short(ts)}"
            )
        ts = float(ts)
    if fields.by is not None:
        category = _category(obj, feats, fields)
        return _new_record(CategorizedEvent, (eid, x, ts, category))
    return _new_record(Event, (eid, x, ts))


_CATEGORY_TYPES = frozenset((str, int, float, bool))


def _category(obj: dict, feats: dict, fields: Fields):
    """The event's category: its feature ``fields.by`` (the raw value, before string
    features are one-hot encoded), else its top-level field ``fields.by``, else None."""
    name = fields.by
    c = feats[name] if name in feats else obj.get(name)
    if c is None:
        return None
    if type(c) not in _CATEGORY_TYPES or (type(c) is float and not math.isfinite(c)):
        raise BadInput(f"category field {_short(name)} is not a string, number or boolean: "
                       f"{_short(c)}")  # fmt: skip
    if type(c) is str and len(c) > fields.max_string:
        raise BadInput(f"category longer than max_string_length={fields.max_string}: {_short(c)}")
    return c


def _check_lengths(eid: str, x: dict, limit: int) -> None:
    if len(eid) > limit:
        raise BadInput(f"id longer than max_string_length={limit}: {len(eid)} characters")
    if x and max(map(len, x)) > limit:
        name = max(x, key=len)
        raise BadInput(f"feature name longer than max_string_length={limit}: {_short(name)}")


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
                raise BadInput(f"feature {_short(k)} is not finite: {v!r}")
            x[k] = v
        elif t is int:
            x[k] = v
        elif t is str:
            x[f"{k}={v}"] = 1.0
        elif t is bool:
            x[k] = 1.0 if v else 0.0
        else:
            raise BadInput(f"feature {_short(k)} is not a number or a string: {_short(v)}")
    return x


def _id_and_label(value: bytes | None, fields: Fields) -> tuple:
    """The id and the raw label value of a label message (``BadInput`` if either is
    missing or the message is not a JSON object within the limits)."""
    obj = _load(value, fields.max_bytes)
    eid = _id(obj, fields.id)
    if len(value) > fields.max_string:
        _check_lengths(eid, {}, fields.max_string)
    if fields.label not in obj:
        raise BadInput(f"missing label field {fields.label!r}")
    return eid, obj[fields.label]


def decode_label(value: bytes | None, fields: Fields) -> Label:
    """Decode a label message or raise ``BadInput``: true/false, 0/1 (also 0.0/1.0), or
    the strings "0"/"1"/"true"/"false"."""
    eid, y = _id_and_label(value, fields)
    if y is True or y is False:  # the common case, without a call
        return _new_record(Label, (eid, y))
    try:
        binary = binary_label(y) == 1
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    return _new_record(Label, (eid, binary))


def decode_class_label(value: bytes | None, fields: Fields) -> Label:
    """Decode a multiclass label message or raise ``BadInput``: the class is a non-empty
    string, or an integer, used as its decimal string (as ids are), so that ``4`` and
    ``"4"`` are one class and every class is a JSON object key in the predictions.
    Booleans, floats, null, arrays and objects are refused: none of them names a class
    without a guess (``true`` could be ``1`` or ``"true"``, ``4.0`` could be ``4``).

    >>> decode_class_label(b'{"id": "e1", "label": 4}', Fields())
    Label(id='e1', y='4')
    >>> decode_class_label(b'{"id": "e1", "label": 4.5}', Fields())
    Traceback (most recent call last):
    ...
    streamcal.stream.messages.BadInput: label is not a class (a string or an integer): 4.5
    """
    eid, y = _id_and_label(value, fields)
    if type(y) is str and len(y) > fields.max_string:
        raise BadInput(f"label longer than max_string_length={fields.max_string}: {_short(y)}")
    try:
        cls = class_label(y)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    return _new_record(Label, (eid, cls))
