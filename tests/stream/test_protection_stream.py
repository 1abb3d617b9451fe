"""Protected calibration in the stream processor (``--protect``, on by default).

Without a broker: a unit's protector learns each label with the p that was given for its
event, however late, missing or out of order the labels come, per category with ``--by``;
predictions and metric lines carry the protected fields only with protection; the
checkpoint binds the setting. Against tansu: the demo's shifting stream. (kill -9 and
restarts: tests/e2e/test_protection_recovery.py; a unit moving between instances:
tests/e2e/test_scale_out.py compares every prediction, p_protected included since protection
is on by default.)
"""

from __future__ import annotations

import math
import random

import orjson
import pytest

from streamcal.core import Protector
from streamcal.monitoring.schema import ALARM_KEYS, PROTECTION_KEYS
from streamcal.stream.config import ProcessorConfig
from streamcal.stream.metrics import MetricEmitter
from streamcal.stream.pending import ABSENT
from streamcal.stream.state.errors import CheckpointError
from streamcal.stream.unit import CalibrationUnit
from tests._fakes import Record
from tests._helpers import full_state, resume

SHIFT = 1100  # events from here on have their labels flipped: p is then far from calibrated


def _config(**settings) -> ProcessorConfig:
    base = dict(events_topic="ev", labels_topic="lab", mode="sva", metrics_file="none")
    return ProcessorConfig.build(**{**base, **settings})


def _unit(**settings):
    unit = CalibrationUnit(_config(**settings))
    sent = []
    unit.send = lambda topic, key, value: sent.append((topic, orjson.loads(value)))
    return unit, sent


def _stream(n: int, seed: int, shops=None):
    """Events (id, features, shop) and their labels (id, y); labels flipped from SHIFT."""
    rng = random.Random(seed)
    events, labels = [], []
    for i in range(n):
        x1, x2 = rng.gauss(0, 1), rng.gauss(0, 1)
        y = int(rng.random() < 1 / (1 + math.exp(-(1.5 * x1 - x2))))
        shop = rng.choice(shops) if shops else None
        events.append((f"e{i}", {"x1": x1, "x2": x2}, shop))
        labels.append((f"e{i}", y if i < SHIFT else 1 - y))
    return events, labels


def _schedule(events, labels, delay: int, rng, missing=()):
    """("e", event) and ("l", label) items: each label after its event, up to ``delay``
    events later (so late and out of order), those of ``missing`` never."""
    at: dict[int, list] = {}
    for i, lab in enumerate(labels):
        if i not in missing:
            at.setdefault(i + rng.randrange(delay + 1), []).append(lab)
    items = []
    for i, ev in enumerate(events):
        items.append(("e", ev))
        items += [("l", lab) for lab in at.pop(i, [])]
    return items + [("l", lab) for k in sorted(at) for lab in at[k]]


def _feed(unit, items, by=None) -> None:
    for t, (kind, item) in enumerate(items):
        if kind == "e":
            eid, x, shop = item
            value = {"id": eid, "features": x} if by is None else {"id": eid, "features": x,
                                                                   "shop": shop}  # fmt: skip
            unit.on_event(Record("ev", 0, t, 1000 + t, eid.encode(), orjson.dumps(value)))
        else:
            eid, y = item
            value = orjson.dumps({"id": eid, "label": y})
            unit.on_label(Record("lab", 0, t, 1000 + t, eid.encode(), value))


def _replay(items, sent, by=None) -> dict:
    """Reference protectors (one per category) fed, in the processing order, the p that
    each prediction gave; checks every prediction's p_protected against them."""
    preds = {v["id"]: v for t, v in sent if t == "streamcal.predictions"}
    refs: dict = {}
    for kind, item in items:
        eid = item[0]
        pred = preds[eid]
        cat = pred.get("category") if by is not None else None
        ref = refs.get(cat, Protector(alpha=0.01, burn_in=0))  # as the classifier's protectors
        if kind == "e":
            assert pred["p_protected"] == pytest.approx(ref.predict(pred["p"]), abs=1e-12)
        else:
            refs[cat] = ref
            ref.learn(pred["p"], item[1])
    return refs


