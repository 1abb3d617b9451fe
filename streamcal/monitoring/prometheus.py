"""``PrometheusExporter``: serve the latest metric-log line on an HTTP ``/metrics`` endpoint.

The stream processor calls ``update(line)`` each time it writes a metric-log line; a
scrape then reads that line. The metric schema (``streamcal.monitoring.schema``) says
what each field becomes and ``streamcal.monitoring.series`` how: counters
(``streamcal_events_total``, ...), means as ``_sum``/``_count`` pairs
(``streamcal_log_loss_sum``, ...), gauges, and the version as ``streamcal_build_info``;
lines with label values (see the schema) are kept one per label set. The exporter is a
custom collector on its own ``CollectorRegistry``, so several processors (or tests) in
one process never collide, and a scrape always sees one consistent line.

>>> import urllib.request
>>> with PrometheusExporter(port=0) as exporter:  # port 0: any free port
...     exporter.update({"events": 12, "labels": 10, "log_loss": 0.25, "version": 3})
...     url = f"http://127.0.0.1:{exporter.port}/metrics"
...     text = urllib.request.urlopen(url, timeout=5).read().decode()
>>> [line for line in text.splitlines() if line.startswith(("streamcal_events", "streamcal_log"))]
['streamcal_log_loss_count 10.0', 'streamcal_log_loss_sum 2.5', 'streamcal_events_total 12.0']
"""

from __future__ import annotations

import math
import threading
from numbers import Real

from prometheus_client import CollectorRegistry, start_http_server

from streamcal.monitoring import histogram, schema
from streamcal.monitoring.metric_log import check_bins
from streamcal.monitoring.series import line_families

__all__ = ["PrometheusExporter"]

def _check(metric_line) -> None:
    """ValueError naming the key if a known statistic is not a number or null."""
    if not isinstance(metric_line, dict):
        raise ValueError(f"metric line must be a dict, got {type(metric_line).__name__}")
    for f in schema.FIELDS:
        v = metric_line.get(f.key)
        if f.kind == schema.BINS:
            check_bins("metric line", f.key, v)  # a scrape turns them into series
        elif f.kind == schema.HISTOGRAM:
            histogram.check("metric line", f.key, v)
        if v is None or not f.numeric:
            continue
        if isinstance(v, bool) or not isinstance(v, Real) or math.isnan(float(v)):
            raise ValueError(f"metric line field {f.key!r} must be a number or null, got {v!r}")


def _label_values(line: dict) -> tuple:
    """The line's values of the schema's labels (None where it has none)."""
    return tuple(line.get(label.key) for label in schema.LABELS)


class _LineCollector:
    """Turns the latest metric-log line of each label set into metric families at each
    scrape (``streamcal.monitoring.series``). A line without labels is the whole
    processor's."""

    def __init__(self, prefix: str, const_labels: dict[str, str]):
        self.prefix = prefix
        self.const_labels = const_labels
        self.lines: dict[tuple, dict] = {}
        self.floors: dict = {}  # each sum's last (count, value): sums never go down

    def describe(self):
        return []  # names depend on the line; registering must not call collect()

    def collect(self):
        lines = self.lines  # one snapshot: a concurrent update() cannot mix
        yield from line_families(lines, self.prefix, self.const_labels, self.floors)


class PrometheusExporter:
    """Expose metric-log lines at ``http://ADDR:PORT/metrics``.

    Parameters
    ----------
    port
        TCP port; 0 picks a free one (read it back from ``.port``); None starts no server
        (scrape ``.registry`` yourself, e.g. with ``prometheus_client.generate_latest``).
    addr
        Listening address: loopback by default, so nothing is exposed unless asked for.
    registry
        The ``CollectorRegistry`` to register with; default: a new one of its own.
    prefix
        Metric-name prefix.
    const_labels
        Labels put on every metric, e.g. ``{"processor": "fraud"}`` to tell apart several
        processors sharing one registry.
    """

    def __init__(
        self,
        port: int | None,
        addr: str = "127.0.0.1",
        registry: CollectorRegistry | None = None,
        prefix: str = "streamcal",
        const_labels: dict[str, str] | None = None,
    ):
        self.registry = CollectorRegistry() if registry is None else registry
        self._collector = _LineCollector(prefix, dict(const_labels or {}))
        self.registry.register(self._collector)
        self._registered = True
        self._server = self._thread = None
        self._lock = threading.Lock()
        self.port = None
        if port is not None:
            try:
                self._server, self._thread = start_http_server(port, addr, registry=self.registry)
            except BaseException:
                self.registry.unregister(self._collector)
                raise
            self.port = self._server.server_port
        self.addr = addr

    def update(self, metric_line: dict) -> None:
        """Publish one metric-log line (fields as in docs/contracts.md; unknown keys are
        ignored). It replaces the previous line with the same label values.

        Raises ValueError naming the key if a known statistic is not a number or null.
        """
        _check(metric_line)
        # A new dict for each line: a scrape in progress keeps reading the one it took.
        lines = dict(self._collector.lines)
        lines[_label_values(metric_line)] = dict(metric_line)
        self._collector.lines = lines

    def update_categories(self, rows: list[dict], labels: dict | None = None) -> None:
        """Publish the per-category lines (``CalibrationTracker.category_snapshots()``) as
        one set: categories that left the top k are no longer scraped. ``labels`` (e.g.
        ``{"unit": "3", "instance": "a"}``) are added to every row, and the set replaced is
        that of those labels only: each unit publishes its own categories."""
        labels = dict(labels or {})
        for row in rows:
            if not isinstance(row, dict) or not isinstance(row.get(schema.CATEGORY), str):
                raise ValueError(f"a category line needs a string 'category', got {row!r}")
        rows = [{**row, **labels} for row in rows]
        for row in rows:
            _check(row)
        keep = {
            values: line
            for values, line in self._collector.lines.items()
            if line.get(schema.CATEGORY) is None or any(line.get(k) != v for k, v in labels.items())
        }
        for row in rows:
            keep[_label_values(row)] = row
        # One assignment: a scrape sees the old set or the new one, never a part of it.
        self._collector.lines = keep

    def close(self) -> None:
        """Stop the HTTP server (idempotent) and leave the registry."""
        with self._lock:
            server, self._server = self._server, None
            if server is not None:
                server.shutdown()
                server.server_close()
                self._thread.join(timeout=5)
            if self._registered:
                self.registry.unregister(self._collector)
                self._registered = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        where = f"{self.addr}:{self.port}" if self.port is not None else "no server"
        return f"PrometheusExporter({where})"
