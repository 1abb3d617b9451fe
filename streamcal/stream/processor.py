"""The stream processor: events in, calibrated predictions out, labels joined, model learns.

One ``Processor`` owns the whole calibration state, so it reads every partition of the
events and labels topics itself (``assign``, no consumer-group rebalancing) in a
deterministic merge order (see ``streamcal.stream.ordering``), and resumes from the
offsets stored in its newest checkpoint. Delivery is at least once and idempotent by
key: after a crash the records since the last checkpoint are processed again from the
same state, in the same order, so the predictions re-emitted are identical to the first
ones (consumers keep the latest value per key, or dedupe by id).

Per event: decode, score (``predict_interval_one``), produce the prediction, wait in the
pending store. Per label: decode, join with its pending event, record the loss of the
prediction that was made (``CalibrationTracker``), let the model learn. Anything that
cannot be processed goes to the dead-letter topic with its original bytes and a reason,
and leaves the state untouched.
"""

from __future__ import annotations

import gc
import logging
import sys
import threading
import time

import orjson

import streamcal
from streamcal.core.merge import SCALAR_MERGES
from streamcal.monitoring import schema as metric_schema
from streamcal.monitoring.tracker import prediction_in_range
from streamcal.stream.checkpoint import CheckpointError, CheckpointStore
from streamcal.stream.config import ProcessorConfig
from streamcal.stream.deadletter import dead_letter
from streamcal.stream.messages import BadInput, Fields, decode_event, decode_label
from streamcal.stream.models import make_model
from streamcal.stream.pending import RecentIds, WaitingRoom
from streamcal.stream.sink import Outbox, ProducerProcess, quiet_false_alarms

_merge_square = SCALAR_MERGES["square"]

__all__ = ["Processor", "ProcessorState", "CheckpointError"]

log = logging.getLogger("streamcal.stream")

_EVENT, _LABEL = 0, 1  # topic ranks: at equal timestamps an event goes before a label
_BURST = 256  # records handled between two looks at the clock, flags and timers
_GC_GEN0 = 50_000  # gen-0 threshold while running (CPython's default is 700)

# Settings a checkpoint is bound to: resuming with other ones would mix two states.
_FINGERPRINT = (
    "events_topic",
    "labels_topic",
    "model",
    "mode",
    "window",
    "merge",
    "refresh_every",
    "id_field",
    "features_field",
    "label_field",
)


class ProcessorState:
    """Everything a checkpoint holds (picklable)."""

    def __init__(self, config: ProcessorConfig):
        from streamcal.learner import VennAbersClassifier
        from streamcal.monitoring.tracker import CalibrationTracker

        kwargs = {"merge": config.merge}
        if config.mode is not None:
            kwargs["mode"] = config.mode
        if config.window is not None:
            kwargs["window"] = config.window
        if config.refresh_every is not None:
            kwargs["refresh_every"] = config.refresh_every
        self.clf = VennAbersClassifier(make_model(config.model), **kwargs)
        self.tracker = CalibrationTracker(window=config.tracker_window, bins=config.tracker_bins)
        self.pending = WaitingRoom(config.pending_ttl, config.pending_max)
        self.waiting = WaitingRoom(config.label_wait, config.label_wait_max)
        self.recent = RecentIds(config.dedupe_window)
        self.counts = {"events": 0, "labels": 0, "predictions": 0, "expired": 0, "dead_letters": 0}
        self.offsets: dict[tuple[str, int], int] = {}  # next offset to process
        self.clock = float("-inf")  # the largest record timestamp seen (s)
        self.fingerprint = {k: getattr(config, k) for k in _FINGERPRINT}
        self.version = streamcal.__version__


