"""``PrometheusExporter``: serve the latest metric-log line on an HTTP ``/metrics`` endpoint.

The stream processor calls ``update(line)`` each time it writes a metric-log line; a
scrape then reads that line. Cumulative counts of the line become Prometheus counters
(``streamcal_events_total``, ...), everything else gauges. The exporter is a custom
collector on its own ``CollectorRegistry``, so several processors (or tests) in one process
never collide, and a scrape always sees one consistent line.

>>> import urllib.request
>>> with PrometheusExporter(port=0) as exporter:  # port 0: any free port
...     exporter.update({"events": 12, "labels": 10, "log_loss": 0.25, "version": 3})
...     url = f"http://127.0.0.1:{exporter.port}/metrics"
...     text = urllib.request.urlopen(url, timeout=5).read().decode()
>>> [line for line in text.splitlines() if line.startswith(("streamcal_events", "streamcal_log"))]
['streamcal_events_total 12.0', 'streamcal_log_loss 0.25']
"""

from __future__ import annotations

import math
import threading
from numbers import Real

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily

__all__ = ["PrometheusExporter", "COUNTERS", "GAUGES"]

# metric-log key -> (metric name without prefix, help). Counters get "_total" appended.
COUNTERS = {
    "events": ("events", "Events consumed."),
    "labels": ("labels", "Labels joined to their predictions (tracker updates)."),
    "raw_labels": ("raw_labels", "Labels whose prediction carried a raw model score."),
    "predictions": ("predictions", "Predictions produced."),
    "expired": ("expired", "Predictions whose label never came before the deadline."),
    "dead_letters": ("dead_letters", "Messages sent to the dead-letter topic."),
    "merge_stalls": ("merge_stalls", "Times the ordered merge of partitions waited on one."),
}
GAUGES = {
    "pending": ("pending", "Predictions waiting for their label."),
    "waiting_labels": ("waiting_labels", "Labels waiting for their event."),
    "events_per_s": ("events_per_second", "Recent event rate."),
    "calibration_size": ("calibration_size", "Labelled pairs in the calibration set."),
    "ts": ("last_update_timestamp_seconds", "Unix time of the metric-log line."),
    "log_loss": ("log_loss", "Cumulative log loss of the calibrated probability p."),
    "recent_log_loss": ("recent_log_loss", "Log loss of p over the last window of labels."),
    "square_loss": ("square_loss", "Cumulative square (Brier) loss of p."),
    "recent_square_loss": ("recent_square_loss", "Square loss of p over the last window."),
    "raw_log_loss": ("raw_log_loss", "Cumulative log loss of the raw model score."),
    "recent_raw_log_loss": ("recent_raw_log_loss", "Log loss of the raw score, last window."),
    "raw_square_loss": ("raw_square_loss", "Cumulative square loss of the raw model score."),
    "recent_raw_square_loss": (
        "recent_raw_square_loss",
        "Square loss of the raw score, last window.",
    ),
    "mean_width": ("mean_width", "Mean Venn-Abers interval width p1 - p0."),
    "recent_mean_width": ("recent_mean_width", "Mean p1 - p0 over the last window."),
    "ece": ("ece", "Binned expected calibration error of p."),
    "raw_ece": ("raw_ece", "Binned expected calibration error of the raw score."),
    "mean_p0": ("mean_p0", "Mean p0 (lower end of the Corollary 1 band)."),
    "frequency": ("frequency", "Frequency of label 1."),
    "mean_p1": ("mean_p1", "Mean p1 (upper end of the Corollary 1 band)."),
}


class _LineCollector:
    """Turns the latest metric-log line into metric families at each scrape."""

    def __init__(self, prefix: str, const_labels: dict[str, str]):
        self.prefix = prefix
        self.label_names = list(const_labels)
        self.label_values = [str(v) for v in const_labels.values()]
        self.line: dict = {}

    def describe(self):
        return []  # names depend on the line; registering must not call collect()

    def collect(self):
        line = self.line  # one reference: a concurrent update() cannot mix two lines
        for table, family in ((COUNTERS, CounterMetricFamily), (GAUGES, GaugeMetricFamily)):
            for key, (name, doc) in table.items():
                value = line.get(key)
                if value is None:
                    continue  # undefined (no labels yet, no raw scores): absent, not 0
                m = family(f"{self.prefix}_{name}", doc, labels=self.label_names)
                m.add_metric(self.label_values, float(value))
                yield m
        if line.get("version") is not None:
            m = InfoMetricFamily(
                f"{self.prefix}_build",
                "The version field of the metric line (streamcal's version).",
                labels=self.label_names,
            )
            m.add_metric(self.label_values, {"version": str(line["version"])})
            yield m


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
        """Publish one metric-log line (keys as in contracts.md; unknown keys are ignored).

        Raises ValueError naming the key if a known statistic is not a number or null.
        """
        if not isinstance(metric_line, dict):
            raise ValueError(f"metric line must be a dict, got {type(metric_line).__name__}")
        for key in (*COUNTERS, *GAUGES):
            v = metric_line.get(key)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, Real) or math.isnan(float(v)):
                raise ValueError(f"metric line field {key!r} must be a number or null, got {v!r}")
        self._collector.line = dict(metric_line)

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
