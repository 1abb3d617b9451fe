"""Helpers for the stream processor's Kafka tests: produce test streams, read topics back."""

from __future__ import annotations

import random
import time

import orjson

from tests._helpers import CHECKPOINT_KEY, wait_until

__all__ = ["CHECKPOINT_KEY", "T0", "base_settings", "json_values", "produce", "produce_stream",
           "read_topic", "synthetic_stream"]  # fmt: skip

T0 = 1_700_000_000_000  # ms: record timestamps of the synthetic streams start here


def produce(bootstrap: str, records) -> None:
    """Produce ``(topic, key, value, timestamp_ms)`` tuples (value: bytes or a JSON object)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        for topic, key, value, ts in records:
            if not isinstance(value, bytes | None):
                value = orjson.dumps(value)
            producer.send(
                topic, key=key.encode() if isinstance(key, str) else key, value=value,
                timestamp_ms=ts,
            )  # fmt: skip
        producer.flush(timeout=30)
    finally:
        producer.close()


def read_topic(bootstrap: str, topic: str, timeout: float = 20.0, min_count: int = 0) -> list:
    """All records of ``topic`` (ConsumerRecords, in (partition, offset) order), read until
    every partition is at its highwater mark and at least ``min_count`` were seen."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    try:
        deadline = time.monotonic() + timeout

        def partitions():
            consumer.topics()  # a metadata request: partitions_for_topic reads the cache
            return consumer.partitions_for_topic(topic)

        wait_until(partitions, timeout, f"the partitions of {topic}")
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        out = []  # what is there at the deadline, if not min_count: callers compare it
        while time.monotonic() < deadline:
            for recs in consumer.poll(timeout_ms=200).values():
                out.extend(recs)
            done = all(
                consumer.highwater(tp) is not None
                and consumer.position(tp) >= consumer.highwater(tp)
                for tp in tps
            )
            if done and len(out) >= min_count:
                break
        out.sort(key=lambda r: (r.partition, r.offset))
        return out
    finally:
        consumer.close()


def json_values(records) -> list:
    return [orjson.loads(r.value) for r in records]


def synthetic_stream(
    n: int,
    seed: int = 0,
    label_delay_ms: int = 1,
    shuffle_labels: int = 0,
    missing: frozenset = frozenset(),
):
    """Events e0..e{n-1} 10 ms apart with two features; label i at event time + delay.

    ``shuffle_labels``: labels get an extra random delay of up to that many ms (out of
    order and late). ``missing``: indices whose label is never sent.
    Returns (events, labels) as lists of (key, value, ts)."""
    rng = random.Random(seed)
    events, labels = [], []
    for i in range(n):
        x1, x2 = rng.gauss(0, 1), rng.gauss(0, 1)
        y = int(rng.random() < 1 / (1 + 2.718281828 ** -(1.5 * x1 - x2)))
        ts = T0 + 10 * i
        eid = f"e{i}"
        events.append((eid, {"id": eid, "features": {"x1": x1, "x2": x2}}, ts))
        if i not in missing:
            delay = label_delay_ms + (rng.randrange(shuffle_labels) if shuffle_labels else 0)
            labels.append((eid, {"id": eid, "label": y}, ts + delay))
    return events, labels


def produce_stream(bootstrap: str, topics: dict, events, labels) -> None:
    """Produce in timestamp order, as a live source would (late labels are written late)."""
    records = [(topics["events"], k, v, ts) for k, v, ts in events]
    records += [(topics["labels"], k, v, ts) for k, v, ts in labels]
    produce(bootstrap, sorted(records, key=lambda r: r[3]))


def base_settings(bootstrap: str, topics: dict, **extra) -> dict:
    """Processor settings for the test topics (sva, no window limit unless given)."""
    settings = dict(
        bootstrap_servers=bootstrap,
        group_id=topics["group"],
        events_topic=topics["events"],
        labels_topic=topics["labels"],
        predictions_topic=topics["predictions"],
        dead_letter_topic=topics["dead_letters"],
        metrics_file="none",
        mode="sva",
        model="logreg",
        merge_wait=10.0,
        session_timeout_ms=2000,  # tansu joins a group in about half of it
    )
    settings.update(extra)
    return settings
