"""A deterministic order over the records of many partitions: a k-way merge.

Why: the model's state when an event is scored depends on which labels were joined
before it. Kafka delivers partitions in whatever order fetches complete, so a
restarted processor would interleave events and labels differently from the first run
and re-emit different predictions. Merging by the key (record timestamp, topic rank,
partition, offset) makes the order a function of the topics' contents alone.

The release condition. Number the polls that return records 1, 2, ...; every record
carries the number of the poll that brought it. Partition p is *confirmed at n* when,
after poll n returned, the broker was asked for p's end offset (ListOffsets: the high
watermark, ``end_offsets``) and the answer E was reached, position(p) >= E: every record
of p not polled yet has an offset >= E. The least buffered head r (by the key above),
brought by poll n, is released when every partition of the merge either has a buffered
head or is confirmed at n or later. Why that is enough: r was in the topic (below its
high watermark) before poll n returned, so before the question was asked; every record
of p not yet read has an offset >= E, so it became readable after the answer, after r.
The highwater that the consumer keeps from its last fetch is never taken as proof (a
fetch answered before a pause, or a fetch response not parsed yet, shows a stale one);
it only tells that p has unread records (position < highwater, or no highwater yet:
poll, do not ask). Asking only once the position has reached a fetch's highwater (the
log end then, a record-batch boundary) also keeps the answer sound with brokers that
answer ListOffsets with the base offset of the last batch + 1 (tansu 0.6): every record
not read then lies in a batch that starts at or after the position, so the answer is
above it. The broker is asked only when the least head is held back by empty partitions
that all look caught up, at most once per poll that brought records (one question covers
every partition that looks caught up and every record polled before it). Partitions that
stay empty are not waited for once confirmed (Kafka Streams' default
``max.task.idle.ms=0``). A partition that is not confirmed within ``max_wait`` seconds
(``--merge-wait``: it has unread records it does not deliver, or the broker does not
answer) is skipped: what is buffered is released as if it were confirmed, and ``stalls``
counts it.

So the order is a function of the topics' contents for all input that is in the topics
(below the high watermark) when the records before it are read: replays, restarts after
a crash, backlogs, and after a pause, a stall, a broker restart or a rebalance, as long as
no stall happens. What remains is live operation: a record that becomes readable after
a record of another partition later in the order has been released (a label reaching the
broker after an event with a later timestamp) cannot take its place in the order. It is
counted when it arrives, in ``late`` (per unit, ``late_arrivals`` in the metric line): a
record whose key is below that of the last record released of its unit from another
partition. With each partition's timestamps in order, the predictions equal a replay's
exactly when no stall and no late arrival happened.

The merge is also the gate of the input, the one place that sees every record before it is
ordered. A record that would harm the state whatever its value is replaced by a
``RejectedRecord`` (its value a ``messages.Rejected`` carrying the reason, so decoding it
raises ``BadInput`` and the processor dead-letters it like any bad message): a record
timestamp more than ``max_future`` seconds ahead of the wall clock (it would move the
record-time clock and expire every pending event), a negative record timestamp (-1 means
none: such a record has no place in record time), a key and value together larger than
``max_bytes``, or a key larger than ``deadletter.KEEP_BYTES`` (keys are used only in dead
letters). A rejected record is released as soon as it is at the head of its partition, so
it never holds up the records around it, whose order is that of a stream without it.

A record batch that cannot be read (a codec that is not installed, a corrupt batch) raises
``UnreadableBatch`` naming the topic, partition, offsets and what to do; with
``skip_unreadable`` the batch is skipped instead and a ``RejectedRecord`` with the offset
range and the cause takes its place, so the processor dead-letters it and moves its offset
past the batch exactly when the records before it in that partition have been handled.

Partitions are never paused: kafka-python 3.0.12 can deadlock when a partition is paused
while its fetched records are being drained (``_next_partition_records`` stays parked on
the paused partition and no fetch is sent for any other). Buffers are therefore bounded
by what the broker returns while a lagging partition is awaited, in practice a few
fetches per partition.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections import deque
from typing import NamedTuple

from kafka.errors import KafkaError

from streamcal.stream.deadletter import KEEP_BYTES, dead_letter_key
from streamcal.stream.messages import Rejected

__all__ = ["OrderedMerge", "RejectedRecord", "UnreadableBatch"]

log = logging.getLogger(__name__)


class RejectedRecord(NamedTuple):
    """A record replaced by the gate (or an unreadable batch): what a dead letter needs.
    ``offset`` is the last offset it stands for, so that the next offset to read is
    ``offset + 1``."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: Rejected


