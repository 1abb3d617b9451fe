"""The stream processor's loop: records in merge order to their units, outputs out, and
metric lines and checkpoints on time.

The calibration itself happens in units (``streamcal.stream.unit``): one for
``--scope global`` (every partition of both topics, read with ``assign``), one per
partition number for ``--scope partition`` (the instances of a job share the units
through a consumer group, ``streamcal.stream.kafka.group``). Records are handed to the
units in a deterministic merge order (``streamcal.stream.kafka.ordering``): record
timestamp, events before labels, partition, offset. A unit's records are a subset of the
merge, released in its own sorted order, so a unit's predictions are the same whichever
instance runs it and however often it moves.

Each unit resumes from its newest checkpoint (``streamcal.stream.state.units``). Delivery
is at least once and idempotent by key: after a crash the records since a unit's last
checkpoint are processed again from the same state, in the same order, so the
predictions re-emitted are identical to the first ones (consumers keep the latest value
per key, or dedupe by id). With ``--processing-guarantee exactly-once`` each checkpoint
interval's outputs and input offsets are one Kafka transaction, committed before the
units' stores (``streamcal.stream.exactly_once``).
"""

from __future__ import annotations

import gc
import importlib
import logging
import os
import socket
import threading
import time

from streamcal.stream.bounds import size_text
from streamcal.stream.config import ProcessorConfig
from streamcal.stream.exactly_once import ExactlyOnce
from streamcal.stream.kafka import clients
from streamcal.stream.kafka.group import GroupError
from streamcal.stream.kafka.inputs import STALE, Inputs
from streamcal.stream.kafka.kafka_python import quiet_false_alarms
from streamcal.stream.kafka.port import TopicPartition
from streamcal.stream.kafka.preflight import check_broker
from streamcal.stream.kafka.sink import TransactionAborted
from streamcal.stream.metrics import MetricEmitter
from streamcal.stream.models import find_model
from streamcal.stream.state.errors import CheckpointError
from streamcal.stream.state.kv import check_directory
from streamcal.stream.state.units import UnitStates
from streamcal.stream.unit import GLOBAL_UNIT, CalibrationUnit, TopicRank

__all__ = ["Processor", "CalibrationUnit", "CheckpointError", "GroupError"]

log = logging.getLogger(__name__)

