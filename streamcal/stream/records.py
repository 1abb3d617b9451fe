"""What a unit keeps of an input record: enough for its dead letter, and a waiting label
packed as bytes with its whole record (``pack_label`` / ``unpack_label``).

>>> rec = Rec("streamcal.labels", 2, 41, 1700000000000, b"e1", b'{"id": "e1", "label": 1}')
>>> unpack_label(pack_label(True, rec)) == (True, rec)
True
"""

from __future__ import annotations

import struct

import orjson

# What a dead letter needs of a record: the port's record (its headers are not kept).
from streamcal.stream.kafka.port import Record as Rec

__all__ = ["Rec", "pack_label", "unpack_label"]


_LABEL_HEAD = struct.Struct("<Iii")  # JSON length, key length, value length (-1: None)


def pack_label(y, rec) -> bytes:
    """A waiting label: its value and what its dead letter would need (the whole record)."""
    head = orjson.dumps([y, rec.topic, rec.partition, rec.offset, rec.timestamp])
    key, value = rec.key, rec.value
    sizes = _LABEL_HEAD.pack(len(head), -1 if key is None else len(key),
                             -1 if value is None else len(value))  # fmt: skip
    return sizes + head + (key or b"") + (value or b"")


def unpack_label(data: bytes) -> tuple:
    """``(y, Rec)`` of a packed waiting label."""
    n, nk, nv = _LABEL_HEAD.unpack_from(data)
    at = _LABEL_HEAD.size
    y, topic, partition, offset, timestamp = orjson.loads(data[at : at + n])
    at += n
    key = None if nk < 0 else data[at : at + nk]
    at += max(nk, 0)
    value = None if nv < 0 else data[at : at + nv]
    return y, Rec(topic, partition, offset, timestamp, key, value)