class UnreadableBatch(RuntimeError):
    """A record batch the consumer cannot read; the message says where, why and what to do."""

    def __init__(self, topic: str, partition: int, first: int, last: int, cause: BaseException):
        self.topic, self.partition, self.first, self.last = topic, partition, first, last
        self.cause = cause
        super().__init__(
            f"cannot read the record batch at topic {topic!r} partition {partition} offset "
            f"{first} (batch offsets {first}..{last}): {_describe(cause)}. {_fix(cause)}; "
            "or run with --skip-unreadable to dead-letter this batch and go on (its records "
            "are lost to the model). No checkpoint is written after this: a restart resumes "
            "from the last one."
        )


def _describe(exc: BaseException) -> str:
    text = str(exc)  # kafka-python's errors start with their class name already
    name = type(exc).__name__
    return text if text.startswith(name) else f"{name}: {text}"


_CODEC_PACKAGES = {"snappy": "python-snappy", "lz4": "lz4", "zstd": "zstandard"}


def _fix(cause: BaseException) -> str:
    text = str(cause)
    for codec, package in _CODEC_PACKAGES.items():
        if f"for {codec} compression codec not found" in text:
            return (
                f"To fix: install the {codec} codec, `pip install {package}` (a dependency "
                "of streamcal-va: reinstalling streamcal-va brings it back)"
            )
    if "Unrecognized compression type" in text:
        return (
            "To fix: the producer used a codec kafka-python does not know; have it produce "
            "with none, gzip, snappy, lz4 or zstd"
        )
    if "crc" in text.lower():
        return (
            "To fix: the batch is corrupt (its checksum does not match); re-produce the "
            "records from the source"
        )
    return "To fix: re-produce the records with a standard Kafka client and codec"


def _locate(exc: BaseException):
    """(TopicPartition, base offset, next offset, first timestamp) of the record batch
    whose reading raised ``exc``, or None if ``exc`` did not come from reading a batch.

    kafka-python names neither the partition nor the offsets in these errors (and its
    consumer is left spinning on the failed partition until it is seeked elsewhere); the
    frame of the fetcher's batch loop, still on the traceback, holds both."""
    tb = exc.__traceback__
    found = None
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name == "_unpack_records":
            local = frame.f_locals
            batch, parts = local.get("batch"), local.get("self")
            tp = getattr(parts, "topic_partition", None)
            if batch is not None and tp is not None:
                base = batch.base_offset
                nxt = getattr(batch, "next_offset", base + 1)  # legacy: one wrapper offset
                ts = getattr(batch, "first_timestamp", getattr(batch, "timestamp", -1))
                found = (tp, base, nxt, ts if ts is not None else -1)
        tb = tb.tb_next
    return found


