"""The input path against hostile records, without a broker: the merge's gate, the limits
of decoding, dead letters of any size, the unreadable-batch message, the codec settings.
(The same records through a real broker: tests/stream/test_other_clients.py.)"""

from __future__ import annotations

import random

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamcal.stream.config import ProcessorConfig
from streamcal.stream.deadletter import KEEP_BYTES, dead_letter
from streamcal.stream.intake import Reject, decode
from streamcal.stream.kafka.ordering import OrderedMerge, RejectedRecord, UnreadableBatch
from streamcal.stream.messages import BadInput, Fields, Rejected, decode_event, decode_label
from tests._fakes import TP, ChunkyConsumer, Record, release_all

F = Fields()


FAR = 4_102_444_800_000  # 2100-01-01, ms
HOSTILE = {  # (timestamp, key, value) -> words of the reason
    (-1, None, b"{}"): "(none)",
    (FAR, None, b"{}"): "max_future_s",
    (5, b"k" * (KEEP_BYTES + 1), b"{}"): "key too large",
    (5, None, b"v" * 200): "record too large",
}


def _release_all(merge) -> list:
    return [record for _, record in release_all(merge)]


@given(
    st.lists(st.tuples(st.integers(0, 1), st.integers(0, 2), st.integers(0, 20)), max_size=40),
    st.lists(
        st.tuples(st.sampled_from(sorted(HOSTILE, key=repr)), st.integers(0, 5), st.integers(0, 60))
    ),
    st.randoms(use_true_random=False),
)  # fmt: skip
def test_gate_rejects_hostile_records_without_changing_the_order_of_the_others(good, hostile, rng):
    topics = ("ev", "lab")

    def merge_of(with_hostile: bool):
        data = {TP(t, p): [] for t in topics for p in range(3)}
        for i, (rank, p, ts) in enumerate(good):
            data[TP(topics[rank], p)].append((ts, None, b"g%d" % i))
        if with_hostile:
            for (ts, key, value), where, at in hostile:
                recs = data[list(data)[where]]
                recs.insert(at % (len(recs) + 1), (ts, key, value))
        data = {
            tp: [Record(tp.topic, tp.partition, o, *r) for o, r in enumerate(recs)]
            for tp, recs in data.items()
        }
        consumer = ChunkyConsumer(data, random.Random(rng.random()), most=5)
        return OrderedMerge(consumer, list(data), {"ev": 0, "lab": 1}, max_bytes=100), data

    clean, _ = merge_of(False)
    want = [r.value for r in _release_all(clean)]
    merge, data = merge_of(True)
    out = _release_all(merge)
    assert [r.value for r in out if type(r) is Record] == want
    rejected = [r for r in out if type(r) is RejectedRecord]
    assert len(rejected) == len(hostile)
    for r in rejected:
        original = data[TP(r.topic, r.partition)][r.offset]
        assert (r.timestamp, r.value.original) == (original.timestamp, original.value)
        words = HOSTILE[(original.timestamp, original.key, original.value)]
        assert words in r.value.reason
        assert r.key is None or len(r.key) == KEEP_BYTES
        reject = decode(r, decode_event, F)  # typed: never decoded, its reason kept
        assert type(reject) is Reject and reject.reason == r.value.reason


def _nested(depth: int) -> bytes:
    return b'{"a": ' * depth + b"1" + b"}" * depth


@pytest.mark.parametrize(
    "value, words",
    [
        (None, "tombstone"),
        (b"x" * (F.max_bytes + 1), "value too large"),
        (b'{"id": "e", "features": {"x": ' + _nested(1000) + b"}}", "an object of 1 keys"),
        (b'{"id": ' + _nested(1000) + b', "features": {"x": 1}}', "an object of 1 keys"),
        (b'{"id": "e", "features": {"x": ' + b"[" * 1100 + b"]" * 1100 + b"}}", "depth"),
        (orjson.dumps({"id": "e", "features": {f"f{i}": 1 for i in range(1001)}}), "1001 > max"),
        (orjson.dumps({"id": "e", "features": {"f" * 1025: 1}}), "feature name longer"),
        (orjson.dumps({"id": "e", "features": {"c": "v" * 1024}}), "feature name longer"),
        (orjson.dumps({"id": "i" * 1025, "features": {"x": 1}}), "id longer"),
        (orjson.dumps({"id": 1.5, "features": {"x": 1}}), "not a string or an integer: 1.5"),
        (orjson.dumps({"id": False, "features": {"x": 1}}), "not a string or an integer"),
        (orjson.dumps({"id": "e", "features": {"x": "y" * 10_000, "z": None}}), "'z'"),
        (orjson.dumps({"id": "e", "features": {"k" * 5000: None}}), "(5002 characters)"),
    ],
)
def test_hostile_events_get_a_short_reason(value, words):
    with pytest.raises(BadInput) as exc:
        decode_event(value, F)
    assert words in str(exc.value) and len(str(exc.value)) < 300


