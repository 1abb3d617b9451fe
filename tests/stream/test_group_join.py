"""Joining a consumer group with kafka-python, polling with timeouts shorter than a
rebalance, against tansu: the member keeps the first assignment the group gives it
(librdkafka joins in a thread of its own, whatever the polls).

kafka-python 3.0.12 threw away a rebalance that finished between two polls and joined
again (``kafka_python.claim_finished_joins``); each lost generation made the whole group
rebalance once more, and on noida-db left the graceful hand-over of
tests/e2e/test_exactly_once.py stuck for minutes (tests/README.md)."""

from __future__ import annotations

import logging
import time

import pytest

from streamcal.stream.kafka import adapters, clients
from tests._kafka_helpers import create_topics

pytestmark = pytest.mark.kafka


class _JoinGroups(logging.Handler):
    """Counts the JoinGroup requests kafka-python logs for ``group``."""

    def __init__(self, group: str):
        super().__init__()
        self.group, self.count = group, 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == f"(Re-)joining group {self.group}":
            self.count += 1


def _joined(broker: str, topic: str, group: str, timeout_ms: int) -> tuple:
    """(seconds to the first assignment or None if none within 30 s, JoinGroup requests
    sent) of a lone member of a new group that polls with ``timeout_ms`` every 10 ms."""
    counter, log = _JoinGroups(group), logging.getLogger("kafka.coordinator")
    level = log.level
    log.addHandler(counter)
    log.setLevel(logging.INFO)
    consumer = clients.consumer({adapters.CLIENT: "kafka-python", "bootstrap_servers": broker},
                                group_id=group, session_timeout_ms=2000)  # fmt: skip
    assigned: list = []
    try:
        consumer.subscribe([topic], lambda revoked: None, assigned.append)
        started = time.monotonic()
        while not assigned and time.monotonic() - started < 30:
            consumer.poll(timeout_ms=timeout_ms, max_records=1)
            time.sleep(0.01)
        return (time.monotonic() - started if assigned else None), counter.count
    finally:
        consumer.close()
        log.removeHandler(counter)
        log.setLevel(level)


def test_a_member_polling_with_short_timeouts_keeps_its_first_assignment(
    kafka_broker, unique_topics
):
    """Alone in a new group, a member polling with a timeout of 0 sends as many JoinGroup
    requests before it is assigned as one whose poll awaits the whole rebalance (two: the
    first is answered with its member id): none after a rebalance it took part in."""
    topic, group = unique_topics["events"], unique_topics["group"]
    create_topics(kafka_broker, [topic], 4)
    _, awaited = _joined(kafka_broker, topic, f"{group}-awaited", timeout_ms=3000)
    took, joins = _joined(kafka_broker, topic, group, timeout_ms=0)
    assert took is not None, f"not assigned within 30 s ({joins} JoinGroups)"
    assert joins == awaited, (took, joins, awaited)
