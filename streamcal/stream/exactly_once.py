"""Exactly-once processing (``--processing-guarantee exactly-once``): the protocol.

A unit's state is committed twice at a checkpoint: to Kafka (its outputs and its input
offsets) and to its local store (``streamcal.stream.state.units``: its waiting entries
and its snapshot, with the same offsets, in one atomic batch). A crash can fall between
the two. The protocol orders them and decides at start which one a unit resumes from:

1. **One transaction per checkpoint interval.** The first output after a checkpoint
   begins it (``TransactionalOutbox``); it holds every prediction, dead letter, metric
   record and state-topic record of the interval.
2. **A checkpoint** (every ``--checkpoint-interval``, at a stop, before units are given
   up in a rebalance): the changed units' state-topic records go into the transaction,
   then their next input offsets (``send_offsets_to_transaction``, naming the consumer
   group), then ``commit_transaction``; **only then** is each changed unit's store
   committed, its snapshot carrying the same offsets. So per partition, the offset in a
   local store is never ahead of the one committed to the group: ``L <= C``.
3. **Start** (and after an aborted transaction, in process): the producer's
   ``init_transactions`` fences every earlier producer with the same transactional id and
   ends what it left open (aborted, or committed if its commit had begun). Then the
   group's committed offsets ``C`` are read (a ``read_committed`` consumer asks for stable
   ones: while a transaction holding offsets for them is pending, the broker makes it
   wait) and compared with each unit's local offsets ``L``:

   - ``L == C``: a crash before the Kafka commit (the transaction was aborted, its
     outputs never seen), or a clean stop: resume.
   - ``L < C``: a crash between the Kafka commit and the local one (or a unit whose
     local state is older: a new machine, a state taken from the state topic's older
     snapshot). Input is read from ``L`` as always, in the merge's order, and each record
     below ``C`` is processed with its outputs dropped (``mute``): they were committed.
     From ``C`` on, outputs go out.
   - ``L > C``, or nothing committed: possible only outside the protocol (an earlier
     at-least-once run whose offset commit failed, offsets reset or expired by the
     broker's retention); the outputs below ``L`` were delivered before ``L`` was stored,
     so the unit resumes from ``L``, with a warning.
4. **A failed transaction** (a send failed, the broker went away, the commit failed,
   even one whose outcome is unknown): it is aborted (an abort that fails replaces the
   producer, whose ``init_transactions`` ends the transaction either way), nothing is
   committed locally, the units go back to their stores' last commit and step 3 decides,
   in process. A producer fenced by a successor (``Fenced``) stops the processor.

Why records are muted one by one, by offset, and not as "the first N records": a record's
outputs were committed exactly when its offset is below its partition's committed offset,
whatever order the merge releases records in after the restart. So an event's prediction
and the dead letter of a bad record, which its own record makes, are exactly once in any
case. A dead letter of a label that waited too long or was pushed out by a waiting bound,
and a metric record, are made by a later record; they are exactly once when the replay
releases the records in the order of the run that committed them, which the merge does
for all input that was in the topics when read (``streamcal.stream.kafka.ordering``:
backlogs, and live input within the grace; not after a stall or a late arrival, which the
metric lines count). Why a transaction during a replay commits, for a partition still
below ``C``, ``C`` and not its position: committed offsets never go back, so a crash
during the replay mutes the same records again.

Fencing. ``--scope global``: the transactional id is the group's (``clients.
transactional_id``), so a restarted or second instance fences the first at once; the
global lock (``GroupLock``) is not needed for it (brokers that never expire a member
killed with kill -9, like noida-db, need ``--no-global-lock``). ``--scope partition``: one
id per instance (``--instance-id`` if given: a restarted instance then fences its
predecessor at once; else host:pid, whose open transaction the broker aborts after
``clients.transaction_timeout_ms``), and each offset commit carries the member and its
generation, so a member that lost its units in a rebalance cannot commit them (KIP-447).

Readers of the outputs must read with ``isolation.level=read_committed``; they see an
interval's outputs when it commits: up to one checkpoint interval later than at least once.
"""

from __future__ import annotations

import logging

