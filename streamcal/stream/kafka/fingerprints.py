"""Record fingerprints: what the processor read is what the broker's log still holds.

Why: a position is an offset in a log, and a log can be replaced under it. A broker
restarted without its data and written to again past the processor's position, with the
processor stopped, paused (SIGSTOP) or restarted meanwhile, shows no loss to a fetch: the
position is inside the new log, so the ordered merge (``ordering``: lost input) reads on
from it, and what the new log holds below it is skipped silently.

What is kept: each unit of calibration keeps the last record it handled of each input
partition (``unit.last_read``; a dict entry per record, nothing computed), and its
checkpoint keeps that record's mark (``Mark``): offset, record timestamp and a CRC-32 of
key and value (``rows`` / ``marks``: an optional key of the unit's state; a state without
it has no mark, and its first check has nothing to check).

The check (``LogCheck``) reads the record at a mark's offset from the broker
(``port.RecordsAt.records_at``, a reader of its own) and compares:

* at start and after each rebalance, the marks of the units just adopted (from their
  checkpoints);
* before every checkpoint, and once per checkpoint interval when none is written, the
  marks of the previous check (the *anchor*): a record read since may come from a new
  log, and then matches it; the anchor was read before, from the log the processor
  checked. A record deleted by retention (the log starts after its offset but not after
  the position) is no loss.

A mismatch (no record at that offset although the log holds offsets around it, or
another record) is lost input, with the ``--on-lost-input`` policy of the merge: by
default ``LostInput`` (exit status 4, one line naming topic, partition and position);
with ``continue`` a dead letter with the offsets (``lost.lost_record``), counted in
``lost_input``, and the partition read again from the log's start (what the new log
holds was never read). A log that ends at or before a mark, or starts after the
position, is left to the merge, which tells that loss itself (so it is counted once).

The cost is one fetch round per check for all partitions (a record batch each, the
reader's fetches capped at 1 KiB a partition): measured in docs/processor.md.

>>> from streamcal.stream.kafka.port import Record
>>> r = Record("events", 0, 41, 1_700_000_000_000, b"id-7", b'{"x": 1}')
>>> m = mark_of(r)
>>> (m.offset, m.timestamp), same(m, r), same(m, r._replace(value=b'{"x": 2}'))
((41, 1700000000000), True, False)
>>> marks(rows({("events", 0): r})) == {("events", 0): m}
True
"""

from __future__ import annotations

import logging
import struct
import time
import zlib
from typing import NamedTuple

from streamcal.stream.kafka.gate import RejectedRecord
from streamcal.stream.kafka.lost import LostInput, lost_record
from streamcal.stream.kafka.lost import held_text as _held
from streamcal.stream.kafka.port import KafkaError, TopicPartition

__all__ = ["LogCheck", "Mark", "crc", "mark_of", "marks", "rows", "same"]

log = logging.getLogger(__name__)

_LENGTHS = struct.Struct(">ii")


class Mark(NamedTuple):
    """What identifies a record read: its offset, timestamp (ms) and ``crc``."""

    offset: int
    timestamp: int
    crc: int


def crc(key: bytes | None, value: bytes | None) -> int:
    """CRC-32 of a record's key and value, their lengths first (-1: None), so that moving
    bytes from one to the other, or None for empty, changes it.

    >>> crc(b"ab", b"c") != crc(b"a", b"bc"), crc(None, b"") != crc(b"", b"")
    (True, True)
    """
    head = _LENGTHS.pack(-1 if key is None else len(key), -1 if value is None else len(value))
    return zlib.crc32(value or b"", zlib.crc32(key or b"", zlib.crc32(head)))


def mark_of(rec) -> Mark | None:
    """The mark of a record (a ``Mark`` is its own), None for a ``RejectedRecord`` (it
    stands for no record of the log: lost input, an unreadable batch, a gate's refusal)."""
    if rec.__class__ is Mark or rec is None:
        return rec
    if rec.__class__ is RejectedRecord:
        return None
    return Mark(rec.offset, rec.timestamp, crc(rec.key, rec.value))


def same(mark: Mark, rec) -> bool:
    """Whether ``rec`` (a record of the log, or None) is the record ``mark`` was made of."""
    return rec is not None and mark_of(rec) == mark


def rows(last_read: dict) -> list:
    """``{(topic, partition): record or Mark}`` as plain data for a checkpoint:
    ``[(topic, partition, offset, timestamp, crc)]``, rejected records left out."""
    out = []
    for (t, p), rec in last_read.items():
        m = mark_of(rec)
        if m is not None:
            out.append((t, p, *m))
    return out


