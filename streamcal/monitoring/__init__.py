"""Monitoring: losses, calibration statistics, metric logs and reports."""
