"""Multiclass monitoring: ``MulticlassTracker`` against a direct computation, and a
multiclass unit's statistics through the schema, the metric line, Prometheus and
``streamcal report``."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import orjson
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from streamcal.monitoring import PrometheusExporter
from streamcal.monitoring.metric_log import read_metric_log, split_classes
from streamcal.monitoring.multiclass_tracker import MulticlassTracker
from streamcal.monitoring.schema import MULTICLASS_KEYS, PROTECTION_KEYS
from streamcal.stream.config import ProcessorConfig
from streamcal.stream.metrics import MetricEmitter
from streamcal.stream.unit import CalibrationUnit
from tests._fakes import Record

CLASSES = ["a", "b", "c", "d"]


def _random_predictions(n, rng):
    out = []
    for i in range(n):
        known = CLASSES[: 2 + min(2, i // 50)]  # classes c and d appear later
        w = [rng.random() + 0.01 for _ in known]
        proba = {c: v / sum(w) for c, v in zip(known, w, strict=True)}
        label = max(proba, key=proba.get)
        p = proba[label]
        p0, p1 = max(0.0, p - rng.random() * 0.2), min(1.0, p + rng.random() * 0.2)
        raw = [rng.random() + 0.01 for _ in known]
        scores = {c: v / sum(raw) for c, v in zip(known, raw, strict=True)}
        intervals = {c: (max(0.0, q - 0.05), min(1.0, q + 0.05)) for c, q in proba.items()}
        y = rng.choice(CLASSES[: 2 + min(2, (i + 5) // 50)])  # sometimes a class not yet known
        out.append((label, p0, p1, p, proba, y, scores, intervals))
    return out


def test_tracker_against_direct_computation():
    rng = random.Random(0)
    preds = _random_predictions(400, rng)
    window = 70
    t = MulticlassTracker(window=window, bins=5)
    for label, p0, p1, p, proba, y, scores, intervals in preds:
        t.update(label, p0, p1, p, proba, y, scores=scores, intervals=intervals)
    s = t.snapshot(reliability=True)

    def log_loss(rows, which):
        return np.mean([-math.log(min(max(r[which].get(r[5], 0.0), 1e-15), 1 - 1e-15))
                        for r in rows])  # fmt: skip

    def brier(rows, which):
        return np.mean([sum((r[which].get(c, 0.0) - (c == r[5])) ** 2
                            for c in {*r[which], r[5]}) for r in rows])  # fmt: skip

    recent = preds[-window:]
    assert s["multiclass_log_loss"] == pytest.approx(log_loss(preds, 4), rel=1e-12)
    assert s["raw_multiclass_log_loss"] == pytest.approx(log_loss(preds, 6), rel=1e-12)
    assert s["multiclass_square_loss"] == pytest.approx(brier(preds, 4), rel=1e-12)
    assert s["raw_multiclass_square_loss"] == pytest.approx(brier(preds, 6), rel=1e-12)
    assert s["recent_multiclass_log_loss"] == pytest.approx(log_loss(recent, 4), rel=1e-9)
    assert s["recent_raw_multiclass_square_loss"] == pytest.approx(brier(recent, 6), rel=1e-9)
    # the top label: accuracy and the band
    assert s["labels"] == 400 and s["classes"] == 4
    assert s["frequency"] == np.mean([r[0] == r[5] for r in preds])
    assert s["mean_p0"] == pytest.approx(np.mean([r[1] for r in preds]), rel=1e-12)
    assert s["mean_p1"] == pytest.approx(np.mean([r[2] for r in preds]), rel=1e-12)
    assert s["raw_log_loss"] == pytest.approx(
        np.mean([-math.log(r[6][r[0]]) if r[0] == r[5] else -math.log(1 - r[6][r[0]])
                 for r in preds]), rel=1e-12)  # fmt: skip
    assert sum(b["count"] for b in s["reliability"]) == 400
    # one band per class, over the predictions that carried its pair
    for row in t.class_snapshots():
        c = row["class"]
        mine = [r for r in preds if c in r[7]]
        assert row["labels"] == len(mine) > 0
        assert row["frequency"] == pytest.approx(np.mean([r[5] == c for r in mine]), rel=1e-12)
        assert row["mean_p0"] == pytest.approx(np.mean([r[7][c][0] for r in mine]), rel=1e-12)
        assert row["mean_p1"] == pytest.approx(np.mean([r[7][c][1] for r in mine]), rel=1e-12)
    assert [r["class"] for r in t.class_snapshots()] == CLASSES


def test_tracker_refuses_bad_input_unchanged():
    t = MulticlassTracker()
    t.update("a", 0.4, 0.6, 0.5, {"a": 0.5, "b": 0.5}, "a")
    before = t.to_state()
    for bad in [dict(proba={"a": 1.5}), dict(p0=-0.1), dict(scores={"a": "x"}),
                dict(intervals={"a": (0.2,)})]:  # fmt: skip
        kw = dict(label="a", p0=0.4, p1=0.6, p=0.5, proba={"a": 0.5, "b": 0.5}, y="b")
        kw.update(bad)
        with pytest.raises(ValueError):
            t.update(**kw)
        assert t.to_state() == before


def _multiclass_run(tmp_path, n: int = 300):
    config = ProcessorConfig.build(
        events_topic="ev", labels_topic="lab", task="multiclass", model="gnb", window=80,
        metrics_file=str(tmp_path / "metrics.jsonl"), tracker_window=100,
    )  # fmt: skip
    unit = CalibrationUnit(config)
    unit.send = lambda *a: None
    rng = random.Random(1)
    centres = {"red": (0, 0), "green": (2, 0), "blue": (0, 2)}
    emitter = MetricEmitter(config, "i-1")
    emitter.start({None: unit})  # opens the metrics file
    emitter.exporter = PrometheusExporter(None)  # scraped below through its registry
    for i in range(n):
        y = rng.choice(list(centres))
        x = {"x1": rng.gauss(centres[y][0], 1), "x2": rng.gauss(centres[y][1], 1)}
        eid = f"e{i}"
        unit.on_event(Record("ev", 0, i, 1000 + i, eid.encode(),
                             orjson.dumps({"id": eid, "features": x})))  # fmt: skip
        unit.on_label(Record("lab", 0, i, 1000 + i, eid.encode(),
                             orjson.dumps({"id": eid, "label": y})))  # fmt: skip
        if (i + 1) % 100 == 0:
            emitter.emit_unit(unit, {"merge_stalls": 0, "late_arrivals": 0})
    return config, unit, emitter


def test_line_prometheus_and_report(tmp_path):
    pytest.importorskip("matplotlib")
    from streamcal.monitoring.report import write_report

    _, unit, emitter = _multiclass_run(tmp_path)
    log = read_metric_log(tmp_path / "metrics.jsonl")  # every line valid for the schema
    whole, by_class = split_classes(log)
    assert len(whole) == 3 and sorted(by_class) == ["blue", "green", "red"]
    last = whole[-1]
    assert set(MULTICLASS_KEYS) <= set(last) and not set(PROTECTION_KEYS) & set(last)
    assert last["classes"] == 3 and last["labels"] == 299  # the first had no class to predict
    assert last["multiclass_log_loss"] < last["raw_multiclass_log_loss"]  # gnb: calibration helps
    assert last["mean_p0"] <= last["frequency"] + 0.1 and last["frequency"] <= last["mean_p1"] + 0.1
    first = unit.clf.classes[0]
    assert by_class[first]["labels"] == 299  # every prediction after the first label
    for row in by_class.values():
        assert row["unit"] == "global" and 0 < row["labels"] <= 299
        assert row["mean_p0"] - 0.1 <= row["frequency"] <= row["mean_p1"] + 0.1

    samples = {}
    for fam in text_string_to_metric_families(generate_latest(emitter.exporter.registry).decode()):
        for s in fam.samples:
            samples[(s.name, s.labels.get("class", ""))] = s.value
    assert samples[("streamcal_multiclass_log_loss", "")] == pytest.approx(
        last["multiclass_log_loss"])
    assert samples[("streamcal_mean_p0", "red")] == pytest.approx(by_class["red"]["mean_p0"])
    assert samples[("streamcal_frequency", "blue")] == pytest.approx(by_class["blue"]["frequency"])
    assert ("streamcal_log_loss", "red") not in samples  # not broken down by class
    emitter.close()

    page = write_report(tmp_path / "metrics.jsonl", tmp_path / "report")
    assert (tmp_path / "report" / "classes.png").stat().st_size > 0
    text = page.read_text()
    assert "Per class" in text and "Multiclass: of the top label" in text
    doc = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert [r["class"] for r in doc["per_class"]] == unit.clf.classes
    assert all(r["corollary1"].startswith("holds") for r in doc["per_class"])
    assert doc["multiclass_log_loss"] == last["multiclass_log_loss"]


def test_a_binary_line_has_no_multiclass_field():
    config = ProcessorConfig.build(events_topic="ev", labels_topic="lab", metrics_file="none")
    from streamcal.stream.unit import CalibrationUnit

    line = MetricEmitter(config, "i").line(None, CalibrationUnit.empty_snapshot(config), {})
    assert not set(MULTICLASS_KEYS) & set(line) and set(PROTECTION_KEYS) <= set(line)
