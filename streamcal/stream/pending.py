"""What waits for its partner, keyed by event id, on disk: predictions waiting for their
labels, labels waiting for their events, and the ids already finished.

All of it lives in the unit's ``KVStore`` (``streamcal.stream.state.kv``), so memory is
bounded by the store's cache, not by how many wait. Each id has one entry, ``i`` + id:

* ``E``: an event's prediction waits for its label (the unit's packed prediction);
* ``L``: a label waits for its event (the label and what its dead letter would need);
* ``A``: with a label horizon, an event waits with its label attached until it matures;
* ``J``, ``X``, ``V``, ``D``: the id is finished (joined, expired, evicted by a bound,
  joined with the default label at the horizon), so that a duplicate event or a late
  label is told apart from an unknown id.

Three first-in first-out sequences (``streamcal.stream.state.fifo``) give the orders:
waiting events and waiting labels in the order they came (their deadlines, record time
plus a time to live, grow in that order because the clock only moves forward), and
finished ids in the order they finished, of which the newest ``dedupe_window`` are kept.
A sequence entry holds the deadline, the size of the waiting entry and the id.

With a label horizon (``horizon``) an event's deadline is its maturity, record time plus
the horizon, so the events' sequence is also the order in which they mature: ``mature``
hands the caller, in that order, the events that passed it (with the label attached, or
none), and moves a cursor past them. The caller takes them out (joined, with a default or
expired) or, to learn a late label, leaves an unlabelled one waiting ``keep`` seconds more
(it expires then, from the front, as any event). A label for a waiting event is attached
to its entry (``attach``: rewritten in place, its bytes counted with the event's).

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

With a horizon of 3 s, a label is attached to its event, which matures in event order:

>>> room = Pending(KVStore(), ttl=10.0, label_ttl=5.0, max_bytes=1 << 20, horizon=3.0)
>>> room.wait_event("a", b"A", now=0.0), room.wait_event("b", b"B", now=1.0)
([], [])
>>> kind, payload, seq = room.lookup("b")
>>> room.attach("b", seq, payload, b"label of b")
[]
>>> [(eid, kind == ATTACHED, split(kind, stored)) for eid, _, kind, stored in room.mature(4.5)]
[('a', False, (b'A', None)), ('b', True, (b'B', b'label of b'))]
"""

from __future__ import annotations

import hashlib
import hmac
import struct

from streamcal.errors import StateError
from streamcal.stream.state.fifo import Fifo
from streamcal.stream.state.kv import KVStore

__all__ = [
    "Pending",
    "ABSENT",
    "EVENT",
    "LABEL",
    "ATTACHED",
    "JOINED",
    "EXPIRED",
    "EVICTED",
    "DEFAULTED",
    "FINISHED",
    "TamperedEntry",
    "split",
]


# The kinds of an id's entry (its first byte); ABSENT: no entry.
ABSENT, EVENT, LABEL, ATTACHED = 0, ord("E"), ord("L"), ord("A")
JOINED, EXPIRED, EVICTED, DEFAULTED = ord("J"), ord("X"), ord("V"), ord("D")
FINISHED = frozenset((JOINED, EXPIRED, EVICTED, DEFAULTED))
_TAGGED = frozenset((EVENT, LABEL, ATTACHED))
_MARKERS = {kind: bytes((kind,)) for kind in FINISHED}

_ID = b"i"
_WAIT = struct.Struct("<BQ")  # kind, sequence number (waiting entries)
_SEQ_ENTRY = struct.Struct("<dI")  # deadline, size of the waiting entry; then the id
_TAG = 16  # bytes of an entry's authentication tag, with a key
_LENGTH = struct.Struct("<I")  # an attached entry: the event payload's length


def split(kind: int, stored: bytes) -> tuple[bytes, bytes | None]:
    """The event payload and the attached label's (None if ``kind`` is not ``ATTACHED``)
    of a waiting event's stored payload."""
    if kind != ATTACHED:
        return stored, None
    n = _LENGTH.unpack_from(stored)[0]
    return stored[4 : 4 + n], stored[4 + n :]


