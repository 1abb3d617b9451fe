"""The stream processor: the Kafka clients, the group membership, the loop, the checkpoints.

The calibration itself happens in units (``streamcal.stream.unit``): one for
``--scope global`` (every partition of both topics, read with ``assign``), one per
partition number for ``--scope partition`` (the instances of a job share the units
through a consumer group, ``streamcal.stream.group``). Records are handed to the units in
a deterministic merge order (see ``streamcal.stream.ordering``): record timestamp, events
before labels, partition, offset. A unit's records are a subset of the merge, released in
its own sorted order, so a unit's predictions are the same whichever instance runs it
and however often it moves.

Each unit resumes from its newest checkpoint: a local state directory (``state_dir``;
``state_dir/unit-<p>`` for partition units) and, for partition units, the state topic
(``streamcal.stream.state_topic``) when the local one is absent. Delivery is at least
once and idempotent by key: after a crash the records since a unit's last checkpoint are
processed again from the same state, in the same order, so the predictions re-emitted are
identical to the first ones (consumers keep the latest value per key, or dedupe by id).
"""

from __future__ import annotations

import gc
import logging
import os
import socket
import sys
import threading
import time
from pathlib import Path

import orjson

import streamcal
from streamcal.monitoring import schema as metric_schema
from streamcal.stream.checkpoint import CheckpointError, CheckpointStore
from streamcal.stream.config import ProcessorConfig
from streamcal.stream.group import (
    GlobalLock,
    GroupError,
    GroupMembership,
    MergeView,
    heartbeat_ms,
)
from streamcal.stream.sink import Outbox, ProducerProcess, quiet_false_alarms
from streamcal.stream.unit import CalibrationUnit

__all__ = ["Processor", "CalibrationUnit", "CheckpointError", "GroupError"]

log = logging.getLogger("streamcal.stream")

