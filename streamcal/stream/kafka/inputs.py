"""The processor's inputs: its consumer, its place in the group, and the ordered merge of
the partitions it reads.

``--scope global``: the consumer is assigned every partition of both topics, and
``GlobalLock`` (unless turned off) keeps a second instance from calibrating too.
``--scope partition``: the consumer subscribes to both topics in the job's group and
``GroupMembership`` says which units (partition numbers) it runs; after every change of
assignment the merge is built anew over the assigned partitions, from the units'
offsets, and records polled across a rebalance are dropped (they are read again).
"""

from __future__ import annotations

from streamcal.stream.kafka import clients
from streamcal.stream.kafka.group import (
    GlobalLock,
    GroupMembership,
    MergeView,
    check_copartitioned,
    polled,
)

__all__ = ["Inputs", "STALE"]

STALE = object()  # what ``next`` returns for records polled across a rebalance


class Inputs:
    """Read the input topics of ``config`` in merge order; ``ranks`` maps a topic to its
    rank in that order. ``release(units)`` is called, from within a poll, with the units
    revoked from this instance (``--scope partition``). ``late``, ``lost`` and ``skipped``
    (unit -> count) count the records that arrived after a later record of their unit was
    released, the positions the broker's log no longer held and the offsets passed over
    unread (see ``streamcal.stream.kafka.ordering``); they outlive the merges."""

    def __init__(self, config, ranks: dict, release=None, late: dict | None = None,
                 lost: dict | None = None, skipped: dict | None = None):  # fmt: skip
        self.config = config
        self.late = {} if late is None else late
        self.lost = {} if lost is None else lost
        self.skipped = {} if skipped is None else skipped
        self.consumer = None  # given to open()
        self.ranks = ranks
        self.merge = None  # the OrderedMerge of the current assignment
        self.lock: GlobalLock | None = None
        self.membership: GroupMembership | None = None
        self._release = release
        self._generation = -1
        self.stable: dict | None = None  # read_committed: last stable offsets of fetches

    def lock_group(self) -> None:
        """``--scope global`` with ``global_lock``: be the only instance in the group (an
        own consumer of the events topic; ``GroupError`` if another one is in it)."""
        cfg = self.config
        self.lock = GlobalLock(
            clients.settings(cfg),
            group_id=cfg.group_id,
            topic=cfg.events_topic,
            session_timeout_ms=cfg.session_timeout_ms,
        )
        self.lock.acquire()

    def open(self, consumer, offset_of) -> None:
        """Start reading with ``consumer``: with ``--scope global`` every partition, each
        from ``offset_of(topic, partition)`` (None: nothing of it read yet); else join the
        group (units come later)."""
        cfg = self.config
        self.consumer = consumer
        if cfg.exactly_once:
            self.stable = consumer.last_stable_offsets()
        topics = (cfg.events_topic, cfg.labels_topic)
        if cfg.scope == "global":
            tps = clients.input_partitions(self.consumer, topics)
            self.consumer.assign(tps)
            self.remerge(offset_of, tps)
        else:
            check_copartitioned(self.consumer, *topics)
            self.membership = GroupMembership(self.consumer, *topics, self._release)
            self.membership.subscribe()

    def reassigned(self) -> list[int] | None:
        """With ``--scope partition``: None while the assignment is the one the merge
        reads; after a change, the units newly assigned (maybe none), to adopt before
        ``remerge``. Raises what went wrong in the rebalance callbacks."""
        membership = self.membership
        if membership is None:
            return None
        if membership.error is not None:
            raise membership.error
        if membership.generation == self._generation:
            return None
        self._generation = membership.generation
        return membership.take_new()

    def remerge(self, offset_of, tps=None) -> None:
        """A new merge over ``tps`` (default: the assigned partitions; with ``--scope
        global``, the current merge's), each read from ``offset_of(topic, partition)``, or
        from its start when that is None (nothing of it read yet)."""
        from streamcal.stream.kafka.ordering import OrderedMerge

        cfg = self.config
        if tps is None:
            tps = self.partitions() if self.membership is None else self.membership.partitions()
        if not tps:
            self.merge = None
            return
        view = self.consumer
        if self.membership is not None:
            view = MergeView(self.consumer, self.membership)
        fresh = []
        for tp in tps:
            offset = offset_of(tp.topic, tp.partition)
            if offset is None:
                offset = 0
                fresh.append(tp)
            self.consumer.seek(tp, offset)
        self.merge = OrderedMerge(
            view,
            tps,
            self.ranks,
            max_wait=cfg.merge_wait,
            poll_records=cfg.poll_max_records,
            max_future=cfg.max_future_s,
            max_bytes=cfg.max_message_bytes,
            skip_unreadable=cfg.skip_unreadable,
            unit_of=None if self.membership is None else _partition_number,
            late=self.late,
            grace=cfg.grace_ms / 1000,
            on_lost_input=cfg.on_lost_input,
            lost=self.lost,
            skipped=self.skipped,
            fresh=fresh,
            stable=self.stable,
            buffer_bytes=cfg.merge_buffer,
        )

    def next(self, timeout: float):
        """The next ``(rank, record)`` in merge order, None if there was none within
        ``timeout`` seconds, or ``STALE`` if the assignment changed meanwhile."""
        if self.merge is None:
            polled(self.consumer, int(1000 * timeout), 1)  # join, heartbeat
            return None
        item = self.merge.next(timeout)
        membership = self.membership
        if membership is not None and membership.generation != self._generation:
            return STALE  # polled across a rebalance: read again from the offsets
        return item

    def caught_up(self) -> bool:
        return self.merge is not None and self.merge.caught_up()

    def done(self, idle: float, max_idle_s: float | None) -> bool:
        """Whether a run that stops after ``max_idle_s`` seconds without a record (None:
        never) stops after ``idle`` seconds: idle means caught up; before that (start-up,
        a backlog still being fetched) it waits longer, but not forever (a broker that
        went away)."""
        if max_idle_s is None or idle < max_idle_s:
            return False
        return self.caught_up() or idle >= max(60.0, 10 * max_idle_s)

    def keep(self) -> None:
        """Stay in the group (the lock polls now and then)."""
        if self.lock is not None:
            self.lock.keep()

    def commit(self, offsets: dict) -> None:
        """Commit ``{(topic, partition): next offset}`` as a member of the group."""
        clients.commit(self.lock or self.consumer, offsets)

    def group(self) -> dict:
        """What a transaction's offset commit names as the group (``ConsumerGroupMetadata``
        fields): with ``--scope partition`` the member and its generation, which fence a
        member that lost its units (KIP-447); with ``--scope global`` the group alone (the
        transactional id fences a second instance)."""
        return self.consumer.group_metadata()

    def committed(self, tps, timeout: float = 120.0) -> dict:
        """``{(topic, partition): offset}`` committed to the group for ``tps`` (those with
        none left out). A ``read_committed`` consumer asks for stable offsets: while a
        transaction holding offsets for them is open, the broker has it ask again until
        that transaction ends (committed or aborted)."""
        out = {}
        for tp in tps:
            offset = self.consumer.committed(tp, timeout_ms=int(timeout * 1000))
            if offset is not None:
                out[(tp.topic, tp.partition)] = offset
        return out

    def partitions(self) -> list:
        """The TopicPartitions the current merge reads."""
        return [] if self.merge is None else list(self.merge.partitions)

    def close(self) -> None:
        """Stop releasing units (the final checkpoint is written), leave the group."""
        if self.membership is not None:
            self.membership.detach()
        try:
            if self.consumer is not None:
                self.consumer.close()
        except Exception:  # noqa: BLE001
            pass
        if self.lock is not None:
            self.lock.close()
            self.lock = None


def _partition_number(tp) -> int:
    """The unit of a partition under ``--scope partition``: its number."""
    return tp.partition
