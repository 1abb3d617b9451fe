"""End to end against a real tansu broker: the processor's metric log and Prometheus
endpoint during a run, then `streamcal report` on that metric log."""

from __future__ import annotations

import html
import re
import urllib.request

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from streamcal.cli import main
from streamcal.monitoring.event_rate import event_rate
from streamcal.stream.config import ProcessorConfig
from streamcal.stream.processor import Processor
from tests._kafka_helpers import base_settings, produce_stream, synthetic_stream

pytest.importorskip("matplotlib")


def scrape(port) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return {s.name: s for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_metric_log_prometheus_and_report_of_a_real_run(kafka_broker, unique_topics, tmp_path):
    n = 600
    events, labels = synthetic_stream(n, seed=11, label_delay_ms=1)
    produce_stream(kafka_broker, unique_topics, events, labels)
    metrics_file = tmp_path / "metrics.jsonl"
    config = ProcessorConfig.build(
        **base_settings(
            kafka_broker,
            unique_topics,
            metrics_file=str(metrics_file),
            metrics_every=100,
            metrics_port=0,  # any free port: Processor.metrics_port says which
        )
    )
    scraped = []
    proc = Processor(config)
    assert proc.metrics_port is None  # not serving before run()

    def on_metrics(line):  # the exporter has been updated with this line just before
        assert proc.metrics_port > 0
        scraped.append((line, scrape(proc.metrics_port)))

    final = proc.run(max_idle_s=1.5, on_metrics=on_metrics)

    # Prometheus during the run showed exactly the line just written.
    assert len(scraped) >= n // 100
    for line, samples in scraped:
        assert samples["streamcal_labels_total"].value == line["labels"]
        assert samples["streamcal_events_total"].value == line["events"]
        n = line["labels"]
        assert samples["streamcal_log_loss_sum"].value == pytest.approx(
            line["log_loss"] * n, rel=1e-12)  # fmt: skip
        assert samples["streamcal_p1_sum"].value == pytest.approx(line["mean_p1"] * n, rel=1e-12)
        assert samples["streamcal_pending"].value == line["pending"]

    lines = [orjson.loads(x) for x in metrics_file.read_text().splitlines()]
    assert lines[-1]["labels"] == final["labels"] == n
    # Every line carries the reliability bins of p and of the raw score.
    for line in lines:
        for key in ("reliability", "raw_reliability"):
            assert len(line[key]) == config.tracker_bins
            assert sum(b["count"] for b in line[key]) == line["labels"]
    out = tmp_path / "report"
    assert main(["report", str(metrics_file), "--out", str(out), "--no-progress"]) == 0
    page = (out / "report.html").read_text()
    shown = {
        k: html.unescape(v) for k, v in re.findall(r'data-key="([^"]+)" data-value="([^"]*)"', page)
    }
    # The run's event rate, not that of the line written at stop (0: nothing came since).
    assert lines[-1]["events_per_s"] == 0.0 and float(shown["events_per_s"]) > 0
    last = {**lines[-1], "events_per_s": event_rate(lines)}
    checked = 0
    for key, value in shown.items():
        if key in ("version", "corollary1"):
            continue
        if value == "null":
            assert last[key] is None, key
        else:
            assert float(value) == pytest.approx(last[key], rel=1e-12), key
            checked += 1
    assert checked >= 15
    assert shown["version"].strip("'") == last["version"]
    # The reliability diagrams are drawn from those bins: not the "no bins" page, and a
    # figure that differs from the one drawn for the same line without bins.
    assert "carries no reliability bins" not in page
    from streamcal.monitoring.report import reliability_figure

    bare = {k: v for k, v in last.items() if k not in ("reliability", "raw_reliability")}
    reliability_figure(bare, tmp_path / "empty.png")
    drawn = (out / "reliability.png").read_bytes()
    assert len(drawn) > 0 and drawn != (tmp_path / "empty.png").read_bytes()