def test_limits_are_configurable_and_reach_decoding():
    cfg = ProcessorConfig.build(max_message_bytes=60, max_features=2, max_string_length=3)
    f = Fields.of(cfg)
    assert decode_event(b'{"id": "abc", "features": {"x": 1, "y": 2}}', f).id == "abc"
    for value, words in [
        (b'{"id": "abc", "features": {"x": 1, "y": 2, "z": 3}}', "3 > max_features=2"),
        (b'{"id": "abcd", "features": {"x": 1}}', "max_string_length=3"),
        (b'{"id": "a", "features": {"x": 1}, "padding": "' + b"p" * 60 + b'"}', "bytes > max"),
    ]:
        with pytest.raises(BadInput, match=words):
            decode_event(value, f)


def test_ids_as_numbers_and_far_or_negative_event_times_are_processed():
    ev = decode_event(b'{"id": -7, "features": {"x": 1}, "ts": -1}', F)
    assert ev.id == "-7" and ev.ts == -1.0
    assert decode_event(b'{"id": 9007199254740993, "features": {"x": 1}, "ts": 1e12}', F).ts
    assert decode_label(b'{"id": 123, "label": "true"}', F) == ("123", True)


def test_rejected_values_decode_to_their_reason_and_dead_letter_their_original():
    value = Rejected("record timestamp ... (none)", b'{"id": "e"}')
    rec = Record("t", 0, 3, -1, None, value)
    for decoder in (decode_event, decode_label):
        assert decode(rec, decoder, F) == Reject("record timestamp ... (none)")
    assert decode(rec._replace(value=b"{}"), decode_event, F) == Reject("missing id field 'id'")
    rec = orjson.loads(dead_letter(value, None, "t", 0, 3, -1, "why"))
    assert rec["value"] == '{"id": "e"}' and rec["key"] is None


@pytest.mark.parametrize("size", [KEEP_BYTES, KEEP_BYTES + 1, 5_000_000])
def test_dead_letters_stay_small_whatever_the_record(size):
    key, value = b"\x00" * size, bytes(range(256)) * (size // 256 + 1)
    rec = orjson.loads(dead_letter(value, key, "t", 0, 3, None, "r"))
    assert len(orjson.dumps(rec)) < 300_000
    assert rec.get("key_size", KEEP_BYTES) == size and rec.get("value_size", size) >= size
    kept = rec["key"].encode() if "key" in rec else b""
    assert kept == key[:KEEP_BYTES]


@pytest.mark.parametrize(
    "cause, fix",
    [
        ("Libraries for lz4 compression codec not found", "pip install lz4"),
        ("Libraries for snappy compression codec not found", "pip install python-snappy"),
        ("Libraries for zstd compression codec not found", "pip install zstandard"),
        ("Unrecognized compression type: 7", "none, gzip, snappy, lz4 or zstd"),
        ("Record batch for partition p at offset 4 failed crc check", "corrupt"),
    ],
)
def test_unreadable_batch_message_says_where_why_and_what_to_do(cause, fix):
    from kafka.errors import UnsupportedCodecError

    from streamcal.stream.kafka.kafka_python import fix as fix_of

    error = UnsupportedCodecError(cause)
    msg = str(UnreadableBatch("events", 2, 40, 49, error, fix_of(error)))
    assert "topic 'events' partition 2 offset 40 (batch offsets 40..49)" in msg
    assert cause in msg and fix in msg and "--skip-unreadable" in msg


def test_compression_type_setting(monkeypatch):
    import kafka.codec

    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        cfg = ProcessorConfig.from_sources({}, {"STREAMCAL_COMPRESSION_TYPE": codec})
        assert cfg.producer_settings()["compression_type"] == (None if codec == "none" else codec)
    with pytest.raises(ValueError, match="compression_type must be one of"):
        ProcessorConfig.build(compression_type="brotli")
    monkeypatch.setattr(kafka.codec, "has_zstd", lambda: False)
    with pytest.raises(ValueError, match="zstandard"):
        ProcessorConfig.build(compression_type="zstd")


def test_cli_flags_of_this_path():
    from streamcal.cli import build_parser

    args = build_parser().parse_args(
        ["run", "--compression-type", "lz4", "--skip-unreadable", "--max-features", "5"]
    )
    cfg = ProcessorConfig.from_sources(vars(args), {})
    assert (cfg.compression_type, cfg.skip_unreadable, cfg.max_features) == ("lz4", True, 5)
