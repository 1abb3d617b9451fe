"""The units an instance holds, and their states: the one owner of restoring and saving.

A unit's state is kept in a local directory (``state_dir``; ``state_dir/unit-<p>`` for
the unit of partition p) and, for partition units with a state topic, in Kafka
(``streamcal.stream.state.topic``), so that it outlives the machine. On restore the
newest local checkpoint and the state topic's are compared, and the one that covers more
input wins: the local one may be stale, left from an earlier turn of this instance.

Saving follows one rule: the outputs are flushed first, because a state must not cover
records whose predictions could still be lost. Only the units changed since their last
checkpoint are saved (``changed``, marked by the processor's loop).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from streamcal.stream.state.checkpoint import CheckpointStore
from streamcal.stream.state.errors import CheckpointError
from streamcal.stream.unit import GLOBAL_UNIT, CalibrationUnit

__all__ = ["UnitStates"]

log = logging.getLogger(__name__)


class UnitStates:
    """The units a processor configured by ``config`` holds (``held``: unit id -> unit):
    made, restored, saved and let go here.

    ``unit_class`` is what a unit is (a subclass may count more); ``key`` authenticates
    the checkpoints. The state topic is opened by ``open_topic`` once the outbox exists
    (its records go through it).
    """

    def __init__(self, config, key: bytes, unit_class=CalibrationUnit):
        self.config = config
        self.key = key
        self.unit_class = unit_class
        self.held: dict[int | None, CalibrationUnit] = {}
        self.changed: set = set()  # ids of the held units changed since their checkpoint
        self.topic = None  # StateTopic, while running with one
        self.restore_seconds = 0.0  # how long the last restore took

    def open_topic(self, outbox) -> None:
        """Write and read the state topic through ``outbox`` (``--scope partition``)."""
        from streamcal.stream.state.topic import StateTopic

        cfg = self.config
        self.topic = StateTopic(
            cfg.kafka_client_settings(),
            topic=cfg.state_topic,
            group=cfg.group_id,
            key=self.key,
            outbox=outbox,
            chunk_bytes=cfg.state_chunk_bytes,
        )
        self.topic.create()

    def _local(self, unit: int | None) -> CheckpointStore | None:
        cfg = self.config
        if cfg.state_dir is None:
            return None
        directory = Path(cfg.state_dir)
        if unit is not GLOBAL_UNIT:
            directory = directory / f"unit-{unit}"
        return CheckpointStore(directory, self.key, cfg.checkpoint_keep)

    def make(self, unit: int | None, state=None, send=None) -> CalibrationUnit:
        """Unit ``unit``, new or from ``state``; ``CheckpointError`` if ``state`` is
        another unit's."""
        if state is None:
            return self.unit_class(self.config, unit, send=send)
        if state.get("unit") != unit:
            raise CheckpointError(
                f"checkpoint holds unit {state.get('unit')!r}, not unit {unit!r}; refusing it"
            )
        return self.unit_class.from_state(state, config=self.config, send=send)

    def restore_global(self) -> bool:
        """Hold the global unit, from its newest local checkpoint if there is one (then
        True) or new."""
        store = self._local(GLOBAL_UNIT)
        state = store.load() if store is not None else None
        self.held[GLOBAL_UNIT] = self.make(GLOBAL_UNIT, state)
        return state is not None

    def adopt(self, units: list[int], send=None) -> None:
        """Hold the partition ``units``, each from its newest checkpoint: the local one or
        the state topic's, whichever covers more input; new where there is none."""
        t = time.monotonic()
        states, source = {}, {}
        for u in units:
            store = self._local(u)
            states[u] = store.load() if store is not None else None
            source[u] = "local" if states[u] is not None else "new"
        if self.topic is not None:
            for u, state in self.topic.restore(units).items():
                if states[u] is None or _covered(state) > _covered(states[u]):
                    states[u], source[u] = state, "state topic"
        for u in units:
            self.held[u] = self.make(u, states[u], send)
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

    def release(self, units: list[int], outbox=None) -> None:
        """Save ``units`` and let them go (revoked from this instance)."""
        units = [u for u in units if u in self.held]  # assigned but never adopted: nothing
        if not units:
            return
        self.save([self.held[u] for u in units], outbox)
        for u in units:
            del self.held[u]
            self.changed.discard(u)
        log.info("released units %s", units, extra={"event": "released", "units": units})

    def save_changed(self, outbox=None) -> list[CalibrationUnit]:
        """Save the units changed since their last checkpoint; returns them."""
        units = [self.held[u] for u in sorted(self.changed, key=str) if u in self.held]
        self.save(units, outbox)
        self.changed.clear()
        return units

    def save(self, units, outbox=None) -> None:
        """Flush ``outbox`` first (a state must not cover records whose predictions could
        still be lost), write the units' states, then flush the state-topic records."""
        if outbox is not None:
            outbox.flush()
        for unit in units:
            store = self._local(unit.unit)
            if store is None and self.topic is None:
                continue
            state = unit.to_state()
            if store is not None:
                store.save(state)
            if self.topic is not None:
                self.topic.save(unit.unit, state, unit.offsets)
        if units and outbox is not None and self.topic is not None:
            outbox.flush()


def _covered(state: dict) -> int:
    """How much input a unit's state covers: the sum of its next offsets."""
    return sum(o for _, _, o in state["offsets"])
