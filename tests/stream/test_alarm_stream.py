"""The conformal alarm in the stream processor (``--alarm``, on by default), without a
broker: in every mode the processor offers (pretrained, sva, va, a score field, Mondrian,
multiclass) it fires after an abrupt change of the concept and not before, with its
fields in the metric lines, per unit and per category; it runs alone with
``--no-protect``; its checkpoint binds ``--alarm``.

Against tansu (the end of this file): a run with a change has the alarm in its metric lines
and on Prometheus after the change and not before. kill -9 and restart:
tests/e2e/test_protection_recovery.py (binary), test_multiclass_recovery.py and
test_mondrian_recovery.py (each category's).
"""

from __future__ import annotations

import copy
import math
import random

import orjson
import pytest

from streamcal.monitoring.schema import (
    ALARM_KEYS,
    CATEGORY_ALARM_KEYS,
    CATEGORY_PROTECTION_KEYS,
    PROTECTION_KEYS,
)
from streamcal.stream.config import ProcessorConfig
from streamcal.stream.metrics import MetricEmitter
from streamcal.stream.state.errors import CheckpointError
from streamcal.stream.unit import CalibrationUnit
from tests._fakes import Record
from tests._helpers import full_state, resume

N, CHANGE = 1200, 600  # events; the labels flip from event CHANGE on (the prior kept)
LEVEL = math.log(100)  # ln(1 / alpha) at the default alpha 0.01


def _config(**settings) -> ProcessorConfig:
    base = dict(events_topic="ev", labels_topic="lab", metrics_file="none", window=200)
    return ProcessorConfig.build(**{**base, **settings})


def _events(n: int, seed: int, changed=("a", "b"), prefix: str = "e"):
    """(id, features, y): y ~ sigmoid(2 x1) until CHANGE, then sigmoid(-2 x1) in the
    shops of ``changed`` (the boundary turned over, P(y = 1) = 1/2 throughout)."""
    rng = random.Random(seed)
    for i in range(n):
        x1, x2 = rng.gauss(0, 1), rng.gauss(0, 1)
        shop = "ab"[i % 2]
        z = -2.0 * x1 if i >= CHANGE and shop in changed else 2.0 * x1
        x = {"x1": x1, "x2": x2, "shop": shop, "p": 1 / (1 + math.exp(-2.0 * x1))}
        yield f"{prefix}{i}", x, int(rng.random() < 1 / (1 + math.exp(-z)))


def _run(unit, events, label=lambda y: y, every: int = 100) -> list[dict]:
    """Each label right after its event; a metric line of the unit every ``every`` labels
    (with the unit's per-category rows as ``"rows"``)."""
    unit.send = lambda topic, key, value: None
    emitter = MetricEmitter(unit.config, "i")
    lines = []
    for t, (eid, x, y) in enumerate(events):
        ts = 1000 + 2 * t
        unit.on_event(Record("ev", 0, 2 * t, ts, eid.encode(), orjson.dumps({"id": eid,
                                                                              "features": x})))
        unit.on_label(Record("lab", 0, 2 * t + 1, ts + 1, eid.encode(),
                             orjson.dumps({"id": eid, "label": label(y)})))  # fmt: skip
        if unit.counts["labels"] % every == 0:
            line = emitter.line(None, unit.snapshot(), {"merge_stalls": 0})
            lines.append({**line, "rows": unit.category_snapshots()})
    return lines


MODES = {
    "pretrained": {},
    "sva": {"mode": "sva"},
    "va": {"mode": "va"},
    "score field": {"model": "score:p"},
    "mondrian": {"by": "shop"},
    "multiclass": {"task": "multiclass", "model": "gnb"},
}


@pytest.mark.parametrize("mode", list(MODES))
def test_the_alarm_fires_after_an_abrupt_change_and_not_before(mode):
    settings = MODES[mode]
    unit = CalibrationUnit(_config(**settings))
    label = (lambda y: ("no", "yes")[y]) if mode == "multiclass" else (lambda y: y)
    lines = _run(unit, _events(N, seed=1), label)
    before = [ln for ln in lines if ln["labels"] <= CHANGE]
    assert len(before) == 6 and all(ln["alarm"] == 0 for ln in before), mode
    assert all(ln["log_martingale"] < LEVEL and ln["alarm_at"] is None for ln in before)
    last = lines[-1]
    assert last["alarm"] == 1 and CHANGE < last["alarm_at"] <= CHANGE + 200, (mode, last)
    assert CHANGE - 100 <= last["alarm_onset"] <= last["alarm_at"], (mode, last)
    assert last["alarm_alpha"] == 0.01 and last["log_martingale"] >= LEVEL
    clf = unit.clf
    assert (last["alarm_at"], last["alarm_onset"]) == (clf.alarm_at, clf.alarm_onset)
    assert last["log_martingale"] == pytest.approx(clf.log_martingale)
    # protection's fields with binary protection only (the default), never for multiclass
    assert (set(PROTECTION_KEYS) <= set(last)) == (mode != "multiclass")
    if mode == "mondrian":  # each shop's alarm in its own line
        rows = {r["category"]: r for r in last["rows"]}
        assert set(rows) == {"a", "b"} and all(rows[c]["alarm"] == 1 for c in "ab")
        assert last["log_martingale"] == max(r["log_martingale"] for r in rows.values())


