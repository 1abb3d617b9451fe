"""Unit tests of the stream processor's parts that need no broker."""

from __future__ import annotations

import math
import pickle

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamcal.stream.checkpoint import MAGIC, CheckpointError, CheckpointStore
from streamcal.stream.config import ProcessorConfig
from streamcal.stream.deadletter import dead_letter
from streamcal.stream.messages import BadInput, Fields, decode_event, decode_label
from streamcal.stream.pending import RecentIds, WaitingRoom

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
        (None, "empty message"),
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


@pytest.mark.parametrize("label", [2, -1, 0.5, "1", None, [1]])
def test_non_binary_labels_are_rejected(label):
    with pytest.raises(BadInput, match="label"):
        decode_label(orjson.dumps({"id": "e", "label": label}), F)


@pytest.mark.parametrize("label, y", [(0, False), (1, True), (False, False), (True, True)])
def test_binary_labels(label, y):
    assert decode_label(orjson.dumps({"id": 7, "label": label}), F) == ("7", y)


def test_field_names_are_configurable():
    f = Fields(id="key", features="x", label="y", timestamp="t")
    ev = decode_event(b'{"key": "a", "x": {"u": 2}, "t": 5}', f)
    assert ev == ("a", {"u": 2}, 5.0)
    assert decode_label(b'{"key": "a", "y": 1}', f) == ("a", True)


# ---------------------------------------------------------------- waiting rooms
@given(
    st.lists(st.tuples(st.integers(0, 30), st.floats(0, 100)), max_size=60),
    st.integers(1, 10),
    st.floats(0.5, 50),
)
def test_waiting_room_matches_a_plain_model(ops, max_size, ttl):
    """Same answers as a naive ordered list; everything put comes out exactly once."""
    room = WaitingRoom(ttl, max_size)
    model: list = []  # [key, deadline, value] in insertion order
    out = 0
    for i, (key, now) in enumerate(ops):
        value = (key, i)
        if key in room:
            j = next(j for j, e in enumerate(model) if e[0] == key)
            assert room.pop(key) == model.pop(j)[2]
            out += 1
        evicted = room.put(key, value, now)
        model.append([key, now + ttl, value])
        want = []
        while len(model) > max_size:
            k, _, v = model.pop(0)
            want.append((k, v))
        assert evicted == want
        expired = room.expire(now)
        want = []
        while model and model[0][1] < now:
            k, _, v = model.pop(0)
            want.append((k, v))
        assert expired == want
        out += len(evicted) + len(expired)
        assert len(room) == len(model) <= max_size
    assert room.values() == [e[2] for e in model]
    assert len(ops) == out + len(room)


def test_recent_ids_forget_the_oldest():
    r = RecentIds(3)
    for k in "abcd":
        r.add(k, "joined")
    assert r.get("a") is None and r.get("d") == "joined" and len(r) == 3


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