from streamcal.stream.kafka.port import TopicPartition

__all__ = ["ExactlyOnce"]

log = logging.getLogger(__name__)


class ExactlyOnce:
    """The processor's side of the protocol: which input was committed (``resume``), the
    outputs to drop while it is read again (``mute``), and the commit of a checkpoint's
    transaction (``commit``: ``streamcal.stream.checkpointing`` orders it with the rest
    of a checkpoint). ``inputs``: the processor's ``Inputs``; ``out``: its
    transactional outbox."""

    def __init__(self, inputs, out):
        self.inputs = inputs
        self.out = out
        # (topic, partition) -> offset committed to the group that its unit is below: the
        # records up to it are read again with their outputs dropped.
        self.ahead: dict = {}
        self.muted_records = 0  # records processed with their outputs dropped

    def resume(self, offsets_of: dict) -> None:
        """Compare the local offsets of the partitions in ``offsets_of`` (TopicPartition
        -> the unit's next offset, None if it read nothing of it) with the group's."""
        committed = self.inputs.committed(list(offsets_of))
        behind, ahead = [], []
        for tp, local in offsets_of.items():
            key = (tp.topic, tp.partition)
            self.ahead.pop(key, None)
            c = committed.get(key)
            if c is not None and (local is None or local < c):
                self.ahead[key] = c
                behind.append((tp.topic, tp.partition, local or 0, c))
            elif local is not None and (c is None or local > c):
                ahead.append((tp.topic, tp.partition, local, c))
        _warn(behind, "replay_committed", lambda t, p, lo, c: f"{t}[{p}] {lo}..{c - 1}",
              "the local state is behind what Kafka committed (a crash between the two "
              "commits, or an older local state): reading again without output")  # fmt: skip
        _warn(ahead, "local_ahead", lambda t, p, lo, c: f"{t}[{p}] {lo} > {c}",
              "the local state is ahead of the offsets committed to the group (an earlier "
              "at-least-once run, or offsets reset or expired): resuming from it")  # fmt: skip

    def resume_units(self, units, offset_of) -> None:
        """``resume`` for the input partitions of ``units`` (with ``--scope global``: every
        partition the inputs read), each at ``offset_of(topic, partition)``: where its
        unit goes on from."""
        cfg = self.inputs.config
        if cfg.scope == "global":
            tps = self.inputs.partitions()
        else:
            tps = [TopicPartition(t, u) for u in units for t in (cfg.events_topic,
                                                                 cfg.labels_topic)]  # fmt: skip
        self.resume({tp: offset_of(tp.topic, tp.partition) for tp in tps})

    @property
    def replaying(self) -> bool:
        """Whether records must go through ``mute`` (some are below the committed offsets,
        or the last one was)."""
        return bool(self.ahead) or self.out.muted

    def mute(self, rec) -> None:
        """Before ``rec`` is handled: drop its outputs if they were committed."""
        key = (rec.topic, rec.partition)
        c = self.ahead.get(key)
        muted = c is not None and rec.offset < c
        self.out.muted = muted
        if muted:
            self.muted_records += 1
        if c is not None and rec.offset + 1 >= c:
            del self.ahead[key]

    def offsets(self, units) -> dict:
        """``{(topic, partition): next offset}`` to commit for ``units``: their offsets, or
        for a partition read again below its committed offset, that one."""
        ahead = self.ahead
        return {k: max(o, ahead.get(k, o)) for unit in units for k, o in unit.offsets.items()}

    def commit(self, units) -> None:
        """Commit the open transaction with the offsets of ``units`` (raises
        ``TransactionAborted`` or ``Fenced`` from the outbox)."""
        self.out.muted = False
        self.out.commit(self.offsets(units), self.inputs.group())


def _warn(partitions: list, event: str, each, text: str) -> None:
    """Log ``text`` and ``partitions`` (``(topic, partition, local, committed)``, each as
    ``each`` writes it), if there are any; ``event`` keys the record (JSON logs)."""
    if partitions:
        log.warning("%s %s", text, ", ".join(each(*row) for row in partitions),
                    extra={"event": event, "partitions": partitions})  # fmt: skip
