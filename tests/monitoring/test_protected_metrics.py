"""Protected metrics and the alarm's in monitoring: the tracker's protected losses and the
alarm's state, per unit and per category, their state, and schema -> metric line ->
Prometheus -> report; the alarm alone (without protection) has only its own fields.

A protector and an alarm are numbers in, numbers out: these tests feed the tracker plain
numbers (a protected probability per label, a log S path and an alarm) and check every
consumer."""

from __future__ import annotations

import copy
import html
import json
import math
import pickle
import re

import numpy as np
import orjson
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from streamcal.monitoring import CalibrationTracker, PrometheusExporter, schema
from streamcal.monitoring.metric_log import check_metric_line, read_metric_log
from streamcal.monitoring.pooled import pool
from streamcal.monitoring.report import ALARM_FIGURE, summary

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
ALPHA = 0.01
# The fields of both optional features, in schema order
BOTH = tuple(f.key for f in schema.FIELDS if f.only_with in (schema.PROTECTION, schema.ALARM))


def clamp_log_loss(y, q):
    q = min(max(q, 1e-15), 1 - 1e-15)
    return -math.log(q if y else 1 - q)


def a_stream(n, seed=0, protected_every=1):
    """(p0, p1, y, p_protected or None, category) rows; p_protected on every
    ``protected_every``-th row only, to check the separate count."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        s = float(rng.uniform(0.05, 0.95))
        p0, p1 = max(0.0, s - 0.05), min(1.0, s + 0.05)
        y = int(rng.random() < s)
        q = float(np.clip(s + rng.normal(0, 0.1), 0.0, 1.0)) if i % protected_every == 0 else None
        rows.append((p0, p1, y, q, "ab"[int(rng.random() < 0.3)]))
    return rows


def fed(rows, window=50, categories=True, protection=True):
    """A tracker fed ``rows`` (a fake protector: log S a random walk, alarm past 1/alpha)."""
    t = CalibrationTracker(window=window, top_k=1)
    log_s, alarm_at = 0.0, None
    for i, (p0, p1, y, q, c) in enumerate(rows, 1):
        kw = {"category": c} if categories else {}
        t.update(p0, p1, y, p_protected=q if protection else None, **kw)
        if protection:
            log_s += 0.05 * (1 if y else -0.5)
            if alarm_at is None and log_s >= math.log(1 / ALPHA):
                alarm_at = i
            t.update_protection(log_s, alarm_at is not None, alarm_at, alpha=ALPHA)
            if categories:
                t.update_protection(-log_s / 2, False, None, category=c)
    return t


def test_tracker_records_exactly_the_protected_losses():
    rows = a_stream(400, protected_every=3)
    t = fed(rows, window=50, categories=False)
    s = t.snapshot()
    prot = [(y, q) for _, _, y, q, _ in rows if q is not None]
    recent = [(y, q) for _, _, y, q, _ in rows[-50:] if q is not None]
    assert s["protected_labels"] == len(prot) == 134
    assert s["labels"] == 400
    assert s["protected_log_loss"] == pytest.approx(
        np.mean([clamp_log_loss(y, q) for y, q in prot]), rel=1e-12
    )
    assert s["protected_square_loss"] == pytest.approx(
        np.mean([(y - q) ** 2 for y, q in prot]), rel=1e-12
    )
    assert s["recent_protected_log_loss"] == pytest.approx(
        np.mean([clamp_log_loss(y, q) for y, q in recent]), rel=1e-9
    )
    assert s["recent_protected_square_loss"] == pytest.approx(
        np.mean([(y - q) ** 2 for y, q in recent]), rel=1e-9
    )
    # The unprotected statistics do not see p_protected.
    assert (
        s["log_loss"]
        == fed(rows, window=50, categories=False, protection=False).snapshot()["log_loss"]
    )
    # The protector's last reported state, as plain JSON numbers.
    assert s["alarm"] == 1 and isinstance(s["alarm"], int)
    assert s["alarm_at"] is not None and 0 < s["alarm_at"] <= 400
    assert s["alarm_alpha"] == ALPHA
    assert tuple(s) == schema.SNAPSHOT_KEYS + BOTH
    assert set(BOTH) == set(schema.PROTECTION_KEYS + schema.ALARM_KEYS)


def test_protected_losses_per_category_and_other_row():
    rows = a_stream(300, seed=1)
    t = fed(rows)
    by = {r["category"]: r for r in t.category_snapshots()}
    assert set(by) == {"a", "(other)"}  # top_k=1: "b" is in "(other)"
    for row_name, c in (("a", "a"), ("(other)", "b")):
        mine = [(y, q) for _, _, y, q, cc in rows if cc == c]
        r = by[row_name]
        assert tuple(r) == (("category",) + schema.CATEGORY_KEYS + schema.CATEGORY_PROTECTION_KEYS
                            + schema.CATEGORY_ALARM_KEYS)  # fmt: skip
        assert r["protected_labels"] == r["labels"] == len(mine)
        assert r["protected_log_loss"] == pytest.approx(
            np.mean([clamp_log_loss(y, q) for y, q in mine]), rel=1e-9
        )
        assert r["protected_square_loss"] == pytest.approx(np.mean([(y - q) ** 2 for y, q in mine]))
    last_of = {}
    log_s = 0.0
    for _, _, y, _, c in rows:  # fed() reported -log_s / 2 for the label's category
        log_s += 0.05 * (1 if y else -0.5)
        last_of[c] = -log_s / 2
    assert by["a"]["log_martingale"] == pytest.approx(last_of["a"])
    assert (by["a"]["alarm"], by["a"]["alarm_at"]) == (0, None)
    # "(other)": the largest log S of its categories, any alarm, no alarm_at.
    assert by["(other)"]["log_martingale"] == pytest.approx(last_of["b"])
    assert by["(other)"]["alarm_at"] is None
    t.update_protection(9.0, True, 17, category="b")
    other = t.category_snapshots()[-1]
    assert (other["log_martingale"], other["alarm"], other["alarm_at"]) == (9.0, 1, None)


def test_state_round_trip_continues_identically():
    rows = a_stream(260, seed=2, protected_every=2)
    t = fed(rows[:200])
    state = orjson.loads(orjson.dumps(t.to_state()))  # plain JSON, as a checkpoint keeps it
    copies = [
        CalibrationTracker.from_state(state),
        pickle.loads(pickle.dumps(t)),
        copy.deepcopy(t),
    ]
    for c in copies:
        assert c.snapshot(reliability=True) == t.snapshot(reliability=True)
        assert c.category_snapshots() == t.category_snapshots()
    for p0, p1, y, q, cat in rows[200:]:
        for x in [t, *copies]:
            x.update(p0, p1, y, p_protected=q, category=cat)
            x.update_protection(1.5, True, 120, alpha=ALPHA, category=cat)
    for c in copies:
        assert c.snapshot() == t.snapshot()
        assert c.category_snapshots() == t.category_snapshots()


def test_without_protection_snapshots_are_as_before():
    rows = a_stream(150, seed=5)
    t = fed(rows, protection=False)
    assert tuple(t.snapshot()) == schema.SNAPSHOT_KEYS
    assert tuple(t.snapshot(reliability=True)) == schema.SNAPSHOT_KEYS + (
        "reliability",
        "raw_reliability",
    )
    for r in t.category_snapshots():
        assert tuple(r) == ("category",) + schema.CATEGORY_KEYS
    assert not set(schema.PROTECTION_KEYS) & set(schema.SNAPSHOT_KEYS)
    # An alarm's state alone (the alarm without protection) turns its keys on, and only them.
    t.update_protection(0.0, False)
    s = t.snapshot()
    assert tuple(s) == schema.SNAPSHOT_KEYS + schema.ALARM_KEYS
    assert s["log_martingale"] == 0.0 and s["alarm"] == 0
    t.update_protection(0.0, False, category="a")
    for r in t.category_snapshots():
        assert tuple(r) == ("category",) + schema.CATEGORY_KEYS + schema.CATEGORY_ALARM_KEYS
    # ... and a gain (protection's) turns protection's on.
    t.update_protection(0.0, False, protection_gain=0.5)
    s = t.snapshot()
    assert tuple(s) == schema.SNAPSHOT_KEYS + BOTH
    assert s["protected_labels"] == 0 and s["protected_log_loss"] is None
    assert s["protection_gain"] == 0.5


@pytest.mark.parametrize(
    "args, match",
    [
        ((math.nan, False), "log_martingale"),
        ((math.inf, False), "log_martingale"),
        (("2", False), "log_martingale"),
        ((1.0, 2), "alarm"),
        ((1.0, True, -1), "alarm_at"),
        ((1.0, True, 3.5), "alarm_at"),
        ((1.0, True, 3, 0.0), "alpha"),
        ((1.0, True, 3, 1.0), "alpha"),
    ],
)
def test_bad_protector_state_is_refused_and_changes_nothing(args, match):
    t = fed(a_stream(30, seed=6))
    before = t.to_state()
    with pytest.raises(ValueError, match=match):
        t.update_protection(*args)
    with pytest.raises(ValueError, match=match):
        t.update_protection(*args, category="a")
    with pytest.raises(ValueError, match="p_protected=1.5"):
        t.update(0.2, 0.4, 1, p_protected=1.5, category="a")
    assert t.to_state() == before


# ------------------------------------------------------------- line, scrape, report


def a_line(tracker: CalibrationTracker, i: int, unit: str = "global") -> dict:
    """A processor's metric line: every schema field, in order, from the tracker's
    snapshot and its counters (docs/contracts.md), then its labels."""
    values = {**tracker.snapshot(reliability=True), "ts": 1.7e9 + i, "events": i + 3,
              "predictions": i + 3, "pending": 3, "expired": 0, "dead_letters": 0,
              "waiting_labels": 0, "events_per_s": 100.0, "calibration_size": i,
              "merge_stalls": 0, "version": "t"}  # fmt: skip
    line = {f.key: values.get(f.key) for f in schema.FIELDS}
    return {**line, "unit": unit, "instance": "i0"}


def a_shifted_log(path, n=1200, change=600, every=40, protection=True, unit="global",
                  alarm=None):  # fmt: skip
    """A metric log of a stream whose labels shift at ``change``; log S climbs after it.
    ``alarm`` (default: as ``protection``): the alarm's fields, alone without protection."""
    alarm = protection if alarm is None else alarm
    rng = np.random.default_rng(7)
    t = CalibrationTracker(window=200)
    log_s, alarm_at, lines = 0.0, None, []
    for i in range(1, n + 1):
        p = float(rng.uniform(0.1, 0.5))
        truth = p if i <= change else min(1.0, p + 0.4)
        y = int(rng.random() < truth)
        # The fake protector catches up with the shift 30 labels after it.
        q = (p if i <= change + 30 else truth) if protection else None
        t.update(max(0.0, p - 0.02), min(1.0, p + 0.02), y, p=p, p_protected=q)
        if alarm:
            log_s = max(-3.0, log_s + (0.08 if i > change else -0.01) + rng.normal(0, 0.02))
            if alarm_at is None and log_s >= math.log(1 / ALPHA):
                alarm_at = i
            gain = {"protection_gain": 0.1 * max(0, i - change)} if protection else {}
            t.update_protection(log_s, alarm_at is not None, alarm_at, alpha=ALPHA,
                                alarm_onset=None if alarm_at is None else change, **gain)
        if i % every == 0:
            lines.append(a_line(t, i, unit))
    path.write_bytes(b"".join(orjson.dumps(ln) + b"\n" for ln in lines))
    return lines