# ---------------------------------------------------------------- without a broker
@pytest.mark.parametrize("delay", [0, 150])
def test_protector_learns_the_given_p_with_late_missing_and_out_of_order_labels(delay):
    events, labels = _stream(1600, seed=1)
    items = _schedule(events, labels, delay, random.Random(2), missing={3, 500, 1200})
    unit, sent = _unit()
    _feed(unit, items)
    assert unit.counts["labels"] == 1597 and unit.pending.events == 3
    (ref,) = _replay(items, sent).values()
    prot = unit.clf.protectors[None]
    assert prot == ref  # every label learned with the p given for its event
    # The unit passes each label's p: the classifier remembers none (no table to save).
    assert unit.clf.protect == {"alpha": 0.01, "lookup": False}
    assert unit.to_state()["classifier"]["protection"]["given"] == []
    # The alarm (a conformal test martingale) catches the shift within a few tens of labels.
    clf = unit.clf
    assert clf.alarm and SHIFT - delay <= clf.alarm_at < SHIFT + delay + 150, clf.alarm_at
    snap = unit.snapshot()
    assert (snap["alarm"], snap["alarm_at"], snap["alarm_alpha"]) == (1, clf.alarm_at, 0.01)
    assert snap["log_martingale"] == pytest.approx(clf.log_martingale)
    assert snap["protection_gain"] == pytest.approx(prot.log_martingale)
    # The tracker's protected loss is that of the p_protected each prediction carried.
    preds = {v["id"]: v for t, v in sent if t == "streamcal.predictions"}
    losses = [-math.log(preds[e]["p_protected"] if y else 1 - preds[e]["p_protected"])
              for kind, (e, *rest) in items if kind == "l" for y in rest]  # fmt: skip
    assert snap["protected_labels"] == len(losses)
    assert snap["protected_log_loss"] == pytest.approx(sum(losses) / len(losses))
    # ... and it recovers from the shift faster than p (labels of the 300 events after it)
    after = [(preds[e], y) for kind, (e, *ys) in items if kind == "l"
             and SHIFT <= int(e[1:]) < SHIFT + 300 for y in ys]  # fmt: skip
    loss = {k: sum(-math.log(v[k] if y else 1 - v[k]) for v, y in after)
            for k in ("p", "p_protected")}  # fmt: skip
    assert loss["p_protected"] < 0.9 * loss["p"], loss


def test_each_category_has_its_own_protector():
    events, labels = _stream(3000, seed=4, shops=("a", "b"))
    items = _schedule(events, labels, 60, random.Random(5), missing={7})
    unit, sent = _unit(by="shop")
    _feed(unit, items, by="shop")
    refs = _replay(items, sent, by="shop")
    assert set(unit.clf.protectors) == set(refs) == {"a", "b"}
    for cat, ref in refs.items():
        assert unit.clf.protectors[cat] == ref
    rows = {r["category"]: r for r in unit.category_snapshots()}
    alarms = unit.clf.alarms
    for cat in refs:
        a = alarms[cat]
        assert rows[cat]["alarm"] == int(a.alarm) and rows[cat]["alarm_at"] == a.alarm_at
        assert rows[cat]["log_martingale"] == pytest.approx(a.log_martingale)
    # the unit's line: the first alarm and the largest log S over the categories
    snap = unit.snapshot()
    assert snap["log_martingale"] == pytest.approx(max(a.log_martingale for a in alarms.values()))
    assert snap["alarm"] == int(any(a.alarm for a in alarms.values()))


def test_without_protection_and_alarm_outputs_are_those_of_before():
    """--no-protect --no-alarm: the outputs of releases before both; --no-protect alone
    keeps the alarm's fields, and only them."""
    events, labels = _stream(300, seed=6)
    items = _schedule(events, labels, 20, random.Random(7))
    on, sent_on = _unit()
    off, sent_off = _unit(protect=False, alarm=False)
    alone, sent_alone = _unit(protect=False)
    for unit in (on, off, alone):
        _feed(unit, items)
    p_on, p_off, p_alone = ([v for t, v in sent if t == "streamcal.predictions"]
                            for sent in (sent_on, sent_off, sent_alone))  # fmt: skip
    assert all("p_protected" not in p for p in p_off + p_alone)
    assert [{k: v for k, v in p.items() if k != "p_protected"} for p in p_on] == p_off == p_alone
    assert not set(PROTECTION_KEYS + ALARM_KEYS) & set(off.snapshot())
    on_line, off_line, alone_line = (
        MetricEmitter(u.config, "i").line(None, u.snapshot(), {"merge_stalls": 0})
        for u in (on, off, alone)
    )  # fmt: skip
    assert set(PROTECTION_KEYS + ALARM_KEYS) <= set(on_line)
    assert not set(PROTECTION_KEYS + ALARM_KEYS) & set(off_line)  # absent, not null
    assert set(ALARM_KEYS) <= set(alone_line) and not set(PROTECTION_KEYS) & set(alone_line)
    both = PROTECTION_KEYS + ALARM_KEYS
    assert {k: v for k, v in on_line.items() if k not in both and k != "ts"} == {
        k: v for k, v in off_line.items() if k != "ts"
    }
    # The alarm alone is protection's alarm: the same ln S, label by label.
    assert {k: alone_line[k] for k in ALARM_KEYS} == {k: on_line[k] for k in ALARM_KEYS}
    assert alone.clf.protectors == {} and alone.clf.protection_gain == 0.0


