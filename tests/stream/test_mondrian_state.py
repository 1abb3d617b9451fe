"""Mondrian state as plain data: the classifier, the tracker's per-category statistics and
a ``--by`` unit round-trip through the checkpoint format (to_state -> sealed -> from_state)
and go on with identical predictions in every category; older states upgrade."""

from __future__ import annotations

import random

import orjson
import pytest
from river import compose, linear_model, preprocessing

from streamcal import VennAbersClassifier
from streamcal.monitoring.tracker import CalibrationTracker
from streamcal.stream.config import ProcessorConfig
from streamcal.stream.state.checkpoint import CheckpointError, seal, unseal
from streamcal.stream.unit import CalibrationUnit, TopicRank
from tests._fakes import Record
from tests._helpers import full_state, resume

KEY = b"k" * 32


def sealed(state):
    """Through the checkpoint format: the plain-data pickler and its restricted unpickler."""
    return unseal(KEY, seal(KEY, state), "test")


def stream(n, seed, categories=6):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        g = rng.randrange(categories)
        a = rng.gauss(0.3 * g - 0.8, 1.0)
        out.append(({"a": a, "b": rng.random(), "g": g}, int(rng.random() < 1 / (1 + 2.7**-a))))
    return out


def model():
    return compose.Discard("g") | preprocessing.StandardScaler() | linear_model.LogisticRegression()


