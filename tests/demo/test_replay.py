"""The demo stream (no broker needed)."""

from __future__ import annotations

import orjson
import pytest

from streamcal.demo.datasets import load_dataset
from streamcal.demo.replay import STEP_MS, demo_records, replay, replay_counts


def _by_kind(records, kind):
    return [r for r in records if r.kind == kind]


def test_deterministic_given_seed():
    a = demo_records("drift", events=300, seed=7, start_ms=0, bad_records=3)
    b = demo_records("drift", events=300, seed=7, start_ms=0, bad_records=3)
    c = demo_records("drift", events=300, seed=8, start_ms=0, bad_records=3)
    assert a == b
    assert a != c


def test_timestamps_ordered_and_events_one_step_apart():
    recs = demo_records("phishing", events=200, seed=1, start_ms=1000)
    stamps = [r.timestamp_ms for r in recs]
    assert stamps == sorted(stamps)
    events = _by_kind(recs, "event")
    assert [r.timestamp_ms for r in events] == [1000 + i * STEP_MS for i in range(200)]
    for r in events:
        msg = orjson.loads(r.value)
        assert r.key == msg["id"].encode()
        assert msg["ts"] == r.timestamp_ms / 1000
        assert isinstance(msg["features"], dict) and msg["features"]


def test_labels_follow_their_event_with_bounded_mean_lag():
    delay = 15
    recs = demo_records("drift", events=2000, seed=2, label_delay=delay, start_ms=0)
    event_ts = {r.key: r.timestamp_ms for r in _by_kind(recs, "event")}
    lags = []
    for r in _by_kind(recs, "label"):
        msg = orjson.loads(r.value)
        assert msg["label"] in (0, 1) and r.key == msg["id"].encode()
        lag_ms = r.timestamp_ms - event_ts[r.key]
        assert lag_ms > 0  # a label never precedes its event
        lags.append((lag_ms - STEP_MS // 2) / STEP_MS)
    assert min(lags) == 0 and max(lags) == 2 * delay  # uniform on 0..2*delay
    assert abs(sum(lags) / len(lags) - delay) < 1.0


@pytest.mark.parametrize("fraction", [0.0, 0.1])
def test_missing_label_fraction(fraction):
    counts = replay_counts(demo_records("drift", events=3000, seed=3, missing_labels=fraction))
    missing = counts["event"] - counts["label"]
    assert counts["event"] == 3000
    if fraction == 0:
        assert missing == 0
    else:
        assert abs(missing / 3000 - fraction) < 0.02


def test_bad_records_are_malformed():
    from streamcal.stream.messages import BadInput, Fields, decode_event, decode_label

    recs = demo_records("drift", events=100, seed=4, bad_records=20)
    bad = [r for r in recs if r.kind.startswith("bad-")]
    assert len(bad) == 20
    fields = Fields("id", "features", "label", "ts")
    for r in bad:
        decode = decode_event if r.topic == "events" else decode_label
        with pytest.raises(BadInput):
            decode(r.value, fields)


def test_labels_are_the_datasets():
    import random

    data = load_dataset("phishing", None, random.Random(5))
    recs = demo_records("phishing", seed=5, missing_labels=0, start_ms=0)
    labels = {orjson.loads(r.value)["id"]: orjson.loads(r.value)["label"]
              for r in _by_kind(recs, "label")}  # fmt: skip
    assert [labels[f"e{i}"] for i in range(len(data))] == [int(y) for _, y in data]


def test_phishing_is_rivers_data_set_shuffled():
    import random

    from river import datasets

    ours = load_dataset("phishing", None, random.Random(0))
    theirs = [(dict(x), bool(y)) for x, y in datasets.Phishing()]
    assert len(ours) == len(theirs) == 1250
    key = lambda xy: (sorted(xy[0].items()), xy[1])  # noqa: E731
    assert sorted(ours, key=key) == sorted(theirs, key=key)
    assert ours != theirs  # shuffled


def test_bad_arguments():
    with pytest.raises(ValueError, match="dataset"):
        demo_records("nope")
    with pytest.raises(ValueError, match="missing_labels"):
        demo_records("drift", events=5, missing_labels=1.0)
    with pytest.raises(ValueError, match="events"):
        demo_records("drift", events=0)
    with pytest.raises(ValueError, match="1250"):
        demo_records("phishing", events=5000)


def test_replay_sends_each_record_to_its_topic_with_its_timestamp():
    class FakeProducer:
        def __init__(self):
            self.sent, self.flushed = [], False

        def send(self, topic, key, value, timestamp_ms):
            self.sent.append((topic, key, value, timestamp_ms))

        def flush(self):
            self.flushed = True

    recs = demo_records("drift", events=50, seed=6, bad_records=2)
    producer = FakeProducer()
    replay(producer, recs, {"events": "E", "labels": "L"})
    assert producer.flushed
    assert producer.sent == [({"events": "E", "labels": "L"}[r.topic], r.key, r.value,
                              r.timestamp_ms) for r in recs]  # fmt: skip
