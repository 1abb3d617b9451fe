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
from streamcal.stream.unit import GLOBAL_UNIT

__all__ = ["MetricEmitter", "features_of", "metric_line"]


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
    multiclass = config.task == "multiclass"
    return (
        (metric_schema.MULTICLASS,) * multiclass
        + (metric_schema.PROTECTION,) * (config.protect and not multiclass)
        + (metric_schema.ALARM,) * config.alarm
    )


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
        rates of ``units`` from now."""
        cfg = self.config
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
        for u, unit in units.items():
            self.mark(u, unit.counts["events"])

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

    def due(self, now: float, totals) -> tuple | None:
        """The ``totals()`` (events, labels, dead letters) if the periodic lines are due at
        ``now`` (monotonic): ``metrics_interval`` has passed and the totals differ from
        the last lines' (the caller sets ``last_line_counts`` once it has sent them)."""
        if now - self.last_line_at < self.config.metrics_interval:
            return None
        counts = totals()
        if counts == self.last_line_counts:
            self.last_line_at = now  # nothing new: look again one interval later
            return None
        return counts

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
        classes = unit.class_snapshots() if self.config.task == "multiclass" else None
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
