"""The label horizon in the unit (``--label-horizon``): labels joined in event order once
their event is the horizon old, defaults at the horizon, late and early labels, the
waiting bound, and a restart in the middle of a horizon; no broker."""

from __future__ import annotations

import random

import orjson
import pytest

from streamcal.stream.config import ProcessorConfig
from streamcal.stream.pending import ATTACHED, DEFAULTED, EVENT, EVICTED, EXPIRED, JOINED
from streamcal.stream.state.errors import CheckpointError
from streamcal.stream.state.kv import KVStore
from streamcal.stream.unit import CalibrationUnit
from tests._fakes import Record

KEY = b"k" * 32


def _config(**settings):
    return ProcessorConfig.build(events_topic="ev", labels_topic="lab", metrics_file="none",
                                 model="gnb", **settings)  # fmt: skip


def _unit(store=None, state=None, **settings):
    config = _config(**settings)
    if state is None:
        unit = CalibrationUnit(config, store=store, key=KEY)
    else:
        unit = CalibrationUnit.from_state(state, config=config, store=store, key=KEY)
    sent: list = []
    unit.send = lambda topic, key, value: sent.append((topic, orjson.loads(value)))
    return unit, sent


def _event(i, t, x=None):
    features = {"x": float(i % 7) if x is None else x, "y": 1.0}
    value = orjson.dumps({"id": f"e{i}", "features": features})
    return Record("ev", 0, i, int(1000 * t), f"e{i}".encode(), value)


def _label(i, t, y=1, offset=None):
    value = orjson.dumps({"id": f"e{i}", "label": y})
    return Record("lab", 0, i if offset is None else offset, int(1000 * t), f"e{i}".encode(),
                  value)  # fmt: skip


def _dead(sent):
    return [m["reason"] for t, m in sent if t == "streamcal.dead-letters"]


class Spy:
    """Records the labels the classifier learns, in order (ids by feature x)."""

    def __init__(self, unit):
        self.learned = []
        learn = unit.task.learn

        def spy(clf, pred, y):
            self.learned.append((pred.x["x"], y))
            learn(clf, pred, y)

        unit.task.learn = spy


def test_labels_are_learned_in_event_order_once_the_event_is_the_horizon_old():
    unit, _ = _unit(label_horizon="10s")
    spy = Spy(unit)
    for i in range(5):
        unit.on_event(_event(i, i, x=float(i)))
    # labels in the reverse order, all within the horizon
    for k, i in enumerate(reversed(range(5))):
        unit.on_label(_label(i, 5 + k * 0.1, y=i % 2))
    assert spy.learned == [] and unit.counts["labels"] == 0
    assert all(unit.pending.lookup(f"e{i}")[0] == ATTACHED for i in range(5))
    unit.on_event(_event(5, 12.5, x=5.0))  # clock 12.5: e0, e1, e2 are > 10 s old
    assert spy.learned == [(0.0, False), (1.0, True), (2.0, False)]
    assert unit.counts["labels"] == 3 and unit.pending.lookup("e2")[0] == JOINED
    unit.on_event(_event(6, 100, x=6.0))
    assert [x for x, _ in spy.learned] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0][:5]
    assert unit.counts["expired"] == 1  # e5: no label, no default


def test_an_event_without_a_label_gets_the_default_at_the_horizon():
    unit, _ = _unit(label_horizon="10s", label_default="0")
    spy = Spy(unit)
    unit.on_event(_event(0, 0, x=0.0))
    unit.on_event(_event(1, 1, x=1.0))
    unit.on_label(_label(1, 2, y=1))
    unit.on_event(_event(2, 30, x=2.0))
    assert spy.learned == [(0.0, False), (1.0, True)]
    assert unit.pending.lookup("e0")[0] == DEFAULTED and unit.pending.lookup("e1")[0] == JOINED
    assert (unit.counts["labels"], unit.counts["labels_defaulted"]) == (2, 1)
    assert unit.snapshot()["labels_defaulted"] == 1


@pytest.mark.parametrize("default", [None, "0"])
def test_a_label_after_maturity_is_counted_and_dead_lettered_by_default(default):
    unit, sent = _unit(label_horizon="10s", label_default=default)
    unit.on_event(_event(0, 0))
    unit.on_event(_event(1, 20))  # e0 matured
    labels = unit.counts["labels"]
    unit.on_label(_label(0, 21))
    (reason,) = _dead(sent)
    assert "'e0' came after its event" in reason and "label_horizon=10 s" in reason
    assert unit.counts["labels_late"] == 1 and unit.counts["labels"] == labels


