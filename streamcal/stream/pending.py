"""What waits for its partner, keyed by event id, on disk: predictions waiting for their
labels, labels waiting for their events, and the ids already finished.

All of it lives in the unit's ``KVStore`` (``streamcal.stream.state.kv``), so memory is
bounded by the store's cache, not by how many wait. Each id has one entry, ``i`` + id:

* ``E``: an event's prediction waits for its label (the unit's packed prediction);
* ``L``: a label waits for its event (the label and what its dead letter would need);
* ``J``, ``X``, ``V``: the id is finished (joined, expired, evicted by a bound), so that a
  duplicate event or a late label is told apart from an unknown id.

Three first-in first-out sequences (``streamcal.stream.state.fifo``) give the orders:
waiting events and waiting labels in the order they came (their deadlines, record time
plus a time to live, grow in that order because the clock only moves forward), and
finished ids in the order they finished, of which the newest ``dedupe_window`` are kept.
A sequence entry holds the deadline, the size of the waiting entry and the id.

Bounds: the waiting events (and, apart, the waiting labels) are bounded in bytes, and
optionally in number; at a bound the oldest leave first and are reported, never silently.
Expiry is on the clock the caller advances (record time), so a replay expires the same
entries at the same records. The counters and sequence numbers are the state to keep
with the store's commit (``to_state``), so both come back together.

>>> from streamcal.stream.state.kv import KVStore
>>> room = Pending(KVStore(), ttl=10.0, label_ttl=5.0, max_bytes=1 << 20)
>>> room.wait_event("a", b"prediction of a", now=0.0)
[]
>>> room.lookup("a")[0] == EVENT, room.events
(True, 1)
>>> kind, payload, seq = room.lookup("a")
>>> payload, room.take_event("a", seq, payload), room.lookup("a")[0] == JOINED
(b'prediction of a', None, True)
>>> room.wait_label("b", b"label of b", now=1.0)
[]
>>> room.expire(now=6.5)  # the label of "b" waited more than 5 s
([], [('b', b'label of b')])
"""

from __future__ import annotations

import hashlib
import hmac
import struct

from streamcal.stream.state.fifo import Fifo
from streamcal.stream.state.kv import KVStore

__all__ = [
    "Pending",
    "ABSENT",
    "EVENT",
    "LABEL",
    "JOINED",
    "EXPIRED",
    "EVICTED",
    "FINISHED",
    "TamperedEntry",
]

# The kinds of an id's entry (its first byte); ABSENT: no entry.
ABSENT, EVENT, LABEL = 0, ord("E"), ord("L")
JOINED, EXPIRED, EVICTED = ord("J"), ord("X"), ord("V")
FINISHED = frozenset((JOINED, EXPIRED, EVICTED))
_TAGGED = frozenset((EVENT, LABEL))
_MARKERS = {kind: bytes((kind,)) for kind in FINISHED}

_ID = b"i"
_WAIT = struct.Struct("<BQ")  # kind, sequence number (waiting entries)
_SEQ_ENTRY = struct.Struct("<dI")  # deadline, size of the waiting entry; then the id
_TAG = 16  # bytes of an entry's authentication tag, with a key


class TamperedEntry(ValueError):
    """An entry of the store whose tag does not match: changed by someone without the key."""


class _Room:
    """The waiting entries of one kind (events, or labels): their order, number, bytes,
    time to live and bounds. The entries themselves are the ``Pending``'s."""

    __slots__ = ("kind", "fifo", "ttl", "max_bytes", "max_count", "count", "bytes",
                 "next_deadline")  # fmt: skip

    def __init__(self, kind: int, fifo: Fifo, ttl: float, max_bytes: int, max_count, count=0,
                 size=0):  # fmt: skip
        self.kind, self.fifo = kind, fifo
        self.ttl, self.max_bytes, self.max_count = float(ttl), int(max_bytes), max_count
        self.count, self.bytes = count, size
        # Deadline of the oldest entry that may still wait (-inf: look it up): nothing of
        # the room expires before it, so most records cost one comparison.
        self.next_deadline = float("-inf")

    def over(self) -> bool:
        return self.bytes > self.max_bytes or (
            self.max_count is not None and self.count > self.max_count
        )

    def first(self):
        """``(seq, deadline, size, id)`` of the oldest entry, or None."""
        found = self.fifo.first()
        if found is None:
            return None
        seq, value = found
        deadline, size = _SEQ_ENTRY.unpack_from(value)
        return seq, deadline, size, value[_SEQ_ENTRY.size :].decode()

    def leave(self, seq: int, size: int) -> None:
        self.fifo.remove(seq)
        self.count -= 1
        self.bytes -= size


