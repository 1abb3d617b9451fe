"""The units an instance holds, and their states: restored here, saved by a checkpoint.

A unit's state is in its store (``streamcal.stream.state.kv``): the waiting entries, and
under ``SNAPSHOT`` the rest of the unit sealed as a checkpoint is (``checkpoint.seal``:
authenticated, plain data). A checkpoint of a unit is one commit of its store: the
changes since the last one with the new snapshot, in one atomic batch, so the waiting
entries and the offsets in the snapshot always match, whenever the process dies. A
restart opens the store; it does not rebuild it. With ``state_dir`` the store is
``state_dir/store`` (``state_dir/unit-<p>/store`` for the unit of partition p); without,
it is in a temporary directory (memory stays bounded; a restart replays the topics). A
state directory of a development version before the first release holds checkpoint
files instead: the newest is read, and refused (``migrations``), naming it.

Partition units with a state topic are also kept in Kafka, as a changelog: each
checkpoint sends what changed and, now and then, the snapshot
(``streamcal.stream.state.topic``), so that they outlive the machine. On restore the local
store's snapshot and the state topic's newest rebuildable one are compared, and the one
that covers more input wins (the local one may be stale, left from an earlier turn of
this instance); a unit taken from the topic has its store rebuilt from the changelog.

Saving is a checkpoint's (``streamcal.stream.checkpointing``: one ``Checkpoint`` owns
the order of a commit, the outbox's, the offsets' and the stores'); here are its parts
of a unit: its next state, its state-topic records and the commit of its store. Only the
units changed since their last checkpoint are saved (``changed``, marked by the
processor's loop).
"""

from __future__ import annotations

import importlib
import logging
import shutil
import time
from pathlib import Path

from streamcal.stream.checkpointing import Checkpoint
from streamcal.stream.models import find_model
from streamcal.stream.native_heap import NativeHeap
from streamcal.stream.state import marker
from streamcal.stream.state.checkpoint import CheckpointStore, seal, unseal
from streamcal.stream.state.errors import CheckpointError, DamagedStore
from streamcal.stream.state.kv import KVStore, check_directory, set_memory
from streamcal.stream.unit import GLOBAL_UNIT, CalibrationUnit

__all__ = ["SNAPSHOT", "UnitStates"]

log = logging.getLogger(__name__)

SNAPSHOT = b"~snapshot"  # the store key of a unit's sealed state (beyond the data keys)
# A unit whose store has this many writes waiting is checkpointed before the interval is
# over: its commit (about 1 µs a write, plus ~10 ms to seal the snapshot) then stays near
# 50 ms however fast the events come (one second at 20,000 events/s with their labels is
# 100,000-140,000 writes).
COMMIT_WRITES = 40_000


