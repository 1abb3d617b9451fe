"""The multiclass unit (``--task multiclass``) without a broker.

Its predictions and its tracker equal a bare ``VennAbersMultiClassifier`` and a
``MulticlassTracker`` fed in the unit's join order, however late, missing or out of order
the labels come; a class first seen mid-stream; bad labels dead-lettered with the state
unchanged; the checkpoint round trip and its fingerprint; the 4 -> 5 migration.
"""

from __future__ import annotations

import math
import pickle
import random

import orjson
import pytest

from streamcal.learner import VennAbersMultiClassifier
from streamcal.monitoring.multiclass_tracker import MulticlassTracker
from streamcal.stream.config import ProcessorConfig
from streamcal.stream.pending import EVENT
from streamcal.stream.state.errors import CheckpointError
from streamcal.stream.unit import CalibrationUnit
from tests._fakes import Record
from tests._helpers import assert_bad_label_dead_lettered, full_state, resume

CENTRES = {"a": (0.0, 0.0), "b": (2.0, 0.0), 7: (0.0, 2.0), "late": (2.0, 2.0)}


def _config(**settings) -> ProcessorConfig:
    base = dict(events_topic="ev", labels_topic="lab", metrics_file="none", task="multiclass",
                model="gnb", window=60)  # fmt: skip
    return ProcessorConfig.build(**{**base, **settings})


def _unit(config):
    unit = CalibrationUnit(config)
    sent = []
    unit.send = lambda topic, key, value: sent.append((topic, orjson.loads(value)))
    return unit, sent


def _stream(n: int, seed: int, late_from: int = 10**9):
    """Events (id, x) and labels (id, class); the class "late" only from ``late_from``."""
    rng = random.Random(seed)
    events, labels = [], []
    for i in range(n):
        classes = [c for c in CENTRES if c != "late" or i >= late_from]
        y = rng.choice(classes)
        cx, cy = CENTRES[y]
        events.append((f"e{i}", {"x1": rng.gauss(cx, 1.0), "x2": rng.gauss(cy, 1.0)}))
        labels.append((f"e{i}", y))
    return events, labels


def _schedule(events, labels, delay: int, rng, missing=()):
    """("e", event) and ("l", label) items: each label from 2 events before its own event
    (a label first) to ``delay`` events after it, those of ``missing`` never."""
    at = [(i + 0.5, ("e", ev)) for i, ev in enumerate(events)]
    at += [(i + rng.randrange(-2, delay + 1) + 0.25, ("l", lab))
           for i, lab in enumerate(labels) if i not in missing]  # fmt: skip
    return [item for _, item in sorted(at, key=lambda a: a[0])]


def _records(items, start: int = 0):
    for t, (kind, item) in enumerate(items, start):
        if kind == "e":
            eid, x = item
            yield "e", Record("ev", 0, t, 1000 + t, eid.encode(),
                              orjson.dumps({"id": eid, "features": x}))  # fmt: skip
        else:
            eid, y = item
            yield "l", Record("lab", 0, t, 1000 + t, eid.encode(),
                              orjson.dumps({"id": eid, "label": y}))  # fmt: skip


def _feed(unit, items, start: int = 0):
    """Feed ``items`` as records numbered (offset, time) from ``start``."""
    for kind, rec in _records(items, start):
        (unit.on_event if kind == "e" else unit.on_label)(rec)


def _reference(items, scheme="one-vs-rest", window=60):
    """The predictions and tracker of a bare classifier fed in join order."""
    from river import naive_bayes

    clf = VennAbersMultiClassifier(naive_bayes.GaussianNB(), scheme=scheme, window=window)
    tracker = MulticlassTracker(window=1000, bins=10)
    preds, pending, early = {}, {}, {}
    xs = {}

    def join(eid, y):
        pred = pending.pop(eid)
        clf.learn_one(xs[eid], y)
        if pred is not None:
            iv = pred.intervals if scheme == "one-vs-rest" else None
            tracker.update(pred.label, pred.p0, pred.p1, pred.p, pred.proba, y,
                           scores=pred.scores, intervals=iv)  # fmt: skip

    for kind, item in items:
        if kind == "e":
            eid, x = item
            xs[eid] = x
            pending[eid] = preds[eid] = clf.predict_interval_one(x)
            if eid in early:
                join(eid, early.pop(eid))
        else:
            eid, y = item
            y = str(y)
            if eid in pending:
                join(eid, y)
            else:
                early[eid] = y
    return preds, tracker


@pytest.mark.parametrize("scheme", ["one-vs-rest", "one-vs-one", "top-label"])
def test_late_missing_out_of_order_labels_equal_the_bare_classifier(scheme):
    rng = random.Random(3)
    events, labels = _stream(500, seed=1, late_from=250)
    items = _schedule(events, labels, delay=30, rng=rng, missing=set(rng.sample(range(500), 40)))
    unit, sent = _unit(_config(scheme=scheme))
    _feed(unit, items)
    preds, tracker = _reference(items, scheme)
    out = {m["id"]: m for topic, m in sent if topic == "streamcal.predictions"}
    assert len(out) == 500 and unit.counts["labels"] == 460 and unit.counts["dead_letters"] == 0
    for eid, m in out.items():
        ref = preds[eid]
        if ref is None:
            assert m["label"] is None and m["probabilities"] == {} and m["p0"] == 0.0
            continue
        assert m["label"] == ref.label and m["scheme"] == scheme
        assert (m["p0"], m["p1"], m["p"]) == (ref.p0, ref.p1, ref.p)
        assert m["probabilities"] == ref.proba and m["scores"] == ref.scores
        assert math.isclose(sum(m["probabilities"].values()), 1.0, rel_tol=1e-9)
        if scheme == "one-vs-rest":
            assert m["intervals"] == {c: list(v) for c, v in ref.intervals.items()}
        if scheme == "one-vs-one":
            assert m["pairs"] == [[a, b, *v] for (a, b), v in ref.intervals.items()]
        assert ("intervals" in m) == (scheme == "one-vs-rest")
        assert ("pairs" in m) == (scheme == "one-vs-one")
    assert unit.tracker.snapshot() == tracker.snapshot()
    assert unit.tracker.class_snapshots() == tracker.class_snapshots()
    # integers are their decimal strings: 7 and "7" are one class
    assert sorted(unit.clf.classes) == ["7", "a", "b", "late"]


