"""Bounded waiting rooms keyed by event id: events waiting for labels, and labels for events.

Both are insertion-ordered with a time to live measured on a clock the caller advances
(the processor uses record timestamps, so expiry is deterministic and replays identically
after a restart) and a maximum size (the oldest entry leaves first). Nothing leaves
silently: ``expire(now)`` and ``put`` return what left, and the caller reports it.

>>> room = WaitingRoom(ttl=10.0, max_size=2)
>>> room.put("a", "A", now=0.0)
[]
>>> room.put("b", "B", now=5.0)
[]
>>> room.put("c", "C", now=6.0)  # full: the oldest leaves
[('a', 'A')]
>>> room.expire(now=15.5)  # "b" arrived at 5.0, its TTL of 10 s is over
[('b', 'B')]
>>> room.pop("c"), len(room)
('C', 0)
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["WaitingRoom", "RecentIds"]


class WaitingRoom:
    """Entries that wait for a partner, at most ``ttl`` clock seconds and ``max_size`` of them.

    Expiry scans from the oldest insertion: an entry inserted with an older clock value
    behind a newer one (records out of time order) leaves when the entries before it do.
    """

    __slots__ = ("ttl", "max_size", "_items")

    def __init__(self, ttl: float, max_size: int):
        self.ttl = float(ttl)
        self.max_size = int(max_size)
        self._items: OrderedDict = OrderedDict()  # id -> (deadline, value)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key) -> bool:
        return key in self._items

    def put(self, key, value, now: float) -> list:
        """Add an entry; return the (key, value) pairs pushed out because the room is full."""
        self._items[key] = (now + self.ttl, value)
        out = []
        while len(self._items) > self.max_size:
            k, (_, v) = self._items.popitem(last=False)
            out.append((k, v))
        return out

    def pop(self, key, default=None):
        item = self._items.pop(key, None)
        return default if item is None else item[1]

    def get(self, key, default=None):
        """The value waiting under ``key`` (it stays), or ``default``."""
        item = self._items.get(key)
        return default if item is None else item[1]

    def expire(self, now: float) -> list:
        """Remove and return the (key, value) pairs whose deadline has passed."""
        items = self._items
        out = []
        while items:
            k, (deadline, v) = next(iter(items.items()))
            if deadline >= now:
                break
            del items[k]
            out.append((k, v))
        return out

    def values(self):
        return [v for _, v in self._items.values()]

    def to_state(self) -> dict:
        """Plain data: the settings and the (key, deadline, value) entries, oldest first."""
        items = [(k, d, v) for k, (d, v) in self._items.items()]
        return {"ttl": self.ttl, "max_size": self.max_size, "items": items}

    @classmethod
    def from_state(cls, state: dict, *, value=None) -> WaitingRoom:
        """The room ``to_state`` described; ``value`` converts each stored value back."""
        room = cls(state["ttl"], state["max_size"])
        conv = value or (lambda v: v)
        room._items = OrderedDict((k, (d, conv(v))) for k, d, v in state["items"])
        return room


class RecentIds:
    """The ``max_size`` most recently finished ids with a status, to reject duplicates.

    >>> r = RecentIds(2)
    >>> r.add("a", "joined"); r.add("b", "expired"); r.add("c", "joined")
    >>> r.get("a"), r.get("b")
    (None, 'expired')
    """

    __slots__ = ("max_size", "_items")

    def __init__(self, max_size: int):
        self.max_size = int(max_size)
        self._items: OrderedDict = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def add(self, key, status: str) -> None:
        items = self._items
        items[key] = status
        items.move_to_end(key)
        if len(items) > self.max_size:
            items.popitem(last=False)

    def get(self, key):
        return self._items.get(key)

    def to_state(self) -> dict:
        """Plain data: the size and the (id, status) entries, oldest first."""
        return {"max_size": self.max_size, "items": list(self._items.items())}

    @classmethod
    def from_state(cls, state: dict) -> RecentIds:
        ids = cls(state["max_size"])
        ids._items = OrderedDict((k, v) for k, v in state["items"])
        return ids
