"""Per-category monitoring: tracker rows, metric-log lines, Prometheus labels, the report."""

from __future__ import annotations

import json
import pickle
import random
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from streamcal.monitoring import CalibrationTracker, PrometheusExporter, write_report
from streamcal.monitoring.categories import OTHER
from streamcal.monitoring.metric_log import (
    check_metric_line,
    read_metric_log,
    split_labelled,
)
from streamcal.monitoring.schema import CATEGORY_KEYS
from streamcal.monitoring.shapes import log_from_predictions
from tests._helpers import examples

prob = st.floats(0, 1)
update = st.tuples(prob, prob, st.integers(0, 1), st.sampled_from(["a", "b", "c", 7, None]))


def row_of(tracker):
    s = tracker.snapshot()
    return {k: s[k] for k in CATEGORY_KEYS}


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(update, max_size=60), st.integers(1, 4), st.integers(1, 4))
def test_rows_equal_trackers_fed_one_category_each(updates, top_k, max_categories):
    """A category's row is what a tracker fed only its updates reports; "(other)" is a
    tracker fed the updates of every category outside the top k (or beyond the capacity)."""
    t = CalibrationTracker(bins=4, top_k=top_k, max_categories=max_categories)
    for a, b, y, c in updates:
        t.update(min(a, b), max(a, b), y, category=c)
    rows = t.category_snapshots()
    counted = {}  # the categories counted one by one: the first max_categories
    for *_, c in updates:
        if c is not None and str(c) not in counted and len(counted) < max_categories:
            counted[str(c)] = True
    volume = {c: sum(1 for *_, d in updates if str(d) == c) for c in counted}
    order = sorted(volume, key=lambda c: (-volume[c], c))[:top_k]
    assert [r["category"] for r in rows if r["category"] != OTHER] == order
    rest = [u for u in updates if u[3] is not None and str(u[3]) not in order]
    assert (OTHER in [r["category"] for r in rows]) == bool(rest)
    for r in rows:
        alone = CalibrationTracker(bins=4)
        for a, b, y, c in updates:
            if c is not None and (str(c) == r["category"] or (r["category"] == OTHER and
                                                             str(c) not in order)):  # fmt: skip
                alone.update(min(a, b), max(a, b), y)
        want = row_of(alone)
        assert r["labels"] == want["labels"]
        for k in CATEGORY_KEYS:
            assert r[k] == pytest.approx(want[k], rel=1e-9, abs=1e-12), k


def test_without_categories_nothing_changes():
    a, b = CalibrationTracker(), CalibrationTracker()
    for i in range(50):
        a.update(0.2, 0.4, i % 2, score=0.3)
        b.update(0.2, 0.4, i % 2, score=0.3, category="x")
    assert a.snapshot() == b.snapshot()  # the whole stream's statistics are the same
    assert a.category_snapshots() == []
    assert [r["category"] for r in b.category_snapshots()] == ["x"]


def test_a_tracker_pickled_before_categories_still_loads():
    t = CalibrationTracker()
    t.update(0.2, 0.4, 1)
    state = t.__dict__.copy()
    del state["_categories"]
    old = CalibrationTracker.__new__(CalibrationTracker)
    old.__setstate__(state)
    old.update(0.1, 0.3, 0, category="z")
    assert [r["labels"] for r in old.category_snapshots()] == [1]
    assert pickle.loads(pickle.dumps(old)).category_snapshots() == old.category_snapshots()


def segmented_predictions(path, n=4000, seed=2):
    """Category "over": p0, p1 well above the frequency; "fair": calibrated; small ones."""
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n):
        c = ["fair", "over", f"small{i % 20}"][min(2, int(rng.integers(0, 5)))]
        q = float(rng.random())
        y = int(rng.random() < (q if c != "over" else q / 2))
        lines.append({"p0": q * 0.95, "p1": min(1.0, q * 1.05), "label": y, "category": c})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return lines


def test_metric_log_carries_category_lines(tmp_path):
    f = tmp_path / "p.jsonl"
    lines = segmented_predictions(f)
    log = log_from_predictions(f, top_k=2)
    whole, by_category = split_labelled(log)
    assert whole[-1]["labels"] == len(lines) and "category" not in whole[-1]
    volume = Counter(line["category"] for line in lines)
    assert list(by_category) == sorted(volume, key=lambda c: (-volume[c], c))[:2] + [OTHER]
    assert sum(r["labels"] for r in by_category.values()) == len(lines)
    # written out and read back, category lines are valid though they lack whole-stream fields
    out = tmp_path / "m.jsonl"
    out.write_text("".join(json.dumps(line) + "\n" for line in log))
    assert read_metric_log(out) == log
    with pytest.raises(ValueError, match="missing field 'frequency'"):
        check_metric_line({k: v for k, v in by_category["fair"].items() if k != "frequency"})


