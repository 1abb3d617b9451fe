"""What ``--merge-wait`` counts with the buffers bounded (issue 37): a client that hands over
records of other partitions first (kafka-python drains one fetch response after another,
2,000 records a poll; with tansu, a backlog's events came once its labels were paused) is
not a partition that fails to deliver. A backlog whose labels topic is days ahead once
stalled there under load and dead-lettered its labels as having no event; a partition
that delivers nothing still stalls after ``max_wait``."""

from __future__ import annotations

import time

import pytest

from streamcal.stream.kafka.ordering import OrderedMerge, size
from tests._fakes import TP, Record, release_all

EV, LAB = TP("ev", 0), TP("lab", 0)
RANKS = {"ev": 0, "lab": 1}


class QueuedConsumer:
    """Fetch responses of ``fetch`` records a partition, labels first, handed over
    ``max_records`` at a time in that order, each poll that returns records taking
    ``cost`` seconds (parsing on a loaded machine), an empty poll between two fetches (the
    round trip). A paused partition's response is parked and no new fetch is sent for it,
    as kafka-python does; ``dead`` partitions never answer; with ``starve`` the events
    are fetched only while the labels cannot be (as a backlog on tansu showed)."""

    def __init__(self, data: dict, fetch: int, cost: float, dead=(), starve: bool = False):
        self.data, self.fetch, self.cost, self.dead = data, fetch, cost, set(dead)
        self.starve = starve
        self.pos = dict.fromkeys(data, 0)
        self.queue: list = []  # [tp, next offset, end] of responses not handed over
        self.paused: set = set()
        self.hw = dict.fromkeys(data)

    def pause(self, *tps) -> None:
        self.paused.update(tps)

    def resume(self, *tps) -> None:
        self.paused.difference_update(tps)

    def _fetchable(self, tp) -> bool:
        queued = any(q[0] == tp for q in self.queue)
        left = self.pos[tp] < len(self.data[tp])
        return tp not in self.dead and tp not in self.paused and not queued and left

    def _send_fetches(self) -> bool:
        """A fetch once nothing fetched can be handed over; True if one was sent."""
        if any(q[0] not in self.paused for q in self.queue):
            return False
        sent = False
        for tp in (LAB, EV):
            if not self._fetchable(tp) or (self.starve and tp == EV and self._fetchable(LAB)):
                continue
            start = self.pos[tp]
            self.queue.append([tp, start, min(start + self.fetch, len(self.data[tp]))])
            self.hw[tp] = len(self.data[tp])
            sent = True
        return sent

    def poll(self, timeout_ms=0, max_records=2000):
        if self._send_fetches():
            time.sleep(timeout_ms / 1000)
            return {}
        for q in self.queue:
            tp, start, end = q
            if tp in self.paused:
                continue  # parked
            stop = min(start + max_records, end)
            q[1] = self.pos[tp] = stop
            if stop == end:
                self.queue.remove(q)
            time.sleep(self.cost)
            return {tp: self.data[tp][start:stop]}
        time.sleep(timeout_ms / 1000)
        return {}

    def highwater(self, tp):
        return self.hw[tp]

    def position(self, tp):
        return self.pos[tp]

    def end_offsets(self, tps, timeout_ms=None):
        return {tp: len(self.data[tp]) for tp in tps if tp not in self.dead}


def backlog() -> dict:
    """Events at 0..299, labels 1000 later in record time (a labels topic days ahead)."""
    return {
        EV: [Record("ev", 0, i, i, b"k", b"e" * 100) for i in range(300)],
        LAB: [Record("lab", 0, i, 1000 + i, b"k", b"l" * 20) for i in range(300)],
    }


@pytest.mark.parametrize("starve", [False, True])
def test_handing_over_other_partitions_is_not_a_stall_with_the_bound(starve):
    data = backlog()
    consumer = QueuedConsumer(data, fetch=145, cost=0.06, starve=starve)
    bound = 2 * 40 * size(data[LAB][0])  # the labels are paused after 4 polls of 10
    merge = OrderedMerge(consumer, list(data), RANKS, max_wait=0.15, poll_records=10,
                         buffer_bytes=bound)  # fmt: skip
    out = [(rec.topic, rec.offset) for _, rec in release_all(merge)]
    # Four polls of labels (0.24 s) come before the events' response: more than the
    # wait, but the labels were being handed over, so nothing goes out of order.
    assert merge.stalls == 0 and merge.late_arrivals == 0
    assert out == [("ev", i) for i in range(300)] + [("lab", i) for i in range(300)]


def test_a_partition_that_delivers_nothing_still_stalls_with_the_bound():
    data = backlog()
    consumer = QueuedConsumer(data, fetch=150, cost=0.0, dead={EV})
    bound = 2 * 40 * size(data[LAB][0])
    merge = OrderedMerge(consumer, list(data), RANKS, max_wait=0.2, poll_records=10,
                         buffer_bytes=bound)  # fmt: skip
    consumer.hw[EV] = 300  # known to have unread records: it is waited for
    started = time.monotonic()
    item = None
    while item is None and time.monotonic() - started < 10:
        item = merge.next(0.05)
    assert item is not None and item[1].topic == "lab" and merge.stalls == 1
    # the labels were paused at their share after 4 polls, then 0.2 s without records
    assert time.monotonic() - started < 5


def test_the_callers_time_between_polls_is_not_waited():
    """A processor that writes a checkpoint between two calls (seconds, under load) has
    not waited for the partition meanwhile: only the merge's own asking and polling
    counts."""
    data = backlog()
    consumer = QueuedConsumer(data, fetch=150, cost=0.0, dead={EV})
    merge = OrderedMerge(consumer, list(data), RANKS, max_wait=0.2, poll_records=1000,
                         buffer_bytes=10**9)  # fmt: skip
    consumer.hw[EV] = 300  # known to have unread records: it is waited for
    item, calls = None, 0
    while item is None:
        calls += 1
        if calls == 6:
            consumer.dead.clear()  # its fetch answered at last
        item = merge.next(0.001)  # a poll or two a call, none of them full
        if item is None:
            time.sleep(0.1)  # the caller's work: 0.5 s before the events come
    assert calls >= 6 and merge.stalls == 0
    assert item[1].topic == "ev" and item[1].offset == 0
