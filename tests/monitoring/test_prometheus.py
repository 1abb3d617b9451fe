"""PrometheusExporter scraped over HTTP on a free loopback port."""

from __future__ import annotations

import urllib.request

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from streamcal.monitoring import CalibrationTracker, PrometheusExporter
from streamcal.monitoring.schema import COUNTER, GAUGE, MULTICLASS_KEYS, fields


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
        **t.snapshot(),
        "ts": 1.7e9,
        "events": 250,
        "predictions": 249,
        "pending": 49,
        "pending_bytes": 16_170,
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
        # a multiclass line's own fields (never in the same line as protection's)
        **{k: 0.25 + i for i, k in enumerate(MULTICLASS_KEYS)},
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
            assert samples[name].value == pytest.approx(line[f.key], rel=1e-9), f.key
        assert samples["streamcal_build_info"].labels == {"version": "7"}
        # A later line replaces the values; undefined statistics disappear, not 0.
        exp.update({**line, "events": 300, "raw_log_loss": None})
        samples = scrape(exp)
        assert samples["streamcal_events_total"].value == 300
        assert "streamcal_raw_log_loss" not in samples


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
    a.update({"log_loss": 0.25})
    b.update({"log_loss": 0.5})
    text = generate_latest(reg).decode()
    assert 'streamcal_log_loss{processor="a"} 0.25' in text
    assert 'streamcal_log_loss{processor="b"} 0.5' in text
    a.close()
    assert 'processor="a"' not in generate_latest(reg).decode()
    b.close()


@pytest.mark.parametrize("bad", [{"log_loss": "high"}, {"events": True}, {"ece": float("nan")}])
def test_bad_update_is_refused_and_keeps_the_previous_line(bad):
    with PrometheusExporter(port=0) as exp:
        exp.update({"log_loss": 0.5, "events": 3, "ece": 0.1})
        with pytest.raises(ValueError, match=next(iter(bad))):
            exp.update(bad)
        assert scrape(exp)["streamcal_log_loss"].value == 0.5


def test_close_stops_the_server():
    exp = PrometheusExporter(port=0)
    port = exp.port
    exp.close()
    exp.close()  # idempotent
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)
