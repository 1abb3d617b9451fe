"""The bound of the ordered merge's buffers (issue 37, memory): a partition whose buffered
records pass its share of ``buffer_bytes`` is paused until the merge has released it down
to half; the records are released in the order of the unbounded merge, and what a
partition holds never passes its share by more than the poll that crossed it."""

from __future__ import annotations

import random
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamcal.stream.kafka.ordering import OrderedMerge, size
from tests._fakes import TP, LiveConsumer, Record, step
from tests._helpers import examples

TOPICS = ("ev", "lab")
RANKS = {"ev": 0, "lab": 1}
MOST = 7  # records per poll, at most (LiveConsumer's chunk)


def build(records) -> dict:
    """{TP: [Record]} of ``records`` (rank, partition, timestamp, value bytes), each
    partition in timestamp order."""
    data = {TP(t, p): [] for t in TOPICS for p in range(2)}
    for rank, p, ts, n in sorted(records, key=lambda r: r[2]):
        tp = TP(TOPICS[rank], p)
        data[tp].append(Record(tp.topic, p, len(data[tp]), ts, b"k", b"v" * n))
    return data


def release(data: dict, seed: int, buffer_bytes=None, phases: int = 1, moves=()):
    """Everything the merge releases, as (topic, partition, offset); the most each
    partition held (in ``size``'s bytes, counted from outside: served by the consumer and
    not released yet), the pauses seen, and the merge. Records of phase k (by timestamp)
    become readable at time k, which moves at the polls in ``moves`` or when the merge
    has caught up."""
    rng = random.Random(seed)
    top = 1 + max((r.timestamp for recs in data.values() for r in recs), default=0)
    appear = {tp: [r.timestamp * phases // top for r in recs] for tp, recs in data.items()}
    consumer = LiveConsumer(data, appear, rng, most=MOST)
    merge = OrderedMerge(consumer, list(data), RANKS, max_wait=60.0, buffer_bytes=buffer_bytes)
    out, most, pauses = [], dict.fromkeys(data, 0), 0
    released = dict.fromkeys(data, 0)
    moves = sorted(moves)
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline, f"not drained after 60 s: {len(out)} out"
        item = step(merge, consumer, rng, moves)
        pauses += bool(consumer.paused)
        for tp, recs in data.items():
            held = sum(size(r) for r in recs[released[tp] : consumer.pos[tp]])
            most[tp] = max(most[tp], held)
        if item is not None:
            rec = item[1]
            tp = TP(rec.topic, rec.partition)
            released[tp] += 1
            out.append((rec.topic, rec.partition, rec.offset))
        elif merge.caught_up():
            if consumer.now >= phases - 1:
                break
            consumer.now += 1  # caught up before the next move: a pause of the source
    return out, most, pauses, merge, consumer


@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.large_base_example, HealthCheck.too_slow],
)
@given(
    st.lists(
        st.tuples(st.integers(0, 1), st.integers(0, 1), st.integers(0, 1000),
                  st.integers(0, 3000)),  # fmt: skip
        max_size=120,
    ),
    st.integers(1, 40_000),
    st.integers(1, 3),
    st.lists(st.integers(0, 60), max_size=3),
    st.integers(0, 2**32),
)
def test_the_bound_holds_and_the_order_is_the_unbounded_merges(records, bound, phases,
                                                               moves, seed):  # fmt: skip
    data = build(records)
    moves = list(moves) + [10**9] * (phases - 1)
    free, *_ = release(data, seed, None, phases, moves)
    got, most, _, merge, consumer = release(data, seed + 1, bound, phases, moves)
    assert got == free
    assert merge.stalls == 0 and merge.late_arrivals == 0
    share = bound // len(data)
    for tp, recs in data.items():
        biggest = max((size(r) for r in recs), default=0)
        # paused once past its share: only the poll that crossed it goes over
        assert most[tp] <= share + MOST * biggest, (tp, most[tp], share)
    # nothing left paused once caught up: a paused partition holds records
    assert not consumer.paused and not merge.paused()


def test_a_labels_topic_days_ahead_is_paused_and_released_in_record_time():
    """The backlog of docs/processor.md: the labels start far later in record time than
    the events. Unbounded, the labels pile up while the events are read; bounded, the
    labels partition is paused and holds at most its share and one poll."""
    ev, lab = TP("ev", 0), TP("lab", 0)
    data = {
        ev: [Record("ev", 0, i, i, b"k", b"e" * 200) for i in range(3000)],
        lab: [Record("lab", 0, i, 2000 + i // 2, b"k", b"l" * 20) for i in range(2000)],
    }
    free, most_free, _, _, _ = release(data, 5)
    bound = 40 * size(data[lab][0])
    got, most, pauses, merge, consumer = release(data, 6, bound)
    assert got == free
    assert pauses > 0 and most_free[lab] > 10 * bound  # it would have piled up
    assert most[lab] <= bound // 2 + MOST * size(data[lab][0])
    assert merge.stalls == 0 and merge.caught_up() and not consumer.paused


def test_a_new_merge_resumes_what_an_earlier_one_paused():
    """A rebalance builds a new merge over the same consumer: partitions the old one had
    paused are fetched again (the client keeps a pause across merges)."""
    ev, lab = TP("ev", 0), TP("lab", 0)
    data = {
        ev: [Record("ev", 0, i, 100 + i, b"k", b"e") for i in range(50)],
        lab: [Record("lab", 0, i, i, b"k", b"l") for i in range(50)],
    }
    consumer = LiveConsumer(data, {tp: [0] * 50 for tp in data}, random.Random(4), lie=False)
    consumer.pause(ev)  # as a merge left it
    merge = OrderedMerge(consumer, [ev, lab], RANKS, max_wait=60.0, buffer_bytes=1 << 20)
    assert not consumer.paused
    got = []
    deadline = time.monotonic() + 30
    while not merge.caught_up():
        assert time.monotonic() < deadline
        item = merge.next(0.05)
        if item is not None:
            got.append(item[1].timestamp)
    assert got == sorted(got) and len(got) == 100 and merge.stalls == 0
