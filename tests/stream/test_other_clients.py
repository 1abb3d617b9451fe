"""Topics as other clients write them, against a real tansu broker: librdkafka
(confluent-kafka) with each codec, headers, null and foreign keys, idempotent and
transactional producers; tombstones and hostile records; a batch the processor cannot
read (`streamcal run` in a subprocess where the lz4 package cannot be imported).

Every good record must get exactly the prediction of a clean run (kafka-python,
uncompressed): the stream's timestamps are distinct, so the merge order, and with it the
predictions, does not depend on how a producer partitions or batches the records.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid

import orjson
import pytest

from streamcal.cli import main as cli_main
from streamcal.stream.config import ProcessorConfig
from streamcal.stream.processor import Processor
from tests._helpers import checkpoint_env, stored, stored_state, streamcal_run_args
from tests._kafka_helpers import (
    T0,
    base_settings,
    json_values,
    produce,
    produce_stream,
    read_topic,
    synthetic_stream,
)

pytestmark = pytest.mark.kafka
confluent_kafka = pytest.importorskip("confluent_kafka")

N = 60
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_IDS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}  # of Kafka's record batch header


def _topics(tag: str) -> dict:
    names = {
        kind: f"test-{tag}.{kind.replace('_', '-')}"
        for kind in ("events", "labels", "predictions", "dead_letters", "metrics")
    }
    names["group"] = f"test-{tag}"
    return names


def _stream():
    return synthetic_stream(N, seed=21, label_delay_ms=3)


def _predictions(bootstrap: str, topic: str, min_count: int = N) -> dict:
    """Prediction bytes by event id (the latest per id, as a consumer deduping by key)."""
    return {r.key.decode(): r.value for r in read_topic(bootstrap, topic, min_count=min_count)}


@pytest.fixture(scope="module")
def clean(kafka_broker):
    """The clean run: the stream written by kafka-python, uncompressed, no bad records."""
    topics = _topics(uuid.uuid4().hex[:10] + "-clean")
    events, labels = _stream()
    produce_stream(kafka_broker, topics, events, labels)
    config = ProcessorConfig.build(**base_settings(kafka_broker, topics))
    final = Processor(config).run(max_idle_s=1.0)
    assert (final["events"], final["labels"], final["dead_letters"]) == (N, N, 0)
    return _predictions(kafka_broker, topics["predictions"])


def produce_confluent(bootstrap: str, records, codec: str = "none", **conf) -> None:
    """Produce ``(topic, key, value, timestamp_ms, headers)`` with librdkafka."""
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20, **conf}
    )
    transactional = "transactional.id" in conf
    if transactional:
        producer.init_transactions(30)
        producer.begin_transaction()
    for topic, key, value, ts, headers in records:
        if value is not None and not isinstance(value, bytes):
            value = orjson.dumps(value)
        producer.produce(topic, value=value, key=key, timestamp=ts, headers=headers)
        producer.poll(0)
    if transactional:
        producer.commit_transaction(30)
    assert producer.flush(30) == 0


def foreign_records(topics: dict, codec: str) -> list:
    """The clean stream as another client writes it: headers everywhere, keys that are
    the id, null, or something else."""
    events, labels = _stream()
    out = []
    for kind, stream in (("events", events), ("labels", labels)):
        for i, (eid, value, ts) in enumerate(stream):
            key = (eid.encode(), None, b"not-the-id", b"\xff\x00")[i % 4]
            headers = [("producer", b"librdkafka"), ("codec", codec.encode()), ("empty", None)]
            out.append((topics[kind], key, value, ts, headers))
    return sorted(out, key=lambda r: r[3])


def run_cli(bootstrap: str, topics: dict, *extra: str, client: str = "kafka-python") -> int:
    """`streamcal run` in this process (its arguments after the program name)."""
    settings = base_settings(bootstrap, topics, kafka_client=client)
    return cli_main(streamcal_run_args(settings, "--max-idle-s", "1.0", *extra)[3:])


def no_dead_letters(bootstrap: str, topics: dict) -> bool:
    try:
        return read_topic(bootstrap, topics["dead_letters"], timeout=2) == []
    except TimeoutError:  # the topic was never created: nothing was produced to it
        return True


def batches(monkeypatch, bootstrap: str, topic: str) -> list:
    """``(codec id, records bytes)`` of each record batch of ``topic``, read back with
    kafka-python (the records bytes are kept for uncompressed batches only, else None)."""
    from kafka.record.default_records import DefaultRecordBatch

    seen = []
    original = DefaultRecordBatch._maybe_uncompress

    def spy(self):
        if not self._decompressed:
            plain = self.compression_type == 0
            data = bytes(self._buffer[self._pos :]) if plain else None
            seen.append((self.compression_type, data))
        return original(self)

    monkeypatch.setattr(DefaultRecordBatch, "_maybe_uncompress", spy)
    read_topic(bootstrap, topic, min_count=N)
    monkeypatch.undo()
    return seen


def batch_codecs(monkeypatch, bootstrap: str, topic: str) -> set:
    """The codecs of the record batches of ``topic``."""
    return {c for c, _ in batches(monkeypatch, bootstrap, topic)}


def shrinks(codec: str, data: bytes) -> bool:
    """Whether ``codec`` makes ``data`` smaller: kafka-python's producer sends a batch
    uncompressed when it does not (a batch of one or two small records)."""
    from kafka import codec as kc

    encode = {"gzip": kc.gzip_encode, "snappy": kc.snappy_encode, "lz4": kc.lz4_encode,
              "zstd": kc.zstd_encode}[codec]  # fmt: skip
    return len(encode(data)) < len(data)


@pytest.mark.parametrize("codec", CODECS)
def test_each_codec_from_librdkafka_gives_the_clean_predictions(
    kafka_broker, unique_topics, clean, codec, monkeypatch, kafka_client
):
    topics = unique_topics
    produce_confluent(
        kafka_broker, foreign_records(topics, codec), codec, **{"enable.idempotence": True}
    )
    if codec != "none":  # the input really is compressed with that codec
        assert batch_codecs(monkeypatch, kafka_broker, topics["events"]) == {CODEC_IDS[codec]}
    # The outputs compressed with the same codec (--compression-type).
    assert run_cli(kafka_broker, topics, "--compression-type", codec, client=kafka_client) == 0

    assert _predictions(kafka_broker, topics["predictions"]) == clean
    assert no_dead_letters(kafka_broker, topics)
    # Which batches the codec shrinks depends on how the producer's batches fell (on
    # timing): every batch must be compressed with it, but one it would not shrink.
    out = batches(monkeypatch, kafka_broker, topics["predictions"])
    if codec == "none":
        assert {c for c, _ in out} == {0}
    else:
        assert CODEC_IDS[codec] in {c for c, _ in out}
        plain = [data for c, data in out if c == 0]
        assert not [d for d in plain if shrinks(codec, d)], len(plain)
        assert {c for c, _ in out} <= {0, CODEC_IDS[codec]}


def test_transactional_producer_gives_the_clean_predictions(kafka_broker, unique_topics, clean):
    records = foreign_records(unique_topics, "zstd")
    produce_confluent(kafka_broker, records, "zstd", **{"transactional.id": uuid.uuid4().hex})
    assert run_cli(kafka_broker, unique_topics) == 0
    # Commit markers (control batches) take offsets but are not records: skipped.
    assert _predictions(kafka_broker, unique_topics["predictions"]) == clean
    assert no_dead_letters(kafka_broker, unique_topics)


def _nested(depth: int) -> bytes:
    """A JSON object nested ``depth`` levels (more than orjson writes, fewer than it reads;
    a repr of it would overflow Python's stack)."""
    return b'{"a": ' * depth + b"1" + b"}" * depth


def _label_as_text(value: dict, i: int) -> dict:
    """Good labels written as other producers do: 1.0, "1", "true"."""
    y = value["label"]
    return {**value, "label": (float(y), str(y), ("false", "true")[y], y)[i % 4]}


# (kind, key, value, words in the reason); the value is bytes, None or a JSON object.
HOSTILE = [
    ("events", b"t1", None, "tombstone"),
    ("labels", b"e7", None, "tombstone"),
    ("events", None, b'{"id": "big", "features": {"x1": "' + b"x" * 1_100_000 + b'"}}',
     "record too large"),
    ("events", b"k" * 40_000, {"id": "bigkey", "features": {"x1": 1}}, "key too large"),
    ("events", None, b'{"id": "deep", "features": {"x1": ' + _nested(1000) + b"}}",
     "not a number"),
    ("events", None, b'{"id": "deeper", "features": {"x1": ' + b"[" * 2000 + b"]" * 2000 + b"}}",
     "depth limit"),
    ("events", None, {"id": "wide", "features": {f"f{i}": 1.0 for i in range(5000)}},
     "too many features"),
    ("events", None, {"id": "longname", "features": {"x" * 2000: 1.0}}, "feature name longer"),
    ("events", None, {"id": "color", "features": {"c": "v" * 2000}}, "feature name longer"),
    ("events", None, {"id": ["e1"], "features": {"x1": 1}}, "not a string or an integer"),
    ("events", None, {"id": 1.5, "features": {"x1": 1}}, "not a string or an integer"),
    ("events", None, {"id": True, "features": {"x1": 1}}, "not a string or an integer"),
    ("events", None, b'{"id": ' + _nested(1000) + b', "features": {"x1": 1}}',
     "an object of 1 keys"),
    ("events", None, {"id": "i" * 3000, "features": {"x1": 1}}, "id longer"),
    ("labels", None, {"id": "i" * 600_000, "label": 1}, "id longer"),
    ("labels", None, {"id": "e9", "label": "yes"}, "not binary"),
    ("labels", None, {"id": "e9", "label": 0.5}, "not binary"),
    ("events", b"future", {"id": "future", "features": {"x1": 1}}, "max_future_s"),
    ("labels", b"no-ts", {"id": "e3", "label": 1}, "(none)"),
]  # fmt: skip
FUTURE_MS = 4_102_444_800_000  # 2100-01-01


def test_tombstones_and_hostile_records_are_dead_letters_and_the_rest_is_clean(
    kafka_broker, unique_topics, clean
):
    topics = unique_topics
    events, labels = _stream()
    good = [(topics["events"], k, v, ts) for k, v, ts in events]
    good += [(topics["labels"], k, _label_as_text(v, i), ts) for i, (k, v, ts) in
             enumerate(labels)]  # fmt: skip
    # Hostile records between good ones; timestamps never tie with a good record's.
    bad = []
    for i, (kind, key, value, _) in enumerate(HOSTILE):
        ts = {b"future": FUTURE_MS, b"no-ts": -1}.get(key, T0 + 105 + 10 * i + 5 * (i % 2))
        bad.append((topics[kind], key, value, ts))
    producer_conf = {"max_request_size": 4_000_000}
    produce_big(kafka_broker, sorted(good + bad, key=lambda r: r[3]), producer_conf)

    final = Processor(ProcessorConfig.build(**base_settings(kafka_broker, topics))).run(
        max_idle_s=1.0
    )
    dead = json_values(read_topic(kafka_broker, topics["dead_letters"], min_count=len(HOSTILE)))
    assert len(dead) == len(HOSTILE)
    by_offset = {
        (d["source"]["topic"], d["source"]["partition"], d["source"]["offset"]): d for d in dead
    }
    offsets = hostile_offsets(kafka_broker, topics, len(HOSTILE))
    for (_, _, value, words), where in zip(HOSTILE, offsets, strict=True):
        d = by_offset[where]
        assert words in d["reason"], (words, d["reason"])
        assert len(d["reason"]) < 400 and len(orjson.dumps(d)) < 200_000
        if value is None:
            assert d["value"] is None
    assert (final["events"], final["labels"], final["pending"]) == (N, N, 0)
    assert final["dead_letters"] == len(HOSTILE)
    assert _predictions(kafka_broker, topics["predictions"]) == clean


def produce_big(bootstrap: str, records, conf: dict) -> None:
    """``produce`` with a larger request size (for the oversized records)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **conf)
    try:
        for topic, key, value, ts in records:
            if value is not None and not isinstance(value, bytes):
                value = orjson.dumps(value)
            key = key.encode() if isinstance(key, str) else key
            producer.send(topic, key=key, value=value, timestamp_ms=ts)
        producer.flush(timeout=30)
    finally:
        producer.close()


def hostile_offsets(bootstrap: str, topics: dict, count: int) -> list:
    """(topic, offset) of each HOSTILE record, found by its value in the input topics."""
    records = read_topic(bootstrap, topics["events"]) + read_topic(bootstrap, topics["labels"])
    wanted = []
    for kind, key, value, _ in HOSTILE:
        raw = value if value is None or isinstance(value, bytes) else orjson.dumps(value)
        hits = [
            (r.topic, r.partition, r.offset)
            for r in records
            if r.topic == topics[kind] and r.value == raw and r.key == key
        ]
        assert len(hits) == 1, (key, hits)
        wanted.append(hits[0])
    assert len(wanted) == count
    return wanted


# ---------------------------------------------------------------- a batch it cannot read
@pytest.mark.slow
def test_unreadable_batch_stops_with_where_and_fix_keeps_the_checkpoint_and_resumes(
    kafka_broker, unique_topics, clean, tmp_path, streamcal_run
):
    """lz4 batches (librdkafka) read by `streamcal run` where `import lz4` fails: exit 3
    with topic, partition, offset and the fix; the checkpoint untouched; --skip-unreadable
    dead-letters the batches without counting anything twice; with lz4 available a rerun
    resumes to exactly the clean run's predictions."""
    topics = unique_topics
    events, labels = _stream()
    half = events[N // 2][2]
    records = sorted(
        [(topics["events"], k, v, ts) for k, v, ts in events]
        + [(topics["labels"], k, v, ts) for k, v, ts in labels],
        key=lambda r: r[3],
    )
    old = [r for r in records if r[3] < half]
    new = [(t, k.encode(), v, ts, [("h", b"1")]) for t, k, v, ts in records if ts >= half]
    blocked = tmp_path / "blocked"
    (blocked / "lz4").mkdir(parents=True)
    (blocked / "lz4" / "__init__.py").write_text("raise ImportError('lz4 blocked by a test')\n")
    env = checkpoint_env()
    env_blocked = {**env, "PYTHONPATH": f"{blocked}{os.pathsep}{env.get('PYTHONPATH', '')}"}
    state = tmp_path / "state"
    settings = {**base_settings(kafka_broker, topics), "state_dir": state}

    produce(kafka_broker, old)  # kafka-python, uncompressed: readable without lz4
    done = streamcal_run.run(settings, "--max-idle-s", "1.0", env=env_blocked)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    before = stored(state)
    restored = stored_state(state)  # plain data
    n_old = sum(1 for r in old if r[0] == topics["events"])
    assert restored["counts"]["events"] == n_old
    restored_offsets = {(t, p): o for t, p, o in restored["offsets"]}

    produce_confluent(kafka_broker, new, "lz4")
    done = streamcal_run.run(settings, "--max-idle-s", "1.0", env=env_blocked)
    err = done.stderr.decode()
    assert done.returncode == 3, err[-2000:]
    m = re.search(r"topic '([^']+)' partition (\d+) offset (\d+)", err)
    assert m, err
    topic, partition, offset = m[1], int(m[2]), int(m[3])
    assert topic in (topics["events"], topics["labels"])
    # The offset named is where a rerun resumes: the checkpoint's, the first lz4 record.
    assert restored_offsets[(topic, partition)] == offset
    assert "pip install lz4" in err and "--skip-unreadable" in err
    assert stored(state) == before  # the checkpoint is intact

    # --skip-unreadable (on a copy of the state): every lz4 batch is one dead letter with
    # its offset range; nothing is counted twice.
    skip_state = tmp_path / "skip-state"
    shutil.copytree(state, skip_state)
    skip_topics = {**topics, "predictions": topics["predictions"] + "-skip"}
    skip_topics["dead_letters"] = topics["dead_letters"] + "-skip"
    metrics = tmp_path / "skip-metrics.jsonl"
    skip_settings = {
        **base_settings(kafka_broker, skip_topics),
        "state_dir": skip_state,
        "metrics_file": metrics,
    }
    done = streamcal_run.run(
        skip_settings, "--max-idle-s", "1.0", "--skip-unreadable", env=env_blocked
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    dead = json_values(read_topic(kafka_broker, skip_topics["dead_letters"], min_count=1))
    skipped = 0
    for d in dead:
        assert "unreadable record batch" in d["reason"] and "lz4" in d["reason"], d["reason"]
        first, last = d["skipped_offsets"]["first"], d["skipped_offsets"]["last"]
        assert d["source"]["offset"] == last >= first and d["value"] is None
        skipped += last - first + 1
    assert skipped == len(new)
    last = orjson.loads(metrics.read_bytes().splitlines()[-1])
    assert (last["events"], last["dead_letters"]) == (n_old, len(dead))

    # With lz4 importable, the rerun resumes from the checkpoint: the clean predictions.
    done = streamcal_run.run(settings, "--max-idle-s", "1.0", env=env)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert _predictions(kafka_broker, topics["predictions"]) == clean


def _corrupt_stream(kafka_broker, topics, monkeypatch) -> list:
    """The clean stream, then 3 events in batches whose checksum does not match (written
    for real: a producer whose CRC is off by one, which tansu stores as it is)."""
    import kafka.record.default_records as default_records

    events, labels = _stream()
    produce_stream(kafka_broker, topics, events, labels)
    ts = events[N // 2][2] + 5
    corrupt = [(topics["events"], f"c{i}", {"id": f"c{i}", "features": {"x1": i}}, ts + i)
               for i in range(3)]  # fmt: skip
    good_crc = default_records.calc_crc32c
    with monkeypatch.context() as m:
        m.setattr(default_records, "calc_crc32c", lambda data: (good_crc(data) + 1) % 2**32)
        produce(kafka_broker, corrupt)
    return corrupt


def _skipped_as_dead_letters(kafka_broker, topics, final, corrupt, why: str = "") -> None:
    """One dead letter per unreadable batch, naming its offsets, each corrupt record in
    exactly one; every good record counted once."""
    dead = json_values(read_topic(kafka_broker, topics["dead_letters"], min_count=1))
    assert (final["events"], final["labels"], final["dead_letters"]) == (N, N, len(dead))
    skipped = 0
    for d in dead:  # one per corrupt batch (the producer spread them over partitions)
        assert "unreadable record batch" in d["reason"] and why in d["reason"], d["reason"]
        first, last = d["skipped_offsets"]["first"], d["skipped_offsets"]["last"]
        assert d["source"]["offset"] == last >= first
        skipped += last - first + 1
    assert skipped == len(corrupt)


def test_corrupt_batch_stops_the_processor_or_is_skipped_on_request(
    kafka_broker, unique_topics, clean, monkeypatch, kafka_client
):
    """A batch whose checksum does not match, read with each client (librdkafka checks
    CRCs too): a clear error naming where, or on request (--skip-unreadable) a dead letter
    naming its offsets for every corrupt record, nothing counted twice, and every other
    event with the clean run's prediction."""
    from streamcal.stream.kafka.ordering import UnreadableBatch

    topics = unique_topics
    corrupt = _corrupt_stream(kafka_broker, topics, monkeypatch)
    config = ProcessorConfig.build(**base_settings(kafka_broker, topics), kafka_client=kafka_client)
    with pytest.raises(UnreadableBatch) as exc:
        Processor(config).run(max_idle_s=1.0)
    msg = str(exc.value)
    assert f"topic {topics['events']!r} partition" in msg and "offset" in msg, msg
    assert "re-produce" in msg, msg
    if kafka_client == "kafka-python":
        assert "CorruptRecordError" in msg and "corrupt" in msg, msg

    skip = {**topics, "predictions": topics["predictions"] + "-skip"}
    config = ProcessorConfig.build(**base_settings(kafka_broker, skip), skip_unreadable=True,
                                   kafka_client=kafka_client)  # fmt: skip
    final = Processor(config).run(max_idle_s=1.0)
    why = "crc" if kafka_client == "kafka-python" else ""
    _skipped_as_dead_letters(kafka_broker, topics, final, corrupt, why=why)
    assert _predictions(kafka_broker, skip["predictions"]) == clean
