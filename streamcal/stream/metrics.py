"""Metric lines: made from a unit's snapshot, and sent wherever the settings say.

A metric line (docs/contracts.md) has every field of the metric schema
(``streamcal.monitoring.schema``) but those of an optional feature that is off (the
protection fields without ``--protect``, the alarm's without ``--alarm``, the multiclass
ones of a binary run: absent, not null), in its order, taken by name from a unit's
``snapshot()`` and from the processor's own values (time, rate, merge stalls, the waiting
bound, version);
then the labels saying where it comes from: ``unit`` (the partition number, or
``global``) and ``instance``. With ``--by`` a unit's line is followed by its
per-category lines, with the same labels; with ``--task multiclass`` by its per-class
lines (labelled ``class``: each class's one-vs-rest band).

A line goes to the metrics file (or stdout), the metrics topic (one key per unit, so a
unit's lines stay in order), the Prometheus exporter and the caller's ``on_metrics``.
"""

from __future__ import annotations

import io
import sys
import time

import orjson

import streamcal
from streamcal.monitoring import schema as metric_schema
from streamcal.monitoring.log_file import open_for_append
from streamcal.stream.bounds import BoundWatch
from streamcal.stream.tasks import task_of
from streamcal.stream.unit import GLOBAL_UNIT

__all__ = ["MergeCounts", "MetricEmitter", "features_of", "metric_line", "prometheus_exporter",
           "total"]

_TOTALS = ("events", "labels", "dead_letters")  # a periodic line is sent when these change


def metric_line(values: dict, unit: int | None, instance: str, features=()) -> dict:
    """The metric line of ``unit`` from ``values`` (a unit's snapshot and the processor's
    values, by field name; a field without a value is None). Fields of an optional
    feature (``MetricField.only_with``) are there only if it is in ``features``.

    >>> line = metric_line({"events": 3, "labels": 1}, unit=2, instance="i-1")
    >>> line["events"], line["labels"], line["pending"], line["unit"], line["instance"]
    (3, 1, None, '2', 'i-1')
    >>> "alarm" in line, metric_line({}, None, "i-1", features=("alarm",))["alarm"]
    (False, None)
    """
    line = {
        f.key: values.get(f.key)
        for f in metric_schema.FIELDS
        if f.only_with is None or f.only_with in features
    }
    line["unit"] = "global" if unit is GLOBAL_UNIT else str(unit)
    line["instance"] = instance
    return line


def features_of(config) -> tuple:
    """The optional features of the schema whose fields ``config``'s metric lines carry.

    >>> from streamcal.stream.config import ProcessorConfig
    >>> features_of(ProcessorConfig()), features_of(ProcessorConfig(protect=False))
    (('protection', 'alarm'), ('alarm',))
    >>> features_of(ProcessorConfig(task="multiclass", model="gnb"))  # no protection there
    ('multiclass', 'alarm')
    """
    return task_of(config).metric_features(config)


def total(units: dict, count: str) -> int:
    """The sum of the counter ``count`` over ``units`` (unit id -> unit)."""
    return sum(unit.counts[count] for unit in units.values())


def prometheus_exporter(config):
    """The exporter's class when ``config`` has a ``metrics_port`` (else None): told now,
    with ``ValueError``, if the exporter cannot be had."""
    if config.metrics_port is None:
        return None
    try:
        from streamcal.monitoring.prometheus import PrometheusExporter
    except ImportError as exc:
        raise ValueError(f"metrics_port: Prometheus exporter unavailable: {exc}") from None
    return PrometheusExporter


class MergeCounts:
    """The ordered merge's counters in the metric lines (``streamcal.stream.kafka.
    ordering``): its stalls, and by unit (unit -> count) the records that came too late
    for the order, the positions the broker's log no longer held and the input offsets
    passed over unread. They outlive the merges and the runs.

    >>> counts = MergeCounts()
    >>> counts.late[3] = 2
    >>> counts(3)
    {'merge_stalls': 0, 'late_arrivals': 2, 'lost_input': 0, 'skipped_offsets': 0}
    """

    def __init__(self):
        self.stalls = 0
        self.late: dict = {}
        self.lost: dict = {}
        self.skipped: dict = {}

    def __call__(self, unit: int | None) -> dict:
        """The counters in ``unit``'s metric line."""
        return {
            "merge_stalls": self.stalls,
            "late_arrivals": self.late.get(unit, 0),
            "lost_input": self.lost.get(unit, 0),
            "skipped_offsets": self.skipped.get(unit, 0),
        }


