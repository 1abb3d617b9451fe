"""Consumer-group membership: which units of calibration this instance runs.

``--scope partition``: the instances of one job form a Kafka consumer group over the
events and labels topics (``subscribe``), and the group coordinator spreads the
partitions over them. The range assignor gives every member the same partition numbers
of both topics when they have the same partition count, so each member holds whole
units (partition p of the events with partition p of the labels). ``GroupMembership``
turns the client's rebalance callbacks into a call of the processor's ``release`` (the
units revoked: stop, flush, checkpoint, let go, before the callback returns) and a list
of new units that the processor's loop adopts (restore and seek; outside the callback,
which blocks the heartbeats), and counts generations so that records polled across a
rebalance are dropped and read again from the units' offsets.

``--scope global``: one instance runs the one unit over every partition (``assign``).
``GlobalLock`` keeps a second one from calibrating too: it joins the group over the
events topic, and an instance whose first assignment is not the whole topic is refused.
"""

from __future__ import annotations

import logging
import time

from streamcal.errors import ConfigurationError
from streamcal.stream.kafka import clients
from streamcal.stream.kafka.clients import partition_count
from streamcal.stream.kafka.port import NoPosition

__all__ = ["GroupError", "GroupMembership", "GlobalLock", "check_copartitioned"]

log = logging.getLogger(__name__)


class GroupError(ConfigurationError, RuntimeError):
    """The group or the topics do not allow this instance to run: one-line message."""


def check_copartitioned(consumer, events: str, labels: str) -> int:
    """The common partition count of the two topics; ``GroupError`` if they differ."""
    ne, nl = partition_count(consumer, events), partition_count(consumer, labels)
    if ne != nl:
        raise GroupError(
            f"--scope partition needs co-partitioned topics, but {events!r} has {ne} "
            f"partitions and {labels!r} has {nl}; give them the same count"
        )
    return ne


class GroupMembership:
    """The rebalance listener of a ``--scope partition`` consumer.

    kafka-python calls it from inside ``poll``; errors raised there would only be logged,
    so they are kept in ``error`` and raised by the processor's loop.
    """

    def __init__(self, consumer, events: str, labels: str, release):
        self.consumer = consumer
        self.events, self.labels = events, labels
        self._release = release
        self.generation = 0  # bumped at every change of assignment
        self.error: Exception | None = None
        self.units: set[int] = set()  # assigned (adopted by the processor, or to be)
        self._new: set[int] = set()  # assigned, not yet adopted
        # False from a revocation to the next assignment: nothing may be read meanwhile
        # (kafka-python still reports the revoked partitions as assigned).
        self.settled = False

    def _revoked(self, revoked) -> None:
        self.generation += 1
        self.settled = False
        gone = sorted({tp.partition for tp in revoked} & self.units)
        self._new -= set(gone)
        try:
            if gone:
                self._release(gone)
        except Exception as exc:  # noqa: BLE001 - raised by the loop
            log.exception("releasing units %s failed", gone)
            self.error = exc
        self.units -= set(gone)

    def _assigned(self, assigned) -> None:
        self.generation += 1
        self.settled = True
        ev = {tp.partition for tp in assigned if tp.topic == self.events}
        lab = {tp.partition for tp in assigned if tp.topic == self.labels}
        try:
            n = check_copartitioned(self.consumer, self.events, self.labels)
            if ev != lab:
                raise GroupError(
                    f"the group assigned events partitions {sorted(ev)} but labels partitions "
                    f"{sorted(lab)} to this instance (not co-partitioned: {n} each?); refusing"
                )
            new = ev - self.units
            self._new |= new
            self.units |= new
        except Exception as exc:  # noqa: BLE001 - raised by the loop
            self.error = exc

    def detach(self) -> None:
        """Stop releasing revoked units (the processor has written its final checkpoint)."""
        self._release = lambda units: None

    def take_new(self) -> list[int]:
        """The units assigned since the last call, for the processor to adopt."""
        new, self._new = sorted(self._new), set()
        return new

    def partitions(self) -> list:
        """The TopicPartitions of the assigned units (both topics), once settled."""
        if not self.settled:
            return []
        units = sorted(self.units)
        part = self.consumer.partition
        return [part(t, p) for t in (self.events, self.labels) for p in units]

    def subscribe(self) -> None:
        self.consumer.subscribe([self.events, self.labels], self._revoked, self._assigned)