def test_a_class_first_seen_mid_stream():
    events, labels = _stream(400, seed=2, late_from=200)
    unit, sent = _unit(_config())
    _feed(unit, [it for ev, lab in zip(events, labels, strict=True)
                 for it in (("e", ev), ("l", lab))])  # fmt: skip
    out = [m for _, m in sent]
    first = next(i for i, (_, y) in enumerate(labels) if y == "late")
    assert first >= 200
    assert all("late" not in m["probabilities"] for m in out[: first + 1])
    assert all("late" in m["probabilities"] and "late" in m["intervals"] for m in out[first + 1 :])
    rows = {r["class"]: r for r in unit.class_snapshots()}
    assert rows["late"]["labels"] == 399 - first  # from its first pair on
    assert rows["a"]["labels"] == 399  # every prediction after the first label


@pytest.mark.parametrize(
    "label, reason",
    [
        (1.5, "label is not a class (a string or an integer): 1.5"),
        (4.0, "label is not a class (a string or an integer): 4.0"),
        (True, "label is not a class (a string or an integer): True"),
        (None, "label is not a class (a string or an integer): None"),
        ([1], "label is not a class (a string or an integer): an array of 1 items"),
        ({"c": 1}, "label is not a class (a string or an integer): an object of 1 keys"),
        ("", "empty label (a class name must not be empty)"),
    ],
)
def test_a_bad_label_type_is_dead_lettered_with_the_state_unchanged(label, reason):
    events, labels = _stream(60, seed=4)
    unit, sent = _unit(_config())
    _feed(unit, [it for ev, lab in zip(events, labels, strict=True)
                 for it in (("e", ev), ("l", lab))])  # fmt: skip
    _feed(unit, [("e", ("bad", {"x1": 0.0, "x2": 0.0}))])
    assert_bad_label_dead_lettered(unit, sent, label, reason)


def test_a_class_beyond_max_classes_is_dead_lettered():
    unit, sent = _unit(_config(max_classes=2))
    items = [("e", (f"e{i}", {"x1": float(i)})) for i in range(3)]
    items += [("l", ("e0", "a")), ("l", ("e1", "b")), ("l", ("e2", "c"))]
    _feed(unit, items)
    dead = [m["reason"] for t, m in sent if t == "streamcal.dead-letters"]
    assert dead == ["label 'c' of 'e2' would be class number 3, beyond max_classes=2"]
    assert unit.clf.classes == ["a", "b"] and unit.pending.lookup("e2")[0] == EVENT


def test_checkpoint_round_trip_resumes_identically():
    rng = random.Random(5)
    events, labels = _stream(400, seed=6, late_from=150)
    items = _schedule(events, labels, delay=20, rng=rng)
    cut = len(items) // 2
    whole, sent_whole = _unit(_config(by=None))
    _feed(whole, items)
    first, _ = _unit(_config())
    _feed(first, items[:cut])
    state = pickle.loads(pickle.dumps(full_state(first)))
    second = resume(state, config=_config())
    sent = []
    second.send = lambda topic, key, value: sent.append((topic, orjson.loads(value)))
    _feed(second, items[cut:], start=cut)  # record times go on: the label delays too
    tail = [m for _, m in sent_whole][-len(sent):]
    assert sent and [m for _, m in sent] == tail
    assert second.snapshot() == whole.snapshot()  # the alarm's fields included
    assert second.clf.log_martingale == whole.clf.log_martingale != 0.0


def test_fingerprint_binds_task_and_scheme():
    unit, _ = _unit(_config())
    _feed(unit, [("e", ("e0", {"x1": 0.0})), ("l", ("e0", "a"))])
    state = unit.to_state()
    assert state["fingerprint"]["task"] == "multiclass"
    assert state["fingerprint"]["scheme"] is None  # as given: the default
    with pytest.raises(CheckpointError, match="scheme='one-vs-rest' but .* scheme='top-label'"):
        CalibrationUnit.from_state(state, config=_config(scheme="top-label"))
    binary = ProcessorConfig.build(events_topic="ev", labels_topic="lab", metrics_file="none",
                                   model="gnb", window=60)  # fmt: skip
    with pytest.raises(CheckpointError, match="task='multiclass' but .* task='binary'"):
        CalibrationUnit.from_state(state, config=binary)
    with pytest.raises(CheckpointError, match="task='binary' but .* task='multiclass'"):
        CalibrationUnit.from_state(CalibrationUnit(binary).to_state(), config=_config())
    # the explicit default scheme is the same setting; protection is not bound
    CalibrationUnit.from_state(state, config=_config(scheme="one-vs-rest", protect=False))


def test_config_rules():
    for bad, match in [
        (dict(model="logreg"), "binary only"),
        (dict(model="score:p"), "binary only"),
        (dict(mode="sva"), "pretrained only"),
        (dict(scheme="nope"), "scheme"),
        (dict(max_classes=1), "max_classes must be >= 2"),
    ]:
        with pytest.raises(ValueError, match=match):
            _config(**bad)
    with pytest.raises(ValueError, match="scheme needs --task multiclass"):
        ProcessorConfig.build(scheme="one-vs-one")