class MetricEmitter:
    """Make the metric lines of a processor's units and send them (see the module
    docstring). ``start`` opens the outputs; until then, lines are only made."""

    def __init__(self, config, instance: str, exporter_class=None):
        self.config = config
        self.instance = instance
        self.exporter_class = exporter_class  # PrometheusExporter with metrics_port
        self.version = streamcal.__version__
        self.features = features_of(config)
        self.exporter = None
        self.bounds = BoundWatch(config)  # logs the label delay the waiting bounds hold
        self.out = None  # the metrics file (or stdout), while running
        self.outbox = None  # the processor's, while running
        self.on_metrics = None
        self._close_out = False
        now = time.monotonic()
        self._rate_marks: dict = {}  # unit -> (monotonic time, its events) of its last line
        self.last_line_at = now
        self.last_line_counts = None  # (events, labels, dead letters) of the last global line

    def start(self, units: dict, on_metrics=None) -> None:
        """Open the outputs (the outbox is set once the processor has one); measure the
        rates of ``units`` from now; say the waiting bounds in the log."""
        cfg = self.config
        self.bounds.start()
        self.on_metrics = on_metrics
        if cfg.metrics_file and cfg.metrics_file.lower() != "none":
            if cfg.metrics_file == "-":
                self.out = sys.stdout
            else:
                self.out = _MetricsFile(cfg.metrics_file)
                self._close_out = True
        if self.exporter_class is not None:
            self.exporter = self.exporter_class(cfg.metrics_port, addr=cfg.metrics_addr)
        self.last_line_counts = None
        self.last_line_at = time.monotonic()
        self.mark_all(units)

    def close(self) -> None:
        if self.exporter is not None:
            self.exporter.close()
        if self._close_out:
            self.out.close()
            self._close_out = False
        self.out = self.outbox = None

    def mark(self, unit: int | None, events: int) -> None:
        """Measure the event rate of ``unit`` from now (and ``events``) on."""
        self._rate_marks[unit] = (time.monotonic(), events)

    def mark_all(self, units: dict) -> None:
        """``mark`` each of ``units`` (unit id -> unit) at its events."""
        for u, unit in units.items():
            self.mark(u, unit.counts["events"])

    def emit_due(self, now: float, units: dict, merge_of) -> None:
        """Send the periodic lines of ``units`` (as ``emit_all``) if they are due at
        ``now`` (monotonic): ``metrics_interval`` has passed and the totals of their
        events, labels and dead letters differ from the last lines'."""
        if now - self.last_line_at < self.config.metrics_interval:
            return
        counts = tuple(total(units, k) for k in _TOTALS)
        if counts == self.last_line_counts:
            self.last_line_at = now  # nothing new: look again one interval later
            return
        self.emit_all(units, merge_of)
        self.last_line_counts = counts

    def line(self, unit: int | None, snapshot: dict, merge: dict) -> dict:
        """The current metric line of ``unit``, whose snapshot is ``snapshot``; ``merge``
        holds the ordered merge's counters for it (``merge_stalls``, ``late_arrivals``)."""
        mono = time.monotonic()
        events = snapshot["events"]
        since, then = self._rate_marks.get(unit, (mono, events))
        elapsed = mono - since
        values = {
            **snapshot,
            "ts": time.time(),
            "events_per_s": (events - then) / elapsed if elapsed > 0 else 0.0,
            **merge,
            "pending_max_bytes": self.config.pending_max_bytes,
            "version": self.version,
        }
        return metric_line(values, unit, self.instance, self.features)

    def current(self, units: dict, unit: int | None, unit_class, merge_of) -> dict:
        """The current line of ``unit`` among ``units`` (unit id -> unit), with
        ``merge_of(unit)`` as its merge counters; with ``--scope partition`` and no unit
        given, of the lowest one held. A unit not held (yet): the line of an empty
        ``unit_class``."""
        if unit is GLOBAL_UNIT and self.config.scope == "partition":
            unit = min(units) if units else GLOBAL_UNIT
        held = units.get(unit)
        snapshot = unit_class.empty_snapshot(self.config) if held is None else held.snapshot()
        return self.line(unit, snapshot, merge_of(unit))

    def emit(self, unit: int | None, snapshot: dict, categories, merge: dict, classes=None) -> dict:
        """Make the line of ``unit`` and send it, then its per-category lines
        (``categories``: rows of ``CalibrationTracker.category_snapshots``, or None), then
        its per-class lines (``classes``: rows of ``MulticlassTracker.class_snapshots``)."""
        line = self.line(unit, snapshot, merge)
        self.bounds.observe(line)
        self.mark(unit, line["events"])
        self.last_line_at = time.monotonic()
        if unit is GLOBAL_UNIT:
            self.last_line_counts = (line["events"], line["labels"], line["dead_letters"])
        data = orjson.dumps(line)
        if self.out is not None:
            self.out.write(data.decode() + "\n")
            self.out.flush()
        self._send(unit, line, data)
        if self.exporter is not None:
            self.exporter.update(line)
        if categories is not None:
            self._emit_categories(unit, line, categories)
        if classes:
            self._emit_classes(unit, line, classes)
        if self.on_metrics is not None:
            self.on_metrics(line)
        return line

    def emit_unit(self, unit, merge: dict) -> dict:
        """Make and send the line of ``unit`` (a ``CalibrationUnit``), with its
        per-category lines under ``--by``."""
        categories = unit.category_snapshots() if self.config.by is not None else None
        classes = unit.class_snapshots()  # none but multiclass has them
        return self.emit(unit.unit, unit.snapshot(), categories, merge, classes)

    def emit_all(self, units: dict, merge_of) -> dict | None:
        """The lines of all ``units`` (the global one, or by partition), with
        ``merge_of(unit)`` as each one's merge counters; the last line."""
        line = None
        for u in sorted(units, key=lambda k: -1 if k is GLOBAL_UNIT else k):
            line = self.emit_unit(units[u], merge_of(u))
        return line

    def _send(self, unit, line: dict, data: bytes) -> None:
        cfg = self.config
        if cfg.metrics_topic and self.outbox is not None:
            # One key per unit: one partition, so a unit's lines stay in order.
            key = cfg.client_id if unit is GLOBAL_UNIT else f"{cfg.client_id}/{line['unit']}"
            self.outbox.send(cfg.metrics_topic, key.encode(), data)

    def _emit_classes(self, unit, line: dict, classes) -> None:
        # A class, once seen, stays: each row replaces its class's previous one.
        labels = {"unit": line["unit"], "instance": line["instance"]}
        for row in classes:
            row = {**row, **labels}
            data = orjson.dumps(row)
            if self.out is not None:
                self.out.write(data.decode() + "\n")
            self._send(unit, line, data)
            if self.exporter is not None:
                self.exporter.update(row)
        if self.out is not None:
            self.out.flush()

    def _emit_categories(self, unit, line: dict, categories) -> None:
        labels = {"unit": line["unit"], "instance": line["instance"]}
        rows = [{**row, **labels} for row in categories]
        for row in rows:
            data = orjson.dumps(row)
            if self.out is not None:
                self.out.write(data.decode() + "\n")
            self._send(unit, line, data)
        if self.out is not None:
            self.out.flush()
        if self.exporter is not None:
            self.exporter.update_categories(rows, labels)


class _MetricsFile:
    """The ``--metrics-file``, appended to (a last line cut off by a killed run is dropped
    first: ``open_for_append``): an error of the disk (full, read-only) names the file and
    what to do."""

    def __init__(self, path: str):
        self.path = path
        self._file = self._do(lambda: io.TextIOWrapper(open_for_append(path), encoding="utf-8"))

    def _do(self, action):
        try:
            return action()
        except OSError as exc:
            raise OSError(
                exc.errno, f"cannot write the metric log {self.path!r}: {exc.strerror or exc}; "
                "free space on its disk, or give another --metrics-file (or none)",
            ) from None  # fmt: skip

    def write(self, text: str) -> None:
        self._do(lambda: self._file.write(text))

    def flush(self) -> None:
        self._do(self._file.flush)

    def close(self) -> None:
        self._do(self._file.close)