class TamperedEntry(StateError, ValueError):
    """An entry of the store whose tag does not match: changed by someone without the key."""


class _Room:
    """The waiting entries of one kind (events, or labels): their order, number, bytes,
    time to live and bounds. The entries themselves are the ``Pending``'s."""

    __slots__ = ("kind", "fifo", "ttl", "max_bytes", "max_count", "count", "bytes",
                 "next_deadline", "keep")  # fmt: skip

    def __init__(self, kind: int, fifo: Fifo, ttl: float, max_bytes: int, max_count, count=0,
                 size=0, keep=0.0):  # fmt: skip
        self.kind, self.fifo = kind, fifo
        self.ttl, self.max_bytes, self.max_count = float(ttl), int(max_bytes), max_count
        self.count, self.bytes = count, size
        self.keep = float(keep)  # an entry expires this long after its deadline
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
    With ``horizon`` (clock seconds) an event's deadline is its maturity (``mature``), and
    one left waiting at it expires ``keep`` seconds later.
    """

    def __init__(self, store: KVStore, *, ttl: float, label_ttl: float, max_bytes: int,
                 label_max_bytes: int | None = None, max_events: int | None = None,
                 max_labels: int | None = None, dedupe_window: int = 1_000_000,
                 key: bytes | None = None, state: dict | None = None,
                 horizon: float | None = None, keep: float = 0.0):  # fmt: skip
        self.store = store
        self.dedupe_window = int(dedupe_window)
        # A keyed BLAKE2b, copied per entry (cheaper than keying it anew).
        self._hasher = None if key is None else hashlib.blake2b(key=key[:64], digest_size=_TAG)
        s = state or {}
        label_max_bytes = max_bytes if label_max_bytes is None else label_max_bytes
        self.horizon = horizon
        self.event_room = _Room(EVENT, Fifo(store, b"q", *s.get("events_fifo", (0, 0))),
                                ttl if horizon is None else horizon, max_bytes, max_events,
                                s.get("events", 0), s.get("event_bytes", 0), keep)  # fmt: skip
        # Events numbered below it have matured; the oldest that may mature next (-inf:
        # look it up), as ``next_deadline`` for expiry.
        self.matured = s.get("matured", 0)
        self._next_mature = float("-inf")
        # (id, label payload) of labels attached to events a bound pushed out, for the
        # caller to report (``lost_labels``)
        self._lost: list = []
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
            "matured": self.matured,
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

    def prefetch(self, eids: list[str]) -> None:
        """Read the entries of ``eids`` from the store in one look-up, for the ``lookup``
        calls that follow (``KVStore.prefetch``)."""
        self.store.prefetch([_ID + eid.encode() for eid in eids])

    def lookup(self, eid: str) -> tuple[int, bytes | None, int]:
        """``(kind, payload, sequence number)`` of ``eid``'s entry: ``ABSENT``, ``EVENT`` or
        ``LABEL`` (with the waiting payload and its number), or a finished kind."""
        value = self._get(_ID + eid.encode())
        if value is None:
            return ABSENT, None, -1
        kind = value[0]
        if kind in _TAGGED:
            return kind, value[_WAIT.size :], _WAIT.unpack_from(value)[1]
        return kind, None, -1

    def _wait(self, room: _Room, eid: str, payload: bytes, deadline: float,
              kind: int | None = None) -> None:  # fmt: skip
        key = eid.encode()
        size = len(key) + len(payload)
        seq = room.fifo.push(_SEQ_ENTRY.pack(deadline, size) + key)
        self._put(_ID + key, (room.kind if kind is None else kind), seq, payload)
        room.count += 1
        room.bytes += size

    def _put(self, key: bytes, kind: int, seq: int, payload: bytes) -> None:
        value = _WAIT.pack(kind, seq) + payload
        if self._hasher is not None:
            value += self._tag(key, value)
        self.store.put(key, value)

    def wait_event(self, eid: str, payload: bytes, now: float, deadline=None,
                   label: bytes | None = None) -> list[str]:  # fmt: skip
        """Keep an event's ``payload`` (with a horizon, and ``label`` attached if given)
        until its label comes (``eid`` has no entry) or clock ``now + ttl`` (the horizon,
        or ``deadline``); returns the ids of the oldest waiting events pushed out by a
        bound (finished as evicted)."""
        room = self.event_room
        kind = None
        if label is not None:
            payload, kind = _LENGTH.pack(len(payload)) + payload + label, ATTACHED
        self._wait(room, eid, payload, now + room.ttl if deadline is None else deadline, kind)
        return self._evict()

    def _evict(self) -> list[str]:
        room, out = self.event_room, []
        while room.over():
            out.append(self._pop_event(EVICTED))
        return out

    def attach(self, eid: str, seq: int, payload: bytes, label: bytes) -> list[str]:
        """Attach ``label`` to the waiting event ``eid`` (``lookup``'s number and payload),
        which keeps its place; returns the ids of the events a bound pushed out then."""
        key = eid.encode()
        room = self.event_room
        stored = _LENGTH.pack(len(payload)) + payload + label
        size = len(key) + len(stored)
        deadline = _SEQ_ENTRY.unpack_from(room.fifo.get(seq))[0]
        self.store.put(room.fifo.key(seq), _SEQ_ENTRY.pack(deadline, size) + key)
        self._put(_ID + key, ATTACHED, seq, stored)
        room.bytes += size - len(key) - len(payload)
        return self._evict()

    def lost_labels(self) -> list[tuple[str, bytes]]:
        """The ``(id, label payload)`` of the labels attached to events that a bound
        pushed out since the last call."""
        out, self._lost = self._lost, []
        return out

    def event_time(self, seq: int) -> float:
        """The clock when the waiting event numbered ``seq`` came."""
        room = self.event_room
        return _SEQ_ENTRY.unpack_from(room.fifo.get(seq))[0] - room.ttl

    def is_matured(self, seq: int) -> bool:
        """Whether the waiting event numbered ``seq`` has passed its maturity (``mature``)."""
        return seq < self.matured

    def mature(self, now: float) -> list[tuple[str, int, int, bytes]]:
        """The ``(id, number, kind, stored payload)`` of the waiting events that passed
        their maturity (their deadline, with a horizon) at clock ``now``, oldest first;
        they stay until the caller takes them (``take_event``)."""
        if self.horizon is None or now <= self._next_mature:
            return []
        fifo, out = self.event_room.fifo, []
        seq = max(self.matured, fifo.head)
        while (found := fifo.at_or_after(seq)) is not None:
            seq, value = found
            deadline = _SEQ_ENTRY.unpack_from(value)[0]
            if deadline >= now:
                self._next_mature = deadline
                break
            eid = value[_SEQ_ENTRY.size :].decode()
            kind, stored, _ = self.lookup(eid)
            out.append((eid, seq, kind, stored))
            seq += 1
        else:
            self._next_mature = float("-inf")
        self.matured = max(self.matured, seq)
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
        if status == EVICTED and self.horizon is not None:
            kind, stored, _ = self.lookup(eid)
            if kind == ATTACHED:
                self._lost.append((eid, split(kind, stored)[1]))
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
            if first[1] + room.keep >= now:
                room.next_deadline = first[1] + room.keep
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
            value = self._get(_ID + eid.encode())
            out.append((eid, deadline, split(value[0], value[_WAIT.size :])[0]))
        return out

    def finished_ids(self) -> list[tuple[str, int]]:
        """The ``(id, kind)`` of the finished ids remembered, oldest first (reads them all)."""
        fifo = self.finished_fifo
        out = []
        for _, value in self.store.items(fifo.key(fifo.head), fifo.key(fifo.tail)):
            eid = value.decode()
            out.append((eid, self.lookup(eid)[0]))
        return out