def test_late_labels_learn_joins_a_late_label_until_the_pending_ttl():
    unit, sent = _unit(label_horizon="10s", late_labels="learn", pending_ttl="60s")
    spy = Spy(unit)
    unit.on_event(_event(0, 0, x=0.0))
    unit.on_event(_event(1, 20, x=1.0))  # e0 matured without a label: it keeps waiting
    assert unit.pending.lookup("e0")[0] == EVENT and unit.pending.is_matured(0)
    unit.on_label(_label(0, 25, y=1))
    assert spy.learned == [(0.0, True)] and unit.counts["labels_late"] == 1
    unit.on_event(_event(2, 200, x=2.0))  # e1 expires at 20 + 60
    assert unit.pending.lookup("e1")[0] == EXPIRED and unit.counts["expired"] == 1
    unit.on_label(_label(1, 201))
    assert "expired (pending_ttl=60 s)" in _dead(sent)[0] and unit.counts["labels_late"] == 2


def test_a_label_before_its_event_waits_with_it_for_the_horizon():
    unit, _ = _unit(label_horizon="10s")
    spy = Spy(unit)
    unit.on_label(_label(0, 0, y=1))
    unit.on_event(_event(0, 1, x=0.0))
    assert unit.pending.labels == 0 and unit.pending.lookup("e0")[0] == ATTACHED
    assert spy.learned == []
    unit.on_event(_event(1, 12, x=1.0))
    assert spy.learned == [(0.0, True)]


def test_duplicate_labels_within_the_horizon_are_dead_letters():
    unit, sent = _unit(label_horizon="10s")
    unit.on_event(_event(0, 0))
    unit.on_label(_label(0, 1))
    unit.on_label(_label(0, 2, offset=9))
    assert "a label waits for the horizon" in _dead(sent)[0]
    unit.on_event(_event(1, 20))
    unit.on_label(_label(0, 21, offset=10))
    assert "already joined" in _dead(sent)[1] and unit.counts["labels_late"] == 0


def test_an_attached_label_counts_in_the_bytes_and_leaves_with_its_event_at_the_bound():
    unit, sent = _unit(label_horizon="1h", pending_max_bytes="4KiB")
    for i in range(60):
        unit.on_event(_event(i, i))
        unit.on_label(_label(i, i + 0.5))
    pending = unit.pending
    assert pending.event_bytes <= 4096 and pending.labels == 0
    stored = sum(len(f"e{i}") + len(pending.lookup(f"e{i}")[1]) for i in range(60)
                 if pending.lookup(f"e{i}")[0] == ATTACHED)  # fmt: skip
    assert stored == pending.event_bytes
    evicted = unit.counts["evicted"]
    assert evicted == 60 - pending.events > 0 and pending.lookup("e0")[0] == EVICTED
    assert unit.counts["labels_lost"] == evicted == len(_dead(sent))
    assert all("pushed out with its event by a waiting bound" in r for r in _dead(sent))


def test_a_restart_in_the_middle_of_a_horizon_learns_what_an_uninterrupted_run_learns(tmp_path):
    rng = random.Random(3)
    records = []
    for i in range(300):
        t = i * 0.5
        records.append(("e", _event(i, t)))
        if rng.random() < 0.6:
            records.append(("l", _label(i, t + rng.uniform(0, 8), y=rng.random() < 0.5)))
    records.sort(key=lambda r: (r[1].timestamp, r[0] == "l"))
    settings = dict(label_horizon="5s", label_default="false", metrics_every=10)

    def feed(unit, recs):
        for kind, rec in recs:
            unit.on_event(rec) if kind == "e" else unit.on_label(rec)

    whole, sent_whole = _unit(**settings)
    feed(whole, records)
    store = KVStore(tmp_path / "store")
    first, sent = _unit(store=store, **settings)
    cut = len(records) // 2
    feed(first, records[:cut])
    state = first.to_state()
    store.commit()
    assert first.pending.events > 5  # events were mid-horizon
    feed(first, records[cut : cut + 40])  # never committed: lost in the crash
    store.close()
    again, sent_again = _unit(store=KVStore(tmp_path / "store"), state=state, **settings)
    feed(again, records[cut:])
    assert again.counts == whole.counts
    assert again.snapshot() == whole.snapshot()
    assert again.export_waiting() == whole.export_waiting()