class Processor:
    """Run the stream processor described by a ``ProcessorConfig``.

    Construction validates everything that can be checked without a broker (model,
    checkpoint key) and restores the newest checkpoint if there is one, raising
    ``ValueError`` or ``CheckpointError`` before anything is consumed.
    """

    def __init__(self, config: ProcessorConfig):
        config.validate()
        self.config = config
        self._fields = Fields.of(config)
        key = config.key_bytes()
        self._checkpoints = (
            CheckpointStore(config.state_dir, key, config.checkpoint_keep)
            if config.state_dir is not None
            else None
        )
        self.restored = False
        state = self._checkpoints.load() if self._checkpoints is not None else None
        if state is None:
            state = ProcessorState(config)
        else:
            self._check_fingerprint(state)
            self.restored = True
        self.state = state
        self._version = streamcal.__version__
        self._exporter = None
        if config.metrics_port is not None:
            try:
                from streamcal.monitoring.prometheus import PrometheusExporter
            except ImportError as exc:
                raise ValueError(f"metrics_port: Prometheus exporter unavailable: {exc}") from None
            self._exporter_cls = PrometheusExporter
        self._out = None  # Outbox or ProducerProcess, while running
        self._consumer = None
        self.merge_stalls = 0

    def _check_fingerprint(self, state) -> None:
        if not isinstance(state, ProcessorState):
            raise CheckpointError("checkpoint does not hold a streamcal processor state")
        for k in _FINGERPRINT:
            if state.fingerprint.get(k) != getattr(self.config, k):
                raise CheckpointError(
                    f"checkpoint was written with {k}={state.fingerprint.get(k)!r} but the "
                    f"processor is configured with {k}={getattr(self.config, k)!r}; use another "
                    "state directory or the same settings"
                )

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

        return KafkaConsumer(
            **self.config.kafka_client_settings(),
            group_id=self.config.group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_poll_records=self.config.poll_max_records,
            fetch_max_wait_ms=100,
        )

    def _partitions(self, consumer, timeout: float = 30.0):
        from kafka import TopicPartition

        deadline = time.monotonic() + timeout
        out = []
        for topic in (self.config.events_topic, self.config.labels_topic):
            while True:
                parts = consumer.partitions_for_topic(topic)
                if parts:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"topic {topic!r} has no partitions (broker unreachable?)")
                consumer.topics()  # a metadata request; brokers that auto-create do so now
                time.sleep(0.1)
            out.extend(TopicPartition(topic, p) for p in sorted(parts))
        return out

    def _send(self, topic: str, key: bytes | None, value: bytes) -> None:
        self._out.send(topic, key, value)

    # ------------------------------------------------------------------ per record
    def _dead(self, rec, reason: str, value=None) -> None:
        self.state.counts["dead_letters"] += 1
        self._send(
            self.config.dead_letter_topic,
            rec.key,
            dead_letter(
                rec.value if value is None else value,
                rec.key,
                rec.topic,
                rec.partition,
                rec.offset,
                rec.timestamp,
                reason,
                self._version,
            ),
        )

    def _advance(self, ts_ms: int) -> None:
        st = self.state
        now = ts_ms / 1000.0
        if now <= st.clock:
            return
        st.clock = now
        if st.pending:
            for eid, _ in st.pending.expire(now):
                st.counts["expired"] += 1
                st.recent.add(eid, "expired")
        if st.waiting:
            for _, old in st.waiting.expire(now):
                self._dead(
                    old.rec,
                    f"label without event: no event with this id within "
                    f"label_wait={self.config.label_wait:g} s",
                )

    def _on_event(self, rec) -> None:
        st = self.state
        try:
            ev = decode_event(rec.value, self._fields)
        except BadInput as exc:
            self._dead(rec, str(exc))
            return
        eid = ev.id
        if eid in st.pending or st.recent.get(eid) is not None:
            self._dead(rec, f"duplicate event id {eid!r}")
            return
        self._advance(rec.timestamp)
        iv = st.clf.predict_interval_one(ev.x)
        p0, p1, p, score = iv.p0, iv.p1, iv.p, iv.score
        out = {
            "id": eid,
            "p0": p0,
            "p1": p1,
            "p": p,
            "p_square": _merge_square(p0, p1),
            "score": score,
            "calibration_size": st.clf.calibration_size,
            "version": self._version,
        }
        key = eid.encode()
        self._send(self.config.predictions_topic, key, orjson.dumps(out))
        st.counts["events"] += 1
        st.counts["predictions"] += 1
        for old_id, _ in st.pending.put(eid, (ev.x, p0, p1, p, score), st.clock):
            st.counts["expired"] += 1
            st.recent.add(old_id, "expired")
        waiting = st.waiting.pop(eid)
        if waiting is not None:
            self._join(eid, waiting.y, waiting.rec)

    def _on_label(self, rec) -> None:
        st = self.state
        try:
            lab = decode_label(rec.value, self._fields)
        except BadInput as exc:
            self._dead(rec, str(exc))
            return
        eid = lab.id
        if eid in st.pending:
            self._advance(rec.timestamp)
            self._join(eid, lab.y, rec)
            return
        if eid in st.waiting:
            self._dead(rec, f"duplicate label for {eid!r} (a label is already waiting)")
            return
        status = st.recent.get(eid)
        if status == "joined":
            self._dead(rec, f"duplicate label for {eid!r} (already joined)")
            return
        if status == "expired":
            self._dead(rec, f"label for {eid!r} came after its event expired (pending_ttl/max)")
            return
        self._advance(rec.timestamp)
        for _, old in st.waiting.put(eid, _WaitingLabel(lab.y, rec), st.clock):
            self._dead(
                old.rec,
                f"label without event: waiting room full (label_wait_max="
                f"{self.config.label_wait_max})",
            )

    def _join(self, eid: str, y: bool, rec) -> None:
        """Join label ``y`` (from ``rec``) with its pending event: all or nothing. If the
        tracker or the learner refuses, the label becomes a dead letter and the state (the
        pending event included) is left as it was."""
        st = self.state
        x, p0, p1, p, score = st.pending.get(eid)
        if not prediction_in_range(p0, p1, p, score):  # first: the learner cannot be undone
            self._dead(
                rec,
                f"tracker rejected the prediction of {eid!r}: "
                f"p0={p0!r}, p1={p1!r}, p={p!r}, score={score!r}",
            )
            return
        try:
            st.clf.learn_one(x, y)
        except Exception as exc:  # noqa: BLE001 - any model error: reject this label only
            self._dead(rec, f"learner rejected the label of {eid!r}: {exc!r}")
            return
        st.tracker.update(p0, p1, y, score=score, p=p)
        st.pending.pop(eid)
        st.recent.add(eid, "joined")
        st.counts["labels"] += 1
        # Keyed on the label count, not on time, so these lines replay identically.
        if st.counts["labels"] % self.config.metrics_every == 0:
            self._emit_metrics()

    # ------------------------------------------------------------------ metrics
    def metric_line(self) -> dict:
        """The current metric line (docs/contracts.md): every field of the metric schema,
        in its order, from the tracker's snapshot, ``state.counts`` (by name) and below."""
        st = self.state
        now = time.time()
        mono = time.monotonic()
        events = st.counts["events"]
        elapsed = mono - self._rate_mark[0]
        rate = (events - self._rate_mark[1]) / elapsed if elapsed > 0 else 0.0
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
            version=self._version,
        )
        return {f.key: values.get(f.key) for f in metric_schema.FIELDS}

    def _emit_metrics(self) -> dict:
        line = self.metric_line()
        self._rate_mark = (time.monotonic(), self.state.counts["events"])
        self._last_line_at = time.monotonic()
        self._last_line_counts = (line["events"], line["labels"], line["dead_letters"])
        data = orjson.dumps(line)
        if self._metrics_out is not None:
            self._metrics_out.write(data.decode() + "\n")
            self._metrics_out.flush()
        if self.config.metrics_topic:
            # One key for all lines: one partition, so they stay in order.
            self._send(self.config.metrics_topic, self.config.client_id.encode(), data)
        if self._exporter is not None:
            self._exporter.update(line)
        if self._on_metrics is not None:
            self._on_metrics(line)
        return line

    @property
    def metrics_port(self) -> int | None:
        """The port the Prometheus endpoint is bound to (useful with ``metrics_port=0``), or
        None when it is off or ``run`` has not started it yet."""
        return self._exporter.port if self._exporter is not None else None

    # ------------------------------------------------------------------ checkpoints
    def checkpoint(self) -> None:
        """Flush outputs, write the state (with the offsets it corresponds to), commit."""
        self._out.flush()
        if self._checkpoints is not None:
            self._checkpoints.save(self.state)
        self._commit()
        self._last_checkpoint_at = time.monotonic()
        self._dirty = False

    def _commit(self) -> None:
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        offsets = {
            TopicPartition(t, p): OffsetAndMetadata(o, "", -1)
            for (t, p), o in self.state.offsets.items()
        }
        if not offsets:
            return
        try:
            self._consumer.commit(offsets)
        except Exception as exc:  # lag monitoring only: never fatal
            log.warning("offset commit failed: %r", exc)

    # ------------------------------------------------------------------ main loop
    def run(
        self,
        stop_event: threading.Event | None = None,
        max_idle_s: float | None = None,
        on_metrics=None,
        progress=None,
    ) -> dict:
        """Process until ``stop_event`` is set, or no record arrived for ``max_idle_s``
        seconds; then flush, checkpoint, commit and return the final metric line."""
        from streamcal.stream.ordering import OrderedMerge

        cfg = self.config
        st = self.state
        self._on_metrics = on_metrics
        self._metrics_out = None
        close_out = False
        if cfg.metrics_file and cfg.metrics_file.lower() != "none":
            if cfg.metrics_file == "-":
                self._metrics_out = sys.stdout
            else:
                self._metrics_out = open(cfg.metrics_file, "a", encoding="utf-8")  # noqa: SIM115
                close_out = True
        if cfg.metrics_port is not None:
            self._exporter = self._exporter_cls(cfg.metrics_port, addr=cfg.metrics_addr)
        self._rate_mark = (time.monotonic(), st.counts["events"])
        self._last_line_at = self._last_checkpoint_at = time.monotonic()
        self._last_line_counts = None
        self._dirty = False
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
        consumer = self._out = None
        try:
            self._out = self._make_outbox()
            self._consumer = consumer = self._make_consumer()
            gc.freeze()
            gc.set_threshold(max(gc_threshold[0], _GC_GEN0), *gc_threshold[1:])
            tps = self._partitions(consumer)
            consumer.assign(tps)
            for tp in tps:
                consumer.seek(tp, st.offsets.get((tp.topic, tp.partition), 0))
            merge = OrderedMerge(
                consumer,
                tps,
                {cfg.events_topic: _EVENT, cfg.labels_topic: _LABEL},
                max_wait=cfg.merge_wait,
                poll_records=cfg.poll_max_records,
                max_future=cfg.max_future_s,
                max_bytes=cfg.max_message_bytes,
                skip_unreadable=cfg.skip_unreadable,
            )
            offsets = st.offsets
            on_event, on_label = self._on_event, self._on_label
            last_record_at = time.monotonic()
            n = 0
            ready = merge.ready
            while not stop_event.is_set():
                item = merge.next(0.2)
                if item is not None:
                    # Then whatever is already releasable, in the same order, without the
                    # checks below (timers, flags) per record: they run every _BURST.
                    burst = 0
                    while item is not None:
                        rank, rec = item
                        if rank == _EVENT:
                            on_event(rec)
                        else:
                            on_label(rec)
                        offsets[(rec.topic, rec.partition)] = rec.offset + 1
                        n += 1
                        if progress is not None and n % 1000 == 0:
                            progress(st.counts["events"])
                        burst += 1
                        item = ready() if burst < _BURST else None
                    self._out.ship()
                    self._dirty = True
                    now = last_record_at = time.monotonic()
                else:
                    now = time.monotonic()
                    # Idle means caught up; before that (start-up, a backlog still being
                    # fetched) wait longer, but not forever (a broker that went away).
                    idle = now - last_record_at
                    if max_idle_s is not None and idle >= max_idle_s:
                        if merge.caught_up() or idle >= max(60.0, 10 * max_idle_s):
                            break
                self.merge_stalls = merge.stalls
                if self._out.failed:  # e.g. the broker restarted: recreate the producer now
                    self._out.flush()
                if now - self._last_line_at >= cfg.metrics_interval:
                    counts = (st.counts["events"], st.counts["labels"], st.counts["dead_letters"])
                    if counts != self._last_line_counts:
                        self._emit_metrics()
                    else:
                        self._last_line_at = now
                if self._dirty and now - self._last_checkpoint_at >= cfg.checkpoint_interval:
                    self.checkpoint()
            if progress is not None:
                progress(st.counts["events"])
            self.checkpoint()
            return self._emit_metrics()
        finally:
            gc.set_threshold(*gc_threshold)
            gc.unfreeze()
            try:
                if consumer is not None:
                    consumer.close(autocommit=False)
            except Exception:  # noqa: BLE001
                pass
            try:
                if self._out is not None:
                    self._out.close(timeout=10)
            except Exception:  # noqa: BLE001
                pass
            if self._exporter is not None:
                self._exporter.close()
            if close_out:
                self._metrics_out.close()


class _WaitingLabel:
    """A label that came before its event, with its record for a dead letter."""

    __slots__ = ("y", "rec")

    def __init__(self, y: bool, rec):
        self.y = y
        # Keep only what a dead letter needs (ConsumerRecords hold more, e.g. headers).
        self.rec = _Rec(rec.topic, rec.partition, rec.offset, rec.timestamp, rec.key, rec.value)

    def __getstate__(self):
        return (self.y, tuple(self.rec))

    def __setstate__(self, state):
        self.y = state[0]
        self.rec = _Rec(*state[1])


from typing import NamedTuple  # noqa: E402


class _Rec(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