def marks(state_rows) -> dict:
    """The marks of ``rows``, ``{(topic, partition): Mark}``."""
    return {(t, p): Mark(o, ts, c) for t, p, o, ts, c in state_rows}


class LogCheck:
    """Check the marks of the units held by ``states`` (``UnitStates``) against the log
    through ``inputs`` (``Inputs``: the consumer, the settings, the merge), counting what
    was lost in ``lost`` (unit -> count). See the module docstring."""

    def __init__(self, inputs, states, lost: dict, timeout_ms: int = 2000):
        self.inputs, self.states, self.lost = inputs, states, lost
        self.policy = inputs.config.on_lost_input
        self.interval = inputs.config.checkpoint_interval
        self.timeout_ms = timeout_ms
        self._anchor: dict = {}  # (topic, partition) -> (unit, Mark) checked last
        self._due = 0.0  # monotonic time of the next check
        self.checks = 0  # checks made (each one fetch round)

    def due(self, now: float) -> bool:
        return now >= self._due

    def check_due(self, now: float) -> None:
        """``check`` if an interval has passed since the last."""
        if now >= self._due:
            self.check()

    def check(self) -> None:
        """Check the anchor's marks (those of units adopted since: their own); raise
        ``LostInput``, or with ``continue`` dead-letter each loss and read its partition
        again from the log's start. A broker that does not answer in time: checked again
        one interval later."""
        todo, now = {}, {}
        for unit in list(self.states.held.values()):  # a rebalance callback may change it
            for key, rec in unit.last_read.items():
                mark = mark_of(rec)
                if mark is None:
                    continue
                now[key] = (unit, mark)
                held = self._anchor.get(key)
                todo[key] = (unit, held[1] if held is not None and held[0] is unit else mark)
        self._due = time.monotonic() + self.interval
        if not todo:
            self._anchor = now
            return
        offsets = {TopicPartition(*key): m.offset for key, (_, m) in todo.items()}
        try:
            got = self.inputs.consumer.records_at(offsets, self.timeout_ms)
        except KafkaError as exc:  # a broker away: the anchor stays, checked again later
            log.debug("records at %s: %r", offsets, exc)
            return
        self.checks += 1
        losses = []
        for key, (unit, mark) in todo.items():
            rec = got.get(TopicPartition(*key))
            if not same(mark, rec):
                lost = self._lost(TopicPartition(*key), unit, mark, rec)
                if lost is not None:
                    losses.append((unit, lost))
                    now.pop(key, None)
        self._anchor = now
        if losses:
            self._go_on(losses)

    def _lost(self, tp, unit, mark: Mark, rec) -> RejectedRecord | None:
        """Raise ``LostInput`` (or return what stands for the loss) if ``tp`` no longer
        holds ``mark``'s record (``rec``: what is at its offset); None if that is no loss
        (retention) or one the merge tells."""
        consumer = self.inputs.consumer
        position = unit.offsets.get(tp, mark.offset + 1)
        try:
            start = consumer.beginning_offsets([tp], timeout_ms=self.timeout_ms)[tp]
            end = consumer.end_offsets([tp], timeout_ms=self.timeout_ms)[tp]
        except KafkaError as exc:
            log.debug("start and end offsets of %s: %r", tp, exc)
            return None
        if rec is None and not start <= mark.offset < end:
            return None  # retention, or a log that ends below the position: the merge's
        if rec is not None:  # tansu 0.6 answers ListOffsets with its last batch's base + 1
            end = max(end, mark.offset + 1)
        there = "no record is there" if rec is None else "that offset holds another record"
        what = (
            f"{_held(start, end)}, but not the record read at offset {mark.offset} (record "
            f"timestamp {mark.timestamp}): {there} (a broker that lost its data and was "
            "written to again, or a topic deleted and recreated: the records that were read "
            "are gone from the log, any written after them were lost unread, and what it "
            f"holds below offset {position} was never read)"
        )
        if self.policy == "stop":
            raise LostInput(tp.topic, tp.partition, position, start, end, start, what)
        return lost_record(tp, position, start, end, start, 0, what)

    def _go_on(self, losses: list) -> None:
        """``continue``: each unit dead-letters its loss and moves its offset to the log's
        start; the merge is built again from the units' offsets."""
        ranks = self.inputs.ranks
        for unit, rec in losses:
            unit.handle(ranks[rec.topic], rec)
            self.states.changed.add(unit.unit)
            self.lost[unit.unit] = self.lost.get(unit.unit, 0) + 1
        self.inputs.remerge(self.states.offset)
