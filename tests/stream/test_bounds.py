"""The waiting bounds: at a bound in bytes the oldest prediction leaves first, counted as
evicted; its label, when it comes, is a dead letter counted as lost; a label pushed out of
the waiting labels is too; and the log says how much label delay the bounds hold."""

from __future__ import annotations

import logging

import orjson

from streamcal.stream.bounds import BoundWatch
from streamcal.stream.config import ProcessorConfig
from streamcal.stream.pending import EVICTED
from streamcal.stream.unit import CalibrationUnit
from tests._fakes import Record


def _unit(**settings):
    config = ProcessorConfig.build(events_topic="ev", labels_topic="lab", metrics_file="none",
                                   model="gnb", **settings)  # fmt: skip
    unit, sent = CalibrationUnit(config), []
    unit.send = lambda topic, key, value: sent.append((topic, orjson.loads(value)))
    return unit, sent


def _event(i, t):
    value = orjson.dumps({"id": f"e{i}", "features": {"x": float(i), "y": 1.0}})
    return Record("ev", 0, t, 1000 * t, f"e{i}".encode(), value)


def _label(i, t, y=1):
    value = orjson.dumps({"id": f"e{i}", "label": y})
    return Record("lab", 0, t, 1000 * t, f"e{i}".encode(), value)


def test_the_oldest_prediction_leaves_at_the_byte_bound_and_its_label_is_counted_lost():
    unit, sent = _unit(pending_max_bytes="2KiB")
    for i in range(100):
        unit.on_event(_event(i, i))
    per = unit.pending.event_bytes / unit.pending.events
    assert unit.pending.event_bytes <= 2048 < unit.pending.event_bytes + per
    assert unit.counts["evicted"] == 100 - unit.pending.events > 0
    assert unit.pending.lookup("e0")[0] == EVICTED
    unit.on_label(_label(0, 200))  # its event was pushed out
    unit.on_label(_label(99, 201))  # its event still waits
    (dead,) = [m for t, m in sent if t == "streamcal.dead-letters"]
    assert "pushed out by a waiting bound (pending_max_bytes=2 KiB)" in dead["reason"]
    assert "'e0'" in dead["reason"]
    assert unit.counts["labels_lost"] == 1 and unit.counts["labels"] == 1
    snap = unit.snapshot()
    assert (snap["evicted"], snap["labels_lost"]) == (unit.counts["evicted"], 1)
    assert snap["pending_bytes"] == unit.pending.event_bytes


def test_a_label_pushed_out_of_the_waiting_labels_is_a_dead_letter_counted_lost():
    unit, sent = _unit(label_wait_max_bytes="1KiB")
    for i in range(40):
        unit.on_label(_label(i, i))  # no events yet
    dead = [m for t, m in sent if t == "streamcal.dead-letters"]
    assert dead and all("label without event: pushed out by a waiting bound" in m["reason"]
                        for m in dead)  # fmt: skip
    assert unit.counts["labels_lost"] == len(dead) == 40 - unit.pending.labels
    assert dead[0]["source"]["offset"] == 0  # the oldest first, with its record
    assert unit.pending.label_bytes <= 1024


def test_count_bounds_are_off_by_default_and_optional():
    assert ProcessorConfig().pending_max is None and ProcessorConfig().label_wait_max is None
    unit, _ = _unit(pending_max=3)
    for i in range(5):
        unit.on_event(_event(i, i))
    assert unit.pending.events == 3 and unit.counts["evicted"] == 2


def test_the_log_says_the_delay_the_bound_holds(caplog):
    config = ProcessorConfig.build(pending_max_bytes="1GiB", pending_ttl=86400.0)
    watch = BoundWatch(config)
    line = {"unit": "global", "events_per_s": 1000.0, "pending": 1000, "pending_bytes": 250_000,
            "evicted": 0, "labels_lost": 0}  # fmt: skip
    with caplog.at_level(logging.INFO, logger="streamcal.stream.bounds"):
        watch.observe({**line, "events_per_s": 0.0})  # no rate yet: nothing to say
        assert not caplog.records
        watch.observe(line)  # 1 GiB / (250 B x 1000/s) = 71.6 min < one day: a warning
        watch.observe(line)  # said once
    (rec,) = caplog.records
    assert rec.levelname == "WARNING" and "holds 1.2 h of label delay" in rec.getMessage()
    assert "less than --pending-ttl (1.0 days)" in rec.getMessage()


def test_with_a_label_horizon_the_bound_is_compared_with_the_horizon(caplog):
    config = ProcessorConfig.build(pending_max_bytes="1GiB", label_horizon="1h")
    line = {"unit": "global", "events_per_s": 1000.0, "pending": 1000, "pending_bytes": 250_000,
            "evicted": 0, "labels_lost": 0}  # fmt: skip
    with caplog.at_level(logging.INFO, logger="streamcal.stream.bounds"):
        BoundWatch(config).observe(line)  # 1.2 h held: covers the horizon, not the ttl
    (rec,) = caplog.records
    assert rec.levelname == "INFO" and "(--label-horizon 1.0 h)" in rec.getMessage()