class OrderedMerge:
    """Release the records of ``partitions`` (kafka-python TopicPartitions) in merge order.

    ``ranks[topic]`` breaks ties between topics with equal timestamps (events before
    labels). Call ``next(timeout)`` repeatedly: it returns ``(rank, record)`` or None
    when nothing could be released within ``timeout`` seconds. ``unit_of(tp)`` names the
    unit of calibration a partition belongs to (default: one unit); ``late`` is a dict
    that counts late arrivals per unit (see the module docstring), kept by the caller
    across merges.
    """

    def __init__(
        self,
        consumer,
        partitions,
        ranks: dict,
        max_wait: float = 5.0,
        poll_records: int = 2000,
        max_future: float = 86400.0,
        max_bytes: int = 1_048_576,
        skip_unreadable: bool = False,
        unit_of=None,
        late: dict | None = None,
    ):
        self.consumer = consumer
        self.partitions = list(partitions)
        self._rank = {tp: ranks[tp.topic] for tp in self.partitions}
        self._bufs = {tp: deque() for tp in self.partitions}
        # The polls that brought a partition's buffered records: [count, poll] runs.
        self._runs = {tp: deque() for tp in self.partitions}
        self._heap: list = []
        self._polls = 0  # polls that returned records; the records carry its number
        # Partitions without a buffered head, and for each partition the latest poll n
        # such that it is known to have nothing unread below end offsets asked after poll n.
        self._empty = set(self.partitions)
        self._confirmed = dict.fromkeys(self.partitions, 0)
        self._floor: int | None = 0  # min of _confirmed over _empty (None: to recompute)
        self._known_end = dict.fromkeys(self.partitions, 0)  # largest end offset seen
        self.max_wait = max_wait
        self.poll_records = poll_records
        self._wait_started: float | None = None
        self.stalls = 0  # times a lagging partition was skipped (determinism not guaranteed)
        self.max_future = max_future
        self.max_bytes = max_bytes
        self.skip_unreadable = skip_unreadable
        self._unit = {tp: unit_of(tp) if unit_of else None for tp in self.partitions}
        self._last: dict = {}  # unit -> heap entry of the last record released
        self.late = {} if late is None else late

    @property
    def late_arrivals(self) -> int:
        """Late arrivals counted so far, all units together."""
        return sum(self.late.values())

    def _caught_up(self, tp) -> bool:
        hw = self.consumer.highwater(tp)
        return hw is not None and self.consumer.position(tp) >= hw

    def _push_head(self, tp) -> None:
        rec = self._bufs[tp][0]
        # A rejected record goes as soon as it is a head: it must not hold the others back.
        ts = rec.timestamp if rec.__class__ is not RejectedRecord else -1
        heapq.heappush(self._heap, (ts, self._rank[tp], tp.partition, rec.offset, tp))

    def _fetch(self, timeout: float) -> dict:
        try:
            return self.consumer.poll(timeout_ms=int(timeout * 1000), max_records=self.poll_records)
        except Exception as error:
            where = _locate(error)
            if where is None:
                raise
            exc = error
        tp, base, nxt, ts = where
        first = max(base, self.consumer.position(tp))
        err = UnreadableBatch(tp.topic, tp.partition, first, nxt - 1, exc)
        if not self.skip_unreadable:
            raise err from exc
        reason = (
            f"unreadable record batch, offsets {first}..{nxt - 1} skipped "
            f"(--skip-unreadable): {_describe(exc)}"
        )
        log.warning("topic %r partition %d: %s", tp.topic, tp.partition, reason)
        # Seeking also frees the consumer from the failed batch.
        self.consumer.seek(tp, nxt)
        value = Rejected(reason, skipped=(first, nxt - 1))
        return {tp: [RejectedRecord(tp.topic, tp.partition, nxt - 1, ts, None, value)]}

    def _gate(self, recs: list) -> list:
        """``recs`` with every record that must not reach the state replaced (see above)."""
        future_ms = (time.time() + self.max_future) * 1000.0
        max_bytes = self.max_bytes
        out = recs
        for i, r in enumerate(recs):
            k, v = r.key, r.value
            nk = 0 if k is None else len(k)
            ts = r.timestamp
            if ts < 0 or ts > future_ms or nk > KEEP_BYTES or nk + len(v or b"") > max_bytes:
                if out is recs:
                    out = list(recs)
                out[i] = _reject(r, future_ms, max_bytes)
        return out

    def _poll(self, timeout: float) -> int:
        got = self._fetch(timeout)
        n = 0
        for tp, recs in got.items():
            if not recs:
                continue
            if not n:
                self._polls += 1
            if recs[0].__class__ is not RejectedRecord:
                recs = self._gate(recs)
            self._count_late(tp, recs)
            buf = self._bufs[tp]
            was_empty = not buf
            buf.extend(recs)
            self._runs[tp].append([len(recs), self._polls])
            n += len(recs)
            if was_empty:
                self._push_head(tp)
                self._empty.discard(tp)
                self._floor = None
        return n

    def _count_late(self, tp, recs: list) -> None:
        """Count the records of ``recs`` that go before the last record released of their
        unit from another partition: they arrived too late for the merge order."""
        last = self._last.get(self._unit[tp])
        if last is None or last[-1] == tp:
            return
        rank, part = self._rank[tp], tp.partition
        lts = last[0]
        n = 0
        for r in recs:
            if r.timestamp <= lts and r.__class__ is not RejectedRecord:
                n += (r.timestamp, rank, part, r.offset) < last[:4]
        if n:
            unit = self._unit[tp]
            self.late[unit] = self.late.get(unit, 0) + n

    def _free(self) -> bool:
        """The release condition for the least head (``_heap`` not empty)."""
        if not self._empty:
            return True
        ts, *_, tp = self._heap[0]
        if ts < 0:  # rejected: it takes no part in the order
            return True
        floor = self._floor
        if floor is None:
            floor = self._floor = min(self._confirmed[p] for p in self._empty)
        return self._runs[tp][0][1] <= floor

    def _confirm(self, timeout: float) -> bool:
        """Ask the broker for end offsets, unless an empty partition that holds the least
        head back is known to have unread records (then polling is what helps). The one
        question covers every partition that looks caught up and is not confirmed at the
        last poll, so that partitions emptied by the next releases need none. True if it
        asked."""
        need = self._runs[self._heap[0][-1]][0][1]
        consumer, known = self.consumer, self._known_end

        def behind(p) -> bool:  # or not known yet: no fetch response parsed
            hw = consumer.highwater(p)
            return hw is None or consumer.position(p) < max(hw, known[p])

        if any(behind(p) for p in self._empty if self._confirmed[p] < need):
            return False
        polls = self._polls  # the answer is newer than every record polled so far
        asked = [p for p in self.partitions if self._confirmed[p] < polls and not behind(p)]
        try:
            ends = consumer.end_offsets(asked, timeout_ms=max(1, int(timeout * 1000)))
        except KafkaError as exc:  # a broker away: keep polling, max_wait bounds the wait
            log.debug("end offsets of %s: %r", asked, exc)
            return False
        for p in asked:
            end = ends.get(p)
            if end is None:
                continue
            known[p] = max(known[p], end)
            if consumer.position(p) >= end:
                self._confirmed[p] = polls
        self._floor = None
        return True

    def _stall(self) -> None:
        """Stop waiting: every empty partition counts as caught up for what is buffered."""
        for p in self._empty:
            self._confirmed[p] = max(self._confirmed[p], self._polls)
        self._floor = None
        self.stalls += 1

    def next(self, timeout: float):
        deadline = time.monotonic() + timeout
        while True:
            if self._heap:
                if self._free():
                    return self._release()
                remaining = max(deadline - time.monotonic(), 0.05)
                if self._confirm(min(remaining, 1.0)) and self._free():
                    return self._release()
                now = time.monotonic()
                if self._wait_started is None:
                    self._wait_started = now
                elif now - self._wait_started > self.max_wait:
                    self._stall()
                    continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            # Short polls while a lagging partition holds the others back; longer when idle.
            self._poll(min(remaining, 0.05 if self._heap else 0.2))

    def ready(self):
        """The next ``(rank, record)`` if it can be released without asking the broker,
        else None (same order as ``next``: a cheap way to drain what is buffered)."""
        if not self._heap or not self._free():
            return None
        return self._release()

    def _release(self):
        self._wait_started = None
        entry = heapq.heappop(self._heap)
        tp = entry[-1]
        buf = self._bufs[tp]
        rec = buf.popleft()
        runs = self._runs[tp]
        runs[0][0] -= 1
        if not runs[0][0]:
            runs.popleft()
        if buf:
            self._push_head(tp)
        else:
            self._empty.add(tp)
            self._floor = None
        if entry[0] >= 0:
            self._last[self._unit[tp]] = entry
        return self._rank[tp], rec

    def caught_up(self) -> bool:
        """True when nothing is buffered and every partition has reached its highwater mark
        (checked afresh: a partition skipped after ``max_wait`` is not caught up)."""
        return not self._heap and all(self._caught_up(tp) for tp in self.partitions)

    def buffered(self) -> int:
        return sum(len(b) for b in self._bufs.values())


def _reject(r, future_ms: float, max_bytes: int) -> RejectedRecord:
    nk, nv = len(r.key or b""), len(r.value or b"")
    if r.timestamp < 0:
        reason = (
            f"record timestamp {r.timestamp} (none): events and labels are ordered and "
            "joined in record time"
        )
    elif r.timestamp > future_ms:
        reason = (
            f"record timestamp {r.timestamp} ms is more than max_future_s ahead of the wall "
            "clock (it would advance the record-time clock and expire every pending event)"
        )
    elif nk > KEEP_BYTES:
        reason = f"key too large: {nk} bytes > {KEEP_BYTES}"
    else:
        reason = f"record too large: key and value {nk + nv} bytes > max_message_bytes={max_bytes}"
    key = dead_letter_key(r.key)
    value = Rejected(reason, r.value)
    return RejectedRecord(r.topic, r.partition, r.offset, r.timestamp, key, value)
