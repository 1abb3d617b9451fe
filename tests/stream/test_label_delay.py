"""The label delay histogram (``label_delay_seconds``): each label joined counts its delay in
record time, read from the event's time kept in its packed prediction (no store read);
entries kept by an older streamcal, without a time, are joined but not counted."""

from __future__ import annotations

import random

import orjson
import pytest

from streamcal.monitoring.histogram import DELAY_BOUNDS
from streamcal.stream.config import ProcessorConfig
from streamcal.stream.tasks.binary import PendingPrediction
from streamcal.stream.tasks.multiclass import PendingMulticlass
from streamcal.stream.unit import CalibrationUnit
from tests._fakes import Record

T0 = 1_700_000_000_000


def _unit(**settings):
    config = ProcessorConfig.build(events_topic="ev", labels_topic="lab", metrics_file="none",
                                   **settings)  # fmt: skip
    unit = CalibrationUnit(config)
    unit.send = lambda topic, key, value: None
    return unit


def _event(i: int, ts: int) -> Record:
    value = {"id": f"e{i}", "features": {"x": float(i % 7), "n": i % 3}}
    return Record("ev", 0, i, ts, f"e{i}".encode(), orjson.dumps(value))


def _label(i: int, ts: int, offset: int) -> Record:
    value = orjson.dumps({"id": f"e{i}", "label": i % 2})
    return Record("lab", 0, offset, ts, f"e{i}".encode(), value)


def _delays(unit) -> dict:
    return unit.snapshot()["label_delay_seconds"]


@pytest.mark.parametrize("task", ["binary", "multiclass"])
def test_each_joined_label_counts_its_delay_in_record_time(task):
    settings = {"task": task, "model": "gnb"} if task == "multiclass" else {}
    unit = _unit(**settings)
    rng = random.Random(3)
    # up to 20 h: within the default --pending-ttl of a day
    delays_ms = [rng.choice([0, 500, 90_000, 7_200_000, 72_000_000]) for _ in range(40)]
    records = [(T0 + 1000 * i, "e", i) for i in range(40)]
    records += [(T0 + 1000 * i + d + 1, "l", i) for i, d in enumerate(delays_ms)]
    for n, (ts, kind, i) in enumerate(sorted(records)):
        if kind == "e":
            unit.on_event(_event(i, ts))
        else:
            unit.on_label(_label(i, ts, n))
    try:
        got = _delays(unit)
        want = [(d + 1) / 1000 for d in delays_ms]
        assert unit.counts["labels"] == 40 and sum(got["counts"]) == 40
        assert got["sum"] == pytest.approx(sum(want), abs=1e-4)  # seconds as doubles near 1.7e9
        for bound, count in zip(DELAY_BOUNDS, got["counts"], strict=False):
            below = sum(1 for d in want if d <= bound)
            assert below >= count  # each bucket holds only delays at or below its bound
        assert got["counts"][0] == sum(1 for d in want if d <= DELAY_BOUNDS[0])
    finally:
        unit.close()


def test_a_label_that_came_first_counts_no_delay():
    unit = _unit()
    unit.on_label(_label(1, T0, 0))
    unit.on_event(_event(1, T0 + 5000))
    try:
        assert unit.counts["labels"] == 1
        assert _delays(unit)["counts"][0] == 1 and _delays(unit)["sum"] == 0.0
    finally:
        unit.close()


def test_an_entry_kept_without_a_time_is_joined_but_not_counted():
    """An older streamcal packed no time: the entry still unpacks, and its label joins."""
    unit = _unit()
    try:
        unit.on_event(_event(1, T0))
        kind, payload, seq = unit.pending.lookup("e1")
        pred = unit.task.unpack(payload)
        assert pred.time == T0 / 1000
        old = unit.task.pack(pred._replace(time=None))  # the layout before the time
        assert unit.task.unpack(old) == pred._replace(time=None)
        unit.pending.take_event("e1", seq, payload)
        unit.pending.store.delete(b"ie1")
        unit.pending.wait_event("e1", old, unit.clock)
        unit.on_label(_label(1, T0 + 60_000, 0))
        assert unit.counts["labels"] == 1 and sum(_delays(unit)["counts"]) == 0
    finally:
        unit.close()


def test_packed_predictions_keep_their_time_exactly():
    binary = _unit(by="shop")
    multi = _unit(task="multiclass", model="gnb")
    try:
        p = PendingPrediction({"x": 1.5}, 0.25, 0.5, 0.4, 0.3, "s1", 0.45)
        m = PendingMulticlass({"x": 2}, "a", 0.1, 0.9, 0.5, {"a": 0.5}, {"a": 0.6},
                              {"a": (0.1, 0.9)}, None)  # fmt: skip
        for task, pred in ((binary.task, p), (multi.task, m)):
            for t in (None, 1_700_000_000.123, 0.0):
                assert task.unpack(task.pack(pred, t)) == pred._replace(time=t)
    finally:
        binary.close()
        multi.close()


def test_the_histogram_outlives_a_restart_and_an_older_state_has_none():
    unit = _unit()
    try:
        unit.on_event(_event(1, T0))
        unit.on_label(_label(1, T0 + 3_600_000, 0))
        state = unit.to_state()
    finally:
        unit.close()
    again = CalibrationUnit.from_state(state, config=unit.config)
    older = {k: v for k, v in state.items() if k != "label_delays"}
    fresh = CalibrationUnit.from_state(older, config=unit.config)
    try:
        assert again.snapshot()["label_delay_seconds"] == state["label_delays"]
        assert state["label_delays"]["sum"] == 3600.0
        assert sum(fresh.snapshot()["label_delay_seconds"]["counts"]) == 0
    finally:
        again.close()
        fresh.close()
