"""Unit tests of the stream processor's parts that need no broker."""

from __future__ import annotations

import math
import pickle

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamcal.stream.config import ProcessorConfig
from streamcal.stream.deadletter import dead_letter
from streamcal.stream.messages import BadInput, Fields, decode_event, decode_label
from streamcal.stream.pending import EVENT
from streamcal.stream.state.checkpoint import MAGIC, CheckpointError, CheckpointStore
from tests._fakes import TP, ChunkyConsumer, Record, release_all
from tests._helpers import CHECKPOINT_KEY

KEY = b"k" * 32
F = Fields()


# ---------------------------------------------------------------- config
def test_config_precedence_flag_env_toml(tmp_path):
    toml = tmp_path / "c.toml"
    toml.write_text('model = "gnb"\nwindow = 50\n[run]\nevents-topic = "from-toml"\n')
    env = {"STREAMCAL_WINDOW": "70", "STREAMCAL_LABELS_TOPIC": "from-env"}
    cfg = ProcessorConfig.from_sources({"window": 90, "mode": None}, env, toml)
    assert (cfg.model, cfg.window, cfg.events_topic, cfg.labels_topic) == (
        "gnb",
        90,
        "from-toml",
        "from-env",
    )
    cfg = ProcessorConfig.from_sources({}, env, toml)
    assert cfg.window == 70


@pytest.mark.parametrize(
    "values, words",
    [
        ({"events_topic": "a", "labels_topic": "a"}, "must differ"),
        ({"predictions_topic": "streamcal.events"}, "also an input topic"),
        ({"mode": "bogus"}, "mode"),
        ({"merge": "max"}, "merge"),
        ({"pending_ttl": -1.0}, "pending_ttl"),
        ({"checkpoint_interval": math.nan}, "checkpoint_interval"),
        ({"window": 0}, "window"),
        ({"model": "forest"}, "model"),
        ({"security_protocol": "TLS"}, "security_protocol"),
        ({"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN"}, "sasl_username"),
        ({"ssl_cafile": "/nonexistent/ca.pem"}, "ssl_cafile"),
        ({"state_dir": "/tmp/somewhere"}, "checkpoint key"),
        ({"metrics_port": 70000}, "metrics_port"),
    ],
)
def test_config_rejects_bad_values_with_one_line(values, words):
    with pytest.raises(ValueError) as exc:
        ProcessorConfig.build(**values)
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_config_env_type_errors_name_the_variable():
    with pytest.raises(ValueError, match="STREAMCAL_PENDING_MAX"):
        ProcessorConfig.from_sources({}, {"STREAMCAL_PENDING_MAX": "lots"})


def test_config_refuses_key_file_inside_state_dir(tmp_path):
    key = tmp_path / "state" / "key"
    key.parent.mkdir()
    key.write_bytes(KEY)
    with pytest.raises(ValueError, match="outside the state directory"):
        ProcessorConfig.build(state_dir=str(tmp_path / "state"), checkpoint_key_file=str(key))
    outside = tmp_path / "key"
    outside.write_bytes(KEY)
    cfg = ProcessorConfig.build(state_dir=str(tmp_path / "state"), checkpoint_key_file=str(outside))
    assert cfg.key_bytes() == KEY


def test_config_repr_hides_secrets():
    cfg = ProcessorConfig.build(
        security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_username="u",
        sasl_password="hunter2", checkpoint_key="s" * 20,
    )  # fmt: skip
    assert "hunter2" not in repr(cfg) and "s" * 20 not in repr(cfg)
    assert cfg.kafka_client_settings()["sasl_plain_password"] == "hunter2"


# ---------------------------------------------------------------- messages
@pytest.mark.parametrize(
    "value, words",
    [
        (b"{not json", "malformed JSON"),
        (b"[1, 2]", "not a JSON object"),
        (None, "tombstone"),
        (b'{"features": {"x": 1}}', "missing id"),
        (b'{"id": "e", "features": {"x": "a", "y": [1]}}', "feature 'y'"),
        (b'{"id": "e"}', "missing features"),
        (b'{"id": "e", "features": {}}', "no features"),
        (b'{"id": "e", "features": 3}', "not an object"),
        (b'{"id": "e", "features": {"x": 1e999}}', "infinity"),
        (b'{"id": "e", "features": {"x": NaN}}', "malformed JSON"),
        (b'{"id": "e", "features": {"x": 1}, "ts": "noon"}', "timestamp"),
    ],
)
def test_bad_events_are_rejected_with_reason(value, words):
    with pytest.raises(BadInput, match=words):
        decode_event(value, F)