SETTINGS = [
    {"mode": "pretrained", "window": 30, "refresh_every": 5, "max_categories": 4},
    {"mode": "pretrained", "window": 30, "min_category": 8, "fallback": "pooled"},
    {"mode": "sva", "window": 25, "refresh_every": 7, "max_categories": 5},
    {"mode": "va", "window": 12, "max_categories": 4},
]


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: s["mode"] + str(len(s)))
def test_classifier_state_roundtrip_predicts_identically_in_every_category(settings):
    n = 150 if settings["mode"] == "va" else 400
    data = stream(n, seed=1)
    clf = VennAbersClassifier(model(), by="g", **settings)
    for x, y in data[: n // 2]:
        clf.learn_one(x, y)
    assert clf.evictions > 0 or settings.get("fallback")
    state = clf.to_state()
    assert state["by"] == "g" and state["mode_state"]["categories"]
    copy = VennAbersClassifier.from_state(sealed(state))
    probe = [{"a": a / 2, "b": 0.5, "g": g} for g in range(8) for a in range(-3, 4)]
    for x, y in data[n // 2 :]:  # every category, before and after each label
        for q in probe[:: 7 if settings["mode"] == "va" else 1] + [x]:
            assert copy.predict_interval_one(q) == clf.predict_interval_one(q)
        clf.learn_one(x, y)
        copy.learn_one(x, y)
    assert copy.evictions == clf.evictions
    assert copy.calibration_size == clf.calibration_size


def test_callable_by_is_passed_again_and_tuple_categories_come_back():
    def by(x):
        return (x["g"] % 2, x["g"] > 2)

    data = stream(200, seed=2)
    clf = VennAbersClassifier(model(), window=20, by=by)
    for x, y in data[:100]:
        clf.learn_one(x, y)
    state = clf.to_state()
    assert state["by"] is None and state["mondrian"]
    with pytest.raises(ValueError, match="callable by"):
        VennAbersClassifier.from_state(state)
    # formats without tuples (JSON) give the categories back as lists
    for row in state["mode_state"]["categories"]:
        row[0] = list(row[0])
    copy = VennAbersClassifier.from_state(state, by=by)
    assert list(copy._state.categories) == list(clf._state.categories)
    for x, y in data[100:]:
        assert copy.predict_interval_one(x) == clf.predict_interval_one(x)
        clf.learn_one(x, y)
        copy.learn_one(x, y)


def test_explicit_category_overrides_by():
    clf = VennAbersClassifier(model(), window=20, by="g")
    for x, y in stream(60, seed=3):
        clf.learn_one(x, y, category="shop-" + str(x["g"] % 2))
    assert sorted(clf._state.categories) == ["shop-0", "shop-1"]
    x = {"a": 0.1, "b": 0.2, "g": 0}
    assert clf.predict_interval_one(x, category="shop-0") != clf.predict_interval_one(x)
    with pytest.raises(ValueError, match="Mondrian"):
        VennAbersClassifier(model()).predict_interval_one(x, category="a")


def test_tracker_state_keeps_the_per_category_statistics():
    t = CalibrationTracker(window=5, bins=4, top_k=2, max_categories=3)
    rng = random.Random(4)
    for _ in range(300):
        p0 = rng.random() * 0.8
        t.update(p0, p0 + 0.1, rng.random() < 0.5, score=0.5, category=rng.choice("abcde"))
    copy = CalibrationTracker.from_state(sealed(t.to_state()))
    assert copy.category_snapshots() == t.category_snapshots()
    assert len(t.category_snapshots()) == 3  # the top 2, then "(other)"
    for tracker in (t, copy):
        tracker.update(0.2, 0.3, 1, category="a")
        tracker.update(0.2, 0.3, 1, category="z")  # beyond max_categories: "(other)"
    assert copy.category_snapshots() == t.category_snapshots()
    assert copy.snapshot(reliability=True) == t.snapshot(reliability=True)


# ---------------------------------------------------------------- a unit with --by
def config(**kw):
    return ProcessorConfig.build(
        events_topic="ev", labels_topic="lab", metrics_file="none", window=20, **kw
    )


def records(n, seed=5):
    """Events with a top-level "shop" field (not a feature) and a string feature "dev",
    each label a few records after its event."""
    rng = random.Random(seed)
    out, labels = [], []
    for i in range(n):
        shop = f"s{rng.randrange(5)}"
        x = {"x1": rng.gauss(0, 1), "dev": rng.choice(["ios", "web"])}
        ev = {"id": f"e{i}", "features": x, "shop": shop}
        out.append(("ev", ev))
        labels.append(
            ("lab", {"id": f"e{i}", "label": int(rng.random() < 0.3 + 0.1 * (x["x1"] > 0))})
        )
        if len(labels) > 3:
            out.append(labels.pop(0))
    return out + labels


def feed(unit, recs, start, sent, emit=None):
    """Feed the unit; ``emit(unit)`` whenever it says a metric line is due."""
    unit.send = lambda topic, key, value: sent.append((topic, orjson.loads(value)))
    for t, (topic, value) in enumerate(recs, start):
        rec = Record(topic, 0, t, 1000 * t, value["id"].encode(), orjson.dumps(value))
        rank = TopicRank.EVENT if topic == "ev" else TopicRank.LABEL
        if unit.handle(rank, rec) and emit is not None:
            emit(unit)


@pytest.mark.parametrize("by", ["shop", "dev"])  # a top-level field; a (string) feature
def test_unit_with_by_roundtrips_through_a_checkpoint(by):
    cfg = config(by=by, max_categories=3)
    recs = records(300)
    unit, sent = CalibrationUnit(cfg), []
    feed(unit, recs[:301], 0, sent)
    again = resume(sealed(full_state(unit)), config=cfg)
    assert list(again.clf._state.categories) == list(unit.clf._state.categories)
    rest_a, rest_b = [], []
    feed(unit, recs[301:], 301, rest_a)
    feed(again, recs[301:], 301, rest_b)
    assert rest_a == rest_b and len(rest_a) > 100
    preds = [v for t, v in sent + rest_a if t == "streamcal.predictions"]
    want = {"s0", "s1", "s2", "s3", "s4"} if by == "shop" else {"ios", "web"}
    assert {p["category"] for p in preds} == want
    assert again.tracker.category_snapshots() == unit.tracker.category_snapshots()
    assert {r["category"] for r in unit.tracker.category_snapshots()} <= want | {"(other)"}


def test_checkpoint_fingerprint_includes_by():
    unit = CalibrationUnit(config(by="shop"))
    feed(unit, records(20), 0, [])
    state = sealed(unit.to_state())
    for other in (config(), config(by="dev"), config(by="shop", max_categories=9)):
        with pytest.raises(CheckpointError, match="by|max_categories"):
            CalibrationUnit.from_state(state, config=other)


def test_bad_category_is_a_dead_letter():
    unit, sent = CalibrationUnit(config(by="shop")), []
    feed(unit, [("ev", {"id": "e1", "features": {"x1": 1.0}, "shop": ["a"]})], 0, sent)
    assert sent[0][0] == "streamcal.dead-letters" and "category" in sent[0][1]["reason"]
    assert unit.counts["events"] == 0


def test_per_category_lines_follow_each_units_line_with_its_labels():
    """--scope partition: a unit's metric line, then its category lines, all labelled with
    the unit (offline: the unit is fed directly)."""
    import io

    from streamcal.stream.processor import Processor

    cfg = config(by="shop", scope="partition", state_topic="none", metrics_every=50, top_k=3)
    proc = Processor(cfg)
    proc.metrics.out = out = io.StringIO()
    proc.units[3] = unit = proc.states.make(3)
    feed(unit, records(120), 0, [], emit=lambda u: proc.metrics.emit_unit(u, {"merge_stalls": 0}))
    lines = [orjson.loads(line) for line in out.getvalue().splitlines()]
    assert len(lines) == 2 * (1 + 4)  # at 50 and 100 labels: the line, 3 shops, "(other)"
    for block in (lines[:5], lines[5:]):
        assert "category" not in block[0] and block[0]["unit"] == "3"
        assert [r["unit"] for r in block[1:]] == ["3"] * 4
        assert block[-1]["category"] == "(other)"
        assert sum(r["labels"] for r in block[1:]) == block[0]["labels"]
    with pytest.raises(ValueError, match="needs by"):
        config(max_categories=5)
