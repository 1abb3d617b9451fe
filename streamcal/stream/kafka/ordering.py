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
counts it. The seconds counted are those spent in ``next`` asking and polling (not the
caller's between two calls), and with the buffers bounded only those in which every
partition with records buffered is paused or read to its last fetch's end: until then
the client may be serving those first, which their shares bound (``_busy``).

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

The grace (``grace`` seconds, ``--grace-ms``) makes late arrivals rare. Live, one producer
writing in record-time order still makes records readable out of order across partitions
(each partition's batch is sent and appended on its own), so a partition that is caught
up may be about to show a record that goes before the least head. With a grace, the least
head also waits until every partition of its unit has a record buffered (one after it, or
one that goes first), for at most ``grace`` seconds after the poll that brought it. So a
record that becomes readable less than ``grace`` (less a poll) after a record of its unit
with a later key is not late, however sparse its partition. The cost: while a partition
of the unit shows nothing, each record waits the whole grace (a partition that never gets
records delays every record by it). Kafka Streams' ``max.task.idle.ms`` waits the same
way, but from the moment a partition first holds a record back, and not again until that
partition shows one: cheaper for a silent partition, no help for the first record of a
sparse one. The grace only ever delays a release that the condition above allows, so what
is reproducible stays so. It differs from ``max_wait``: that bounds the wait for a
partition that has unread records (waiting is what correctness needs: those records
exist), the grace bounds the wait for a partition that has none (they may never come:
waiting costs latency).

Lost input and unreadable batches: ``streamcal.stream.kafka.lost``; the gate that
replaces records that would harm the state: ``streamcal.stream.kafka.gate``.

Transactional input (``read_committed``, with exactly-once). A ``read_committed`` consumer
never sees records of aborted transactions, and its position stops at the partition's
last stable offset (the first offset of the oldest open transaction) while an upstream
transaction is open, below the highwater. So, given ``stable`` (the last stable offsets
of the consumer's fetch responses, ``clients.last_stable_offsets``), the end a fetch
showed is that offset, not the highwater (``_fetched_end``): a partition held at it by an
open transaction looks caught up, is confirmed by the broker's answer to ListOffsets
(which for a ``read_committed`` consumer is the last stable offset too) and holds the
others back no longer than any caught-up partition, instead of waiting ``max_wait`` and
counting a stall. Its records become readable when the transaction commits, after what
was released meanwhile: live, like any record that reaches the broker late.

The buffer's bound (``buffer_bytes``, ``--merge-buffer``). Records are released in
record time, so a partition far ahead of the others in record time (a labels topic that
starts days after its events topic, read from the start: a replay, a new deployment)
would pile up in its buffer while the others are read up to it. So each partition may
hold ``buffer_bytes / len(partitions)`` of buffered records (key and value, plus
``RECORD_OVERHEAD`` for the record object around them: for small records the object is
most of it); past that it is paused (the client fetches no more of it) and it is resumed
once the merge has released it down to half that, or emptied it. Counted in bytes, not
records, because bytes are the memory to bound and record sizes differ a thousandfold
(a 50-byte label, a 1 MiB event). Pausing changes no release: a paused partition always
has a buffered head (it is paused only with records buffered and resumed at the latest
when its buffer empties), so it never holds the least head back, never needs a
confirmation, never stalls, and the records are released in the order they would be
unbounded (tests/stream/test_merge_bound.py). A new merge (after a rebalance) resumes
its partitions first: a pause outlives the merge in the client. What the clients keep of
a paused partition: kafka-python parks at most the one fetch response it had (no new
fetch is sent), librdkafka drops its prefetched records of it and fetches again from the
position on resume.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections import deque

from streamcal.stream.config import LOST_INPUT_POLICIES
from streamcal.stream.kafka.gate import RejectedRecord, gate
from streamcal.stream.kafka.lost import LostInput, UnreadableBatch, describe, lost_record
from streamcal.stream.kafka.lost import loss as _loss
from streamcal.stream.kafka.port import KafkaError, LogTruncated, OffsetOutOfRange, Unreadable
from streamcal.stream.messages import Rejected

__all__ = [
    "RECORD_OVERHEAD",
    "LostInput",
    "OrderedMerge",
    "RejectedRecord",
    "UnreadableBatch",
    "lost_record",
    "size",
]

log = logging.getLogger(__name__)

# What a buffered record takes beyond its key and value: the client's record object, its
# ints and bytes headers, the deque's slot (measured with tracemalloc: 350 bytes for
# kafka-python's ConsumerRecord, 245 for the librdkafka adapter's Record).
RECORD_OVERHEAD = 320


def size(rec) -> int:
    """The bytes ``rec`` is counted for in the merge's buffer (see the module docstring).

    >>> from streamcal.stream.kafka.port import Record
    >>> size(Record("labels", 0, 7, 1_700_000_000_000, b"e7", b'{"label": 1}'))
    334
    """
    k, v = rec.key, rec.value
    n = RECORD_OVERHEAD if k is None else RECORD_OVERHEAD + len(k)
    return n + len(v) if v.__class__ is bytes else n


class OrderedMerge:
    """Release the records of ``partitions`` (``port.TopicPartition``s) in merge order.

    ``ranks[topic]`` breaks ties between topics with equal timestamps (events before
    labels). Call ``next(timeout)`` repeatedly: it returns ``(rank, record)`` or None
    when nothing could be released within ``timeout`` seconds. ``unit_of(tp)`` names the
    unit of calibration a partition belongs to (default: one unit); ``late``, ``lost`` and
    ``skipped`` are dicts that count per unit late arrivals, lost input and offsets passed
    over unread (see the module docstring), kept by the caller across merges. ``grace``
    (seconds) and ``on_lost_input`` (``LOST_INPUT_POLICIES``): see the module docstring.
    ``fresh``: the partitions read from offset 0 because nothing of them was read before
    (a log that starts later is then no loss). ``stable``: with a ``read_committed``
    consumer, the last stable offsets of its fetches (see the module docstring).
    ``buffer_bytes``: the bound of the buffers, all partitions together (None: unbounded;
    the consumer then needs no ``pause`` and ``resume``).
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
        grace: float = 0.0,
        on_lost_input: str = "stop",
        lost: dict | None = None,
        skipped: dict | None = None,
        fresh=(),
        stable: dict | None = None,
        buffer_bytes: int | None = None,
    ):
        self.consumer = consumer
        self._stable = stable
        self.partitions = list(partitions)
        self._rank = {tp: ranks[tp.topic] for tp in self.partitions}
        self._bufs = {tp: deque() for tp in self.partitions}
        # The polls that brought a partition's buffered records: [count, poll, its
        # monotonic time] runs.
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
        # Seconds the least head has waited for a lagging partition (None: not waiting);
        # see ``next`` for what counts.
        self._waited: float | None = None
        self.stalls = 0  # times a lagging partition was skipped (determinism not guaranteed)
        self.max_future = max_future
        self.max_bytes = max_bytes
        self.skip_unreadable = skip_unreadable
        self._unit = {tp: unit_of(tp) if unit_of else None for tp in self.partitions}
        self._last: dict = {}  # unit -> heap entry of the last record released
        self.late = {} if late is None else late
        self.grace = grace
        if on_lost_input not in LOST_INPUT_POLICIES:
            raise ValueError(f"on_lost_input must be one of {LOST_INPUT_POLICIES}")
        self.on_lost_input = on_lost_input
        self.lost = {} if lost is None else lost
        self.skipped = {} if skipped is None else skipped
        self._fresh = set(fresh)
        self._looked: dict = {}  # partition -> when its log's ends may be asked again
        self._held = dict.fromkeys(self.partitions, 0)  # bytes buffered (``size``)
        self._paused: set = set()
        self._bound = self._low = 0
        if buffer_bytes is not None and self.partitions:
            self._bound = max(1, buffer_bytes // len(self.partitions))
            self._low = self._bound // 2
            consumer.resume(*self.partitions)  # paused by an earlier merge

    @property
    def late_arrivals(self) -> int:
        """Late arrivals counted so far, all units together."""
        return sum(self.late.values())

    def _unread(self, tp, end: int) -> int:
        """How many offsets below ``end`` (an end offset: a highwater, an answer to
        ListOffsets) ``tp`` has not read yet; negative when its position is past ``end``.
        The one place that compares a position with an end offset."""
        return end - self.consumer.position(tp)

    def _fetched_end(self, tp) -> int | None:
        """The end offset the last fetch response of ``tp`` showed (None: none parsed yet):
        its highwater, or with ``read_committed`` its last stable offset."""
        if self._stable is None:
            return self.consumer.highwater(tp)
        return self._stable.get(tp)

    def _caught_up(self, tp) -> bool:
        end = self._fetched_end(tp)
        return end is not None and self._unread(tp, end) <= 0

    def _push_head(self, tp) -> None:
        rec = self._bufs[tp][0]
        # A rejected record goes as soon as it is a head: it must not hold the others back.
        ts = rec.timestamp if rec.__class__ is not RejectedRecord else -1
        heapq.heappush(self._heap, (ts, self._rank[tp], tp.partition, rec.offset, tp))

    def _fetch(self, timeout: float) -> dict:
        try:
            return self.consumer.poll(timeout_ms=int(timeout * 1000), max_records=self.poll_records)
        except OffsetOutOfRange as error:
            out: dict = {}
            for tp, position in error.positions.items():
                out.update(self._input_lost(tp, position))
            return out
        except LogTruncated as error:
            out = {}
            for tp, at in error.truncated_at.items():
                out.update(self._input_lost(tp, self.consumer.position(tp), at))
            return out
        except Unreadable as error:
            return self._unreadable(error)

    def _unreadable(self, error: Unreadable) -> dict:
        """Raise ``UnreadableBatch``, or with ``skip_unreadable`` seek past the batch and
        return the ``RejectedRecord`` that stands for it."""
        tp, first, nxt, exc = error.tp, error.first, error.next, error.cause
        err = UnreadableBatch(tp.topic, tp.partition, first, nxt - 1, exc, error.fix)
        if not self.skip_unreadable:
            raise err from exc
        reason = (
            f"unreadable record batch, offsets {first}..{nxt - 1} skipped "
            f"(--skip-unreadable): {describe(exc)}"
        )
        log.warning("topic %r partition %d: %s", tp.topic, tp.partition, reason)
        # Seeking also frees the consumer from the failed batch.
        self.consumer.seek(tp, nxt)
        self._count(self.skipped, tp, nxt - first)
        value = Rejected(reason, skipped=(first, nxt - 1))
        return {tp: [RejectedRecord(tp.topic, tp.partition, nxt - 1, error.timestamp, None, value)]}

    def _count(self, counts: dict, tp, n: int) -> None:
        unit = self._unit[tp]
        counts[unit] = counts.get(unit, 0) + n

    def _input_lost(self, tp, position: int, truncated_at=None, highwater=None) -> dict:
        """``tp``'s log may no longer hold ``position`` (see the module docstring): ask
        for its start and end (``highwater``: that of a fetch at ``position``, when that
        is what showed it). Returns {} if it does hold it after all (a stale or transient
        answer); else raises ``LostInput``, or with ``on_lost_input="continue"`` seeks to
        where reading goes on and returns the ``RejectedRecord`` that stands for the
        loss."""
        consumer = self.consumer
        if tp not in self._bufs:  # not read by this merge (a rebalance meanwhile)
            return {}
        try:
            start = consumer.beginning_offsets([tp], timeout_ms=5000)[tp]
            end = consumer.end_offsets([tp], timeout_ms=5000)[tp]
        except KafkaError as exc:  # asked again at the next look
            log.debug("start and end offsets of %s: %r", tp, exc)
            return {}
        if highwater is not None:
            # Some brokers (tansu 0.6) answer ListOffsets with less than the log's end:
            # the highwater of a fetch at the position is then the better figure. (Not
            # otherwise: after a broker said the position is out of range, the highwater
            # kept from earlier fetches may be that of a log that is gone.)
            end = max(end, highwater)
        if truncated_at is None and start <= position <= end:
            return {}
        if tp in self._fresh and position == 0 and position < start:
            # Nothing of it was read: a log that starts later is where reading begins.
            consumer.seek(tp, start)
            return {}
        resume, skipped, what = _loss(position, start, end, truncated_at)
        if self.on_lost_input == "stop":
            raise LostInput(tp.topic, tp.partition, position, start, end, resume, what)
        consumer.seek(tp, resume)
        self._known_end[tp] = 0  # the old log's: the new one may end below it
        self._count(self.lost, tp, 1)
        self._count(self.skipped, tp, skipped)
        return {tp: [lost_record(tp, position, start, end, resume, skipped, what)]}

    def _look_for_lost_input(self) -> dict:
        """Check the empty partitions for a highwater below the position (what a broker
        that answers a fetch past its log's end with no records shows); ask about each at
        most once a second."""
        consumer, out = self.consumer, {}
        now = time.monotonic()
        for p in self._empty:
            hw = consumer.highwater(p)
            if hw is None or self._unread(p, hw) >= 0 or self._looked.get(p, 0.0) > now:
                continue
            self._looked[p] = now + 1.0
            out.update(self._input_lost(p, consumer.position(p), highwater=hw))
        return out

    def _poll(self, timeout: float) -> int:
        got = self._fetch(timeout)
        if self._empty:
            lost = self._look_for_lost_input()
            if lost:
                got = {**got, **lost}
        n = 0
        now = time.monotonic()
        for tp, recs in got.items():
            if not recs:
                continue
            if not n:
                self._polls += 1
            if recs[0].__class__ is not RejectedRecord:
                recs = gate(recs, self.max_future, self.max_bytes)
            self._count_late(tp, recs)
            buf = self._bufs[tp]
            was_empty = not buf
            buf.extend(recs)
            self._runs[tp].append([len(recs), self._polls, now])
            held = self._held[tp] = self._held[tp] + sum(map(size, recs))
            if self._bound and held > self._bound and tp not in self._paused:
                self.consumer.pause(tp)
                self._paused.add(tp)
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
            self._count(self.late, tp, n)

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

    def _graced(self, now: float) -> float:
        """0.0 if the least head (let go by ``_free``) may go at ``now``; else the
        monotonic time until which it waits for the empty partitions of its unit (the
        grace, see the module docstring)."""
        if not self._empty or not self.grace:
            return 0.0
        ts, *_, tp = self._heap[0]
        if ts < 0:
            return 0.0
        unit = self._unit[tp]
        if unit is not None and all(self._unit[p] != unit for p in self._empty):
            return 0.0
        until = self._runs[tp][0][2] + self.grace
        return until if until > now else 0.0

    def _confirm(self, timeout: float) -> bool:
        """Ask the broker for end offsets, unless an empty partition that holds the least
        head back is known to have unread records (then polling is what helps). The one
        question covers every partition that looks caught up and is not confirmed at the
        last poll, so that partitions emptied by the next releases need none. True if it
        asked."""
        need = self._runs[self._heap[0][-1]][0][1]
        consumer, known = self.consumer, self._known_end

        def behind(p) -> bool:  # or not known yet: no fetch response parsed
            end = self._fetched_end(p)
            return end is None or self._unread(p, max(end, known[p])) > 0

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
            if self._unread(p, end) <= 0:
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
            began = time.monotonic()
            step = 0.2  # the longest poll: when idle
            if self._heap:
                free = self._free()
                if not free:
                    remaining = max(deadline - began, 0.05)
                    free = self._confirm(min(remaining, 1.0)) and self._free()
                now = time.monotonic()
                if free:
                    self._waited = None
                    held = self._graced(now)
                    if not held:
                        return self._release()
                    step = held - now  # poll until an empty partition shows a record
                elif self._waited is None:
                    self._waited = 0.0
                elif self._waited > self.max_wait:
                    self._stall()
                    continue
                # Short polls while a lagging partition holds the others back.
                step = min(step, 0.05)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self._poll(min(remaining, step))
            if self._waited is not None and not (self._bound and self._busy()):
                # The wait counts the time spent here asking and polling, not the caller's
                # between two calls (a checkpoint), and with the bound not while another
                # partition may still deliver: see ``_busy``.
                self._waited += time.monotonic() - began

    def _busy(self) -> bool:
        """Whether a partition with records buffered is neither paused nor read up to the
        end its last fetch showed. The client may be serving it first: kafka-python drains
        one fetch response after another, and tansu answers 5-6 MB a partition (in a
        backlog the events came only once the labels were paused). Its share bounds how
        long, and the lagging partition is fetched alone once the others are paused. A
        backlog whose labels were days ahead stalled there under load, its events not
        fetched for 20 s, and dead-lettered its labels as having no event."""
        empty, paused, caught_up = self._empty, self._paused, self._caught_up
        return any(p not in empty and p not in paused and not caught_up(p)
                   for p in self.partitions)  # fmt: skip

    def ready(self):
        """The next ``(rank, record)`` if it can be released without asking the broker or
        waiting, else None (same order as ``next``: a cheap way to drain what is
        buffered)."""
        if not self._heap or not self._free() or self._graced(time.monotonic()):
            return None
        return self._release()

    def drain(self, limit: int) -> list:
        """Up to ``limit`` ``(rank, record)`` that ``ready`` would give one after another
        (what is releasable now, in merge order)."""
        out: list = []
        now = time.monotonic()
        while len(out) < limit and self._heap and self._free() and not self._graced(now):
            out.append(self._release())
        return out

    def _release(self):
        self._waited = None
        entry = heapq.heappop(self._heap)
        tp = entry[-1]
        buf = self._bufs[tp]
        rec = buf.popleft()
        held = self._held[tp] = self._held[tp] - size(rec)
        if tp in self._paused and (held <= self._low or not buf):
            self.consumer.resume(tp)
            self._paused.discard(tp)
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

    def buffered_bytes(self) -> int:
        """What the buffers hold, in ``size``'s bytes."""
        return sum(self._held.values())

    def paused(self) -> set:
        """The partitions paused now because their buffer reached the bound."""
        return set(self._paused)
