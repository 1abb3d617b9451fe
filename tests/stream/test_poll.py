"""The port's poll against tansu, with each Kafka client: it returns a record as soon as
one arrives, not when its timeout runs out (librdkafka's ``consume(n, timeout)`` waits
for n records or the whole timeout), and hands over at most ``max_records``."""

from __future__ import annotations

import threading
import time

import pytest

from streamcal.stream.kafka import adapters, clients
from tests._kafka_helpers import create_topics, produce

pytestmark = pytest.mark.kafka

TIMEOUT = 4.0  # s: the poll's; a record comes 0.2 s into it


def test_a_poll_returns_a_record_as_soon_as_one_arrives(kafka_broker, unique_topics,
                                                        kafka_client):  # fmt: skip
    topic = unique_topics["events"]
    create_topics(kafka_broker, [topic], 1)
    produce(kafka_broker, [(topic, f"k{i}", b"old", None) for i in range(5)], partition=0)
    consumer = clients.consumer({adapters.CLIENT: kafka_client, "bootstrap_servers": kafka_broker})
    try:
        tp = consumer.partition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got: list = []
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            batch = consumer.poll(timeout_ms=500, max_records=2).get(tp, [])
            assert len(batch) <= 2
            got += batch
        assert [r.value for r in got] == [b"old"] * 5
        for _ in range(2):  # the second time: nothing is left of the first one's fetch
            writer = threading.Timer(0.2, produce, [kafka_broker, [(topic, "n", b"new", None)]],
                                     {"partition": 0})  # fmt: skip
            writer.start()
            start = time.monotonic()
            batch = consumer.poll(timeout_ms=int(TIMEOUT * 1000)).get(tp, [])
            took = time.monotonic() - start
            writer.join()
            assert [r.value for r in batch] == [b"new"], batch
            assert took < TIMEOUT / 2, f"the record came after {took:.2f} s of a {TIMEOUT} s poll"
    finally:
        consumer.close()
