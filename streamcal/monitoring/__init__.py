"""Monitoring: losses, calibration statistics, metric logs and reports.

``CalibrationTracker`` computes the statistics; ``read_metric_log`` / ``read_predictions``
read the JSON-lines files the stream processor writes, and ``MetricLogWriter`` writes a
metric log from a library loop; ``write_report`` turns either into
an HTML page with figures (needs matplotlib: ``pip install streamcal-va[report]``);
``PrometheusExporter`` serves metric-log lines to Prometheus. ``schema`` declares the
fields of a metric line once, for all of them (docs/contracts.md).
"""

from streamcal.monitoring.metric_log import read_metric_log, read_predictions
from streamcal.monitoring.metric_log_writer import MetricLogWriter
from streamcal.monitoring.prometheus import PrometheusExporter
from streamcal.monitoring.reliability import (
    ReliabilityBins,
    expected_calibration_error,
    wilson_interval,
)
from streamcal.monitoring.report import write_report
from streamcal.monitoring.tracker import SNAPSHOT_KEYS, CalibrationTracker

__all__ = [
    "CalibrationTracker",
    "MetricLogWriter",
    "PrometheusExporter",
    "ReliabilityBins",
    "SNAPSHOT_KEYS",
    "expected_calibration_error",
    "read_metric_log",
    "read_predictions",
    "wilson_interval",
    "write_report",
]
