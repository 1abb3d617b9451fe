"""Stand-ins for kafka-python's consumer side, for the tests of the input path that need no
broker (the merge, the units): records in the shape the processor keeps, and a consumer
that serves records already in the topics in an order a test chooses.
(The same paths against a real broker: tests/stream/test_processor_kafka.py and
test_other_clients.py.)"""

from __future__ import annotations

import time

from kafka.structs import TopicPartition as TP

from streamcal.stream.unit import _Rec as Record

__all__ = ["TP", "ChunkyConsumer", "LiveConsumer", "Record", "release_all", "step"]


class ChunkyConsumer:
    """Serves all records already in ``data`` ({TP: [Record]}): each poll one partition,
    chosen by ``rng``, and a chunk of 1..``most`` of its next records (as tansu does)."""

    def __init__(self, data: dict, rng, most: int = 7):
        self.data, self.rng, self.most = data, rng, most
        self.pos = dict.fromkeys(data, 0)

    def poll(self, timeout_ms=0, max_records=2000):
        left = [tp for tp in self.data if self.pos[tp] < len(self.data[tp])]
        if not left:
            return {}
        tp = self.rng.choice(left)
        p = self.pos[tp]
        k = min(max_records, self.rng.randint(1, self.most))
        self.pos[tp] = p + k
        return {tp: self.data[tp][p : p + k]}

    def highwater(self, tp):
        return len(self.data[tp])

    def position(self, tp):
        return min(self.pos[tp], len(self.data[tp]))

    def end_offsets(self, tps, timeout_ms=None):
        return {tp: len(self.data[tp]) for tp in tps}


class LiveConsumer:
    """Serves records that become readable over time, the way a live consumer sees them.

    ``data`` ({TP: [Record]}): a record is readable once ``now`` (set by the test) has
    reached ``appear[tp][i]``. Each poll returns a chunk of 1..``most`` readable records
    of one partition chosen by ``rng``. ``highwater`` is what kafka-python shows: None
    until a poll, then the readable count when a poll last parsed a fetch response of
    that partition (not for ``held`` ones), so it is stale after ``now`` moves, and with
    ``lie`` it may even read as caught up while records are readable (an unparsed fetch
    response). ``end_offsets`` tells the truth, and counts its calls in ``asked``.
    ``pause``d partitions are neither served nor fetched (their highwater stays) until
    ``resume``d, as a client does.
    """

    def __init__(self, data: dict, appear: dict, rng, most: int = 7, lie: bool = True):
        self.data, self.appear, self.rng, self.most, self.lie = data, appear, rng, most, lie
        self.now = 0
        self.pos = dict.fromkeys(data, 0)
        self.hw = dict.fromkeys(data)
        self.held: set = set()  # partitions whose readable records are not served
        self.paused: set = set()
        self.asked = 0
        self.polls = 0

    def readable(self, tp) -> int:
        return sum(1 for a in self.appear[tp] if a <= self.now)

    def pause(self, *tps) -> None:
        self.paused.update(tps)

    def resume(self, *tps) -> None:
        self.paused.difference_update(tps)

    def poll(self, timeout_ms=0, max_records=2000):
        held = self.held | self.paused
        left = [tp for tp in self.data if tp not in held and self.pos[tp] < self.readable(tp)]
        for tp in self.data:  # fetch responses parsed now: highwaters that go stale later
            if tp not in held and (self.hw[tp] is None or self.rng.random() < 0.5):
                self.hw[tp] = self.readable(tp)
        if self.lie:  # a stale highwater, down to the position, for any partition
            for tp in self.data:
                if self.rng.random() < 0.3:
                    # Not below it: kafka-python's highwater comes from the fetch that
                    # brought the records read; only a log that lost them shows less.
                    self.hw[tp] = self.pos[tp]
        if not left:
            return {}
        tp = self.rng.choice(left)
        p = self.pos[tp]
        k = min(max_records, self.rng.randint(1, self.most), self.readable(tp) - p)
        self.pos[tp] = p + k
        self.hw[tp] = self.readable(tp)
        self.polls += 1
        return {tp: self.data[tp][p : p + k]}

    def highwater(self, tp):
        return self.hw[tp]

    def position(self, tp):
        return self.pos[tp]

    def end_offsets(self, tps, timeout_ms=None):
        self.asked += 1
        return {tp: self.readable(tp) for tp in tps}


def step(merge, consumer: LiveConsumer, rng, moves: list):
    """One try of ``merge`` (``ready`` first, half the time, then ``next``), after moving
    ``consumer``'s clock on by one for each poll count of ``moves`` (sorted) reached."""
    while moves and consumer.polls >= moves[0]:
        moves.pop(0)
        consumer.now += 1
    item = merge.ready() if rng.random() < 0.5 else None
    return item or merge.next(0.01)


def release_all(merge, use_ready=(False,), timeout: float = 60.0) -> list:
    """Every ``(rank, record)`` ``merge`` releases, until it has caught up: nothing
    buffered and every partition read to its end. Keyed on that, not on ``next``
    returning None: ``next`` gives up after its timeout, which a loaded machine can reach
    with records still to release. ``use_ready`` cycles: True tries the non-blocking
    ``ready`` first."""
    out, i = [], 0
    deadline = time.monotonic() + timeout
    while not merge.caught_up():
        assert time.monotonic() < deadline, f"not caught up after {timeout} s: {len(out)} out"
        item = merge.ready() if use_ready[i % len(use_ready)] else None
        i += 1
        item = item or merge.next(0.05)
        if item is not None:
            out.append(item)
    return out
