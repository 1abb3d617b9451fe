"""The stream processor against a real tansu broker (no mocks of Kafka)."""

from __future__ import annotations

import orjson
import pytest

from streamcal.stream.config import ProcessorConfig
from streamcal.stream.processor import Processor
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


def run_processor(bootstrap, topics, max_idle_s=1.5, **extra) -> dict:
    config = ProcessorConfig.build(**base_settings(bootstrap, topics, **extra))
    return Processor(config).run(max_idle_s=max_idle_s)


def test_every_event_is_predicted_before_its_label(kafka_broker, unique_topics, kafka_client):
    n = 300
    events, labels = synthetic_stream(n, label_delay_ms=1)  # each label right after its event
    produce_stream(kafka_broker, unique_topics, events, labels)
    final = run_processor(kafka_broker, unique_topics, kafka_client=kafka_client)

    preds = read_topic(kafka_broker, unique_topics["predictions"], min_count=n)
    assert len(preds) == n
    by_id = {r.key.decode(): orjson.loads(r.value) for r in preds}
    assert set(by_id) == {f"e{i}" for i in range(n)}
    for i in range(n):
        p = by_id[f"e{i}"]
        assert p["id"] == f"e{i}"
        # sva learns every joined label: exactly the i earlier labels, never its own.
        assert p["calibration_size"] == i
        assert 0 <= p["p0"] <= p["p"] <= p["p1"] <= 1
        assert p["p_square"] == pytest.approx(p["p1"] + (p["p0"] ** 2 - p["p1"] ** 2) / 2)
        assert 0 <= p["score"] <= 1 and p["version"]
    assert (final["events"], final["labels"], final["predictions"]) == (n, n, n)
    assert (final["pending"], final["expired"], final["dead_letters"]) == (0, 0, 0)
    for key in ("log_loss", "recent_log_loss", "ece", "mean_p0", "frequency", "mean_p1"):
        assert final[key] is not None


def test_late_out_of_order_early_and_missing_labels(kafka_broker, unique_topics):
    import random

    n, ttl = 400, 1.5
    rng = random.Random(1)
    missing = set(rng.sample(range(n), 25))
    early = set(rng.sample(sorted(set(range(n)) - missing), 30))  # label before its event
    events, labels = [], []
    ev, _ = synthetic_stream(n, seed=3)
    for i, (key, value, ts) in enumerate(ev):
        events.append((key, value, ts))
        if i in missing:
            continue
        # Delays are never multiples of 10 ms, so no label ties with an event.
        delay = -3 if i in early else 10 * rng.randrange(60) + rng.randrange(1, 10)
        labels.append((key, {"id": key, "label": i % 2}, ts + delay))
    produce_stream(kafka_broker, unique_topics, events, labels)
    final = run_processor(kafka_broker, unique_topics, pending_ttl=ttl, label_wait=0.1)

    # The join time of each label: when both it and its event have been read.
    event_ts = {k: ts for k, _, ts in events}
    join_ts = {k: max(ts, event_ts[k]) for k, _, ts in labels}
    clock = max(ts for *_, ts in events + labels) / 1000
    expired = {f"e{i}" for i in missing if event_ts[f"e{i}"] / 1000 + ttl < clock}

    records = read_topic(kafka_broker, unique_topics["predictions"], min_count=n)
    preds = {p["id"]: p for p in json_values(records)}
    assert len(preds) == n
    for key, ts in event_ts.items():
        joined_before = sum(1 for k, t in join_ts.items() if k != key and t < ts)
        assert preds[key]["calibration_size"] == joined_before, key
    assert final["labels"] == n - len(missing)
    assert final["expired"] == len(expired) > 0
    assert final["pending"] == len(missing) - len(expired) > 0
    assert final["dead_letters"] == 0 and final["waiting_labels"] == 0


BAD = [
    # (topic kind, key, raw value, words expected in the dead-letter reason)
    ("events", "b1", b"{oops", "malformed JSON"),
    ("events", "b2", b'{"id": "b2", "features": {"x1": [1], "x2": 0}}', "not a number"),
    ("events", "b3", b'{"id": "b3"}', "missing features"),
    ("events", "b4", b'{"id": "b4", "features": {"x1": NaN, "x2": 0}}', "malformed JSON"),
    ("events", "b5", b'{"id": "b5", "features": {"x1": 1e999, "x2": 0}}', "infinity"),
    ("events", "e3", b'{"id": "e3", "features": {"x1": 0.1, "x2": 0.2}}', "duplicate event"),
    ("labels", "e4", b'{"id": "e4", "label": 2}', "not binary"),
    ("labels", "e5", b'{"id": "e5", "label": "yes"}', "not binary"),
    ("labels", "e6", b'{"id": "e6", "label": 1}', "duplicate label"),
    ("labels", "ghost", b'{"id": "ghost", "label": 1}', "label without event"),
]