@pytest.mark.parametrize("label", [2, -1, 0.5, "yes", "1.0", "True", None, [1], {"a": 1}])
def test_non_binary_labels_are_rejected(label):
    with pytest.raises(BadInput, match="label"):
        decode_label(orjson.dumps({"id": "e", "label": label}), F)


@pytest.mark.parametrize(
    "label, y",
    [(0, False), (1, True), (False, False), (True, True), (1.0, True), (0.0, False),
     ("1", True), ("0", False), ("true", True), ("false", False)],
)  # fmt: skip
def test_binary_labels(label, y):
    assert decode_label(orjson.dumps({"id": 7, "label": label}), F) == ("7", y)


def test_field_names_are_configurable():
    f = Fields(id="key", features="x", label="y", timestamp="t")
    ev = decode_event(b'{"key": "a", "x": {"u": 2}, "t": 5}', f)
    assert ev == ("a", {"u": 2}, 5.0)
    assert decode_label(b'{"key": "a", "y": 1}', f) == ("a", True)


# ---------------------------------------------------------------- checkpoints
def test_checkpoint_roundtrip_keeps_newest(tmp_path):
    store = CheckpointStore(tmp_path, KEY, keep=2)
    for i in range(5):
        store.save({"i": i})
    assert store.load() == {"i": 4}
    assert len(list(tmp_path.glob("checkpoint-*.ckpt"))) == 2
    assert not list(tmp_path.glob(".tmp-*"))


@pytest.mark.parametrize("where", ["header", "tag", "payload", "truncate"])
def test_tampered_checkpoint_is_refused_before_unpickling(tmp_path, where):
    store = CheckpointStore(tmp_path, KEY)
    path = store.save({"ok": 1})
    data = bytearray(path.read_bytes())
    if where == "header":
        data[0] ^= 1
    elif where == "tag":
        data[len(MAGIC)] ^= 1
    elif where == "payload":
        data[-2] ^= 1
    else:
        data = data[: len(MAGIC) + 10]
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="refusing"):
        store.load()


def test_foreign_checkpoint_with_code_is_never_unpickled(tmp_path):
    """A pickle that would run code on load, signed with another key, is refused."""

    class Boom:
        def __reduce__(self):
            return (exec, ("raise SystemExit('unpickled!')",))

    CheckpointStore(tmp_path, b"x" * 32).save(Boom())
    with pytest.raises(CheckpointError, match="authentication"):
        CheckpointStore(tmp_path, KEY).load()


def test_dead_letter_keeps_original_bytes():
    raw = b"\xff\xfe not utf-8"
    rec = orjson.loads(dead_letter(raw, None, "t", 1, 2, 3, "why"))
    import base64

    assert base64.b64decode(rec["value_base64"]) == raw and rec["key"] is None
    assert pickle.loads(pickle.dumps(rec)) == rec


# ---------------------------------------------------------------- processor without Kafka

from river import linear_model  # noqa: E402


class PickyModel(linear_model.LogisticRegression):
    """Refuses to learn objects with ``x1 > 100`` (before changing anything)."""

    def learn_one(self, x, y):
        if x.get("x1", 0.0) > 100:
            raise ValueError(f"x1 too large: {x['x1']}")
        super().learn_one(x, y)


def offline_processor(**settings):
    """A Processor whose outputs are collected in a list instead of sent to Kafka."""
    from streamcal.learner import VennAbersClassifier
    from streamcal.stream.processor import Processor

    config = ProcessorConfig.build(
        events_topic="ev", labels_topic="lab", mode="sva", metrics_file="none", **settings
    )
    proc = Processor(config)
    protect = config.protect_params() or False  # as the unit's own classifier
    proc.state.clf = VennAbersClassifier(PickyModel(), mode="sva", protect=protect)
    sent = []
    proc.state.send = lambda topic, key, value: sent.append((topic, key, orjson.loads(value)))
    return proc, sent


def feed(proc, items):
    """items: ("e", i, x1) events or ("l", i, y) labels, at increasing record times."""
    for t, (kind, i, v) in enumerate(items):
        if kind == "e":
            value = orjson.dumps({"id": f"e{i}", "features": {"x1": v, "x2": 1.0}})
            proc.state.on_event(Record("ev", 0, t, 1000 * t, f"e{i}".encode(), value))
        else:
            value = orjson.dumps({"id": f"e{i}", "label": v})
            proc.state.on_label(Record("lab", 0, t, 1000 * t, f"e{i}".encode(), value))


