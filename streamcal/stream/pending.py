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
        self.ttl = float(ttl)
        self.label_ttl = float(label_ttl)
        self.max_bytes = int(max_bytes)
        self.label_max_bytes = self.max_bytes if label_max_bytes is None else label_max_bytes
        self.max_events = max_events
        self.max_labels = max_labels
        self.dedupe_window = int(dedupe_window)
        # A keyed BLAKE2b, copied per entry (cheaper than keying it anew).
        self._hasher = None if key is None else hashlib.blake2b(key=key[:64], digest_size=_TAG)
        s = state or {}
        self.events_fifo = Fifo(store, b"q", *s.get("events_fifo", (0, 0)))
        self.labels_fifo = Fifo(store, b"l", *s.get("labels_fifo", (0, 0)))
        self.finished_fifo = Fifo(store, b"o", *s.get("finished_fifo", (0, 0)))
        self.events = s.get("events", 0)  # waiting events
        self.labels = s.get("labels", 0)  # waiting labels
        self.event_bytes = s.get("event_bytes", 0)
        self.label_bytes = s.get("label_bytes", 0)
        # Deadline of the oldest entry that may still wait (-inf: look it up): nothing of
        # a sequence expires before it, so most records cost one comparison.
        self._next_event_deadline = float("-inf")
        self._next_label_deadline = float("-inf")

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict:
        """The counters and sequence numbers (the entries are in the store)."""
        return {
            "events_fifo": self.events_fifo.to_state(),
            "labels_fifo": self.labels_fifo.to_state(),
            "finished_fifo": self.finished_fifo.to_state(),
            "events": self.events,
            "labels": self.labels,
            "event_bytes": self.event_bytes,
            "label_bytes": self.label_bytes,
        }

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

    def _put(self, key: bytes, value: bytes) -> None:
        if self._hasher is not None:
            value += self._tag(key, value)
        self.store.put(key, value)

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

    def wait_event(self, eid: str, payload: bytes, now: float, deadline=None) -> list[str]:
        """Keep an event's ``payload`` until its label comes (``eid`` has no entry) or clock
        ``now + ttl`` (or ``deadline``); returns the ids of the oldest waiting events pushed
        out by a bound (finished as evicted)."""
        key = eid.encode()
        size = len(key) + len(payload)
        deadline = now + self.ttl if deadline is None else deadline
        seq = self.events_fifo.push(_SEQ_ENTRY.pack(deadline, size) + key)
        self._put(_ID + key, _WAIT.pack(EVENT, seq) + payload)
        self.events += 1
        self.event_bytes += size
        out = []
        while self.event_bytes > self.max_bytes or (
            self.max_events is not None and self.events > self.max_events
        ):
            out.append(self._pop_event(EVICTED))
        return out

    def wait_label(self, eid: str, payload: bytes, now: float, deadline=None) -> list:
        """Keep a label's ``payload`` until its event comes (``eid`` has no entry) or clock
        ``now + label_ttl`` (or ``deadline``); returns the ``(id, payload)`` of the oldest
        waiting labels pushed out by a bound."""
        key = eid.encode()
        size = len(key) + len(payload)
        deadline = now + self.label_ttl if deadline is None else deadline
        seq = self.labels_fifo.push(_SEQ_ENTRY.pack(deadline, size) + key)
        self._put(_ID + key, _WAIT.pack(LABEL, seq) + payload)
        self.labels += 1
        self.label_bytes += size
        out = []
        while self.label_bytes > self.label_max_bytes or (
            self.max_labels is not None and self.labels > self.max_labels
        ):
            out.append(self._pop_label())
        return out

    def take_event(self, eid: str, seq: int, payload: bytes, status: int = JOINED) -> None:
        """The waiting event ``eid`` (``lookup``'s number and payload) leaves, finished as
        ``status``."""
        self.events_fifo.remove(seq)
        self.events -= 1
        self.event_bytes -= len(eid.encode()) + len(payload)
        self.finish(eid, status)

    def take_label(self, eid: str, seq: int, payload: bytes) -> None:
        """The waiting label ``eid`` leaves (its id has no entry afterwards)."""
        key = eid.encode()
        self.labels_fifo.remove(seq)
        self.labels -= 1
        self.label_bytes -= len(key) + len(payload)
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
    def _first(self, fifo: Fifo):
        """``(seq, deadline, size, id)`` of the oldest entry of ``fifo``, or None."""
        found = fifo.first()
        if found is None:
            return None
        seq, value = found
        deadline, size = _SEQ_ENTRY.unpack_from(value)
        return seq, deadline, size, value[_SEQ_ENTRY.size :].decode()

    def _pop_event(self, status: int, first=None) -> str:
        """The oldest waiting event (``first``, if ``_first`` just gave it) leaves,
        finished as ``status``; returns its id."""
        seq, _, size, eid = first or self._first(self.events_fifo)
        self.events_fifo.remove(seq)
        self.events -= 1
        self.event_bytes -= size
        self.finish(eid, status)
        return eid

    def _pop_label(self, first=None) -> tuple[str, bytes]:
        """The oldest waiting label (``first``, as for ``_pop_event``) leaves; returns its
        id and payload."""
        seq, _, size, eid = first or self._first(self.labels_fifo)
        key = _ID + eid.encode()
        value = self._get(key)
        self.labels_fifo.remove(seq)
        self.labels -= 1
        self.label_bytes -= size
        self.store.delete(key)
        return eid, value[_WAIT.size :]

    def expire(self, now: float) -> tuple[list[str], list[tuple[str, bytes]]]:
        """Remove what waited past its deadline at clock ``now``: the ids of the expired
        events (finished as expired) and the ``(id, payload)`` of the expired labels."""
        events: list = []
        labels: list = []
        if now > self._next_event_deadline and self.events:
            while (first := self._first(self.events_fifo)) is not None:
                if first[1] >= now:
                    self._next_event_deadline = first[1]
                    break
                events.append(self._pop_event(EXPIRED, first))
            else:
                self._next_event_deadline = float("-inf")
        if now > self._next_label_deadline and self.labels:
            while (first := self._first(self.labels_fifo)) is not None:
                if first[1] >= now:
                    self._next_label_deadline = first[1]
                    break
                labels.append(self._pop_label(first))
            else:
                self._next_label_deadline = float("-inf")
        return events, labels

    def waiting(self, kind: int = EVENT) -> list[tuple[str, float, bytes]]:
        """The ``(id, deadline, payload)`` of every waiting event (or label), oldest first.
        Reads them all: for exports and tests."""
        fifo = self.events_fifo if kind == EVENT else self.labels_fifo
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