@pytest.mark.slow
def test_bad_input_goes_to_dead_letters_and_leaves_state_untouched(
    kafka_broker, unique_topics, tmp_path, kafka_client
):
    n = 40
    events, labels = synthetic_stream(n, seed=5, label_delay_ms=5)
    good = [(unique_topics["events"], k, v, ts) for k, v, ts in events]
    good += [(unique_topics["labels"], k, v, ts) for k, v, ts in labels]
    # Bad records come between good ones (timestamps inside the stream, after e6's label).
    bad = [(unique_topics[kind], key, raw, T0 + 103 + i) for i, (kind, key, raw, _) in
           enumerate(BAD)]  # fmt: skip
    produce(kafka_broker, sorted(good + bad, key=lambda r: r[3]))
    final = run_processor(kafka_broker, unique_topics, label_wait=0.05, kafka_client=kafka_client)

    dead = json_values(read_topic(kafka_broker, unique_topics["dead_letters"], min_count=len(BAD)))
    assert len(dead) == len(BAD)
    by_value = {d["value"]: d for d in dead}
    for (kind, key, raw, words), (_, _, _, ts) in zip(BAD, bad, strict=True):
        d = by_value[raw.decode()]
        assert words in d["reason"], (raw, d["reason"])
        assert d["key"] == key and d["source"]["topic"] == unique_topics[kind]
        assert d["source"]["timestamp_ms"] == ts and d["source"]["offset"] >= 0
    assert (final["events"], final["labels"], final["dead_letters"]) == (n, n, len(BAD))

    # State untouched: the good events get exactly the predictions of a clean run.
    clean = {k: unique_topics[k] + "-clean" for k in unique_topics}
    produce_stream(kafka_broker, clean, events, labels)
    clean_final = run_processor(kafka_broker, clean)
    want = {r.key: r.value for r in read_topic(kafka_broker, clean["predictions"], min_count=n)}
    got = {r.key: r.value for r in read_topic(kafka_broker, unique_topics["predictions"])}
    assert got == want
    for key in ("log_loss", "square_loss", "ece", "mean_p0", "mean_p1", "frequency"):
        assert final[key] == clean_final[key]


def test_metric_lines_go_to_file_topic_callback_and_prometheus(
    kafka_broker, unique_topics, tmp_path
):
    import urllib.request

    n = 50
    events, labels = synthetic_stream(n, seed=8)
    produce_stream(kafka_broker, unique_topics, events, labels)
    path = tmp_path / "metrics.jsonl"
    config = ProcessorConfig.build(
        **base_settings(kafka_broker, unique_topics, metrics_every=20, metrics_file=str(path)),
        metrics_interval=3600.0,
        metrics_topic=unique_topics["metrics"],
        metrics_port=0,
    )
    processor = Processor(config)
    scraped, seen = [], []

    def on_metrics(line):
        seen.append(line)
        url = f"http://127.0.0.1:{processor.metrics_port}/metrics"
        scraped.append(urllib.request.urlopen(url, timeout=5).read().decode())

    final = processor.run(max_idle_s=1.0, on_metrics=on_metrics)
    lines = [orjson.loads(x) for x in path.read_bytes().splitlines()]
    topic = json_values(read_topic(kafka_broker, unique_topics["metrics"], min_count=len(lines)))
    assert [x["labels"] for x in lines] == [20, 40, 50] == [x["labels"] for x in topic]
    assert seen == lines and lines[-1] == final
    contract = ("ts", "events", "predictions", "pending", "expired", "dead_letters",
                "events_per_s", "calibration_size", "version", "log_loss", "recent_log_loss",
                "square_loss", "raw_log_loss", "mean_width", "ece", "mean_p0", "frequency",
                "mean_p1")  # fmt: skip
    assert all(k in final for k in contract)
    # Every series carries the unit it comes from; the instance is Prometheus' target.
    assert 'streamcal_events_total{unit="global"} 40.0' in scraped[1]
    assert "instance=" not in scraped[1]
    assert final["unit"] == "global" and final["instance"] == processor.instance


def test_mode_va_small_window_end_to_end(kafka_broker, unique_topics):
    """Full Venn-Abers (Algorithm 1) can give p0 > p1; the processor must take it in its
    stride (`streamcal demo --mode va` used to crash on such a pair)."""
    n = 300
    events, labels = synthetic_stream(n, seed=5, label_delay_ms=1)
    produce_stream(kafka_broker, unique_topics, events, labels)
    final = run_processor(kafka_broker, unique_topics, mode="va", window=20)

    preds = json_values(read_topic(kafka_broker, unique_topics["predictions"], min_count=n))
    assert sorted(p["id"] for p in preds) == sorted(f"e{i}" for i in range(n))
    for p in preds:
        assert 0 <= p["p0"] <= 1 and 0 <= p["p1"] <= 1 and 0 <= p["p"] <= 1
        assert p["calibration_size"] <= 20
    assert (final["events"], final["labels"], final["predictions"]) == (n, n, n)
    assert (final["pending"], final["dead_letters"]) == (0, 0)
    assert final["log_loss"] is not None and final["mean_p0"] is not None
