"""Input that the broker no longer holds or the client cannot read: the errors that say
where, why and what to do (``streamcal.stream.kafka.ordering`` raises them).

Lost input. The broker's log may no longer hold the position of a partition: a broker
restarted without its data (its log starts again at 0), an unclean leader election (the
new leader's log is shorter), a topic deleted and recreated, retention deleting records
before they were read. Kafka answers a fetch at such a position with
``OFFSET_OUT_OF_RANGE`` (the input consumer has ``auto_offset_reset="none"``, so the
client raises it instead of silently moving to the earliest offset), a truncation found by
the leader-epoch check raises ``LogTruncated``, and some brokers (tansu) answer with no
records and a high watermark below the position, which is checked for every empty
partition after each poll. The log's start and end are then asked
(``OrderedMerge._input_lost``); by default ``LostInput`` is raised (topic, partition,
position, what the log holds, what to do); with ``on_lost_input="continue"`` the merge
goes on from what the log holds (its start, or the point of a truncation) and a
``RejectedRecord`` takes the place of what was lost, so the processor dead-letters it (its
reason has the offsets) and the unit's offset moves to where reading goes on. Each such
event is counted in ``lost`` and the offsets passed over unread (deleted before they were
read) in ``skipped`` (per unit: ``lost_input`` and ``skipped_offsets`` in the metric
line). Whether a position has reached an end offset is decided in one place,
``OrderedMerge._unread``.

A record batch that cannot be read (a codec that is not installed, a corrupt batch) raises
``UnreadableBatch`` naming the topic, partition, offsets and what to do; with
``skip_unreadable`` the batch is skipped instead and a ``RejectedRecord`` with the offset
range and the cause takes its place, so the processor dead-letters it and moves its offset
past the batch exactly when the records before it in that partition have been handled
(its offsets count in ``skipped``).

"""

from __future__ import annotations

import logging

from streamcal.errors import InputError, InputLostError
from streamcal.stream.kafka.gate import RejectedRecord
from streamcal.stream.messages import Rejected

__all__ = ["LostInput", "UnreadableBatch", "describe", "held_text", "lost_record", "loss"]

log = logging.getLogger("streamcal.stream.kafka.ordering")  # the merge's logger, as before


class UnreadableBatch(InputError, RuntimeError):
    """A record batch the consumer cannot read; the message says where, why and what to do."""

    def __init__(self, topic: str, partition: int, first: int, last: int, cause: BaseException,
                 fix: str):  # fmt: skip
        self.topic, self.partition, self.first, self.last = topic, partition, first, last
        self.cause = cause
        super().__init__(
            f"cannot read the record batch at topic {topic!r} partition {partition} offset "
            f"{first} (batch offsets {first}..{last}): {describe(cause)}. {fix}; "
            "or run with --skip-unreadable to dead-letter this batch and go on (its records "
            "are lost to the model). No checkpoint is written after this: a restart resumes "
            "from the last one."
        )


class LostInput(InputLostError, RuntimeError):
    """The broker's log no longer holds the position of a partition; the message says
    where (topic, partition, position, what the log holds), the likely causes and what
    to do, on one line."""

    def __init__(self, topic: str, partition: int, position: int, start: int, end: int,
                 resume: int, what: str):  # fmt: skip
        self.topic, self.partition, self.position = topic, partition, position
        self.start, self.end, self.resume = start, end, resume
        super().__init__(
            f"input lost: topic {topic!r} partition {partition} no longer holds offset "
            f"{position}, where the processor is: {what}. To go on from offset {resume} "
            "(counted in lost_input, the offsets in a dead letter), run with "
            "--on-lost-input continue; to start over, run with an empty --state-dir. No "
            "checkpoint is written after this: a restart resumes from the last one."
        )


def held_text(start: int, end: int) -> str:
    """What a log holds, in words.

    >>> held_text(0, 312), held_text(40, 40)
    ('the log holds offsets 0..311', 'the log holds no record (its next offset is 40)')
    """
    if end > start:
        return f"the log holds offsets {start}..{end - 1}"
    return f"the log holds no record (its next offset is {end})"


def loss(position: int, start: int, end: int, truncated_at: int | None):
    """(where reading goes on, offsets passed over unread, what happened in words) for a
    partition at ``position`` whose log holds ``start``..``end - 1``.

    >>> loss(120, 500, 900, None)[:2], loss(5000, 0, 312, None)[:2], loss(80, 0, 90, 60)[:2]
    ((500, 380), (0, 0), (60, 0))
    """
    held = held_text(start, end)
    if truncated_at is not None:
        what = (
            f"{held} and was truncated at offset {truncated_at} (an unclean leader election: "
            f"the records from offset {truncated_at} that were read are gone, and any written "
            "after them were lost unread)"
        )
        return truncated_at, 0, what
    if position < start:
        what = (
            f"{held}: offsets {position}..{start - 1} were deleted before they were read "
            "(retention, or a topic deleted and recreated)"
        )
        return start, start - position, what
    what = (
        f"{held}, below it (a broker that lost its data, an unclean leader election, or a "
        "topic deleted and recreated: the records that were read up to it are gone from the "
        "log, and any written after them were lost unread)"
    )
    return start, 0, what


def lost_record(tp, position: int, start: int, end: int, resume: int, skipped: int,
                what: str) -> RejectedRecord:  # fmt: skip
    """What takes the place of lost input with ``--on-lost-input continue`` (its warning
    logged): a dead letter whose reason has the offsets, which moves the partition's
    offset to ``resume``."""
    reason = (
        f"input lost: offset {position} of topic {tp.topic!r} partition {tp.partition}, "
        f"where the processor was, is no longer in the broker's log: {what}; reading "
        f"goes on from offset {resume} (--on-lost-input continue)"
    )
    log.warning(reason, extra={
        "event": "lost_input", "topic": tp.topic, "partition": tp.partition,
        "position": position, "log_start": start, "log_end": end, "resume": resume,
        "skipped": skipped})  # fmt: skip
    value = Rejected(reason, skipped=(position, resume - 1) if skipped else None)
    return RejectedRecord(tp.topic, tp.partition, resume - 1, -1, None, value)


def describe(exc: BaseException) -> str:
    text = str(exc)  # kafka-python's errors start with their class name already
    name = type(exc).__name__
    return text if text.startswith(name) else f"{name}: {text}"
