"""PrometheusExporter scraped over HTTP on a free loopback port."""

from __future__ import annotations

import math
import shutil
import subprocess
import urllib.request

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from streamcal.monitoring import CalibrationTracker, PrometheusExporter
from streamcal.monitoring.schema import COUNTER, GAUGE, MULTICLASS_KEYS, REGRESSION_KEYS, fields


def scrape(exporter):
    url = f"http://127.0.0.1:{exporter.port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as resp:
        assert resp.status == 200
        text = resp.read().decode()
    return {s.name: s for fam in text_string_to_metric_families(text) for s in fam.samples}


def a_metric_line():
    rng = np.random.default_rng(0)
    t = CalibrationTracker(window=50)
    for _ in range(200):
        s = float(rng.random())
        t.update(max(0.0, s - 0.1), min(1.0, s + 0.1), int(rng.random() < s), score=s,
                 p_protected=0.9 * s + 0.05)  # fmt: skip
    t.update_protection(5.2, True, 180, alpha=0.01, alarm_onset=150, protection_gain=3.5)
    return {
        **t.snapshot(reliability=True),
        "ts": 1.7e9,
        "events": 250,
        "predictions": 249,
        "pending": 49,
        "pending_bytes": 16_170,
        "pending_max_bytes": 1 << 34,
        "expired": 1,
        "evicted": 6,
        "labels_lost": 7,
        "labels_late": 9,
        "labels_defaulted": 10,
        "label_delay_warnings": 1,
        "dead_letters": 2,
        "rejected_state_records": 8,
        "waiting_label_bytes": 912,
        "events_per_s": 812.5,
        "calibration_size": 150,
        "waiting_labels": 3,
        "merge_stalls": 4,
        "late_arrivals": 5,
        "lost_input": 1,
        "skipped_offsets": 12,
        "version": "7",
        "label_delay_seconds": {"le": [60.0, 3600.0, 86400.0], "counts": [3, 0, 5, 1],
                                "sum": 250_000.5},
        # a multiclass line's own fields (never in the same line as protection's)
        **{k: 0.25 + i for i, k in enumerate(MULTICLASS_KEYS)},
        # and a regression line's (the PIT histogram aside: bins)
        **{k: 0.125 + i for i, k in enumerate(REGRESSION_KEYS) if k != "pit_histogram"},
    }


def test_scrape_shows_the_updated_line():
    line = a_metric_line()
    with PrometheusExporter(port=0) as exp:
        assert exp.port > 0
        before = scrape(exp)
        assert not any(name.startswith("streamcal_") for name in before)
        exp.update(line)
        samples = scrape(exp)
        for f in fields(COUNTER):
            name = f"streamcal_{f.prometheus_name}_total"
            assert samples[name].value == pytest.approx(line[f.key]), f.key
        for f in fields(GAUGE):
            name = f"streamcal_{f.prometheus_name}"
            if f.per is None:
                assert samples[name].value == pytest.approx(line[f.key], rel=1e-9), f.key
                continue
            # A mean over a counter: its sum and count, which add up and window.
            assert name not in samples
            assert samples[f"{name}_count"].value == line[f.per], f.key
            assert samples[f"{name}_sum"].value == pytest.approx(
                line[f.key] * line[f.per], rel=1e-9), f.key  # fmt: skip
        assert samples["streamcal_build_info"].labels == {"version": "7"}
        # A later line replaces the values; undefined statistics disappear, not 0.
        exp.update({**line, "events": 300, "raw_log_loss": None})
        samples = scrape(exp)
        assert samples["streamcal_events_total"].value == 300
        assert "streamcal_raw_log_loss_sum" not in samples


def test_reliability_bins_give_the_binned_ece_and_the_alarm_its_level():
    line = a_metric_line()
    with PrometheusExporter(port=0) as exp:
        exp.update(line)
        text = urllib.request.urlopen(f"http://127.0.0.1:{exp.port}/metrics").read().decode()
    bins = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name.startswith("streamcal_reliability_"):
                bins.setdefault(s.labels["bin"], {})[s.name] = s.value
    assert len(bins) == len(line["reliability"])
    # What the dashboard's windowed ECE computes, on the whole stream: the line's ECE.
    n = sum(b["streamcal_reliability_prediction_count"] for b in bins.values())
    gaps = sum(abs(b["streamcal_reliability_prediction_sum"] - b["streamcal_reliability_label_sum"])
               for b in bins.values())  # fmt: skip
    assert n == line["labels"] and gaps / n == pytest.approx(line["ece"], rel=1e-9)
    samples = {s.name: s.value for fam in text_string_to_metric_families(text) for s in fam.samples}
    assert samples["streamcal_calibration_alarm_threshold"] == pytest.approx(math.log(100))
    assert samples["streamcal_calibration_alarms_total"] == 1


