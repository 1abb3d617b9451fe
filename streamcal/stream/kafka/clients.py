"""Building the Kafka clients: the settings they share, in one place.

Every consumer of the processor reads from the earliest offset when it has none and
never commits on its own (the processor commits the offsets its checkpoints cover, for
lag monitoring), except the input consumer: it never moves on its own (no
``auto_offset_reset``), so that a position the broker's log no longer holds is an error
the ordered merge handles (``streamcal.stream.kafka.ordering``: lost input) instead of a
silent jump to the log's start. A consumer in the job's group (``group_id``) also gets
the session and heartbeat settings and the range assignor, which gives a member the same
partition numbers of both input topics (whole units, see ``streamcal.stream.kafka.group``).
"""

from __future__ import annotations

import logging
import time

__all__ = [
    "admin",
    "commit",
    "consumer",
    "heartbeat_ms",
    "input_consumer",
    "input_partitions",
    "outbox",
    "partition_count",
]

log = logging.getLogger(__name__)


def heartbeat_ms(session_timeout_ms: int) -> int:
    """At most a third of the session timeout (Kafka's rule) and at most 1 s: a member
    learns that the group rebalances at its next heartbeat, so after a kill -9 the
    survivors rejoin up to one interval after the session timeout has run out.

    >>> heartbeat_ms(10_000), heartbeat_ms(900), heartbeat_ms(100)
    (1000, 300, 100)
    """
    return max(100, min(1000, session_timeout_ms // 3))


def consumer(settings: dict, group_id: str | None = None, session_timeout_ms: int = 10_000,
             **options):  # fmt: skip
    """A ``KafkaConsumer`` with the client ``settings``; in group ``group_id`` if given.
    ``options`` are kafka-python's, and win over the defaults here."""
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    kw: dict = {"enable_auto_commit": False, "auto_offset_reset": "earliest"}
    if group_id is not None:
        kw.update(
            group_id=group_id,
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_ms(session_timeout_ms),
            # range: each member gets the same partition numbers of both topics (units)
            partition_assignment_strategy=[RangePartitionAssignor],
        )
    return KafkaConsumer(**settings, **{**kw, **options})


def input_consumer(config):
    """The processor's consumer of the input topics, in the job's group."""
    return consumer(
        config.kafka_client_settings(),
        group_id=config.group_id,
        session_timeout_ms=config.session_timeout_ms,
        max_poll_records=config.poll_max_records,
        fetch_max_wait_ms=100,
        auto_offset_reset="none",  # every partition is sought to its unit's offset
    )


def admin(settings: dict):
    """A ``KafkaAdminClient`` with the client ``settings`` (close it after use)."""
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(**settings)


def outbox(config):
    """The processor's producer (``streamcal.stream.kafka.sink``): idempotent, in a child
    process unless ``config.producer_process`` is off."""
    from streamcal.stream.kafka.sink import Outbox, ProducerProcess

    settings = {
        **config.kafka_client_settings(),
        "enable_idempotence": True,
        "linger_ms": config.linger_ms,
        "batch_size": 256 * 1024,
        **config.producer_settings(),
    }
    return ProducerProcess(settings) if config.producer_process else Outbox(settings)


def partition_count(consumer, topic: str, timeout: float = 30.0) -> int:
    """The number of partitions of ``topic`` (waits for the metadata)."""
    deadline = time.monotonic() + timeout
    while True:
        parts = consumer.partitions_for_topic(topic)
        if parts:
            return len(parts)
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {topic!r} has no partitions (broker unreachable?)")
        consumer.topics()  # a metadata request; brokers that auto-create do so now
        time.sleep(0.1)


def input_partitions(consumer, topics, timeout: float = 30.0) -> list:
    """Every ``TopicPartition`` of ``topics``, in order (waits for the metadata)."""
    from kafka import TopicPartition

    out = []
    for topic in topics:
        partition_count(consumer, topic, timeout)
        out.extend(TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic)))
    return out


def commit(committer, offsets: dict[tuple[str, int], int]) -> None:
    """Commit ``{(topic, partition): next offset}`` through ``committer`` (a consumer, or
    the global lock); a failure is logged, never raised (the offsets are for lag
    monitoring only: the checkpoints are what a restart resumes from)."""
    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata

    if not offsets or committer is None:
        return
    try:
        committer.commit(
            {TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()}
        )
    except Exception as exc:  # noqa: BLE001 - lag monitoring only: never fatal
        log.warning("offset commit failed: %r", exc)
