"""Reading dead letters back from their topic, to show them with their reasons."""

from __future__ import annotations

import time

__all__ = ["read_dead_letters"]


def read_dead_letters(client_settings: dict, topic: str, n: int, timeout: float = 10.0):
    """The first ``n`` dead-letter records of ``topic`` (decoded JSON), oldest first."""
    import orjson

    from streamcal.stream.kafka import clients

    consumer = clients.consumer(client_settings)
    try:
        parts = consumer.partitions_for_topic(topic) or ()
        tps = [consumer.partition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        found: list = []
        deadline = time.monotonic() + timeout
        while len(found) < n and time.monotonic() < deadline:
            for batch in consumer.poll(200).values():
                found.extend(orjson.loads(r.value) for r in batch)
        found.sort(key=lambda d: (d["source"]["timestamp_ms"] or 0, d["source"]["offset"]))
        return found[:n]
    finally:
        consumer.close()