def samples_of(text: str) -> dict:
    return {
        (s.name, s.labels.get("category", "")): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def test_schema_line_scrape_and_report(tmp_path):
    pytest.importorskip("matplotlib")
    from streamcal.monitoring.report import write_report

    log = tmp_path / "metrics.jsonl"
    lines = a_shifted_log(log)
    last = lines[-1]
    assert read_metric_log(log)[-1] == last  # the metric log accepts the new fields
    assert last["alarm"] == 1 and 600 < last["alarm_at"] < 1200

    # Prometheus: the schema's names, the unit's line and a category's.
    exporter = PrometheusExporter(None)
    exporter.update(last)
    exporter.update_categories(
        [{"category": "x", "labels": 5, "log_martingale": 2.0, "alarm": 0}], {"unit": "global"}
    )
    text = generate_latest(exporter.registry).decode()
    exporter.close()
    got = samples_of(text)
    assert got[("streamcal_calibration_alarm", "")] == 1
    assert got[("streamcal_calibration_alarm", "x")] == 0
    assert got[("streamcal_calibration_alarm_at_labels", "")] == last["alarm_at"]
    assert got[("streamcal_log_martingale", "")] == pytest.approx(last["log_martingale"])
    assert got[("streamcal_log_martingale", "x")] == 2.0
    assert got[("streamcal_protected_log_loss_sum", "")] == pytest.approx(
        last["protected_log_loss"] * last["protected_labels"])
    assert got[("streamcal_protected_log_loss_count", "")] == last["protected_labels"]
    assert got[("streamcal_calibration_alarms_total", "")] == 1
    assert got[("streamcal_calibration_alarm_threshold", "")] == pytest.approx(-math.log(ALPHA))
    assert got[("streamcal_protected_labels_total", "")] == last["protected_labels"]
    assert got[("streamcal_calibration_alarm_alpha", "")] == ALPHA
    assert got[("streamcal_calibration_alarm_onset_labels", "")] == 600
    assert got[("streamcal_protection_gain", "")] == pytest.approx(last["protection_gain"])
    assert f"# HELP streamcal_calibration_alarm {schema.field('alarm').help}" in text

    # The report: the log S chart, protected loss rows, summary.json.
    page = write_report(log, tmp_path / "report")
    figure = tmp_path / "report" / ALARM_FIGURE
    assert figure.read_bytes()[:8] == PNG_SIGNATURE
    text = page.read_text()
    assert f'alt="{ALARM_FIGURE}"' in text
    for key in ("protected_log_loss", "recent_protected_log_loss", "protected_square_loss",
                "log_martingale", "alarm_at"):  # fmt: skip
        m = re.search(rf'data-key="{key}" data-value="([^"]*)"', text)
        assert m and float(html.unescape(m.group(1))) == pytest.approx(last[key]), key
    assert re.search(r"<tr><td>protected log loss</td><td data-key=\"protected_log_loss\"", text)
    doc = json.loads((tmp_path / "report" / "summary.json").read_text())
    for key in ("protected_log_loss", "log_martingale", "alarm", "alarm_at", "alarm_alpha"):
        assert doc[key] == last[key], key
    verdict = f"fired at label {last['alarm_at']}: the stream is not exchangeable"
    assert doc["calibration_alarm"].startswith(verdict)
    assert doc["calibration_alarm"].endswith("the change began near label 600")
    assert doc["alarm_onset"] == 600
    assert f'data-key="calibration_alarm">{verdict}' in text
    # After the change the protected probability did better than p: the recent rows say so.
    assert last["recent_protected_log_loss"] < last["recent_log_loss"]


def test_report_without_protection_is_as_before(tmp_path):
    pytest.importorskip("matplotlib")
    from streamcal.monitoring.report import write_report

    log = tmp_path / "metrics.jsonl"
    lines = a_shifted_log(log, protection=False)
    # A processor writes every schema field: the protection and alarm ones null.
    assert all(lines[-1][k] is None for k in BOTH)
    page = write_report(log, tmp_path / "report")
    assert not (tmp_path / "report" / ALARM_FIGURE).exists()
    text = page.read_text()
    assert "protected" not in text and "log S" not in text
    doc = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert not set(doc) & set(BOTH) and "calibration_alarm" not in doc
    # A line of a metric log written before protection (no such keys) is still valid.
    old = {k: v for k, v in lines[-1].items() if k not in BOTH}
    assert check_metric_line(old) is old
    assert summary(old) == summary(lines[-1])


def test_pooled_units(tmp_path):
    a = a_shifted_log(tmp_path / "a.jsonl", unit="0")[-1]
    b = a_shifted_log(tmp_path / "b.jsonl", change=1190, unit="1")[-1]
    assert a["alarm"] == 1 and b["alarm"] == 0
    p = pool([a, b])
    w = a["protected_labels"] + b["protected_labels"]
    assert p["protected_labels"] == w
    weighted = sum(ln["protected_log_loss"] * ln["protected_labels"] for ln in (a, b))
    assert p["protected_log_loss"] == pytest.approx(weighted / w)
    assert p["log_martingale"] == max(a["log_martingale"], b["log_martingale"])
    assert p["alarm"] == 1  # some unit alarmed
    assert p["alarm_at"] is None  # a unit's own label count: not pooled
    # Units without protection pool into a line without its fields.
    assert p["protection_gain"] == a["protection_gain"] + b["protection_gain"]
    plain = [{k: v for k, v in ln.items() if k not in BOTH} for ln in (a, b)]
    assert not set(pool(plain)) & set(BOTH)
    nulls = [{**ln, **dict.fromkeys(BOTH)} for ln in (a, b)]
    assert pool(nulls) == pool(plain)


def test_report_of_several_units_marks_the_first_pooled_alarm(tmp_path):
    pytest.importorskip("matplotlib")
    from streamcal.monitoring.report import alarm_moment, write_report

    a_shifted_log(tmp_path / "a.jsonl", unit="0")
    a_shifted_log(tmp_path / "b.jsonl", change=1190, unit="1")
    page = write_report([tmp_path / "a.jsonl", tmp_path / "b.jsonl"], tmp_path / "report")
    assert (tmp_path / "report" / ALARM_FIGURE).read_bytes()[:8] == PNG_SIGNATURE
    text = page.read_text()
    # The unit table shows each unit's own alarm.
    unit0 = re.search(r'<tr data-unit="0">.*?</tr>', text).group(0)
    assert 'data-key="alarm" data-value="1"' in unit0
    unit1 = re.search(r'<tr data-unit="1">.*?</tr>', text).group(0)
    assert 'data-key="alarm" data-value="0"' in unit1
    doc = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert doc["alarm"] == 1 and "alarm_at" not in doc
    assert doc["units"]["0"]["alarm_at"] is not None
    pooled = [{"labels": 10, "alarm": 0}, {"labels": 30, "alarm": 1}, {"labels": 50, "alarm": 1}]
    assert alarm_moment(pooled) == 30


def test_report_of_a_predictions_file_with_protected_probabilities(tmp_path):
    pytest.importorskip("matplotlib")
    from streamcal.monitoring.report import write_report

    rows = a_stream(300, seed=8, protected_every=2)
    f = tmp_path / "predictions.jsonl"
    f.write_bytes(
        b"".join(
            orjson.dumps({"p0": p0, "p1": p1, "label": y, "p_protected": q}) + b"\n"
            for p0, p1, y, q, _ in rows
        )
    )
    write_report(f, tmp_path / "report")
    doc = json.loads((tmp_path / "report" / "summary.json").read_text())
    prot = [(y, q) for _, _, y, q, _ in rows if q is not None]
    assert doc["protected_labels"] == len(prot) == 150
    assert doc["protected_log_loss"] == pytest.approx(
        np.mean([clamp_log_loss(y, q) for y, q in prot]), rel=1e-9
    )
    # No protector state in a predictions file: no log S chart and no alarm verdict.
    assert "log_martingale" not in doc and "alarm" not in doc
    assert "calibration_alarm" not in doc
    assert not (tmp_path / "report" / ALARM_FIGURE).exists()


@pytest.mark.slow  # five figures of two logs: about 3 s
def test_report_of_the_alarm_alone(tmp_path):
    """The alarm without protection (--no-protect): its chart, verdict and unit columns;
    no protected rows, curves or columns."""
    pytest.importorskip("matplotlib")
    from streamcal.monitoring.report import write_report

    a = a_shifted_log(tmp_path / "a.jsonl", protection=False, alarm=True, unit="0")
    a_shifted_log(tmp_path / "b.jsonl", change=1190, protection=False, alarm=True, unit="1")
    last = a[-1]
    assert last["alarm"] == 1 and last["protected_log_loss"] is None
    page = write_report([tmp_path / "a.jsonl", tmp_path / "b.jsonl"], tmp_path / "report")
    assert (tmp_path / "report" / ALARM_FIGURE).read_bytes()[:8] == PNG_SIGNATURE
    text = page.read_text()
    assert "protected log loss" not in text and f'alt="{ALARM_FIGURE}"' in text
    unit0 = re.search(r'<tr data-unit="0">.*?</tr>', text).group(0)
    assert 'data-key="alarm" data-value="1"' in unit0 and "protected_log_loss" not in unit0
    doc = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert doc["alarm"] == 1 and not set(doc) & set(schema.PROTECTION_KEYS)
    assert doc["units"]["0"]["alarm_onset"] == 600
