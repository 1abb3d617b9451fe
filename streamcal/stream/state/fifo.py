"""A first-in first-out sequence of entries in a ``KVStore``, from which any entry may leave.

Entries are numbered in insertion order and stored under ``prefix`` + the number as 8
big-endian bytes, so the store keeps them in order on disk and memory holds two integers:
``head`` (every entry below it is gone) and ``tail`` (the next number). An entry leaves
either from the front (``first`` then ``remove``), or from anywhere (``remove``: a join),
leaving a hole that ``first`` steps over: by exact lookups while the holes are few, else
with one seek of a database iterator, which skips deleted keys inside RocksDB. What the
last commit did not write yet is read from the store's overlay.

>>> from streamcal.stream.state.kv import KVStore
>>> store = KVStore()
>>> q = Fifo(store, b"q")
>>> [q.push(v) for v in (b"a", b"b", b"c")]
[0, 1, 2]
>>> q.remove(0); q.remove(1); q.first()
(2, b'c')
>>> _ = store.commit(); q.remove(2); q.first() is None, q.head, q.tail
(True, 3, 3)
>>> store.close()
"""

from __future__ import annotations

import struct
from bisect import bisect_left

from streamcal.stream.state.kv import KVStore, next_key

__all__ = ["Fifo"]

_SEQ = struct.Struct(">Q")
_EXACT = 8  # holes stepped over by lookups before one iterator seek is cheaper


class Fifo:
    """Entries of ``store`` under ``prefix`` in insertion order (see the module docstring).
    ``head`` and ``tail`` are the state to keep (``to_state`` / ``from_state``)."""

    __slots__ = ("store", "prefix", "head", "tail", "_stop", "_fresh", "_commits")

    def __init__(self, store: KVStore, prefix: bytes, head: int = 0, tail: int = 0):
        self.store = store
        self.prefix = prefix
        self.head = head
        self.tail = tail
        self._stop = next_key(prefix)
        # Numbers pushed since the store's last commit (``_commits``): not in the database.
        self._fresh: list = []
        self._commits = store.commits

    def key(self, seq: int) -> bytes:
        return self.prefix + _SEQ.pack(seq)

    def push(self, value: bytes) -> int:
        """Append ``value``; returns its number."""
        seq = self.tail
        store = self.store
        store.put(self.prefix + _SEQ.pack(seq), value)
        self.tail = seq + 1
        if store.commits != self._commits:
            self._commits = store.commits
            self._fresh = []
        self._fresh.append(seq)
        return seq

    def get(self, seq: int):
        return self.store.get(self.prefix + _SEQ.pack(seq))

    def remove(self, seq: int) -> None:
        """Remove entry ``seq`` (present: the caller knows it from its own records)."""
        self.store.delete(self.prefix + _SEQ.pack(seq))
        if seq == self.head:
            self.head = seq + 1

    def first(self):
        """``(number, value)`` of the oldest entry, or None if there is none; moves
        ``head`` up to it."""
        found = self.at_or_after(self.head)
        self.head = self.tail if found is None else found[0]
        return found

    def at_or_after(self, seq: int):
        """``(number, value)`` of the oldest entry numbered ``seq`` or later, or None."""
        store, prefix, tail = self.store, self.prefix, self.tail
        for _ in range(_EXACT):
            if seq >= tail:
                return None
            v = store.get(prefix + _SEQ.pack(seq))
            if v is not None:
                return seq, v
            seq += 1
        return self._seek(seq)

    def _seek(self, seq: int):
        """The first entry at or after ``seq``: committed ones from an iterator (unless
        deleted since), then those written since the last commit."""
        store = self.store
        changes = store.changes()
        for key, value in store.committed_items(self.prefix + _SEQ.pack(seq), self._stop):
            now = changes.get(key, value)
            if now is not None:
                return _SEQ.unpack_from(key, len(self.prefix))[0], now
        if store.commits != self._commits:  # everything pushed is committed
            return None
        # Pushed since the last commit: numbered after every committed one.
        fresh = self._fresh
        for i in range(bisect_left(fresh, seq), len(fresh)):
            v = changes.get(self.prefix + _SEQ.pack(fresh[i]))
            if v is not None:
                return fresh[i], v
        return None

    def to_state(self) -> list:
        return [self.head, self.tail]
