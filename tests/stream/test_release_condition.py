"""The merge's release condition without a broker (issue 20): a partition counts as
caught up only by end offsets asked after the records to release were polled, never by
a stale highwater; late arrivals and stalls are counted."""

from __future__ import annotations

import heapq
import random
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamcal.stream.kafka.ordering import OrderedMerge
from tests._fakes import TP, LiveConsumer, Record, step
from tests._helpers import examples

TOPICS = ("ev", "lab")


def drain(merge: OrderedMerge, consumer: LiveConsumer, rng, moves=()) -> list:
    """Release everything; at the polls listed in ``moves`` the clock of the topics
    moves on by one (records appear), however much the merge has buffered then."""
    out, idle = [], 0
    moves = sorted(moves)
    deadline = time.monotonic() + 60
    while idle < 3:
        assert time.monotonic() < deadline, f"not drained after 60 s: {len(out)} out"
        item = step(merge, consumer, rng, moves)
        if item is None:
            if merge.buffered() or any(consumer.pos[tp] < consumer.readable(tp) for tp in
                                       consumer.data):  # fmt: skip
                continue  # not idle: ``next`` timed out first (a loaded machine)
            idle += 1
            if moves:  # caught up before the next move: it is a pause, the rest appears
                moves.pop(0)
                consumer.now += 1
                idle = 0
            continue
        idle = 0
        out.append((item[1].timestamp, item[0], item[1].partition, item[1].offset))
    return out


def replay(data: dict) -> list:
    return list(heapq.merge(*[
        [(r.timestamp, TOPICS.index(r.topic), r.partition, r.offset) for r in recs]
        for recs in data.values()
    ]))  # fmt: skip


@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.large_base_example],
)
@given(
    st.lists(st.tuples(st.integers(0, 1), st.integers(0, 2), st.integers(0, 50)), max_size=80),
    st.integers(1, 3),
    st.lists(st.integers(0, 40), max_size=3),
    st.integers(0, 2**32),
)
def test_input_written_during_pauses_is_merged_as_in_a_replay(records, phases, moves, seed):
    """Records of phase k (by timestamp: the stream written in record-time order, cut in
    ``phases``) become readable at time k; the clock moves at random polls or when the
    merge has caught up (a pause). Highwaters are stale or read as caught up at random:
    the released order is still the replay's, with no stall and no late arrival."""
    rng = random.Random(seed)  # not hypothesis's: how often it is drawn depends on timing
    data = {TP(t, p): [] for t in TOPICS for p in range(3)}
    for rank, p, ts in sorted(records, key=lambda r: r[2]):
        tp = TP(TOPICS[rank], p)
        data[tp].append(Record(tp.topic, p, len(data[tp]), ts, None, b""))
    appear = {tp: [r.timestamp * phases // 51 for r in recs] for tp, recs in data.items()}
    consumer = LiveConsumer(data, appear, rng)
    merge = OrderedMerge(consumer, list(data), {"ev": 0, "lab": 1}, max_wait=60.0)
    got = drain(merge, consumer, rng, list(moves) + [10**9] * (phases - 1))
    assert got == replay(data)
    assert merge.stalls == 0 and merge.late_arrivals == 0
    # one question to the broker at most per poll that brought records (and the last one)
    assert consumer.asked <= consumer.polls + 1


def test_a_stale_highwater_is_not_taken_as_caught_up():
    """ev/0 has an older record readable, but its highwater (from before it was written)
    reads as caught up and ``poll`` serves lab/0 first: lab/0's newer record must wait."""
    ev, lab = TP("ev", 0), TP("lab", 0)
    data = {ev: [Record("ev", 0, 0, 5, None, b"")], lab: [Record("lab", 0, 0, 9, None, b"")]}
    consumer = LiveConsumer(data, {ev: [0], lab: [0]}, random.Random(0), lie=False)
    consumer.hw[ev] = 0  # fetched before its record was written
    consumer.held.add(ev)  # its new records are not parsed yet
    merge = OrderedMerge(consumer, [ev, lab], {"ev": 0, "lab": 1}, max_wait=60.0)
    assert merge.next(0.1) is None  # lab's record is buffered, ev is not confirmed
    assert consumer.asked == 1
    consumer.held.clear()
    assert [merge.next(0.1)[1].timestamp for _ in range(2)] == [5, 9]


def test_late_arrivals_are_counted_per_unit():
    """A record that becomes readable after a later record of its unit was released is
    a late arrival of that unit; one older than another unit's releases is not."""
    e0, l0, e1 = TP("ev", 0), TP("lab", 0), TP("ev", 1)
    data = {
        e0: [Record("ev", 0, 0, 10, None, b"")],
        l0: [Record("lab", 0, 0, 5, None, b""), Record("lab", 0, 1, 6, None, b"")],
        e1: [Record("ev", 1, 0, 7, None, b"")],
    }
    appear = {e0: [0], l0: [1, 1], e1: [1]}
    consumer = LiveConsumer(data, appear, random.Random(1), lie=False)
    late: dict = {0: 3}  # kept by the caller across merges: counts add up
    merge = OrderedMerge(consumer, list(data), {"ev": 0, "lab": 1}, max_wait=60.0,
                         unit_of=lambda tp: tp.partition, late=late)  # fmt: skip
    assert merge.next(0.1)[1].timestamp == 10  # everything else is confirmed empty
    consumer.now = 1
    assert sorted(merge.next(0.1)[1].timestamp for _ in range(3)) == [5, 6, 7]
    assert late == {0: 5} and merge.late_arrivals == 5 and merge.stalls == 0


def test_a_partition_that_does_not_deliver_is_skipped_after_max_wait():
    """lab/0 has a readable record that is never served: after ``max_wait`` the merge
    releases what it holds (a stall); the record, when it comes, is a late arrival."""
    ev, lab = TP("ev", 0), TP("lab", 0)
    data = {ev: [Record("ev", 0, 0, 9, None, b"")], lab: [Record("lab", 0, 0, 5, None, b"")]}
    consumer = LiveConsumer(data, {ev: [0], lab: [0]}, random.Random(2), lie=False)
    consumer.held.add(lab)
    # max_wait on the wall clock, far above a call of 0.01 s even on a loaded machine (at
    # 0.05 a worker descheduled for 50 ms saw the stall already in the first call)
    merge = OrderedMerge(consumer, [ev, lab], {"ev": 0, "lab": 1}, max_wait=1.0)
    assert merge.next(0.01) is None and merge.stalls == 0
    assert merge.next(5.0)[1].timestamp == 9 and merge.stalls == 1
    consumer.held.clear()
    assert merge.next(0.1)[1].timestamp == 5 and merge.late_arrivals == 1


def test_a_broker_that_does_not_answer_holds_the_merge_until_max_wait():
    from kafka.errors import KafkaTimeoutError

    from streamcal.stream.kafka.kafka_python import Consumer

    ev, lab = TP("ev", 0), TP("lab", 0)
    data = {ev: [Record("ev", 0, 0, 9, None, b"")], lab: []}
    consumer = LiveConsumer(data, {ev: [0], lab: []}, random.Random(3), lie=False)

    def unreachable(tps, timeout_ms=None):
        raise KafkaTimeoutError("no answer")

    consumer.end_offsets = unreachable
    # Through the adapter: kafka-python's timeout reaches the merge as the port's.
    merge = OrderedMerge(Consumer(consumer), [ev, lab], {"ev": 0, "lab": 1}, max_wait=0.2)
    assert merge.next(0.05) is None
    assert merge.next(1.0)[1].timestamp == 9 and merge.stalls == 1