def test_checkpoint_keeps_protectors_and_pending_p_protected_and_binds_the_setting():
    events, labels = _stream(1400, seed=8)
    items = _schedule(events, labels, 100, random.Random(9))
    unit, _ = _unit()
    _feed(unit, items[:1500])
    state = full_state(unit)
    again = resume(state, config=unit.config)
    assert again.clf.protectors == unit.clf.protectors
    assert again.export_waiting()["pending"] == unit.export_waiting()["pending"]
    sent_a, sent_b = [], []
    unit.send = lambda t, k, v: sent_a.append(v)
    again.send = lambda t, k, v: sent_b.append(v)
    _feed(unit, items[1500:])
    _feed(again, items[1500:])
    assert sent_a == sent_b and again.snapshot() == unit.snapshot()
    for other in (dict(protect=False), dict(protect=False, alarm=False),
                  dict(alarm_alpha=0.001)):  # fmt: skip
        with pytest.raises(CheckpointError, match="checkpoint was written with"):
            CalibrationUnit.from_state(state, config=_config(**other))


def test_per_category_reports_are_those_of_each_label_s_protector():
    """With --by a label reports its own category's protector (O(1), however many
    categories), and the unit's log S is the largest over them."""
    shops = [f"s{i}" for i in range(40)]
    events, labels = _stream(1500, seed=13, shops=shops)
    items = _schedule(events, labels, 30, random.Random(14))
    unit, _ = _unit(by="shop")
    _feed(unit, items, by="shop")
    alarms = unit.clf.alarms
    assert len(alarms) == len(unit.clf.protectors) == len(shops)
    rows = {r["category"]: r for r in unit.category_snapshots()}
    named = [shop for shop in rows if shop in alarms]
    assert len(named) >= 5
    for shop in named:
        assert rows[shop]["log_martingale"] == pytest.approx(alarms[shop].log_martingale), shop
    assert unit.snapshot()["log_martingale"] == pytest.approx(
        max(a.log_martingale for a in alarms.values())
    )


def test_model_score_field_calibrates_and_protects_an_upstream_score():
    rng = random.Random(10)
    unit, sent = _unit(model="score:upstream_p", mode="pretrained", window=200)
    items = []
    for i in range(400):
        s = rng.random()
        items.append(("e", (f"e{i}", {"upstream_p": s, "other": 1.0}, None)))
        items.append(("l", (f"e{i}", int(rng.random() < s**2))))  # overconfident upstream
    items.append(("e", ("bad", {"other": 1.0}, None)))
    _feed(unit, items)
    preds = [v for t, v in sent if t == "streamcal.predictions"]
    want = [item[1]["upstream_p"] for kind, item in items[:-1] if kind == "e"]
    assert [p["score"] for p in preds] == want  # the raw score is the field
    assert all(0.0 <= p["p_protected"] <= 1.0 for p in preds)
    (dead,) = [v for t, v in sent if t == "streamcal.dead-letters"]
    assert "model could not score event 'bad'" in dead["reason"]
    assert "no field 'upstream_p'" in dead["reason"]
    assert unit.counts["events"] == 400 and unit.pending.lookup("bad")[0] == ABSENT
    snap = unit.snapshot()
    assert snap["log_loss"] < snap["raw_log_loss"]  # calibration fixed the overconfidence


# ---------------------------------------------------------------- against tansu
@pytest.mark.kafka
def test_demo_with_a_shift_shows_the_alarm_and_the_protected_loss(
    kafka_broker, unique_topics, tmp_path, capsys
):
    from streamcal.cli import main
    from streamcal.monitoring.report import ALARM_FIGURE

    argv = ["demo", "--bootstrap-servers", kafka_broker, "--topic-prefix",
            unique_topics["group"], "--dataset", "drift", "--max-idle-s", "1",
            "--out", str(tmp_path), "--quiet"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    final = orjson.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[-1])
    # The concept changes at event 2,500 of 5,000: the alarm comes within tens of labels
    # of its first label (the demo's stream is deterministic: its labels' order too).
    from streamcal.demo.replay import demo_records, first_label_from

    change = first_label_from(demo_records("drift", start_ms=0), 2500)
    assert final["alarm"] == 1 and change <= final["alarm_at"] < change + 150
    assert change - 150 <= final["alarm_onset"] <= final["alarm_at"]
    assert f"calibration alarm: fired at label {final['alarm_at']}" in out
    assert (f"the drift stream changes at event 2500 (its first label is label {change} "
            f"here): the alarm fired {final['alarm_at'] - change} labels after it, and not "
            "before") in out  # fmt: skip
    row = next(ln for ln in out.splitlines() if ln.startswith("log loss")).split()
    assert float(row[-1]) == pytest.approx(final["protected_log_loss"], abs=5e-5)
    assert final["protected_log_loss"] < final["log_loss"]
    html = (tmp_path / "report.html").read_text()
    assert f'alt="{ALARM_FIGURE}"' in html and (tmp_path / ALARM_FIGURE).exists()