@pytest.mark.parametrize("early", [False, True])
def test_join_refused_by_the_learner_leaves_state_untouched(early):
    """A label the learner refuses is a dead letter with the reason; the event stays
    pending, nothing is counted, and the state equals that of a run without that label."""
    good = [("e", i, 0.1 * i) for i in range(6)] + [("l", i, i % 2) for i in range(6)]
    bad_event, bad_label = ("e", 6, 1000.0), ("l", 6, 1)
    after = [("e", 7, 0.3), ("l", 7, 1), ("e", 8, -0.2), ("l", 8, 0)]
    # early: the label waits for its event, and the join happens when the event comes.
    bad = [bad_label, bad_event] if early else [bad_event, bad_label]
    proc, sent = offline_processor()
    feed(proc, good + bad + after)
    ref, ref_sent = offline_processor()
    feed(ref, good + [bad_event] + after)

    dead = [v for t, _, v in sent if t == "streamcal.dead-letters"]
    assert len(dead) == 1 and dead[0]["source"]["topic"] == "lab"
    assert "learner rejected the label of 'e6'" in dead[0]["reason"]
    assert "x1 too large" in dead[0]["reason"]
    st, rs = proc.state, ref.state
    assert st.pending.lookup("e6")[0] == EVENT  # still waits, not finished
    assert st.counts == {**rs.counts, "dead_letters": 1}
    assert st.counts["labels"] == st.tracker.labels == 8
    assert st.tracker.snapshot() == rs.tracker.snapshot()
    assert st.clf.calibration_size == rs.clf.calibration_size == 8
    preds = [v for t, _, v in sent if t == "streamcal.predictions"]
    assert preds == [v for t, _, v in ref_sent if t == "streamcal.predictions"]
    probe = {"x1": 0.5, "x2": 1.0}
    assert st.clf.predict_interval_one(probe) == rs.clf.predict_interval_one(probe)
    # the alarm too (mode sva: it scores with a frozen copy of the model before it learns)
    assert st.clf.to_state()["protection"] == rs.clf.to_state()["protection"]


def test_join_refused_by_the_tracker_leaves_state_untouched():
    proc, sent = offline_processor()
    task = proc.state.task
    predict = task.predict

    def broken(clf, ev):  # what waits for the label has p = NaN
        out, pred = predict(clf, ev)
        return out, pred._replace(p=float("nan"))

    task.predict = broken
    feed(proc, [("e", 0, 0.1), ("l", 0, 1)])
    (reason,) = [v["reason"] for t, _, v in sent if t == "streamcal.dead-letters"]
    assert reason.startswith("tracker rejected the prediction of 'e0'")
    assert proc.state.tracker.labels == proc.state.clf.calibration_size == 0
    assert proc.state.pending.lookup("e0")[0] == EVENT


def test_refresh_every_reaches_the_learner():
    cfg = ProcessorConfig.from_sources(
        {"window": 50}, env={"STREAMCAL_REFRESH_EVERY": "7", "STREAMCAL_MODE": "sva"}
    )
    assert cfg.refresh_every == 7
    from streamcal.stream.unit import CalibrationUnit

    assert CalibrationUnit(cfg).clf.refresh_every == 7
    assert CalibrationUnit(ProcessorConfig.build()).clf.refresh_every is None
    for values, words in (
        ({"refresh_every": 0}, "refresh_every must be a positive integer, got 0"),
        ({"mode": "va", "refresh_every": 5}, "refresh_every is not used by mode .va."),
    ):
        with pytest.raises(ValueError, match=words):
            ProcessorConfig.build(**values)


def test_metric_lines_carry_reliability_bins():
    proc, _ = offline_processor(tracker_bins=5)
    feed(proc, [("e", i, 0.1 * i) for i in range(20)] + [("l", i, i % 3 == 0) for i in range(20)])
    line = proc.metric_line()
    assert len(line["reliability"]) == len(line["raw_reliability"]) == 5
    assert sum(b["count"] for b in line["reliability"]) == line["labels"] == 20
    assert line["reliability"] == proc.state.tracker.reliability("p")
    assert orjson.loads(orjson.dumps(line)) == line


