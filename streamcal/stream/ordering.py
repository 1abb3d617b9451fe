"""A deterministic order over the records of many partitions: a k-way merge.

Why: the model's state when an event is scored depends on which labels were joined
before it. Kafka delivers partitions in whatever order fetches complete, so a
restarted processor would interleave events and labels differently from the first run
and re-emit different predictions. Merging by the key (record timestamp, topic rank,
partition, offset) makes the order a function of the topics' contents alone.

The next record is released only when every partition either has a buffered head or is
caught up (its position has reached the highwater mark of its last fetch). A partition
that has unread data but has not delivered it within ``max_wait`` seconds is skipped so
that a slow partition cannot stall the stream; that, and records appended to a
caught-up partition with a timestamp older than records already released, are the
limits of determinism: the order is reproducible whenever the input is already in the
topics when it is read (replays, restarts after a crash, backlogs), and in live
operation it is the arrival order refined by timestamps.

Partitions are never paused: kafka-python 3.0.12 can deadlock when a partition is paused
while its fetched records are being drained (``_next_partition_records`` stays parked on
the paused partition and no fetch is sent for any other). Buffers are therefore bounded
by what the broker returns while a lagging partition is awaited, in practice a few
fetches per partition.
"""

from __future__ import annotations

import heapq
import time
from collections import deque

__all__ = ["OrderedMerge"]


class OrderedMerge:
    """Release the records of ``partitions`` (kafka-python TopicPartitions) in merge order.

    ``ranks[topic]`` breaks ties between topics with equal timestamps (events before
    labels). Call ``next(timeout)`` repeatedly: it returns ``(rank, record)`` or None
    when nothing could be released within ``timeout`` seconds.
    """

    def __init__(
        self, consumer, partitions, ranks: dict, max_wait: float = 5.0, poll_records: int = 2000
    ):
        self.consumer = consumer
        self.partitions = list(partitions)
        self._rank = {tp: ranks[tp.topic] for tp in self.partitions}
        self._bufs = {tp: deque() for tp in self.partitions}
        self._heap: list = []
        # Partitions with an empty buffer that may still have unread data.
        self._waiting = set(self.partitions)
        self.max_wait = max_wait
        self.poll_records = poll_records
        self._wait_started: float | None = None
        self.stalls = 0  # times a lagging partition was skipped (determinism not guaranteed)

    def _caught_up(self, tp) -> bool:
        hw = self.consumer.highwater(tp)
        return hw is not None and self.consumer.position(tp) >= hw

    def _push_head(self, tp) -> None:
        rec = self._bufs[tp][0]
        heapq.heappush(self._heap, (rec.timestamp, self._rank[tp], tp.partition, rec.offset, tp))

    def _poll(self, timeout: float) -> int:
        got = self.consumer.poll(timeout_ms=int(timeout * 1000), max_records=self.poll_records)
        n = 0
        for tp, recs in got.items():
            if not recs:
                continue
            buf = self._bufs[tp]
            was_empty = not buf
            buf.extend(recs)
            n += len(recs)
            if was_empty:
                self._push_head(tp)
                self._waiting.discard(tp)
        for tp in list(self._waiting):
            if self._caught_up(tp):
                self._waiting.discard(tp)
        return n

    def next(self, timeout: float):
        deadline = time.monotonic() + timeout
        while True:
            if self._waiting and self._heap:
                now = time.monotonic()
                if self._wait_started is None:
                    self._wait_started = now
                elif now - self._wait_started > self.max_wait:
                    self._waiting.clear()
                    self.stalls += 1
            if not self._waiting and self._heap:
                return self._release()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            # Short polls while a lagging partition holds the others back; longer when idle.
            self._poll(min(remaining, 0.05 if self._heap else 0.2))

    def ready(self):
        """The next ``(rank, record)`` if it can be released without polling, else None
        (same order as ``next``: a cheap way to drain what is buffered)."""
        if self._waiting or not self._heap:
            return None
        return self._release()

    def _release(self):
        self._wait_started = None
        *_, tp = heapq.heappop(self._heap)
        buf = self._bufs[tp]
        rec = buf.popleft()
        if buf:
            self._push_head(tp)
        else:
            self._waiting.add(tp)
            if self._caught_up(tp):
                self._waiting.discard(tp)
        return self._rank[tp], rec

    def caught_up(self) -> bool:
        """True when nothing is buffered and every partition has reached its highwater mark
        (checked afresh: a partition skipped after ``max_wait`` is not caught up)."""
        return not self._heap and all(self._caught_up(tp) for tp in self.partitions)

    def buffered(self) -> int:
        return sum(len(b) for b in self._bufs.values())