@pytest.mark.parametrize("task", ["binary", "multiclass"])
def test_each_category_has_its_own_alarm(task):
    """Only shop a changes: its alarm fires, b's does not; the unit's line has the first
    alarm and the largest ln S; each row has its alarm's fields (and, binary, protection's)."""
    settings = {"by": "shop"} if task == "binary" else {"by": "shop", "task": task,
                                                          "model": "gnb"}  # fmt: skip
    unit = CalibrationUnit(_config(**settings))
    label = (lambda y: ("no", "yes")[y]) if task == "multiclass" else (lambda y: y)
    lines = _run(unit, _events(N, seed=2, changed=("a",)), label)
    rows = {r["category"]: r for r in lines[-1]["rows"]}
    alarms = unit.clf.alarms
    assert rows["a"]["alarm"] == 1 and rows["b"]["alarm"] == 0
    for c in "ab":
        assert rows[c]["alarm_at"] == alarms[c].alarm_at  # the category's own label count
        assert rows[c]["log_martingale"] == pytest.approx(alarms[c].log_martingale)
        extra = CATEGORY_ALARM_KEYS + (CATEGORY_PROTECTION_KEYS if task == "binary" else ())
        assert set(extra) <= set(rows[c])
    last = lines[-1]
    assert last["alarm"] == 1 and last["alarm_at"] == unit.clf.alarm_at
    assert last["log_martingale"] == max(r["log_martingale"] for r in rows.values())


def test_the_alarm_alone_and_neither():
    """--no-protect keeps the alarm (no protector, no p_protected, no protection fields);
    --no-protect --no-alarm has neither; --no-alarm with --protect is refused."""
    alone = CalibrationUnit(_config(protect=False))
    assert alone.clf.protect == {"alpha": 0.01, "lookup": False, "recalibrate": False}
    last = _run(alone, _events(N, seed=3))[-1]
    assert last["alarm"] == 1 and CHANGE < last["alarm_at"] <= CHANGE + 200
    assert set(ALARM_KEYS) <= set(last) and not set(PROTECTION_KEYS) & set(last)
    assert alone.clf.protectors == {}
    neither = CalibrationUnit(_config(protect=False, alarm=False))
    last = _run(neither, _events(300, seed=3))[-1]
    assert not set(ALARM_KEYS + PROTECTION_KEYS) & set(last) and neither.clf.protect is False
    with pytest.raises(ValueError, match="protect runs with the alarm: --no-alarm needs"):
        _config(alarm=False)
    multi = CalibrationUnit(_config(task="multiclass", model="gnb", alarm=False))
    last = _run(multi, _events(300, seed=3), lambda y: ("no", "yes")[y])[-1]
    assert not set(ALARM_KEYS) & set(last) and multi.clf.alarm_alpha is None
    for bad in (1.5, 0.0, math.nan):
        with pytest.raises(ValueError, match="alarm_alpha must be in"):
            _config(alarm_alpha=bad, protect=False, alarm=False)


# settings, and others a checkpoint made with them is refused with
BOUND = [
    ({}, [{"protect": False}, {"protect": False, "alarm": False}, {"alarm_alpha": 0.001}]),
    ({"protect": False}, [{"protect": False, "alarm": False}, {}]),
    ({"task": "multiclass", "model": "gnb"},
     [{"task": "multiclass", "model": "gnb", "alarm": False}]),
]  # fmt: skip


