"""Every count a unit keeps reaches Prometheus as a ``_total`` counter.

A unit's counts go into its metric line by name (``CalibrationUnit.snapshot``), and the
exporter serves every counter of the metric schema: a new count needs only its entry in
``streamcal.monitoring.schema.FIELDS`` (kind ``COUNTER``). This test says so when one is
missing, instead of the count silently staying out of the line and the scrape.
"""

from __future__ import annotations

from prometheus_client import generate_latest

from streamcal.monitoring import PrometheusExporter, schema
from streamcal.stream.config import ProcessorConfig
from streamcal.stream.metrics import metric_line
from streamcal.stream.unit import CalibrationUnit


def test_every_unit_count_is_a_schema_counter_served_as_total():
    config = ProcessorConfig()
    unit = CalibrationUnit(config, 3)
    try:
        counts = dict(unit.counts)
        for i, key in enumerate(counts):
            unit.counts[key] = i + 1
        line = metric_line(unit.snapshot(), 3, "host:1")
    finally:
        unit.close()
    exporter = PrometheusExporter(None)
    exporter.update(line)
    text = generate_latest(exporter.registry).decode()
    exporter.close()
    for i, key in enumerate(counts):
        try:
            f = schema.field(key)
        except KeyError:
            raise AssertionError(f"unit count {key!r} has no entry in schema.FIELDS") from None
        assert f.kind == schema.COUNTER, key
        if f.source == schema.TRACKER:
            continue  # "labels": the tracker's count is the line's (the same number in a run)
        assert f'streamcal_{f.prometheus_name}_total{{unit="3"}} {i + 1}.0' in text, key
