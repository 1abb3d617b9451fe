"""The merge's grace (``--grace-ms``) without a broker, on a simulated clock: live input
made readable out of order across partitions by less than the grace is released in the
replay's order, never held longer than the grace, and an empty partition of another unit
holds nothing back."""

from __future__ import annotations

import heapq
import random
import time
import types
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from streamcal.stream.kafka import ordering
from streamcal.stream.kafka.ordering import OrderedMerge
from tests._fakes import TP, LiveConsumer, Record
from tests._helpers import examples

TOPICS = ("ev", "lab")


class TimedConsumer(LiveConsumer):
    """A ``LiveConsumer`` on a simulated clock (``now``, seconds) that only its polls move:
    each costs ``step`` seconds, and one that finds nothing readable waits until a record
    is or its timeout has passed. ``appear`` holds when each record becomes readable;
    ``read_at`` keeps when each record was handed out."""

    def __init__(self, data: dict, appear: dict, rng, most: int = 5, step: float = 0.001):
        super().__init__(data, appear, rng, most=most, lie=False)
        self.now, self.step = 0.0, step
        self.read_at: dict = {}

    def poll(self, timeout_ms=0, max_records=2000):
        self.now += self.step
        if all(self.pos[tp] >= self.readable(tp) for tp in self.data):
            later = [a for tp in self.data for a in self.appear[tp][self.pos[tp] :]]
            self.now = min([self.now + timeout_ms / 1000, *later])
        got = super().poll(timeout_ms, max_records)
        for tp, recs in got.items():
            for r in recs:
                self.read_at[(tp, r.offset)] = self.now
        return got

    def clock(self):
        return types.SimpleNamespace(monotonic=lambda: self.now, time=time.time)


def live_input(stamps: list, jitter: dict, spread: float) -> tuple[dict, dict]:
    """({TP: [Record]}, {TP: [readable at]}) of records with timestamps ``stamps`` (ms,
    (rank, partition, ts) each, in record-time order per partition): each readable at its
    timestamp plus up to ``spread`` seconds (``jitter[i]`` of it), never before the
    records before it in its partition."""
    data = {TP(t, p): [] for t in TOPICS for p in range(3)}
    ready = {tp: [] for tp in data}
    for i, (rank, p, ts) in enumerate(sorted(stamps, key=lambda s: s[2])):
        tp = TP(TOPICS[rank], p)
        data[tp].append(Record(tp.topic, p, len(data[tp]), ts, None, b""))
        at = ts / 1000 + spread * jitter.get(i, 0.0)
        ready[tp].append(max([at, *ready[tp][-1:]]))
    return data, ready


def replay(data: dict) -> list:
    return list(heapq.merge(*[
        [(r.timestamp, TOPICS.index(r.topic), r.partition, r.offset) for r in recs]
        for recs in data.values()
    ]))  # fmt: skip


def drain(merge: OrderedMerge, consumer: TimedConsumer) -> list:
    """(key, released at, read at) of every record, until all are released."""
    out = []
    total = sum(len(v) for v in consumer.data.values())
    while len(out) < total:
        assert consumer.now < 10_000, f"not drained: {len(out)} of {total}"
        item = merge.next(0.2)
        if item is not None:
            rank, r = item
            tp = TP(r.topic, r.partition)
            key = (r.timestamp, rank, r.partition, r.offset)
            out.append((key, consumer.now, consumer.read_at[(tp, r.offset)]))
    return out


def simulated(consumer):
    """The merge on ``consumer``'s simulated clock, within a ``with`` block."""
    return mock.patch.object(ordering, "time", consumer.clock())


@settings(max_examples=examples(100), deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 1), st.integers(0, 2), st.integers(0, 3000)),
             min_size=1, max_size=60),  # fmt: skip
    st.dictionaries(st.integers(0, 59), st.floats(0.0, 1.0)),
    st.sampled_from([0.1, 0.3]),
    st.integers(0, 2**32),
)
def test_input_made_readable_out_of_order_within_the_grace_is_in_the_replays_order(
    stamps, jitter, grace, seed
):
    """Each record is readable at its timestamp plus up to ``spread`` < grace (less the
    polls' granularity), whatever the gaps in its partition: released in the replay's
    order, no late arrival, no stall, and none held longer than the grace (plus a poll)
    after the last read of it and the records before it."""
    spread = grace - 0.06  # the merge looks at most every 50 ms while it holds a record
    data, ready = live_input(stamps, jitter, max(spread, 0.0))
    consumer = TimedConsumer(data, ready, random.Random(seed))
    merge = OrderedMerge(consumer, list(data), {"ev": 0, "lab": 1}, max_wait=60.0, grace=grace)
    with simulated(consumer):
        out = drain(merge, consumer)
    assert [key for key, _, _ in out] == replay(data)
    assert merge.late_arrivals == 0 and merge.stalls == 0
    last_read = 0.0
    for _, released, read in out:
        last_read = max(last_read, read)
        assert released - last_read <= grace + 0.06


def test_without_the_grace_the_same_input_arrives_late():
    """The reference for the test above: a label readable 30 ms after an event with a
    later timestamp is late without a grace, in its place with 50 ms."""
    stamps = [(0, 0, 100), (1, 1, 90)]  # an event at 100 ms, a label at 90 ms
    for grace, late in ((0.0, 1), (0.05, 0)):
        data, ready = live_input(stamps, {0: 1.0}, 0.04)  # the label: readable at 130 ms
        consumer = TimedConsumer(data, ready, random.Random(0))
        merge = OrderedMerge(consumer, list(data), {"ev": 0, "lab": 1}, max_wait=60.0,
                             grace=grace)  # fmt: skip
        with simulated(consumer):
            out = drain(merge, consumer)
        assert merge.late_arrivals == late
        assert [key[0] for key, _, _ in out] == ([100, 90] if late else [90, 100])


def test_a_silent_partition_costs_each_record_the_grace_and_no_stall():
    """lab/0 never shows a record: each event waits the whole grace after it was read,
    then goes; that is not a stall."""
    stamps = [(0, 0, ts) for ts in (0, 500, 1000)]
    data, ready = live_input(stamps, {}, 0.0)
    data, ready = {**data, TP("lab", 0): []}, {**ready, TP("lab", 0): []}
    consumer = TimedConsumer(data, ready, random.Random(1), most=1)
    merge = OrderedMerge(consumer, list(data), {"ev": 0, "lab": 1}, max_wait=60.0, grace=0.1)
    with simulated(consumer):
        out = drain(merge, consumer)
    assert all(0.1 <= released - read <= 0.16 for _, released, read in out)
    assert merge.stalls == 0 and merge.late_arrivals == 0


def test_an_empty_partition_of_another_unit_holds_nothing_back():
    """With units (``--scope partition``), only the partitions of the head's unit count."""
    stamps = [(0, 0, 10), (1, 0, 20)]  # unit 0: an event and a label; unit 1, 2: nothing
    data, ready = live_input(stamps, {}, 0.0)
    consumer = TimedConsumer(data, ready, random.Random(2))
    merge = OrderedMerge(consumer, list(data), {"ev": 0, "lab": 1}, max_wait=60.0, grace=5.0,
                         unit_of=lambda tp: tp.partition)  # fmt: skip
    with simulated(consumer):
        out = drain(merge, consumer)
    assert [key[0] for key, _, _ in out] == [10, 20]
    # The event waited for its label's partition (read at 20 ms), not for units 1 and 2;
    # the label then waits the grace for the event's partition, of its own unit.
    assert out[0][1] < 0.1 and 5.0 <= out[1][1] - out[1][2] <= 5.06
