"""The stream processor's loop: records in merge order to their units, outputs out, and
metric lines and checkpoints on time.

The calibration itself happens in units (``streamcal.stream.unit``): one for
``--scope global`` (every partition of both topics, read with ``assign``), one per
partition number for ``--scope partition`` (the instances of a job share the units
through a consumer group, ``streamcal.stream.kafka.group``). Records reach the units in a
deterministic merge order (``streamcal.stream.kafka.ordering``), so a unit's predictions
are the same whichever instance runs it and however often it moves.

Each unit resumes from its newest checkpoint (``streamcal.stream.state.units``). Delivery
is at least once and idempotent by key: after a crash the records since a unit's last
checkpoint are processed again from the same state, in the same order, so the
predictions re-emitted are identical to the first ones. With ``--processing-guarantee
exactly-once`` each checkpoint interval's outputs and input offsets are one Kafka
transaction, committed before the units' stores (``streamcal.stream.exactly_once``). Every
checkpoint is committed through one ``Checkpoint`` (``streamcal.stream.checkpointing``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time

from streamcal.stream.checkpointing import Checkpoint
from streamcal.stream.config import ProcessorConfig
from streamcal.stream.exactly_once import ExactlyOnce
from streamcal.stream.gc_tuning import GcTuning
from streamcal.stream.intake import runs
from streamcal.stream.kafka import clients, port
from streamcal.stream.kafka.fingerprints import LogCheck
from streamcal.stream.kafka.group import GroupError
from streamcal.stream.kafka.inputs import STALE, Inputs
from streamcal.stream.kafka.kafka_python import quiet_false_alarms
from streamcal.stream.metrics import MergeCounts, MetricEmitter, prometheus_exporter, total
from streamcal.stream.state.errors import CheckpointError
from streamcal.stream.state.units import UnitStates
from streamcal.stream.unit import GLOBAL_UNIT, CalibrationUnit, TopicRank

__all__ = ["Processor", "CalibrationUnit", "CheckpointError", "GroupError"]

_BURST = 256  # records handled between two looks at the clock, flags and timers


class Processor:
    """Run the stream processor described by a ``ProcessorConfig``.

    Construction validates everything that can be checked without a broker (model,
    checkpoint key) and, with ``--scope global``, restores the newest checkpoint if there
    is one, raising ``ValueError`` or ``CheckpointError`` before anything is consumed.
    Partition units are restored as the group assigns them.
    """

    unit_class = CalibrationUnit  # what a unit of calibration is (a subclass may count more)

    def __init__(self, config: ProcessorConfig):
        config.validate()
        self.config = config
        self.instance = config.instance_id or f"{socket.gethostname()}:{os.getpid()}"
        self.states = UnitStates(config, config.key_bytes(), self.unit_class)
        self.units = self.states.held  # unit id (GLOBAL_UNIT, or a partition) -> unit
        self.metrics = MetricEmitter(config, self.instance, prometheus_exporter(config))
        # Run-time parts: set up by run(), but defined here so that every public method
        # (metric_line, metrics_port, checkpoint_all) works on a processor that never ran.
        self._out = None  # Outbox or ProducerProcess, while running
        self._inputs: Inputs | None = None  # while running
        self._eos: ExactlyOnce | None = None  # while running with exactly-once
        self._checkpoint = Checkpoint(self.states)  # while running: with the clients
        self.merge_counts = counts = MergeCounts()  # by their names of old, too:
        self.late_arrivals, self.lost_input, self.skipped_offsets = (
            counts.late, counts.lost, counts.skipped)  # fmt: skip
        self.restored = False
        if config.scope == "global":
            self.restored = self._adopt([GLOBAL_UNIT])
        else:
            self.states.check()  # units come with the group's assignment

    @property
    def state(self) -> CalibrationUnit:
        """The unit of ``--scope global`` (all partitions)."""
        try:
            return self.units[GLOBAL_UNIT]
        except KeyError:
            raise AttributeError("with --scope partition the state is in .units") from None

    @property
    def restore_seconds(self) -> float:
        """How long the last adoption of units took."""
        return self.states.restore_seconds

    @property
    def merge_stalls(self) -> int:
        """How often the ordered merge stalled (waiting for a partition)."""
        return self.merge_counts.stalls

    def _adopt(self, units: list) -> bool:
        """Restore the newly assigned ``units`` (``[GLOBAL_UNIT]``: the global unit; see
        ``UnitStates.adopt``). True if the global unit had a local state."""
        send = self._out.send if self._out is not None else None
        restored = False
        if units == [GLOBAL_UNIT]:
            restored = self.states.restore_global(send)
        else:
            self.states.adopt(units, send)
        self.metrics.mark_all({u: self.units[u] for u in units})
        if self._eos is not None:
            self._eos.resume_units(units, self.states.offset)
        return restored

    def _release(self, units: list[int]) -> None:
        # No offset commit: this may run in the client's I/O thread, which cannot block (the
        # next owner resumes from the checkpoints). Each unit's line first, as a stop does.
        self.metrics.emit_all({u: self.units[u] for u in units if u in self.units},
                              self.merge_counts)  # fmt: skip
        self._checkpoint.release(units)

    def checkpoint_all(self) -> None:
        """Checkpoint every unit held (the final checkpoint)."""
        self._checkpoint.commit_all()

    def close(self) -> None:
        """Close the units' stores, dropping what is uncommitted (counters stay readable)."""
        self.states.close()

    def metric_line(self, unit: int | None = GLOBAL_UNIT) -> dict:
        """The current metric line of a unit (``streamcal.stream.metrics``); with
        ``--scope partition`` and no unit given, of the lowest one. Works before ``run``."""
        return self.metrics.current(self.units, unit, self.unit_class, self.merge_counts)

    @property
    def metrics_port(self) -> int | None:
        """The Prometheus endpoint's port (the one bound, with 0), None if off or not up."""
        return self.metrics.exporter.port if self.metrics.exporter is not None else None

    def _make_outbox(self):
        return clients.outbox_checked(self.config, self.instance)

    def _make_consumer(self):
        return clients.input_consumer(self.config)

    def run(self, stop_event: threading.Event | None = None, max_idle_s: float | None = None,
            on_metrics=None, progress=None) -> dict:  # fmt: skip
        """Process until ``stop_event`` is set, or no record arrived for ``max_idle_s``
        seconds; then flush, checkpoint, commit and return the final metric line (of the
        last unit, with ``--scope partition``)."""
        cfg = self.config
        self.metrics.start(self.units, on_metrics)
        self.states.changed = set()
        ranks = {cfg.events_topic: TopicRank.EVENT, cfg.labels_topic: TopicRank.LABEL}
        counts = self.merge_counts
        self._inputs = inputs = Inputs(cfg, ranks, release=self._release, late=counts.late,
                                       lost=counts.lost, skipped=counts.skipped)  # fmt: skip
        self._checkpoint = checkpoint = Checkpoint(self.states, inputs=inputs,
                                                   interval=cfg.checkpoint_interval,
                                                   adopt=self._adopt)  # fmt: skip
        quiet_false_alarms()
        gc_tuning = GcTuning()
        try:
            self._out = checkpoint.out = self.metrics.outbox = self._make_outbox()
            for unit in self.units.values():
                unit.send = self._out.send
            if cfg.scope == "global" and cfg.global_lock:
                inputs.lock_group()
            elif cfg.scope == "partition" and cfg.state_topic:
                self.states.open_topic(self._out)
            consumer = self._make_consumer()
            gc_tuning.start()  # the clients are up: what exists now is never garbage
            inputs.open(consumer, self.states.offset)
            if cfg.exactly_once:
                self._eos = ExactlyOnce(inputs, self._out)
                checkpoint.transaction = self._eos.commit
                if cfg.scope == "global":
                    self._eos.resume_units([GLOBAL_UNIT], self.states.offset)
            checkpoint.log_check = LogCheck(inputs, self.states, counts.lost)
            checkpoint.log_check.check()
            return self._loop(inputs, stop_event or threading.Event(), max_idle_s, progress)
        finally:
            gc_tuning.stop()
            self._stop()

    def _stop(self) -> None:
        """Close the stores (after the last checkpoint, or dropping what it lacks), the
        inputs, the outbox and the metric outputs."""
        self._eos = None
        self._checkpoint = Checkpoint(self.states)
        self.close()
        self._inputs.close()
        self._inputs = None
        with contextlib.suppress(Exception):
            if self._out is not None:
                self._out.close(timeout=port.CLOSE_TIMEOUT_S)
        self._out = None
        self.metrics.close()

    def _loop(self, inputs: Inputs, stop_event, max_idle_s, progress) -> dict:
        last_record_at = time.monotonic()
        self._handled = 0  # records handled in this run
        while not stop_event.is_set():
            new = inputs.reassigned()
            if new is not None:
                # A new assignment: restore the new units (here, not in the rebalance
                # callback, which blocks heartbeats), then merge anew from their offsets.
                if new:
                    self._adopt(new)
                inputs.remerge(self.states.offset)
                self._checkpoint.log_check.check()
                last_record_at = time.monotonic()
            item = inputs.next(0.2)
            if item is STALE:
                continue
            if item is not None:
                self._handle(inputs, item, progress)
                now = last_record_at = time.monotonic()
            else:
                now = time.monotonic()
                if inputs.done(now - last_record_at, max_idle_s):
                    break
            self._on_time(inputs, now)
        if progress is not None:
            progress(total(self.units, "events"))
        self.checkpoint_all()
        line = self.metrics.emit_all(self.units, self.merge_counts) or self.metric_line()
        self._checkpoint.commit_outputs()  # the final metric records, with exactly-once
        return line

    def _handle(self, inputs: Inputs, item, progress) -> None:
        """Hand ``item`` and what is releasable after it (up to ``_BURST`` records, without
        the loop's checks per record) to their units, a run of one unit's records at a time
        (``CalibrationUnit.handle_batch``: as one by one); then ship the outputs."""
        items = [item, *inputs.merge.drain(_BURST - 1)]
        units, eos, changed = self.units, self._eos, self.states.changed
        before = eos.mute if eos is not None and eos.replaying else None  # committed already?
        for unit_id, run in runs(items, inputs.membership is not None):
            unit = units[unit_id]
            unit.handle_batch(run, before, self._due)
            changed.add(unit.unit)
        n, self._handled = self._handled, self._handled + len(items)
        if progress is not None and n // 1000 != self._handled // 1000:
            progress(total(units, "events"))
        if eos is not None:
            self._out.muted = False
        self._out.ship()

    def _due(self, unit) -> None:
        self.metrics.emit_unit(unit, self.merge_counts(unit.unit))

    def _on_time(self, inputs: Inputs, now: float) -> None:
        """What the loop does between bursts: keep the group and the producer alive, and
        send the metric lines and write the checkpoints that are due."""
        if inputs.merge is not None:
            self.merge_counts.stalls = inputs.merge.stalls
        inputs.keep()
        if self._out.failed:  # e.g. the broker restarted: recreate the producer now
            self._out.flush()
        self.metrics.emit_due(now, self.units, self.merge_counts)
        self._checkpoint.on_time(now)