_BURST = 256  # records handled between two looks at the clock, flags and timers
_GC_GEN0 = 50_000  # gen-0 threshold while running (CPython's default is 700)


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
        exporter_class = None
        if config.metrics_port is not None:
            try:
                from streamcal.monitoring.prometheus import PrometheusExporter
            except ImportError as exc:
                raise ValueError(f"metrics_port: Prometheus exporter unavailable: {exc}") from None
            exporter_class = PrometheusExporter
        self.metrics = MetricEmitter(config, self.instance, exporter_class)
        # Run-time parts: set up by run(), but defined here so that every public method
        # (metric_line, metrics_port, checkpoint) works on a processor that never ran.
        self._out = None  # Outbox or ProducerProcess, while running
        self._inputs: Inputs | None = None  # while running
        self._eos: ExactlyOnce | None = None  # while running with exactly-once
        self.merge_stalls = 0
        self.late_arrivals: dict = {}  # unit -> records that came too late for the order
        self.lost_input: dict = {}  # unit -> positions the broker's log no longer held
        self.skipped_offsets: dict = {}  # unit -> input offsets passed over unread
        self._last_checkpoint_at = time.monotonic()
        if config.scope == "global":
            self.restored = self.states.restore_global()
            self.metrics.mark(GLOBAL_UNIT, self.state.counts["events"])
        else:
            self.restored = False
            # Units come with the group's assignment; check the model, the state directory
            # and load the learner's modules before the instance joins (not while a
            # rebalance waits).
            find_model(config.model)
            if config.state_dir is not None:
                check_directory(config.state_dir)
            importlib.import_module("streamcal.learner.classifier")

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

    # ------------------------------------------------------------------ units
    def _adopt(self, units: list[int]) -> None:
        """Restore the newly assigned ``units`` (see ``UnitStates.adopt``)."""
        self.states.adopt(units, self._out.send if self._out is not None else None)
        for u in units:
            self.metrics.mark(u, self.units[u].counts["events"])
        if self._eos is not None:
            self._eos.resume(self._local_offsets(units))

    def _local_offsets(self, units) -> dict:
        """TopicPartition -> next offset (None: nothing read) of the input partitions of
        ``units``, from the units' states (for ``ExactlyOnce.resume``)."""
        cfg = self.config
        if cfg.scope == "global":
            tps = self._inputs.partitions()
        else:
            tps = [TopicPartition(t, u) for u in units for t in (cfg.events_topic,
                                                                 cfg.labels_topic)]  # fmt: skip
        return {tp: self._offset(tp.topic, tp.partition) for tp in tps}

    def _release(self, units: list[int]) -> None:
        # No offset commit here: this runs in kafka-python's I/O thread, where the
        # consumer cannot block; the checkpoints are what the next owner resumes from.
        # (With exactly-once the offsets go with the transaction, through the producer.)
        # Each released unit's line first, as a stop writes one: what it learnt since its
        # last line would otherwise be missing from this instance's metric log until its
        # next owner's line, or for good when no instance takes it over.
        self.metrics.emit_all({u: self.units[u] for u in units if u in self.units},
                              self._merge_counts)  # fmt: skip
        self.states.release(units, self._out, self._transaction())

    def _transaction(self):
        """What commits a checkpoint's transaction, with exactly-once while running."""
        return self._eos.commit if self._eos is not None else None

    def checkpoint(self, final: bool = False) -> None:
        """Flush outputs, write the states of the units changed since the last checkpoint
        (with the offsets they correspond to), commit the offsets. With exactly-once: the
        units' state-topic records and offsets go into the transaction, which is committed
        before their stores (``TransactionAborted``, ``Fenced`` if it fails: then no store
        is committed)."""
        transaction = self._transaction()
        changed = self.states.save_changed(self._out, final, transaction)
        if self._inputs is not None and transaction is None:
            self._inputs.commit({tp: o for unit in changed for tp, o in unit.offsets.items()})
        self._last_checkpoint_at = time.monotonic()

    def _rewind(self, reason: Exception) -> None:
        """Exactly-once, after an aborted transaction: the units go back to their stores'
        last commit, the offsets committed to the group say what to read again without
        output (``ExactlyOnce.resume``), and reading resumes from the units' offsets."""
        log.warning("%s; going back to the last checkpoint", reason,
                    extra={"event": "transaction_aborted"})  # fmt: skip
        held = list(self.units)
        self.states.drop(held)
        tps = None  # --scope partition: the assignment's
        if self.config.scope == "global":
            self.states.restore_global()
            self.units[GLOBAL_UNIT].send = self._out.send
            self.metrics.mark(GLOBAL_UNIT, self.state.counts["events"])
            self._eos.resume(self._local_offsets(held))
            tps = self._inputs.partitions()
        elif held:
            self._adopt(held)
        self._inputs.remerge(self._offset, tps)
        self._last_checkpoint_at = time.monotonic()

    def checkpoint_all(self) -> None:
        """Checkpoint every unit held (the final checkpoint)."""
        self.states.changed = set(self.units)
        self.checkpoint(final=True)

    def close(self) -> None:
        """Close the units' stores (uncommitted changes are dropped): ``run`` does, after
        its last checkpoint. The units' counters and statistics stay readable."""
        self.states.close()

    # ------------------------------------------------------------------ metrics
    def metric_line(self, unit: int | None = GLOBAL_UNIT) -> dict:
        """The current metric line of a unit (``streamcal.stream.metrics``); with
        ``--scope partition`` and no unit given, of the lowest one. Works before ``run``."""
        if unit is GLOBAL_UNIT and self.config.scope == "partition":
            unit = min(self.units) if self.units else GLOBAL_UNIT
        held = self.units.get(unit)
        if held is None:  # nothing assigned yet: the line of an empty unit
            snapshot = self.unit_class.empty_snapshot(self.config)
        else:
            snapshot = held.snapshot()
        return self.metrics.line(unit, snapshot, self._merge_counts(unit))

    def _merge_counts(self, unit: int | None) -> dict:
        """The ordered merge's counters in ``unit``'s metric line."""
        return {
            "merge_stalls": self.merge_stalls,
            "late_arrivals": self.late_arrivals.get(unit, 0),
            "lost_input": self.lost_input.get(unit, 0),
            "skipped_offsets": self.skipped_offsets.get(unit, 0),
        }

    @property
    def metrics_port(self) -> int | None:
        """The port the Prometheus endpoint is bound to (useful with ``metrics_port=0``), or
        None when it is off or ``run`` has not started it yet."""
        return self.metrics.exporter.port if self.metrics.exporter is not None else None

    # ------------------------------------------------------------------ Kafka clients
    def _make_outbox(self):
        # The first client: a TLS or SASL set-up that cannot work is told now, naming the
        # setting to check (SetupError), not after the clients' 30 s of retries.
        check_broker(self.config.kafka_client_settings())
        return clients.outbox(self.config, self.instance)

    def _make_consumer(self):
        return clients.input_consumer(self.config)

    def _offset(self, topic: str, partition: int) -> int | None:
        """Where the unit that reads ``topic``'s ``partition`` goes on from (None: from
        the start, nothing of it read yet)."""
        unit = self.units[GLOBAL_UNIT if self.config.scope == "global" else partition]
        return unit.offsets.get((topic, partition))

    # ------------------------------------------------------------------ main loop
    def run(
        self,
        stop_event: threading.Event | None = None,
        max_idle_s: float | None = None,
        on_metrics=None,
        progress=None,
    ) -> dict:
        """Process until ``stop_event`` is set, or no record arrived for ``max_idle_s``
        seconds; then flush, checkpoint, commit and return the final metric line (of the
        last unit, with ``--scope partition``)."""
        cfg = self.config
        log.info(
            "waiting bounds: predictions %s (--pending-max-bytes), labels %s "
            "(--label-wait-max-bytes); the label delay they hold is logged once the event "
            "rate is known", size_text(cfg.pending_max_bytes), size_text(cfg.label_wait_max_bytes),
            extra={"event": "bounds", "pending_max_bytes": cfg.pending_max_bytes,
                   "label_wait_max_bytes": cfg.label_wait_max_bytes},
        )  # fmt: skip
        self.metrics.start(self.units, on_metrics)
        self._last_checkpoint_at = time.monotonic()
        self.states.changed = set()
        stop_event = stop_event or threading.Event()
        ranks = {cfg.events_topic: TopicRank.EVENT, cfg.labels_topic: TopicRank.LABEL}
        self._inputs = inputs = Inputs(
            cfg,
            ranks,
            release=self._release,
            late=self.late_arrivals,
            lost=self.lost_input,
            skipped=self.skipped_offsets,
        )

        # The cyclic GC is costly here: kafka-python allocates many container objects per
        # record, so gen-0 passes are frequent, and gen-2 passes walk the model and the
        # outbox. Freeze what exists once the clients are up (never garbage) and collect
        # young objects less often while running; both undone on return (gc settings are
        # process-wide). Measured: -5% CPU per event for `streamcal run`, more in a process
        # with a bigger heap (in process with the benchmark: main thread 148-163 -> 106-126
        # µs/event).
        quiet_false_alarms()
        gc_threshold = gc.get_threshold()
        try:
            self._out = self.metrics.outbox = self._make_outbox()
            for unit in self.units.values():
                unit.send = self._out.send
            if cfg.scope == "global" and cfg.global_lock:
                inputs.lock_group()
            elif cfg.scope == "partition" and cfg.state_topic:
                self.states.open_topic(self._out)
            consumer = self._make_consumer()
            gc.freeze()
            gc.set_threshold(max(gc_threshold[0], _GC_GEN0), *gc_threshold[1:])
            inputs.open(consumer, self._offset)
            if cfg.exactly_once:
                self._eos = ExactlyOnce(inputs, self._out)
                if cfg.scope == "global":
                    self._eos.resume(self._local_offsets([GLOBAL_UNIT]))
            return self._loop(inputs, stop_event, max_idle_s, progress)
        finally:
            self._eos = None
            gc.set_threshold(*gc_threshold)
            gc.unfreeze()
            self.close()  # after the last checkpoint (in _loop), or dropping what it lacks
            inputs.close()
            self._inputs = None
            try:
                if self._out is not None:
                    self._out.close(timeout=10)
            except Exception:  # noqa: BLE001
                pass
            self._out = None
            self.metrics.close()

    def _loop(self, inputs: Inputs, stop_event, max_idle_s, progress) -> dict:
        units = self.units
        metrics = self.metrics
        checkpoint_interval = self.config.checkpoint_interval
        eos = self._eos
        last_record_at = time.monotonic()
        n = 0
        while not stop_event.is_set():
            new = inputs.reassigned()
            if new is not None:
                # A new assignment: restore the new units (here, not in the rebalance
                # callback, which blocks the heartbeats), then a new merge over the
                # assignment, from the units' offsets.
                if new:
                    self._adopt(new)
                inputs.remerge(self._offset)
                last_record_at = time.monotonic()
            item = inputs.next(0.2)
            if item is STALE:
                continue
            if item is not None:
                # Then whatever is already releasable, in the same order, without the
                # checks below (timers, flags) per record: they run every _BURST.
                burst = 0
                changed = self.states.changed
                ready = inputs.merge.ready
                by_partition = inputs.membership is not None
                while item is not None:
                    rank, rec = item
                    unit = units[rec.partition if by_partition else GLOBAL_UNIT]
                    if eos is not None and eos.replaying:  # outputs committed already?
                        eos.mute(rec)
                    if unit.handle(rank, rec):  # a metric line is due
                        metrics.emit_unit(unit, self._merge_counts(unit.unit))
                    changed.add(unit.unit)
                    n += 1
                    if progress is not None and n % 1000 == 0:
                        progress(self._total("events"))
                    burst += 1
                    item = ready() if burst < _BURST else None
                if eos is not None:
                    self._out.muted = False
                self._out.ship()
                now = last_record_at = time.monotonic()
            else:
                now = time.monotonic()
                # Idle means caught up; before that (start-up, a backlog still being
                # fetched) wait longer, but not forever (a broker that went away).
                idle = now - last_record_at
                if max_idle_s is not None and idle >= max_idle_s:
                    if inputs.caught_up() or idle >= max(60.0, 10 * max_idle_s):
                        break
            if inputs.merge is not None:
                self.merge_stalls = inputs.merge.stalls
            inputs.keep()
            if self._out.failed:  # e.g. the broker restarted: recreate the producer now
                self._out.flush()
            totals = metrics.due(now, self._totals)
            if totals is not None:
                metrics.emit_all(units, self._merge_counts)
                metrics.last_line_counts = totals
            states = self.states
            pending = states.changed or (eos is not None and self._out.open)
            if pending and (
                now - self._last_checkpoint_at >= checkpoint_interval or states.full()
            ):
                try:
                    self.checkpoint()
                except TransactionAborted as exc:  # exactly-once: back to what was committed
                    self._rewind(exc)
        if progress is not None:
            progress(self._total("events"))
        self.checkpoint_all()
        line = metrics.emit_all(units, self._merge_counts) or self.metric_line()
        if eos is not None and self._out.open:  # the final metric records: commit them too
            self._out.commit({}, None)
        return line

    def _total(self, count: str) -> int:
        return sum(unit.counts[count] for unit in self.units.values())

    def _totals(self) -> tuple:
        """What a periodic metric line is worth sending for: a change of these."""
        return tuple(self._total(k) for k in ("events", "labels", "dead_letters"))