def test_a_state_is_refused_by_a_run_with_another_horizon():
    unit, _ = _unit(label_horizon="10s")
    state = unit.to_state()
    with pytest.raises(CheckpointError, match="label_horizon=10.0 but the processor is "
                       "configured with label_horizon=20.0"):  # fmt: skip
        CalibrationUnit.from_state(state, config=_config(label_horizon="20s"))
    plain = CalibrationUnit(_config()).to_state()
    with pytest.raises(CheckpointError, match="label_horizon=None"):
        CalibrationUnit.from_state(plain, config=_config(label_horizon="20s"))


def test_a_record_that_matures_many_labels_makes_its_metric_line_due():
    unit, _ = _unit(label_horizon="10s", label_default="0", metrics_every=5)
    for i in range(12):
        assert not unit.handle(0, _event(i, i * 0.1))
    assert unit.handle(0, _event(12, 60))  # 12 labels joined at once: a multiple crossed


@pytest.mark.parametrize(
    "settings, words",
    [
        ({"label_horizon": "soon"}, "not a duration: 'soon'"),
        ({"label_horizon": -3.0}, "--label-horizon) must be a positive duration"),
        ({"label_horizon": "2d"}, "give --pending-ttl at least 172800"),
        ({"label_horizon": "1h", "label_default": "yes"}, "must be a binary label"),
        ({"label_default": "0"}, "label_default (--label-default) needs --label-horizon"),
        ({"late_labels": "learn"}, "needs --label-horizon"),
        ({"label_horizon": "1h", "late_labels": "keep"}, "must be one of dead-letter, learn"),
        ({"label_horizon": "1h", "late_labels": "learn", "label_default": "0"},
         "takes no --label-default"),
    ],
)  # fmt: skip
def test_horizon_settings_are_checked_with_one_line_naming_the_flag(settings, words):
    with pytest.raises(ValueError) as exc:
        _config(**settings)
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_durations_take_units_and_multiclass_defaults_are_classes():
    assert _config(label_horizon="2h", pending_ttl="1d").label_horizon == 7200.0
    assert _config(pending_ttl="90").pending_ttl == 90.0
    cfg = ProcessorConfig.build(task="multiclass", model="gnb", label_horizon="30s",
                                label_default="refund")  # fmt: skip
    assert CalibrationUnit(cfg).horizon.default == "refund"


def test_without_a_horizon_outcome_dependent_delays_are_logged_once(caplog):
    unit, _ = _unit()
    for i in range(400):
        unit.on_event(_event(i, i))
    with caplog.at_level("WARNING", logger="streamcal.stream.horizon"):
        for i in range(200):  # positives after 1 s, negatives after 60 s
            y = i % 2
            unit.on_label(_label(i, i + (1 if y else 60), y=y))
    (record,) = [r for r in caplog.records if "label delays depend on the outcome" in r.message]
    assert "--label-horizon" in record.message and unit._delays.said
    assert unit.snapshot()["label_delay_warnings"] == 1
    again, _ = _unit(state=unit.to_state())  # restored: it does not look again
    assert not again._delays.watching
    quiet, _ = _unit()
    for i in range(200):
        quiet.on_event(_event(i, i))
        quiet.on_label(_label(i, i + 2, y=i % 2))
    assert not quiet._delays.said and quiet.counts["label_delay_warnings"] == 0


def test_the_delay_watch_looks_at_the_first_labels_only():
    unit, _ = _unit()
    unit._delays.left = 3
    for i in range(5):
        unit.on_event(_event(i, i))
        unit.on_label(_label(i, i + 1))
    assert unit._delays.left == 0 and sum(unit._delays.delays._n.values()) == 3


def test_multiclass_and_by_mature_in_event_order_with_the_default():
    cfg = ProcessorConfig.build(task="multiclass", model="gnb", events_topic="ev",
                                labels_topic="lab", metrics_file="none", label_horizon="10s",
                                label_default="none-of-them", by="shop")  # fmt: skip
    unit = CalibrationUnit(cfg)
    unit.send = lambda *a: None
    spy = Spy(unit)
    for i in range(6):
        value = {"id": f"e{i}", "features": {"x": float(i), "shop": "ab"[i % 2]}}
        unit.on_event(Record("ev", 0, i, 1000 * i, None, orjson.dumps(value)))
    unit.on_label(Record("lab", 0, 0, 6000, None, orjson.dumps({"id": "e3", "label": 7})))
    unit.on_event(_event(9, 100))
    assert spy.learned == [(float(i), "7" if i == 3 else "none-of-them") for i in range(6)]
    assert unit.counts["labels_defaulted"] == 5
    assert len(unit.clf.classes) == 2