def test_bad_category_in_predictions_is_refused(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text('{"p0": 0.2, "p1": 0.4, "label": 1, "category": [1]}\n')
    with pytest.raises(ValueError, match="line 1: field 'category'"):
        log_from_predictions(f)


def test_prometheus_labels_categories_only_when_there_are_some():
    t = CalibrationTracker()
    for i in range(30):
        t.update(0.3, 0.6, i % 3 == 0, category=["fr", "de"][i % 2])
    exporter = PrometheusExporter(None)
    exporter.update(t.snapshot())
    before = generate_latest(exporter.registry).decode()
    assert "streamcal_log_loss_sum " in before and "category" not in before  # as before labels
    for row in t.category_snapshots():
        exporter.update(row)
    samples = [
        s
        for fam in text_string_to_metric_families(generate_latest(exporter.registry).decode())
        for s in fam.samples
    ]
    ones = {s.labels.get("category"): s.value for s in samples if s.name == "streamcal_label_sum"}
    rows = {r["category"]: r for r in t.category_snapshots()}
    assert ones == {"": 10, "fr": rows["fr"]["frequency"] * rows["fr"]["labels"],
                    "de": rows["de"]["frequency"] * rows["de"]["labels"]}  # fmt: skip
    # whole-stream-only fields are not broken down
    assert {s.labels.get("category", "") for s in samples if s.name == "streamcal_raw_ece"} <= {""}
    # a new set of category lines replaces the old one: "de" left the top k
    exporter.update_categories([dict(rows["fr"], labels=99)])
    text = generate_latest(exporter.registry).decode()
    assert 'streamcal_labels_total{category="fr"} 99.0' in text and '"de"' not in text
    assert 'streamcal_labels_total{category=""} 30.0' in text  # the whole stream stays
    with pytest.raises(ValueError, match="string 'category'"):
        exporter.update_categories([{"labels": 3}])
    exporter.close()


@pytest.mark.slow  # draws eleven rows of figures: 3-5 s
def test_report_draws_one_row_per_category(tmp_path):
    pytest.importorskip("matplotlib")
    f = tmp_path / "p.jsonl"
    segmented_predictions(f)
    page = write_report(f, tmp_path / "r")
    assert (tmp_path / "r" / "categories.png").read_bytes()[:4] == b"\x89PNG"
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    verdicts = {r["category"]: r["corollary1"] for r in summary["categories"]}
    assert verdicts["over"].startswith("violated: frequency is")
    assert verdicts["fair"].startswith("holds")
    assert len(summary["categories"]) == 11  # top 10 and "(other)"
    text = page.read_text()
    assert "categories.png" in text and "<h2>Per category</h2>" in text
    # the command line: --top-k
    from streamcal.cli import main

    assert main(["report", str(f), "--out", str(tmp_path / "k"), "--top-k", "2"]) == 0
    summary = json.loads((tmp_path / "k" / "summary.json").read_text())
    assert [r["category"] for r in summary["categories"]][-1] == OTHER
    assert len(summary["categories"]) == 3
    # without categories: no such figure
    plain = tmp_path / "q.jsonl"
    plain.write_text('{"p0": 0.2, "p1": 0.4, "label": 1}\n')
    write_report(plain, tmp_path / "s")
    assert not (tmp_path / "s" / "categories.png").exists()


def test_each_unit_publishes_its_own_categories():
    """Processor lines carry unit and instance: a unit's new category set replaces only
    its own, and the series carry unit, instance and category."""
    exporter = PrometheusExporter(None)
    t = CalibrationTracker()
    for c in ("de", "fr"):
        t.update(0.2, 0.4, 1, category=c)
    assert [r["category"] for r in t.category_snapshots()] == ["de", "fr"]
    for unit in ("0", "1"):
        labels = {"unit": unit, "instance": "a"}
        exporter.update({**t.snapshot(), "events": 2, **labels})
        exporter.update_categories(t.category_snapshots(), labels)
    exporter.update_categories(
        [dict(t.category_snapshots()[1], labels=7)], {"unit": "1", "instance": "a"}
    )
    text = generate_latest(exporter.registry).decode()
    assert 'streamcal_labels_total{category="de",unit="0"} 1.0' in text
    assert 'streamcal_labels_total{category="de",unit="1"}' not in text
    assert 'streamcal_labels_total{category="fr",unit="1"} 7.0' in text
    assert 'streamcal_labels_total{category="",unit="1"} 2.0' in text
    assert 'streamcal_events_total{unit="0"} 2.0' in text
    exporter.close()


def test_report_of_a_processor_log_with_units_and_categories(tmp_path):
    """A metric log as `streamcal run --by --scope partition` writes it: each unit's line,
    then its category lines. The totals pool the units' lines only; category rows are
    per unit."""
    pytest.importorskip("matplotlib")
    rng = random.Random(5)
    trackers = {u: CalibrationTracker() for u in ("0", "1")}
    lines = []
    for step in range(3):
        for u, t in trackers.items():
            for _ in range(50):
                p0 = rng.random() * 0.7
                t.update(p0, p0 + 0.2, rng.random() < p0 + 0.1, category=rng.choice("ab"))
            labels = {"unit": u, "instance": "i" + u}
            lines.append({**t.snapshot(reliability=True), "events": 50 * (step + 1), **labels})
            lines += [{**row, **labels} for row in t.category_snapshots()]
    log = tmp_path / "m.jsonl"
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    write_report(log, tmp_path / "r")
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["labels"] == 300 and set(summary["units"]) == {"0", "1"}
    names = sorted(r["category"] for r in summary["categories"])
    assert names == ["a @ unit 0", "a @ unit 1", "b @ unit 0", "b @ unit 1"]
    assert sum(r["labels"] for r in summary["categories"]) == 300