class UnitStates:
    """The units a processor configured by ``config`` holds (``held``: unit id -> unit):
    made, restored and let go here, saved through a ``Checkpoint``.

    ``unit_class`` is what a unit is (a subclass may count more); ``key`` authenticates
    the checkpoints. The state topic is opened by ``open_topic`` once the outbox exists
    (its records go through it).
    """

    def __init__(self, config, key: bytes | None, unit_class=CalibrationUnit):
        self.config = config
        self.key = key
        self.unit_class = unit_class
        set_memory(config.state_memory)  # before any store opens
        self.heap = NativeHeap()
        self.heap.limit_arenas()  # before the stores' threads start
        self.held: dict[int | None, CalibrationUnit] = {}
        self.changed: set = set()  # ids of the held units changed since their checkpoint
        self.topic = None  # StateTopic, while running with one
        self.restore_seconds = 0.0  # how long the last restore took

    def open_topic(self, outbox) -> None:
        """Write and read the state topic through ``outbox`` (``--scope partition``)."""
        from streamcal.stream.state.topic import StateTopic

        self.topic = StateTopic.of(self.config, self.key, outbox)
        self.topic.create()

    def _dir(self, unit: int | None) -> Path | None:
        """The unit's directory in ``state_dir`` (None without one)."""
        cfg = self.config
        if cfg.state_dir is None:
            return None
        directory = Path(cfg.state_dir)
        return directory if unit is GLOBAL_UNIT else directory / f"unit-{unit}"

    def _local(self, unit: int | None) -> tuple[KVStore, dict | None]:
        """The unit's store (opened, or a new temporary one) and the state it holds (None
        if none), from the store's snapshot (or a development version's checkpoint file,
        which is refused).
        ``CheckpointError`` if that fails authentication (the store is closed)."""
        directory = self._dir(unit)
        if directory is None:
            return KVStore(), None
        store = KVStore(directory / "store")
        try:
            data = store.get(SNAPSHOT)
            if data is not None:
                state = unseal(self.key, data, f"state store {str(store.path)!r}")
                marker.check(store.path, state["checkpoints"])
                return store, state
            marker.check(store.path, None)
            return store, CheckpointStore(directory, self.key, self.config.checkpoint_keep).load()
        except BaseException:
            store.close()
            raise

    def _local_or_skip(self, unit: int) -> tuple[KVStore, dict | None, int]:
        """``_local``, but with a state topic to restore from, a local state that fails
        authentication, or a damaged store, is skipped (logged, counted: the third value)
        and its store emptied, never used."""
        try:
            return (*self._local(unit), 0)
        except (CheckpointError, DamagedStore) as exc:
            if self.topic is None:
                raise
            log.warning("unit %s: local state skipped: %s", unit, exc,
                        extra={"event": "rejected_state", "unit": unit})  # fmt: skip
            path = self._dir(unit) / "store"
            marker.remove(path)
            shutil.rmtree(path, ignore_errors=True)
            for old in self._dir(unit).glob("checkpoint-*.ckpt"):
                old.unlink()
            return KVStore(path), None, 1

    def make(self, unit: int | None, state=None, send=None, store=None) -> CalibrationUnit:
        """Unit ``unit``, new or from ``state``, its waiting entries in ``store`` (default: a
        temporary one); ``CheckpointError`` if ``state`` is another unit's."""
        if state is None:
            return self.unit_class(self.config, unit, send=send, store=store, key=self.key)
        if state.get("unit") != unit:
            raise CheckpointError(
                f"checkpoint holds unit {state.get('unit')!r}, not unit {unit!r}; refusing it"
            )
        return self.unit_class.from_state(state, config=self.config, send=send, store=store,
                                          key=self.key)  # fmt: skip

    def _hold(self, unit, state, send, store) -> None:
        try:
            self.held[unit] = self.make(unit, state, send, store)
        except BaseException:
            store.close()
            raise

    def offset(self, topic: str, partition: int) -> int | None:
        """Where the unit held that reads ``topic``'s ``partition`` goes on from (None:
        from the start, nothing of it read yet)."""
        unit = self.held[GLOBAL_UNIT if self.config.scope == "global" else partition]
        return unit.offsets.get((topic, partition))

    def check(self) -> None:
        """``--scope partition``: check what units will need (the model, the state
        directory) and load the learner's modules now, before the instance joins its
        group: units come with the group's assignment, and a rebalance must not wait."""
        find_model(self.config.model)
        if self.config.state_dir is not None:
            check_directory(self.config.state_dir)
        importlib.import_module("streamcal.learner.classifier")

    def restore_global(self, send=None) -> bool:
        """Hold the global unit, from its local state if there is one (then True) or new;
        its outputs go to ``send``."""
        store, state = self._local(GLOBAL_UNIT)
        self._hold(GLOBAL_UNIT, state, send, store)
        return state is not None

    def adopt(self, units: list[int], send=None) -> None:
        """Hold the partition ``units``, each from its newest checkpoint: the local one or
        the state topic's, whichever covers more input; new where there is none."""
        t = time.monotonic()
        states, stores, source, rejected = {}, {}, {}, {}
        for u in units:
            stores[u], states[u], rejected[u] = self._local_or_skip(u)
            source[u] = "local" if states[u] is not None else "new"
        if self.topic is not None:
            for u, plans in self.topic.restore(units).items():
                for plan in plans:
                    if states[u] is not None and _covered(plan.state) <= _covered(states[u]):
                        break
                    try:  # the waiting entries, from the changelog
                        stores[u] = _rebuilt(stores[u], plan)
                    except CheckpointError as exc:  # e.g. a record forged under its key
                        log.warning("unit %s: state-topic checkpoint skipped: %s", u, exc)
                        continue
                    states[u], source[u] = plan.state, "state topic"
                    break
        for u in units:
            self._hold(u, states[u], send, stores[u])
            if source[u] == "state topic":
                self.changed.add(u)  # the rebuilt store is committed at the next checkpoint
            if self.topic is not None:
                rejected[u] += self.topic.rejected_by_unit.pop(u, 0)
            if rejected[u]:
                self.held[u].counts["rejected_state_records"] += rejected[u]
                self.changed.add(u)
        self.restore_seconds = time.monotonic() - t
        kinds = ("state topic", "local", "new")
        by_source = {k: [u for u in units if source[u] == k] for k in kinds}
        # The extras are the line's content as data (--log-format json): key on them.
        log.info(
            "adopted units %s (from the state topic: %s; local: %s; new: %s) in %.3f s",
            units, *by_source.values(), self.restore_seconds,
            extra={"event": "adopted", "units": list(units), "seconds": self.restore_seconds,
                   "source": {k.replace(" ", "_"): v for k, v in by_source.items()}},
        )  # fmt: skip

    def drop(self, units) -> None:
        """Let ``units`` go without saving them (what changed since their last checkpoint
        is dropped with their stores' uncommitted writes)."""
        for u in units:
            unit = self.held.pop(u, None)
            if unit is not None:
                unit.close()
            self.changed.discard(u)
            if self.topic is not None:
                self.topic.forget(u)

    def close(self) -> None:
        """Close every unit's store (after the last checkpoint)."""
        for unit in self.held.values():
            unit.close()

    def full(self) -> bool:
        """Whether a changed unit's store has ``COMMIT_WRITES`` writes waiting: checkpoint
        now rather than at the end of the interval, to keep the commit short."""
        held = self.held
        return any(held[u].store.pending_writes >= COMMIT_WRITES
                   for u in self.changed if u in held)  # fmt: skip

    def to_save(self, also=()) -> list[CalibrationUnit]:
        """The held units changed since their last checkpoint, and ``also``, in id order."""
        ids = self.changed.union(also)
        return [self.held[u] for u in sorted(ids, key=str) if u in self.held]

    @property
    def durable(self) -> bool:
        """Whether a checkpoint outlives the process (a state directory or topic)."""
        return self.config.state_dir is not None or self.topic is not None

    def next_state(self, unit) -> dict | None:
        """The state of ``unit``'s next checkpoint, counted in it (None if not ``durable``:
        nothing to seal)."""
        if not self.durable:
            return None
        unit.checkpoints += 1
        return unit.to_state()

    def to_topic(self, unit, state, changes: dict, snapshot: bool) -> None:
        """Send ``unit``'s checkpoint to the state topic, if there is one: ``changes`` (the
        store's writes of this checkpoint) and, with ``snapshot`` or when due, ``state``."""
        if self.topic is not None:
            self.topic.save(unit.unit, state, changes, unit.store, snapshot=snapshot,
                            held=_held(unit))  # fmt: skip

    def save_changed(self, outbox=None, final: bool = False,
                     transaction=None) -> list[CalibrationUnit]:  # fmt: skip
        """Commit a checkpoint of the changed units through a ``Checkpoint``
        (``streamcal.stream.checkpointing``) with ``outbox`` and ``transaction``, without
        inputs: what the processor does, for the tests and benchmarks; the units."""
        return Checkpoint(self, outbox, transaction).commit(final)

    def save(self, units, outbox=None, final: bool = False) -> None:
        """Commit a checkpoint of ``units`` (``Checkpoint.save``, at least once; with
        ``final``, their state-topic snapshots too)."""
        Checkpoint(self, outbox).save(units, {u.unit for u in units} if final else ())

    def commit_stores(self, staged) -> None:
        """Commit each ``(unit, state)``'s store: with exactly-once, ``Checkpoint.save``
        calls this once a checkpoint, after its transaction committed (the window between
        the two commits: tests/e2e/test_exactly_once.py stops a run here)."""
        for unit, state in staged:
            self.commit_store(unit, state)

    def commit_store(self, unit, state) -> dict:
        """Commit ``unit``'s store, with its sealed ``state`` and then its mark if there is a
        state directory (the commit synced first: the mark is never ahead of the store);
        the changes written."""
        if self.config.state_dir is None:
            return unit.store.commit()
        changes = unit.store.commit({SNAPSHOT: seal(self.key, state)}, sync=True)
        marker.write(unit.store.path, state["checkpoints"])
        return changes


