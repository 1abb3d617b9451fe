"""The metric schema is the one declaration of the metric line: a field added there
shows up in the processor's metric line, the Prometheus scrape and the report."""

from __future__ import annotations

import dataclasses
import html
import json
import re
import urllib.request

import orjson
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from streamcal.monitoring import PrometheusExporter, schema
from streamcal.monitoring.metric_log import check_metric_line
from streamcal.stream.config import ProcessorConfig
from streamcal.stream.processor import Processor
from streamcal.stream.unit import CalibrationUnit
from tests._kafka_helpers import base_settings, produce_stream, synthetic_stream


def samples_of(text: str) -> list:
    return [s for fam in text_string_to_metric_families(text) for s in fam.samples]


def test_keys_are_unique_and_every_processor_count_is_declared():
    keys = [f.key for f in schema.FIELDS]
    assert len(keys) == len(set(keys))
    names = [f.prometheus_name for f in schema.FIELDS]
    assert len(names) == len(set(names))
    # A count the processor keeps but the schema does not declare would never be seen.
    state = CalibrationUnit(ProcessorConfig.build())
    assert set(state.counts) <= set(keys)
    assert all(schema.field(k).kind == schema.COUNTER for k in state.counts)


def test_a_field_is_checked_by_its_kind():
    line = {f.key: 0.5 for f in schema.FIELDS if f.required}
    line["labels"] = 3
    assert check_metric_line(dict(line, events=7, version="1.0")) is not None
    with pytest.raises(ValueError, match="'events' must be a count"):
        check_metric_line(dict(line, events=7.5))
    with pytest.raises(ValueError, match="'pending' must be a number or null"):
        check_metric_line(dict(line, pending="many"))
    with pytest.raises(ValueError, match="reliability must be"):
        check_metric_line(dict(line, reliability={}))


@pytest.mark.kafka
def test_a_field_added_to_the_schema_reaches_line_scrape_and_report(
    kafka_broker, unique_topics, tmp_path, monkeypatch
):
    pytest.importorskip("matplotlib")
    from streamcal.monitoring.report import write_report

    # The one-line change: declare the field ...
    added = schema.MetricField("label_records", schema.COUNTER, "Label records read.",
                               title="label records read")  # fmt: skip
    monkeypatch.setattr(schema, "FIELDS", (*schema.FIELDS, added))

    # ... plus its computation: a count of the processor, picked up by name.
    class CountingUnit(CalibrationUnit):
        def on_label(self, rec, message=None):
            self.counts["label_records"] = self.counts.get("label_records", 0) + 1
            super().on_label(rec, message)

    class CountingProcessor(Processor):
        unit_class = CountingUnit

    n = 120
    events, labels = synthetic_stream(n, seed=5, label_delay_ms=1, missing=frozenset({3, 7}))
    produce_stream(kafka_broker, unique_topics, events, labels)
    metrics_file = tmp_path / "metrics.jsonl"
    config = ProcessorConfig.build(
        **base_settings(
            kafka_broker, unique_topics, metrics_file=str(metrics_file), metrics_every=40,
            metrics_port=0,
        )
    )  # fmt: skip
    proc = CountingProcessor(config)
    scraped = []

    def on_metrics(line):  # the exporter has just been updated with this line
        url = f"http://127.0.0.1:{proc.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as resp:
            text = resp.read().decode()
        scraped.append((line, {s.name: s for s in samples_of(text)}))

    final = proc.run(max_idle_s=1.0, on_metrics=on_metrics)

    # The metric line: in schema order (a binary one: without the multiclass and
    # regression fields), with the new field last.
    binary = [f.key for f in schema.FIELDS
              if f.only_with not in (schema.MULTICLASS, schema.REGRESSION)]  # fmt: skip
    assert [k for k in final if k not in ("unit", "instance")] == binary
    assert final["label_records"] == len(labels) == n - 2
    lines = [orjson.loads(x) for x in metrics_file.read_text().splitlines()]
    assert [ln["label_records"] for ln in lines] == sorted(ln["label_records"] for ln in lines)
    assert lines[-1]["label_records"] == n - 2

    # The Prometheus scrape: a counter, with the schema's help.
    assert scraped
    for line, samples in scraped:
        assert samples["streamcal_label_records_total"].value == line["label_records"]
    exporter = PrometheusExporter(None)
    exporter.update(final)
    assert "# HELP streamcal_label_records_total Label records read." in (
        generate_latest(exporter.registry).decode()
    )
    exporter.close()

    # The report: a row of the summary table, and a key of summary.json.
    page = write_report(metrics_file, tmp_path / "report")
    text = page.read_text()
    row = re.search(r"<tr><td>label records read</td><td data-key=\"label_records\" "
                    r"data-value=\"([^\"]*)\">", text)  # fmt: skip
    assert row and int(html.unescape(row.group(1))) == n - 2
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["label_records"] == n - 2


def test_labelled_lines_are_kept_one_per_label_set(monkeypatch):
    # Ready for per-unit metrics: a label declared in the schema and a field broken down
    # by it. The exporter keeps the latest line of each label set; a labelled line feeds
    # only the fields broken down by its labels.
    monkeypatch.setattr(schema, "LABELS", (schema.Label("unit", "Calibration unit."),))
    fields = tuple(
        schema.MetricField(f.key, f.kind, f.help, f.source, f.title, f.required,
                           f.prometheus, ("unit",))
        if f.key == "calibration_size" else dataclasses.replace(f, labels=())
        for f in schema.FIELDS
    )  # fmt: skip
    monkeypatch.setattr(schema, "FIELDS", fields)
    exporter = PrometheusExporter(None)
    exporter.update({"events": 10, "calibration_size": 30})
    exporter.update({"unit": "0", "events": 4, "calibration_size": 12})
    exporter.update({"unit": "1", "events": 6, "calibration_size": 18})
    exporter.update({"unit": "1", "events": 7, "calibration_size": 19})  # replaces unit 1
    samples = samples_of(generate_latest(exporter.registry).decode())
    sizes = {s.labels.get("unit", ""): s.value for s in samples if s.name.endswith("_size")}
    assert sizes == {"": 30, "0": 12, "1": 19}
    assert [s.value for s in samples if s.name == "streamcal_events_total"] == [10]
    exporter.close()
    line = {f.key: 0.5 for f in schema.FIELDS if f.required}
    line["labels"] = 3
    with pytest.raises(ValueError, match="label 'unit' must be a string"):
        check_metric_line(dict(line, unit=3))


def test_docs_contracts_lists_the_fields_of_the_schema():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "contracts.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| (\w+) \| (\w+) \| (yes)? \| (?:`(\w+)`)? \|", doc, re.M)
    documented = [(key, kind, source, bool(req), prom) for key, kind, source, req, prom in rows]
    suffix = {schema.COUNTER: "_total", schema.INFO: "_info"}
    declared = [
        (f.key, f.kind, f.source, f.required,
         "" if f.kind == schema.BINS
         else f"streamcal_{f.prometheus_name}{'_sum' if f.per else suffix.get(f.kind, '')}")
        for f in schema.FIELDS
    ]  # fmt: skip
    assert documented == declared
