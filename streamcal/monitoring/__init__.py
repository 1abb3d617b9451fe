"""Monitoring: losses, calibration statistics, metric logs and reports."""

from streamcal.monitoring.reliability import (
    ReliabilityBins,
    expected_calibration_error,
    wilson_interval,
)
from streamcal.monitoring.tracker import SNAPSHOT_KEYS, CalibrationTracker

__all__ = [
    "CalibrationTracker",
    "ReliabilityBins",
    "SNAPSHOT_KEYS",
    "expected_calibration_error",
    "wilson_interval",
]