def _held(unit) -> int:
    """About how many bytes ``unit``'s store holds: what waits, with its keys, tags and
    sequence entries, and the finished ids (it paces the state topic's roll)."""
    p = unit.pending
    return p.event_bytes + p.label_bytes + 56 * (p.events + p.labels) + 40 * p.finished


def _rebuilt(store: KVStore, plan) -> KVStore:
    """A store rebuilt by ``plan`` that replaces ``store`` (same directory) only once the
    rebuild has succeeded; ``CheckpointError`` leaves ``store`` as it was."""
    if store.temporary:
        fresh = KVStore()
    else:
        path = store.path.with_name(store.path.name + ".rebuild")
        shutil.rmtree(path, ignore_errors=True)
        fresh = KVStore(path)
    try:
        plan.rebuild(fresh)
        fresh.commit()  # the data; its snapshot comes with the next checkpoint
    except BaseException:
        fresh.close()
        if not fresh.temporary:
            shutil.rmtree(fresh.path, ignore_errors=True)
        raise
    store.close()
    if fresh.temporary:
        return fresh
    fresh.close()
    marker.remove(store.path)  # the rebuilt store is marked at its first checkpoint
    shutil.rmtree(store.path)
    fresh.path.rename(store.path)
    return KVStore(store.path)


def _covered(state: dict) -> int:
    """How much input a unit's state covers: the sum of its next offsets."""
    return sum(o for _, _, o in state["offsets"])
