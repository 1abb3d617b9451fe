"""Per-unit metrics: lines of several units pooled into the whole stream's (against a
tracker fed the whole stream), the report over several metric logs, the Prometheus
series per unit and instance."""

from __future__ import annotations

import json

import numpy as np
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from streamcal.cli import main
from streamcal.monitoring import CalibrationTracker, PrometheusExporter, schema
from streamcal.monitoring.metric_log import check_metric_line
from streamcal.monitoring.pooled import latest_by_unit, pool, pooled_log


def stream(n, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        s = float(rng.random())
        w = float(rng.random()) * 0.1
        score = s if rng.random() < 0.7 else None  # some predictions without a raw score
        out.append((max(0.0, s - w), min(1.0, s + w), int(rng.random() < s), score))
    return out


def line_of(tracker, **extra):
    return {**tracker.snapshot(reliability=True), **extra}


def test_pooled_units_equal_one_tracker_over_the_whole_stream():
    data = stream(3000, seed=1)
    whole = CalibrationTracker(window=100)
    units = [CalibrationTracker(window=100) for _ in range(4)]
    for i, (p0, p1, y, score) in enumerate(data):
        whole.update(p0, p1, y, score=score)
        units[i * 7 % 4].update(p0, p1, y, score=score)  # any split into units
    lines = [line_of(t, unit=str(u), events=t.labels + 1) for u, t in enumerate(units)]
    got, want = pool(lines), whole.snapshot(reliability=True)
    assert got["labels"] == want["labels"] and got["raw_labels"] == want["raw_labels"]
    assert got["events"] == 3000 + 4
    for key in ("log_loss", "square_loss", "raw_log_loss", "raw_square_loss", "mean_width",
                "mean_p0", "frequency", "mean_p1", "ece", "raw_ece"):  # fmt: skip
        assert got[key] == pytest.approx(want[key], rel=1e-9, abs=1e-12), key
    for a, b in zip(got["reliability"], want["reliability"], strict=True):
        assert a["count"] == b["count"]
        assert a["mean_pred"] == pytest.approx(b["mean_pred"], rel=1e-9)
        assert a["frequency"] == pytest.approx(b["frequency"], rel=1e-9)
    check_metric_line(got)


def test_newest_line_per_unit_wins_whatever_instance_wrote_it():
    old = {"unit": "3", "instance": "a", "labels": 100, "events": 120, "ts": 5.0}
    new = {"unit": "3", "instance": "b", "labels": 150, "events": 170, "ts": 4.0}  # clock skew
    other = {"unit": "1", "instance": "b", "labels": 10, "events": 11, "ts": 6.0}
    latest = latest_by_unit([new, other, old])
    assert latest == {"3": new, "1": other}
    log = pooled_log([old, other, new])
    # In time order: new, then old (ignored: unit 3 is further already), then other.
    assert [p["labels"] for p in log] == [150, 150, 160]


def write_log(path, lines):
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_report_over_several_metric_logs_shows_totals_and_units(tmp_path):
    pytest.importorskip("matplotlib")
    data = stream(2000, seed=2)
    trackers = [CalibrationTracker(window=100) for _ in range(3)]
    logs = {"i0": [], "i1": []}
    for i, (p0, p1, y, score) in enumerate(data):
        u = i % 3
        t = trackers[u]
        t.update(p0, p1, y, score=score)
        if t.labels % 50 == 0:  # unit 2 moves from i0 to i1 half way
            inst = "i0" if u == 0 or (u == 2 and i < 1000) else "i1"
            extra = {"ts": 1.7e9 + i, "events": t.labels, "predictions": t.labels,
                     "dead_letters": u, "unit": str(u), "instance": inst}  # fmt: skip
            logs[inst].append(line_of(t, **extra))
    paths = []
    for inst, lines in logs.items():
        paths.append(tmp_path / f"{inst}.jsonl")
        write_log(paths[-1], lines)
    assert main(["report", *map(str, paths), "--out", str(tmp_path / "r"), "--no-progress"]) == 0
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert set(summary["units"]) == {"0", "1", "2"}
    assert summary["labels"] == sum(u["labels"] for u in summary["units"].values())
    assert summary["dead_letters"] == 0 + 1 + 2
    assert summary["units"]["2"]["labels"] == trackers[2].labels // 50 * 50
    page = (tmp_path / "r" / "report.html").read_text()
    assert '<tr data-unit="2">' in page and '<tr data-unit="total">' in page
    assert "3 units" in page


def test_prometheus_series_per_unit_and_instance():
    exporter = PrometheusExporter(None)
    exporter.update({"unit": "0", "instance": "a", "events": 4, "calibration_size": 12})
    exporter.update({"unit": "1", "instance": "b", "events": 6, "calibration_size": 18})
    exporter.update({"unit": "1", "instance": "b", "events": 7, "calibration_size": 19})
    text = generate_latest(exporter.registry).decode()
    samples = [s for fam in text_string_to_metric_families(text) for s in fam.samples]
    events = {s.labels["unit"]: s.value for s in samples if s.name == "streamcal_events_total"}
    assert events == {"0": 4, "1": 7}
    # Prometheus sets its own instance label on every target: none of ours.
    assert not any("instance" in s.labels for s in samples)
    exporter.close()
    assert set(schema.UNIT_LABELS) <= {label.key for label in schema.LABELS}
