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
    when nothing could be released within ``timeout`` seconds.
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
        self.max_future = max_future
        self.max_bytes = max_bytes
        self.skip_unreadable = skip_unreadable

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
        return {tp: [RejectedRecord(tp.topic, tp.partition, nxt - 1, ts, None, Rejected(reason))]}

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
            buf = self._bufs[tp]
            was_empty = not buf
            buf.extend(self._gate(recs) if recs[0].__class__ is not RejectedRecord else recs)
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