def test_the_label_delay_is_a_prometheus_histogram():
    """Cumulative buckets ending in +Inf, the sum and the count of the line's histogram,
    whose per-bucket counts add up over units (``pool``)."""
    line = a_metric_line()
    with PrometheusExporter(port=0) as exp:
        exp.update(line)
        text = urllib.request.urlopen(f"http://127.0.0.1:{exp.port}/metrics").read().decode()
    (fam,) = [f for f in text_string_to_metric_families(text)
              if f.name == "streamcal_label_delay_seconds"]  # fmt: skip
    assert fam.type == "histogram"
    got = {(s.name, s.labels.get("le")): s.value for s in fam.samples}
    name = "streamcal_label_delay_seconds"
    assert [got[(f"{name}_bucket", le)] for le in ("60", "3600", "86400", "+Inf")] == [
        3, 3, 8, 9]
    assert got[(f"{name}_count", None)] == 9 and got[(f"{name}_sum", None)] == 250_000.5
    with pytest.raises(ValueError, match="label_delay_seconds"):
        exp.update({"label_delay_seconds": {"le": [1.0], "counts": [1], "sum": 0.0}})


def test_a_sum_never_falls_while_its_count_does_not():
    """mean x count may round a hair below the last sum when the new terms are ~0:
    rate() would read that as a reset."""
    with PrometheusExporter(port=0) as exp:
        exp.update({"labels": 3, "square_loss": 0.1})
        first = scrape(exp)["streamcal_square_loss_sum"].value
        exp.update({"labels": 3, "square_loss": 0.1 - 1e-12})
        assert scrape(exp)["streamcal_square_loss_sum"].value == first
        exp.update({"labels": 1, "square_loss": 0.05})  # a new count below: a real reset
        assert scrape(exp)["streamcal_square_loss_sum"].value == pytest.approx(0.05)


def test_two_exporters_in_one_process_do_not_collide():
    with PrometheusExporter(port=0) as a, PrometheusExporter(port=0) as b:
        a.update({"events": 1})
        b.update({"events": 2})
        assert scrape(a)["streamcal_events_total"].value == 1
        assert scrape(b)["streamcal_events_total"].value == 2


def test_shared_registry_with_const_labels_and_no_server():
    reg = CollectorRegistry()
    a = PrometheusExporter(None, registry=reg, const_labels={"processor": "a"})
    b = PrometheusExporter(None, registry=reg, const_labels={"processor": "b"})
    a.update({"log_loss": 0.25, "labels": 2})
    b.update({"log_loss": 0.5, "labels": 2})
    text = generate_latest(reg).decode()
    assert 'streamcal_log_loss_sum{processor="a"} 0.5' in text
    assert 'streamcal_log_loss_sum{processor="b"} 1.0' in text
    a.close()
    assert 'processor="a"' not in generate_latest(reg).decode()
    b.close()


@pytest.mark.parametrize("bad", [{"log_loss": "high"}, {"events": True}, {"ece": float("nan")},
                                 {"reliability": [{"lo": 0.0, "count": 3}]}])  # fmt: skip
def test_bad_update_is_refused_and_keeps_the_previous_line(bad):
    with PrometheusExporter(port=0) as exp:
        exp.update({"log_loss": 0.5, "events": 3, "ece": 0.1, "labels": 2})
        with pytest.raises(ValueError, match=next(iter(bad))):
            exp.update(bad)
        assert scrape(exp)["streamcal_log_loss_sum"].value == 1.0


def test_close_stops_the_server():
    exp = PrometheusExporter(port=0)
    port = exp.port
    exp.close()
    exp.close()  # idempotent
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)


def test_a_live_exposition_passes_promtool_check_metrics():
    """Prometheus' own linter on a scrape with every kind of series: a unit's line with
    the alarm, protection and the bins, its categories, and a second unit."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    line = {**a_metric_line(), "unit": "0", "instance": "host:1"}
    with PrometheusExporter(port=0) as exp:
        exp.update(line)
        exp.update({**line, "unit": "1"})
        exp.update_categories(
            [{"category": "fr", "labels": 5, "log_loss": 0.5, "log_martingale": 1.0, "alarm": 0}],
            {"unit": "0", "instance": "host:1"},
        )
        text = urllib.request.urlopen(f"http://127.0.0.1:{exp.port}/metrics").read().decode()
    out = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                         text=True, timeout=30)  # fmt: skip
    assert out.returncode == 0 and not (out.stdout + out.stderr).strip(), out.stdout + out.stderr
    assert 'streamcal_log_loss_sum{category="fr",unit="0"} 2.5' in text
    assert "instance=" not in text and "job=" not in text