def polled(consumer, timeout_ms: int, max_records: int) -> dict:
    """``consumer.poll``, in which a new assignment may arrive: its partitions have no
    position until the processor seeks them to their units' offsets (the input consumer
    resets no offset on its own, ``streamcal.stream.kafka.clients``), so kafka-python's
    complaint about them is no error here."""
    try:
        return consumer.poll(timeout_ms=timeout_ms, max_records=max_records)
    except NoPosition:
        return {}


class MergeView:
    """What ``OrderedMerge`` sees of a subscribed consumer, for one generation of the
    assignment: once the assignment changes, its polls return nothing and every
    partition reads as caught up, so the merge stops taking records; the processor then
    builds a new merge over the new assignment, from the units' offsets."""

    def __init__(self, consumer, membership: GroupMembership):
        self._consumer = consumer
        self._membership = membership
        self.generation = membership.generation

    @property
    def current(self) -> bool:
        return self._membership.generation == self.generation

    def poll(self, timeout_ms: int, max_records: int):
        if not self.current:
            return {}
        got = polled(self._consumer, timeout_ms, max_records)
        return got if self.current else {}

    def highwater(self, tp):
        return self._consumer.highwater(tp) if self.current else 0

    def position(self, tp):
        return self._consumer.position(tp) if self.current else 0

    def end_offsets(self, tps, timeout_ms: int) -> dict:
        if not self.current:
            return dict.fromkeys(tps, 0)
        ends = self._consumer.end_offsets(tps, timeout_ms=timeout_ms)
        return ends if self.current else dict.fromkeys(tps, 0)

    def beginning_offsets(self, tps, timeout_ms: int) -> dict:
        if not self.current:
            return dict.fromkeys(tps, 0)
        starts = self._consumer.beginning_offsets(tps, timeout_ms=timeout_ms)
        return starts if self.current else dict.fromkeys(tps, 0)

    def seek(self, tp, offset: int) -> None:
        if self.current:
            self._consumer.seek(tp, offset)

    def pause(self, *tps) -> None:
        if self.current:
            self._consumer.pause(*tps)

    def resume(self, *tps) -> None:
        if self.current:
            self._consumer.resume(*tps)


class GlobalLock:
    """Membership of a ``--scope global`` instance in its consumer group.

    It subscribes a consumer of its own to the events topic with the group id; the first
    instance is assigned every partition. An instance whose first assignment is not the
    whole topic shares the group with another member (a running global instance, or one
    starting at the same moment: then both are refused, never both calibrating), and is
    refused with ``GroupError``. The holder stays a member (``keep`` polls it) and commits
    the processor's offsets as a member of the group.
    """

    def __init__(self, settings: dict, group_id: str, topic: str, session_timeout_ms: int):
        self.topic, self.group_id = topic, group_id
        self.consumer = clients.consumer(
            settings, group_id, session_timeout_ms, auto_offset_reset="latest", max_poll_records=1
        )
        self._kept_at = 0.0

    def acquire(self, timeout: float = 120.0) -> None:
        consumer = self.consumer
        n = partition_count(consumer, self.topic)
        # The lock only holds the partitions: it never fetches their records (nor fails
        # on one it cannot read: the processor's own consumer reports those).
        consumer.subscribe([self.topic], lambda revoked: None, lambda got: consumer.pause(*got))
        deadline = time.monotonic() + timeout
        while not consumer.assignment():
            if time.monotonic() > deadline:
                raise GroupError(f"could not join consumer group {self.group_id!r} in time")
            consumer.poll(timeout_ms=200, max_records=1)
        held = {tp.partition for tp in consumer.assignment()}
        if len(held) != n:
            self.close()
            raise GroupError(
                f"another instance is already in consumer group {self.group_id!r} (this one "
                f"was given {len(held)} of the {n} partitions of {self.topic!r}); refusing "
                "to run a second --scope global calibrator (use --scope partition to scale out)"
            )

    def keep(self) -> None:
        """Poll now and then: a member that stops polling is dropped from the group."""
        now = time.monotonic()
        if now - self._kept_at >= 1.0:
            self._kept_at = now
            self.consumer.poll(timeout_ms=0, max_records=1)

    def commit(self, offsets) -> None:
        self.consumer.commit(offsets)

    def close(self) -> None:
        try:
            self.consumer.close()
        except Exception:  # noqa: BLE001
            pass