def test_checkpoint_keeps_the_alarm_and_binds_its_flags():
    for settings, refused in BOUND:
        config = _config(**settings)
        label = (lambda y: ("no", "yes")[y]) if "task" in settings else (lambda y: y)
        events = list(_events(900, seed=4))  # resumed at 500, before the change at 600
        whole = CalibrationUnit(config)
        want = _run(whole, events, label)
        first = CalibrationUnit(config)
        _run(first, events[:500], label)
        state = full_state(first)
        assert state["fingerprint"]["alarm"] is True
        again = resume(copy.deepcopy(state), config=config)
        got = _run(again, events[500:], label)
        assert [ln["log_martingale"] for ln in got] == [ln["log_martingale"] for ln in want[5:]]
        assert got[-1]["alarm_at"] == want[-1]["alarm_at"] and got[-1]["alarm"] == 1
        assert got[-1]["alarm_onset"] == want[-1]["alarm_onset"]
        for other in refused:
            with pytest.raises(CheckpointError, match="checkpoint was written with"):
                CalibrationUnit.from_state(state, config=_config(**other))


# ---------------------------------------------------------------- against tansu
def _samples(text: str) -> dict:
    """(name, category) -> value of a Prometheus scrape ("" for the unit's line)."""
    from prometheus_client.parser import text_string_to_metric_families

    return {(s.name, s.labels.get("category", "")): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}  # fmt: skip


def test_a_run_with_a_change_shows_the_alarm_after_it_in_lines_and_prometheus(
    kafka_broker, unique_topics, tmp_path
):
    import urllib.request

    from streamcal.stream.processor import Processor
    from tests._kafka_helpers import T0, base_settings, produce_stream

    events = list(_events(N, seed=9))
    produce_stream(
        kafka_broker, unique_topics,
        [(e, {"id": e, "features": x}, T0 + 10 * i) for i, (e, x, _) in enumerate(events)],
        [(e, {"id": e, "label": y}, T0 + 10 * i + 1) for i, (e, _, y) in enumerate(events)],
    )  # fmt: skip
    path = tmp_path / "metrics.jsonl"
    config = ProcessorConfig.build(
        **base_settings(kafka_broker, unique_topics, mode="pretrained", window=200, by="shop",
                        metrics_every=100, metrics_file=str(path)),
        metrics_interval=3600.0, metrics_port=0,
    )  # fmt: skip
    processor = Processor(config)
    scrapes = []

    def on_metrics(line):  # after each unit's line and its category lines
        url = f"http://127.0.0.1:{processor.metrics_port}/metrics"
        scrapes.append((line, _samples(urllib.request.urlopen(url, timeout=5).read().decode())))

    final = processor.run(max_idle_s=1.0, on_metrics=on_metrics)
    lines = [orjson.loads(x) for x in path.read_bytes().splitlines()]
    units = [ln for ln in lines if "category" not in ln]
    assert [ln["labels"] for ln in units[:12]] == list(range(100, 1300, 100))
    assert units[-1] == final
    for ln in units:
        assert set(ALARM_KEYS + PROTECTION_KEYS) <= set(ln)
        if ln["labels"] <= CHANGE:  # not before the change
            assert ln["alarm"] == 0 and ln["log_martingale"] < LEVEL and ln["alarm_at"] is None
    assert final["alarm"] == 1 and CHANGE < final["alarm_at"] <= CHANGE + 200
    assert CHANGE - 100 <= final["alarm_onset"] <= final["alarm_at"]
    assert final["log_martingale"] >= LEVEL and final["protection_gain"] > 0
    rows = {r["category"]: r for r in lines[-2:]}  # the last lines: each shop's
    assert set(rows) == {"a", "b"} and all(rows[c]["alarm"] == 1 for c in "ab")
    assert all(set(CATEGORY_ALARM_KEYS) <= set(r) for r in rows.values())
    # Prometheus serves them: the unit's line and each category's
    before = next(s for ln, s in scrapes if ln["labels"] == CHANGE)
    assert before[("streamcal_calibration_alarm", "")] == 0
    line, got = scrapes[-1]
    assert line == final
    assert got[("streamcal_calibration_alarm", "")] == 1
    assert got[("streamcal_calibration_alarm_at_labels", "")] == final["alarm_at"]
    assert got[("streamcal_calibration_alarm_onset_labels", "")] == final["alarm_onset"]
    assert got[("streamcal_calibration_alarm_alpha", "")] == 0.01
    assert got[("streamcal_log_martingale", "")] == pytest.approx(final["log_martingale"])
    assert got[("streamcal_protection_gain", "")] == pytest.approx(final["protection_gain"])
    for c in "ab":
        assert got[("streamcal_calibration_alarm", c)] == 1
        assert got[("streamcal_log_martingale", c)] == pytest.approx(rows[c]["log_martingale"])
