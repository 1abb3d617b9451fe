"""The checkpoint: the one object that the units' stores, the outbox and the inputs commit
through, and so the one place that says in which order (after quixstreams'
``checkpointing``). Not to be confused with ``streamcal.stream.state.checkpoint``, the
framing of the sealed state a store holds.

A checkpoint commits the units changed since the last one (``UnitStates.changed``):

1. the lost-input check (``LogCheck``): what is saved was read from the log there is;
2. at least once: the outputs are flushed, because a state must not cover records whose
   predictions could still be lost; each unit's store is committed with its sealed state,
   then its state-topic records are sent and flushed; last, the input offsets are
   committed to the group (a crash before it reads again from the stores' offsets);
3. exactly once (``streamcal.stream.exactly_once``): each unit's state-topic records go
   into the open transaction, which is committed with the input offsets and the consumer's
   group metadata; only then are the stores committed, so that a local state is never
   ahead of what Kafka committed. If the transaction fails (``TransactionAborted``,
   ``Fenced``) no store is committed; after ``TransactionAborted`` the units go back to
   their stores' last commit and reading resumes from there (``rewind``).

The processor commits through it every ``--checkpoint-interval`` (``on_time``), at a stop
(``commit_all``) and before units are given up in a rebalance (``release``); the state
tests commit through it with ``UnitStates.save_changed``.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

from streamcal.stream.kafka.sink import TransactionAborted

__all__ = ["Checkpoint"]

log = logging.getLogger(__name__)


@dataclass(eq=False, repr=False)
class Checkpoint:
    """Commit checkpoints of the units held in ``states`` (``UnitStates``).

    ``out``: the outbox (None: nothing to flush); ``transaction(units)``: with
    exactly-once, what commits the open transaction with the offsets of ``units``
    (``ExactlyOnce.commit``); ``inputs``: where offsets are committed at least once (None:
    nowhere); ``log_check``: the lost-input check (None: none). ``interval`` and ``adopt``
    (what restores units, ``Processor._adopt``) serve the processor's loop: ``on_time``.
    A processor that is not running holds one with ``states`` alone.
    """

    states: Any
    out: Any = None
    transaction: Any = None
    inputs: Any = None
    log_check: Any = None
    interval: float = math.inf
    adopt: Any = None
    # when the last checkpoint was committed
    last_at: float = field(default_factory=time.monotonic, init=False)

    def due(self, now: float) -> bool:
        """Whether a checkpoint is due: something to commit (a changed unit, or with
        exactly-once an open transaction) and the interval over, or a store full."""
        states = self.states
        pending = states.changed or (self.transaction is not None and self.out.open)
        return bool(pending) and (now - self.last_at >= self.interval or states.full())

    def on_time(self, now: float) -> None:
        """The loop's part: the lost-input check once per interval (also while nothing is
        read: a pause, a stop), and the checkpoint when due; after an aborted transaction,
        back to what was committed."""
        self.log_check.check_due(now)
        if self.due(now):
            try:
                self.commit()
            except TransactionAborted as exc:
                self.rewind(exc)

    def commit(self, final: bool = False) -> list:
        """Commit the units changed since their last checkpoint, in the order above (with
        ``final``, the last of this instance: their state-topic snapshots too); the units
        committed."""
        if self.log_check is not None:
            self.log_check.check()
        states = self.states
        units = states.to_save()
        self.save(units, {u.unit for u in units} if final else ())
        states.changed.clear()
        states.heap.maybe_trim(time.monotonic())  # what the commits freed
        if self.inputs is not None and self.transaction is None:
            self.inputs.commit({tp: o for unit in units for tp, o in unit.offsets.items()})
        self.last_at = time.monotonic()
        return units

    def commit_all(self) -> None:
        """The final checkpoint: every unit held, with its snapshot."""
        self.states.changed = set(self.states.held)
        self.commit(final=True)

    def commit_outputs(self) -> None:
        """After the final checkpoint, with exactly-once: commit what the transaction took
        since (the final metric records)."""
        if self.transaction is not None and self.out.open:
            self.out.commit({}, None)

    def release(self, ids: list[int]) -> None:
        """Commit the units ``ids`` with their snapshots and let them go (revoked from
        this instance). No lost-input check and no offset commit: this may run in the
        client's I/O thread, which cannot block (the next owner resumes from the
        checkpoints). With exactly-once every changed unit is committed with them: the
        open transaction holds the outputs of all."""
        states = self.states
        ids = [u for u in ids if u in states.held]  # assigned but never adopted: nothing
        if not ids:
            return
        if self.transaction is None:
            self.save([states.held[u] for u in ids], set(ids))
        else:
            self.save(states.to_save(also=ids), set(ids))
            states.changed.clear()
        states.drop(ids)
        log.info("released units %s", ids, extra={"event": "released", "units": ids})

    def save(self, units: list, snapshot=()) -> None:
        """Write the states of ``units`` and commit their stores, with the outputs and
        the state-topic records (``snapshot``: the ids whose snapshot is sent too) in the
        order above; the offsets are the caller's. Without a state directory or topic
        nothing outlives the process: the stores are still committed (what changed goes to
        disk, out of memory), without a flush."""
        states, out = self.states, self.out
        if self.transaction is None:
            if states.durable and out is not None:
                out.flush()
            for unit in units:
                state = states.next_state(unit)
                changes = states.commit_store(unit, state)
                states.to_topic(unit, state, changes, unit.unit in snapshot)
            if units and out is not None and states.topic is not None:
                out.flush()
            return
        staged = []
        for unit in units:
            state = states.next_state(unit)
            # Before the store's commit: the delta is what it will write, the roll's slice
            # is of the store as last committed (a delta's slice is applied before its
            # changes, so either rebuilds the store exactly).
            states.to_topic(unit, state, unit.store.changes(), unit.unit in snapshot)
            staged.append((unit, state))
        self.transaction(units)  # raises if it failed: then no store is committed
        states.commit_stores(staged)

    def rewind(self, reason: Exception) -> None:
        """Exactly-once, after an aborted transaction: the units go back to their stores'
        last commit, the offsets committed to the group say what to read again without
        output (``ExactlyOnce.resume``), and reading resumes from the units' offsets."""
        log.warning("%s; going back to the last checkpoint", reason,
                    extra={"event": "transaction_aborted"})  # fmt: skip
        states = self.states
        held = list(states.held)
        states.drop(held)
        if held:
            self.adopt(held)
        self.inputs.remerge(states.offset)
        self.last_at = time.monotonic()