_EVENT, _LABEL = 0, 1  # topic ranks: at equal timestamps an event goes before a label
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
        self._key = config.key_bytes()
        self._version = streamcal.__version__
        self.units: dict[int | None, CalibrationUnit] = {}
        self.restored = False
        self._state_topic = None
        self._exporter_cls = None
        if config.metrics_port is not None:
            try:
                from streamcal.monitoring.prometheus import PrometheusExporter
            except ImportError as exc:
                raise ValueError(f"metrics_port: Prometheus exporter unavailable: {exc}") from None
            self._exporter_cls = PrometheusExporter
        # Run-time parts: set up by run(), but defined here so that every public method
        # (metric_line, metrics_port, checkpoint) works on a processor that never ran.
        self._exporter = None
        self._out = None  # Outbox or ProducerProcess, while running
        self._consumer = None
        self._lock: GlobalLock | None = None
        self._membership: GroupMembership | None = None
        self._on_metrics = None
        self._metrics_out = None
        self.merge_stalls = 0
        self.late_arrivals: dict = {}  # unit -> records that came too late for the order
        self.restore_seconds = 0.0  # how long the last adoption of units took
        if config.scope == "global":
            state = self._local_store(None)
            state = state.load() if state is not None else None
            self.restored = state is not None
            self.units[None] = self._unit(None, state)
        else:
            # Units come with the group's assignment; one made now checks the model and
            # loads the learner's modules before the instance joins (not while a rebalance
            # waits for it).
            self.unit_class(config, None)
        now = time.monotonic()
        self._rate_marks: dict = {u: (now, unit.counts["events"]) for u, unit in self.units.items()}
        self._last_line_at = self._last_checkpoint_at = now
        self._last_line_counts = None
        self._dirty: set = set()

    @property
    def state(self) -> CalibrationUnit:
        """The unit of ``--scope global`` (all partitions)."""
        try:
            return self.units[None]
        except KeyError:
            raise AttributeError("with --scope partition the state is in .units") from None

    # ------------------------------------------------------------------ units
    def _local_store(self, unit: int | None) -> CheckpointStore | None:
        cfg = self.config
        if cfg.state_dir is None:
            return None
        directory = Path(cfg.state_dir) if unit is None else Path(cfg.state_dir) / f"unit-{unit}"
        return CheckpointStore(directory, self._key, cfg.checkpoint_keep)

    def _unit(self, unit: int | None, state=None) -> CalibrationUnit:
        send = self._out.send if self._out is not None else None
        if state is None:
            return self.unit_class(self.config, unit, send, self._emit_metrics)
        if state.get("unit") != unit:
            raise CheckpointError(
                f"checkpoint holds unit {state.get('unit')!r}, not unit {unit!r}; refusing it"
            )
        return self.unit_class.from_state(state, self.config, send, self._emit_metrics)

    def _adopt(self, units: list[int]) -> None:
        """Restore the newest checkpoint of each unit: the local one or the state topic's,
        whichever covers more input (the local one may be stale, from an earlier turn)."""
        t = time.monotonic()
        states, source = {}, {}
        for u in units:
            store = self._local_store(u)
            states[u] = store.load() if store is not None else None
            source[u] = "local" if states[u] is not None else "new"
        if self._state_topic is not None:
            for u, state in self._state_topic.restore(units).items():
                if states[u] is None or _covered(state) > _covered(states[u]):
                    states[u], source[u] = state, "state topic"
        now = time.monotonic()
        for u in units:
            self.units[u] = self._unit(u, states.get(u))
            self._rate_marks[u] = (now, self.units[u].counts["events"])
        self.restore_seconds = time.monotonic() - t
        log.info(
            "adopted units %s (from the state topic: %s; local: %s; new: %s) in %.3f s",
            units, *([u for u in units if source[u] == k] for k in ("state topic", "local", "new")),
            self.restore_seconds,
        )  # fmt: skip

    def _release(self, units: list[int]) -> None:
        """Flush the units' outputs, checkpoint them, and let them go."""
        units = [u for u in units if u in self.units]  # assigned but never adopted: nothing
        if not units:
            return
        self._save_units([self.units[u] for u in units])
        # No offset commit here: this runs in kafka-python's I/O thread, where the
        # consumer cannot block; the checkpoints above are what the next owner resumes from.
        for u in units:
            del self.units[u]
            self._dirty.discard(u)
        log.info("released units %s", units)

    # ------------------------------------------------------------------ Kafka clients
    def _make_outbox(self):
        settings = {
            **self.config.kafka_client_settings(),
            "enable_idempotence": True,
            "linger_ms": self.config.linger_ms,
            "batch_size": 256 * 1024,
            **self.config.producer_settings(),
        }
        return ProducerProcess(settings) if self.config.producer_process else Outbox(settings)

    def _make_consumer(self):
        from kafka import KafkaConsumer
        from kafka.coordinator.assignors.range import RangePartitionAssignor

        cfg = self.config
        return KafkaConsumer(
            **cfg.kafka_client_settings(),
            group_id=cfg.group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_poll_records=cfg.poll_max_records,
            fetch_max_wait_ms=100,
            session_timeout_ms=cfg.session_timeout_ms,
            heartbeat_interval_ms=heartbeat_ms(cfg.session_timeout_ms),
            # range: each member gets the same partition numbers of both topics (units)
            partition_assignment_strategy=[RangePartitionAssignor],
        )

    def _partitions(self, consumer, timeout: float = 30.0):
        from kafka import TopicPartition

        from streamcal.stream.group import partition_count

        out = []
        for topic in (self.config.events_topic, self.config.labels_topic):
            partition_count(consumer, topic, timeout)
            out.extend(
                TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))
            )
        return out

    # ------------------------------------------------------------------ metrics
    def metric_line(self, unit: int | None = None) -> dict:
        """The current metric line of a unit (docs/contracts.md): every field of the metric
        schema, in its order, from the tracker's snapshot, the unit's ``counts`` (by name)
        and below; then the labels saying where it comes from: ``unit`` (the partition
        number, or ``global``) and ``instance``. Works before ``run``."""
        if unit is None and self.config.scope == "partition":
            unit = min(self.units) if self.units else None
        st = self.units.get(unit)
        if st is None:
            st = self.unit_class(self.config, unit)  # nothing assigned yet: an empty unit
        now = time.time()
        mono = time.monotonic()
        events = st.counts["events"]
        mark = self._rate_marks.get(unit, (mono, events))
        elapsed = mono - mark[0]
        rate = (events - mark[1]) / elapsed if elapsed > 0 else 0.0
        values = dict(st.counts)
        # With the reliability bins on every line (2.4 KB instead of 0.5 KB of JSON with 10
        # bins, +6 µs per line, one line per metrics_every labels) so that `streamcal
        # report` can draw reliability diagrams from any metric log, even a cut-off one.
        values.update(st.tracker.snapshot(reliability=True))
        values.update(
            ts=now,
            pending=len(st.pending),
            waiting_labels=len(st.waiting),
            events_per_s=rate,
            calibration_size=st.clf.calibration_size,
            merge_stalls=self.merge_stalls,
            late_arrivals=self.late_arrivals.get(unit, 0),
            version=self._version,
        )
        line = {f.key: values.get(f.key) for f in metric_schema.FIELDS}
        line["unit"] = "global" if unit is None else str(unit)
        line["instance"] = self.instance
        return line

    def _emit_metrics(self, unit: CalibrationUnit | None = None) -> dict:
        u = None if unit is None else unit.unit
        line = self.metric_line(u)
        now = time.monotonic()
        self._rate_marks[u] = (now, line["events"])
        self._last_line_at = now
        if u is None:
            self._last_line_counts = (line["events"], line["labels"], line["dead_letters"])
        data = orjson.dumps(line)
        if self._metrics_out is not None:
            self._metrics_out.write(data.decode() + "\n")
            self._metrics_out.flush()
        if self.config.metrics_topic and self._out is not None:
            # One key per unit: one partition, so a unit's lines stay in order.
            key = f"{self.config.client_id}/{line['unit']}".encode() if u is not None else (
                self.config.client_id.encode())  # fmt: skip
            self._out.send(self.config.metrics_topic, key, data)
        if self._exporter is not None:
            self._exporter.update(line)
        if self.config.by is not None:
            self._emit_categories(u, line)
        if self._on_metrics is not None:
            self._on_metrics(line)
        return line

    def _emit_categories(self, u, line: dict) -> None:
        """With --by: the unit's per-category lines, after its line, with its labels."""
        st = self.units.get(u)
        if st is None:
            return
        labels = {"unit": line["unit"], "instance": line["instance"]}
        rows = [{**row, **labels} for row in st.tracker.category_snapshots()]
        for row in rows:
            data = orjson.dumps(row)
            if self._metrics_out is not None:
                self._metrics_out.write(data.decode() + "\n")
            if self.config.metrics_topic and self._out is not None:
                key = f"{self.config.client_id}/{line['unit']}".encode() if u is not None else (
                    self.config.client_id.encode())  # fmt: skip
                self._out.send(self.config.metrics_topic, key, data)
        if self._metrics_out is not None:
            self._metrics_out.flush()
        if self._exporter is not None:
            self._exporter.update_categories(rows, labels)

    def _emit_all(self) -> dict | None:
        line = None
        for u in sorted(self.units, key=lambda k: -1 if k is None else k):
            line = self._emit_metrics(self.units[u])
        return line

    @property
    def metrics_port(self) -> int | None:
        """The port the Prometheus endpoint is bound to (useful with ``metrics_port=0``), or
        None when it is off or ``run`` has not started it yet."""
        return self._exporter.port if self._exporter is not None else None

    # ------------------------------------------------------------------ checkpoints
    def _save(self, unit: CalibrationUnit) -> None:
        store = self._local_store(unit.unit)
        if store is None and self._state_topic is None:
            return
        state = unit.to_state()
        if store is not None:
            store.save(state)
        if self._state_topic is not None:
            self._state_topic.save(unit.unit, state, unit.offsets)

    def _save_units(self, units) -> None:
        """Flush the outputs first (a state must not cover records whose predictions could
        still be lost), write the units' states, then flush the state-topic records."""
        if self._out is not None:
            self._out.flush()
        for unit in units:
            self._save(unit)
        if units and self._out is not None and self._state_topic is not None:
            self._out.flush()

    def checkpoint(self) -> None:
        """Flush outputs, write the states of the units changed since the last checkpoint
        (with the offsets they correspond to), commit the offsets."""
        changed = [self.units[u] for u in sorted(self._dirty, key=str) if u in self.units]
        self._save_units(changed)
        self._commit(changed)
        self._last_checkpoint_at = time.monotonic()
        self._dirty.clear()

    def _commit(self, units) -> None:
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        offsets = {
            TopicPartition(t, p): OffsetAndMetadata(o, "", -1)
            for unit in units
            for (t, p), o in unit.offsets.items()
        }
        if not offsets or self._consumer is None:
            return
        try:
            (self._lock or self._consumer).commit(offsets)
        except Exception as exc:  # lag monitoring only: never fatal
            log.warning("offset commit failed: %r", exc)

    # ------------------------------------------------------------------ main loop
    def _merge(self, consumer, tps):
        from streamcal.stream.ordering import OrderedMerge

        cfg = self.config
        view = consumer if self._membership is None else MergeView(consumer, self._membership)
        for tp in tps:
            unit = self.units[None if self._membership is None else tp.partition]
            consumer.seek(tp, unit.offsets.get((tp.topic, tp.partition), 0))
        return OrderedMerge(
            view,
            tps,
            {cfg.events_topic: _EVENT, cfg.labels_topic: _LABEL},
            max_wait=cfg.merge_wait,
            poll_records=cfg.poll_max_records,
            max_future=cfg.max_future_s,
            max_bytes=cfg.max_message_bytes,
            skip_unreadable=cfg.skip_unreadable,
            unit_of=None if self._membership is None else (lambda tp: tp.partition),
            late=self.late_arrivals,
        )

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
        self._on_metrics = on_metrics
        close_out = False
        if cfg.metrics_file and cfg.metrics_file.lower() != "none":
            if cfg.metrics_file == "-":
                self._metrics_out = sys.stdout
            else:
                self._metrics_out = open(cfg.metrics_file, "a", encoding="utf-8")  # noqa: SIM115
                close_out = True
        if self._exporter_cls is not None:
            self._exporter = self._exporter_cls(cfg.metrics_port, addr=cfg.metrics_addr)
        now = time.monotonic()
        self._rate_marks = {u: (now, unit.counts["events"]) for u, unit in self.units.items()}
        self._last_line_at = self._last_checkpoint_at = now
        self._last_line_counts = None
        self._dirty = set()
        stop_event = stop_event or threading.Event()

        # The cyclic GC is costly here: kafka-python allocates many container objects per
        # record, so gen-0 passes are frequent, and gen-2 passes walk the model and the
        # outbox. Freeze what exists once the clients are up (never garbage) and collect
        # young objects less often while running; both undone on return (gc settings are
        # process-wide). Measured: -5% CPU per event for `streamcal run`, more in a process
        # with a bigger heap (in process with the benchmark: main thread 148-163 -> 106-126
        # µs/event).
        quiet_false_alarms()
        gc_threshold = gc.get_threshold()
        consumer = None
        try:
            self._out = self._make_outbox()
            for unit in self.units.values():
                unit.send = self._out.send
            if cfg.scope == "global":
                if cfg.global_lock:
                    self._lock = GlobalLock(
                        cfg.kafka_client_settings(), cfg.group_id, cfg.events_topic,
                        cfg.session_timeout_ms,
                    )  # fmt: skip
                    self._lock.acquire()
            elif cfg.state_topic:
                from streamcal.stream.state_topic import StateTopic

                self._state_topic = StateTopic(
                    cfg.kafka_client_settings(), cfg.state_topic, cfg.group_id, self._key,
                    self._out, cfg.state_chunk_bytes,
                )  # fmt: skip
                self._state_topic.create()
            self._consumer = consumer = self._make_consumer()
            gc.freeze()
            gc.set_threshold(max(gc_threshold[0], _GC_GEN0), *gc_threshold[1:])
            if cfg.scope == "global":
                tps = self._partitions(consumer)
                consumer.assign(tps)
                merge = self._merge(consumer, tps)
            else:
                from streamcal.stream.group import check_copartitioned

                check_copartitioned(consumer, cfg.events_topic, cfg.labels_topic)
                self._membership = GroupMembership(
                    consumer, cfg.events_topic, cfg.labels_topic, self._release
                )
                self._membership.subscribe()
                merge = None
            return self._loop(consumer, merge, stop_event, max_idle_s, progress)
        finally:
            gc.set_threshold(*gc_threshold)
            gc.unfreeze()
            if self._membership is not None:  # the final checkpoint is written: no release
                self._membership._release = lambda units: None
            try:
                if consumer is not None:
                    consumer.close(autocommit=False)
            except Exception:  # noqa: BLE001
                pass
            if self._lock is not None:
                self._lock.close()
                self._lock = None
            try:
                if self._out is not None:
                    self._out.close(timeout=10)
            except Exception:  # noqa: BLE001
                pass
            self._out = None
            self._consumer = None
            if self._exporter is not None:
                self._exporter.close()
            if close_out:
                self._metrics_out.close()
                self._metrics_out = None

    def _loop(self, consumer, merge, stop_event, max_idle_s, progress) -> dict:
        cfg = self.config
        units = self.units
        membership = self._membership
        last_record_at = time.monotonic()
        n = 0
        generation = -1
        while not stop_event.is_set():
            if membership is not None:
                if membership.error is not None:
                    raise membership.error
                if membership.generation != generation:
                    # A new assignment: restore the new units (here, not in the rebalance
                    # callback, which blocks the heartbeats), then a new merge over the
                    # assignment, from the units' offsets.
                    generation = membership.generation
                    new = membership.take_new()
                    if new:
                        self._adopt(new)
                    tps = membership.partitions()
                    merge = self._merge(consumer, tps) if tps else None
                    last_record_at = time.monotonic()
                if merge is None:
                    consumer.poll(timeout_ms=200, max_records=1)  # join, heartbeat
                    item = None
                else:
                    item = merge.next(0.2)
                    if membership.generation != generation:
                        continue  # polled across a rebalance: read again from the offsets
            else:
                item = merge.next(0.2)
            if item is not None:
                # Then whatever is already releasable, in the same order, without the
                # checks below (timers, flags) per record: they run every _BURST.
                burst = 0
                dirty = self._dirty
                while item is not None:
                    rank, rec = item
                    u = None if membership is None else rec.partition
                    unit = units[u]
                    if rank == _EVENT:
                        unit.on_event(rec)
                    else:
                        unit.on_label(rec)
                    unit.offsets[(rec.topic, rec.partition)] = rec.offset + 1
                    dirty.add(u)
                    n += 1
                    if progress is not None and n % 1000 == 0:
                        progress(sum(x.counts["events"] for x in units.values()))
                    burst += 1
                    item = merge.ready() if burst < _BURST else None
                self._out.ship()
                now = last_record_at = time.monotonic()
            else:
                now = time.monotonic()
                # Idle means caught up; before that (start-up, a backlog still being
                # fetched) wait longer, but not forever (a broker that went away).
                idle = now - last_record_at
                if max_idle_s is not None and idle >= max_idle_s:
                    caught_up = merge is not None and merge.caught_up()
                    if caught_up or idle >= max(60.0, 10 * max_idle_s):
                        break
            if merge is not None:
                self.merge_stalls = merge.stalls
            if self._lock is not None:
                self._lock.keep()
            if self._out.failed:  # e.g. the broker restarted: recreate the producer now
                self._out.flush()
            if now - self._last_line_at >= cfg.metrics_interval:
                counts = tuple(
                    sum(x.counts[k] for x in units.values())
                    for k in ("events", "labels", "dead_letters")
                )
                if counts != self._last_line_counts:
                    self._emit_all()
                    self._last_line_counts = counts
                else:
                    self._last_line_at = now
            if self._dirty and now - self._last_checkpoint_at >= cfg.checkpoint_interval:
                self.checkpoint()
        if progress is not None:
            progress(sum(x.counts["events"] for x in units.values()))
        self.checkpoint_all()
        return self._emit_all() or self.metric_line()

    def checkpoint_all(self) -> None:
        """Checkpoint every unit held (the final checkpoint)."""
        self._dirty = set(self.units)
        self.checkpoint()


def _covered(state: dict) -> int:
    """How much input a unit's state covers: the sum of its next offsets."""
    return sum(o for _, _, o in state["offsets"])
