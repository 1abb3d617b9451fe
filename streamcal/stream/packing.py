"""Compact bytes for what waits on disk: features as packed doubles under a shared list of
names, exactly restored.

A waiting prediction keeps the features its model will learn from when the label comes.
A dict of 20 numeric features is about 1.8 KB as a Python object and 600 bytes as JSON;
here it is 4 bytes naming its list of feature names (stored once, ``FeatureCodec``) and 8
per value. The round trip is exact: the same names in the same order (a linear model sums
in that order), the same values, and an int stays an int. Feature sets the codec cannot
pack (more than ``max_schemas`` distinct name lists, e.g. one-hot strings of high
cardinality, or integers a double cannot hold) are kept as JSON instead, still exact.

>>> from streamcal.stream.state.kv import KVStore
>>> codec = FeatureCodec(KVStore())
>>> data = codec.pack({"amount": 12.5, "n": 3, "shop=s7": 1.0})
>>> len(data), codec.unpack(data, 0)
(30, ({'amount': 12.5, 'n': 3, 'shop=s7': 1.0}, 30))
"""

from __future__ import annotations

import struct

import orjson

from streamcal.stream.state.kv import KVStore, next_key

__all__ = ["FeatureCodec"]

_HEAD = struct.Struct("<BI")  # kind, schema number (or JSON length)
_PACKED, _PACKED_INTS, _JSON = 0, 1, 2
_EXACT_INT = 2**53  # every int of smaller magnitude is exactly a double
_FLOAT = float


class FeatureCodec:
    """Pack feature dicts; the lists of names (schemas) live in ``store`` under
    ``prefix``, at most ``max_schemas`` of them, and are read back when the codec is made
    (they are written with the store's next commit, before any value that uses them)."""

    def __init__(self, store: KVStore, prefix: bytes = b"s", max_schemas: int = 4096):
        self.store = store
        self.prefix = prefix
        self.max_schemas = max_schemas
        self._ids: dict = {}  # names tuple -> number
        self._names: list = []  # number -> (names tuple, struct of its doubles)
        for _, value in store.items(prefix, next_key(prefix)):
            self._add(tuple(orjson.loads(value)))

    def _add(self, names: tuple) -> int:
        n = len(self._names)
        self._ids[names] = n
        self._names.append((names, struct.Struct(f"<{len(names)}d")))
        return n

    def _schema(self, names: tuple) -> int | None:
        n = self._ids.get(names)
        if n is None and len(self._names) < self.max_schemas:
            n = self._add(names)
            self.store.put(self.prefix + struct.pack(">I", n), orjson.dumps(list(names)))
        return n

    def pack(self, x: dict) -> bytes:
        """``x`` (names to numbers) as bytes."""
        names = tuple(x)
        n = self._schema(names)
        if n is not None:
            values = x.values()
            if all(type(v) is _FLOAT for v in values):
                return _HEAD.pack(_PACKED, n) + self._names[n][1].pack(*values)
            mask = _int_mask(values)
            if mask is not None:
                return _HEAD.pack(_PACKED_INTS, n) + self._names[n][1].pack(*values) + mask
        data = orjson.dumps(x)
        return _HEAD.pack(_JSON, len(data)) + data

    def unpack(self, data: bytes, offset: int) -> tuple[dict, int]:
        """The dict packed at ``data[offset:]`` and the offset after it."""
        kind, n = _HEAD.unpack_from(data, offset)
        offset += _HEAD.size
        if kind == _JSON:
            return orjson.loads(data[offset : offset + n]), offset + n
        names, doubles = self._names[n]
        values = doubles.unpack_from(data, offset)
        offset += doubles.size
        if kind == _PACKED_INTS:
            size = (len(names) + 7) // 8
            mask = int.from_bytes(data[offset : offset + size], "little")
            offset += size
            values = [int(v) if mask >> i & 1 else v for i, v in enumerate(values)]
        return dict(zip(names, values, strict=True)), offset


def _int_mask(values) -> bytes | None:
    """A bit per value, set for ints (as little-endian bytes), or None if a value is
    neither a float nor an int a double holds exactly."""
    mask = 0
    for i, v in enumerate(values):
        t = type(v)
        if t is int:
            if -_EXACT_INT < v < _EXACT_INT:
                mask |= 1 << i
                continue
            return None
        if t is not _FLOAT:
            return None
    return mask.to_bytes((len(values) + 7) // 8, "little")