class Pending:
    """Waiting events and labels and finished ids of one unit, in ``store`` (see the
    module docstring).

    ``ttl`` and ``label_ttl``: how long (clock seconds) an event waits for its label and a
    label for its event. ``max_bytes`` and ``label_max_bytes`` bound the bytes of waiting
    events and of waiting labels, ``max_events`` and ``max_labels`` (None: off) their
    number; ``dedupe_window`` finished ids are remembered. With ``key``, every waiting event
    and label carries a tag (keyed BLAKE2b over key and value) checked when it is read.
    """

    def __init__(self, store: KVStore, *, ttl: float, label_ttl: float, max_bytes: int,
                 label_max_bytes: int | None = None, max_events: int | None = None,
                 max_labels: int | None = None, dedupe_window: int = 1_000_000,
                 key: bytes | None = None, state: dict | None = None):  # fmt: skip
        self.store = store
        self.dedupe_window = int(dedupe_window)
        # A keyed BLAKE2b, copied per entry (cheaper than keying it anew).
        self._hasher = None if key is None else hashlib.blake2b(key=key[:64], digest_size=_TAG)
        s = state or {}
        label_max_bytes = max_bytes if label_max_bytes is None else label_max_bytes
        self.event_room = _Room(EVENT, Fifo(store, b"q", *s.get("events_fifo", (0, 0))), ttl,
                                max_bytes, max_events, s.get("events", 0),
                                s.get("event_bytes", 0))  # fmt: skip
        self.label_room = _Room(LABEL, Fifo(store, b"l", *s.get("labels_fifo", (0, 0))),
                                label_ttl, label_max_bytes, max_labels, s.get("labels", 0),
                                s.get("label_bytes", 0))  # fmt: skip
        self.finished_fifo = Fifo(store, b"o", *s.get("finished_fifo", (0, 0)))

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict:
        """The counters and sequence numbers (the entries are in the store)."""
        ev, lab = self.event_room, self.label_room
        return {
            "events_fifo": ev.fifo.to_state(),
            "labels_fifo": lab.fifo.to_state(),
            "finished_fifo": self.finished_fifo.to_state(),
            "events": ev.count,
            "labels": lab.count,
            "event_bytes": ev.bytes,
            "label_bytes": lab.bytes,
        }

    @property
    def events(self) -> int:
        """Waiting events."""
        return self.event_room.count

    @property
    def labels(self) -> int:
        """Waiting labels."""
        return self.label_room.count

    @property
    def event_bytes(self) -> int:
        return self.event_room.bytes

    @property
    def label_bytes(self) -> int:
        return self.label_room.bytes

    @property
    def finished(self) -> int:
        """Finished ids remembered."""
        return self.finished_fifo.tail - self.finished_fifo.head

    # ------------------------------------------------------------------ entries
    # Waiting entries (what is learned from) carry a tag over their key and value; a
    # finished marker and the sequences' entries are pointers: changing them can only make
    # an entry leave early, which anyone who can write the store can do anyway.
    def _tag(self, key: bytes, value: bytes) -> bytes:
        h = self._hasher.copy()
        h.update(key)
        h.update(b"\0")
        h.update(value)
        return h.digest()

    def _get(self, key: bytes):
        value = self.store.get(key)
        if value is None or self._hasher is None or value[0] not in _TAGGED:
            return value
        body, tag = value[:-_TAG], value[-_TAG:]
        if not hmac.compare_digest(tag, self._tag(key, body)):
            raise TamperedEntry(
                f"state store entry {key[:40]!r} failed authentication (changed by someone "
                "without the checkpoint key); refusing it"
            )
        return body

    def lookup(self, eid: str) -> tuple[int, bytes | None, int]:
        """``(kind, payload, sequence number)`` of ``eid``'s entry: ``ABSENT``, ``EVENT`` or
        ``LABEL`` (with the waiting payload and its number), or a finished kind."""
        value = self._get(_ID + eid.encode())
        if value is None:
            return ABSENT, None, -1
        kind = value[0]
        if kind == EVENT or kind == LABEL:
            return kind, value[_WAIT.size :], _WAIT.unpack_from(value)[1]
        return kind, None, -1

    def _wait(self, room: _Room, eid: str, payload: bytes, deadline: float) -> None:
        key = eid.encode()
        size = len(key) + len(payload)
        seq = room.fifo.push(_SEQ_ENTRY.pack(deadline, size) + key)
        value = _WAIT.pack(room.kind, seq) + payload
        if self._hasher is not None:
            value += self._tag(_ID + key, value)
        self.store.put(_ID + key, value)
        room.count += 1
        room.bytes += size

    def wait_event(self, eid: str, payload: bytes, now: float, deadline=None) -> list[str]:
        """Keep an event's ``payload`` until its label comes (``eid`` has no entry) or clock
        ``now + ttl`` (or ``deadline``); returns the ids of the oldest waiting events pushed
        out by a bound (finished as evicted)."""
        room = self.event_room
        self._wait(room, eid, payload, now + room.ttl if deadline is None else deadline)
        out = []
        while room.over():
            out.append(self._pop_event(EVICTED))
        return out

    def wait_label(self, eid: str, payload: bytes, now: float, deadline=None) -> list:
        """Keep a label's ``payload`` until its event comes (``eid`` has no entry) or clock
        ``now + label_ttl`` (or ``deadline``); returns the ``(id, payload)`` of the oldest
        waiting labels pushed out by a bound."""
        room = self.label_room
        self._wait(room, eid, payload, now + room.ttl if deadline is None else deadline)
        out = []
        while room.over():
            out.append(self._pop_label())
        return out

    def take_event(self, eid: str, seq: int, payload: bytes, status: int = JOINED) -> None:
        """The waiting event ``eid`` (``lookup``'s number and payload) leaves, finished as
        ``status``."""
        self.event_room.leave(seq, len(eid.encode()) + len(payload))
        self.finish(eid, status)

    def take_label(self, eid: str, seq: int, payload: bytes) -> None:
        """The waiting label ``eid`` leaves (its id has no entry afterwards)."""
        key = eid.encode()
        self.label_room.leave(seq, len(key) + len(payload))
        self.store.delete(_ID + key)

    def finish(self, eid: str, status: int) -> None:
        """Remember ``eid`` as finished with ``status`` (the newest ``dedupe_window``)."""
        key = eid.encode()
        self.store.put(_ID + key, _MARKERS[status])
        fifo = self.finished_fifo
        fifo.push(key)
        if fifo.tail - fifo.head > self.dedupe_window:
            old = fifo.head
            self.store.delete(_ID + fifo.get(old))
            fifo.remove(old)

    # ------------------------------------------------------------------ leaving in order
    def _pop_event(self, status: int, first=None) -> str:
        """The oldest waiting event (``first``, if ``first()`` just gave it) leaves,
        finished as ``status``; returns its id."""
        seq, _, size, eid = first or self.event_room.first()
        self.event_room.leave(seq, size)
        self.finish(eid, status)
        return eid

    def _pop_label(self, first=None) -> tuple[str, bytes]:
        """The oldest waiting label (``first``, as for ``_pop_event``) leaves; returns its
        id and payload."""
        seq, _, size, eid = first or self.label_room.first()
        key = _ID + eid.encode()
        value = self._get(key)
        self.label_room.leave(seq, size)
        self.store.delete(key)
        return eid, value[_WAIT.size :]

    def expire(self, now: float) -> tuple[list[str], list[tuple[str, bytes]]]:
        """Remove what waited past its deadline at clock ``now``: the ids of the expired
        events (finished as expired) and the ``(id, payload)`` of the expired labels."""
        events = self._expire(self.event_room, now, lambda f: self._pop_event(EXPIRED, f))
        labels = self._expire(self.label_room, now, self._pop_label)
        return events, labels

    @staticmethod
    def _expire(room: _Room, now: float, pop) -> list:
        out: list = []
        if now <= room.next_deadline or not room.count:
            return out
        while (first := room.first()) is not None:
            if first[1] >= now:
                room.next_deadline = first[1]
                return out
            out.append(pop(first))
        room.next_deadline = float("-inf")
        return out

    def waiting(self, kind: int = EVENT) -> list[tuple[str, float, bytes]]:
        """The ``(id, deadline, payload)`` of every waiting event (or label), oldest first.
        Reads them all: for exports and tests."""
        fifo = (self.event_room if kind == EVENT else self.label_room).fifo
        out = []
        for _, value in self.store.items(fifo.key(fifo.head), fifo.key(fifo.tail)):
            deadline = _SEQ_ENTRY.unpack_from(value)[0]
            eid = value[_SEQ_ENTRY.size :].decode()
            out.append((eid, deadline, self._get(_ID + eid.encode())[_WAIT.size :]))
        return out

    def finished_ids(self) -> list[tuple[str, int]]:
        """The ``(id, kind)`` of the finished ids remembered, oldest first (reads them all)."""
        fifo = self.finished_fifo
        out = []
        for _, value in self.store.items(fifo.key(fifo.head), fifo.key(fifo.tail)):
            eid = value.decode()
            out.append((eid, self.lookup(eid)[0]))
        return out