# ---------------------------------------------------------------- deterministic merge
@given(
    st.lists(st.tuples(st.integers(0, 1), st.integers(0, 2), st.integers(0, 30)), max_size=60),
    st.randoms(use_true_random=False),
    st.lists(st.booleans(), min_size=1),
)
def test_ordered_merge_is_the_sorted_order_however_records_arrive(records, rng, use_ready):
    """With all records in the topics, the merge releases them sorted by (timestamp, topic
    rank, partition, offset), whatever the fetch order and whether ``next`` or the
    non-blocking ``ready`` is used."""
    from streamcal.stream.kafka.ordering import OrderedMerge

    topics = ("ev", "lab")
    data = {TP(t, p): [] for t in topics for p in range(3)}
    for rank, p, ts in records:
        tp = TP(topics[rank], p)
        # timestamps need not grow within a partition (out-of-order producers)
        data[tp].append(Record(tp.topic, p, len(data[tp]), ts, None, b""))
    merge = OrderedMerge(ChunkyConsumer(data, rng), list(data), {"ev": 0, "lab": 1})
    out = release_all(merge, use_ready)
    # The reference: a k-way merge of the partitions (smallest head first).
    import heapq

    want = heapq.merge(
        *[[(r.timestamp, topics.index(r.topic), r.partition, r.offset) for r in recs]
          for recs in data.values()]
    )  # fmt: skip
    assert [(r.timestamp, rank, r.partition, r.offset) for rank, r in out] == list(want)
    assert merge.stalls == 0 and merge.caught_up()


def test_metric_line_works_before_run():
    from streamcal.stream.processor import Processor

    proc = Processor(ProcessorConfig.build(metrics_file="none", instance_id="i-1"))
    line = proc.metric_line()
    assert (line["events"], line["labels"], line["pending"], line["events_per_s"]) == (0, 0, 0, 0)
    assert (line["unit"], line["instance"]) == ("global", "i-1")
    assert proc.metrics_port is None
    part = Processor(
        ProcessorConfig.build(metrics_file="none", scope="partition", state_topic="none")
    )
    assert part.metric_line()["events"] == 0 and part.units == {}


def test_a_unit_moves_its_own_offsets_and_says_when_a_metric_line_is_due():
    from streamcal.stream.unit import CalibrationUnit, TopicRank

    cfg = ProcessorConfig.build(events_topic="ev", labels_topic="lab", metrics_every=2)
    unit, sent = CalibrationUnit(cfg), []
    unit.send = lambda topic, key, value: sent.append(topic)
    due = []
    for i in range(3):
        event = orjson.dumps({"id": f"e{i}", "features": {"x1": 0.5}})
        due.append(unit.handle(TopicRank.EVENT, Record("ev", 0, i, 1000 * i, b"k", event)))
        label = orjson.dumps({"id": f"e{i}", "label": i % 2})
        due.append(unit.handle(TopicRank.LABEL, Record("lab", 1, 10 + i, 1000 * i, b"k", label)))
    # a duplicate label: a dead letter, no line, and the unit moves past it all the same
    due.append(unit.handle(TopicRank.LABEL, Record("lab", 1, 13, 3000, b"k", label)))
    assert due == [False, False, False, True, False, False, False]
    assert unit.offsets == {("ev", 0): 3, ("lab", 1): 14}
    assert sent.count(cfg.dead_letter_topic) == 1


def test_the_empty_snapshot_is_a_new_units_made_without_a_model():
    from streamcal.stream.unit import CalibrationUnit

    for cfg in (ProcessorConfig.build(), ProcessorConfig.build(by="shop", top_k=3)):
        assert CalibrationUnit.empty_snapshot(cfg) == CalibrationUnit(cfg).snapshot()


def test_a_released_unit_writes_its_line_first(tmp_path):
    """A unit revoked from this instance (a rebalance, the group's other member leaving)
    writes its metric line before it goes, as a stop does: otherwise what it learnt since
    its last line is missing from this instance's log, for good if no one takes it over."""
    from streamcal.monitoring import read_metric_log
    from streamcal.stream.processor import Processor
    from streamcal.stream.unit import TopicRank

    metrics = tmp_path / "metrics.jsonl"
    cfg = ProcessorConfig.build(events_topic="ev", labels_topic="lab", scope="partition",
                                state_topic="none", state_dir=str(tmp_path / "state"),
                                metrics_file=str(metrics), metrics_every=1000,
                                checkpoint_key=CHECKPOINT_KEY)  # fmt: skip
    proc = Processor(cfg)
    proc.states.adopt([0, 1])
    proc.metrics.start(proc.units)
    for u in (0, 1):
        proc.units[u].send = lambda topic, key, value: None
        for i in range(3 + u):
            event = orjson.dumps({"id": f"e{u}-{i}", "features": {"x1": 0.1 * i}})
            proc.units[u].handle(TopicRank.EVENT, Record("ev", u, i, 1000 * i, b"k", event))
            label = orjson.dumps({"id": f"e{u}-{i}", "label": i % 2})
            proc.units[u].handle(TopicRank.LABEL, Record("lab", u, i, 1000 * i, b"k", label))
    proc._release([1])
    proc.metrics.close()
    assert list(proc.units) == [0]
    assert [(line["unit"], line["labels"]) for line in read_metric_log(metrics)] == [("1", 4)]
    proc.states.close()
