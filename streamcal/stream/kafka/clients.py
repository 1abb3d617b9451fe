"""Building the Kafka clients: the settings they share, in one place.

Every consumer of the processor reads from the earliest offset when it has none and
never commits on its own (the processor commits the offsets its checkpoints cover, for
lag monitoring), except the input consumer: it never moves on its own (no
``auto_offset_reset``), so that a position the broker's log no longer holds is an error
the ordered merge handles (``streamcal.stream.kafka.ordering``: lost input) instead of a
silent jump to the log's start. A consumer in the job's group (``group_id``) also gets
the session and heartbeat settings and the range assignor, which gives a member the same
partition numbers of both input topics (whole units, see ``streamcal.stream.kafka.group``).

With ``--processing-guarantee exactly-once`` the input consumer reads ``read_committed``
(records of aborted upstream transactions are never seen; a position stops at the last
stable offset while an upstream transaction is open, which ``last_stable_offsets`` lets
the merge see) and the producer is transactional (``transactional_id``).
"""

from __future__ import annotations

import logging
import time

from streamcal.stream.kafka.adapters import CLIENT, split

__all__ = [
    "admin",
    "commit",
    "consumer",
    "heartbeat_ms",
    "input_consumer",
    "input_partitions",
    "outbox",
    "outbox_checked",
    "partition_count",
    "producer",
    "transaction_timeout_ms",
    "transactional_id",
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
    """A consumer of the adapter ``settings`` name (``adapters``) with the client
    ``settings``; in group ``group_id`` if given. ``options`` (kafka-python's names) win
    over the defaults here."""
    kw: dict = {"enable_auto_commit": False, "auto_offset_reset": "earliest"}
    if group_id is not None:
        kw.update(
            group_id=group_id,
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_ms(session_timeout_ms),
        )
    client, settings = split(settings)
    return client.Consumer.build(**settings, **{**kw, **options})


def input_consumer(config):
    """The processor's consumer of the input topics, in the job's group (``read_committed``
    with exactly-once)."""
    isolation = "read_committed" if config.exactly_once else "read_uncommitted"
    return consumer(
        settings(config),
        group_id=config.group_id,
        session_timeout_ms=config.session_timeout_ms,
        max_poll_records=config.poll_max_records,
        fetch_max_wait_ms=100,
        auto_offset_reset="none",  # every partition is sought to its unit's offset
        isolation_level=isolation,
    )


def admin(settings: dict):
    """An admin client with the client ``settings`` (close it after use)."""
    client, settings = split(settings)
    return client.Admin(settings)


def producer(settings: dict):
    """A producer (``send``, ``flush``, ``close``) with the client ``settings`` and
    producer options (kafka-python's names)."""
    client, settings = split(settings)
    return client.Producer(settings)


def settings(config) -> dict:
    """The client settings of ``config``, naming its client (``--kafka-client``)."""
    return {**config.kafka_client_settings(), CLIENT: config.kafka_client}


def outbox(config, instance: str | None = None):
    """The processor's producer (``streamcal.stream.kafka.sink``): idempotent, in a child
    process unless ``config.producer_process`` is off or the client is librdkafka; with
    exactly-once, transactional
    (``transactional_id(config, instance)``)."""
    from streamcal.stream.kafka import sink

    out = {
        **settings(config),
        "enable_idempotence": True,
        "linger_ms": config.linger_ms,
        "batch_size": 256 * 1024,
        **config.producer_settings(),
    }
    # librdkafka's producer works in its own threads, outside the GIL: no child process
    child = config.producer_process and config.kafka_client == "kafka-python"
    if config.exactly_once:
        out["transactional_id"] = transactional_id(config, instance)
        out["transaction_timeout_ms"] = transaction_timeout_ms(config.checkpoint_interval)
        return sink.TransactionalProcess(out) if child else sink.TransactionalOutbox(out)
    return sink.ProducerProcess(out) if child else sink.Outbox(out)


def outbox_checked(config, instance: str | None = None):
    """``outbox``, as the processor's first client, once a broker answers: a TLS or SASL
    set-up that cannot work is told first, naming the setting to check (``SetupError``),
    and no broker answering within 30 s in one line (``Unreachable``), not after the
    clients' retries."""
    from streamcal.stream.kafka.preflight import reach_broker

    reach_broker(config.kafka_client_settings())
    return outbox(config, instance)


def transactional_id(config, instance: str | None = None) -> str:
    """The producer's transactional id with exactly-once: stable, so that a successor
    fences its predecessor (``init_transactions`` aborts what it left open and makes its
    producer unusable). ``--scope global``: one per group (one instance runs); ``--scope
    partition``: one per instance (``--instance-id``, else host:pid), the group's
    generation in each offset commit fencing a member that lost its units (KIP-447).

    >>> from streamcal.stream.config import ProcessorConfig
    >>> transactional_id(ProcessorConfig(group_id="fraud"))
    'streamcal-fraud-global'
    >>> transactional_id(ProcessorConfig(group_id="fraud", scope="partition"), "pod-3")
    'streamcal-fraud-pod-3'
    """
    if config.scope == "global":
        return f"streamcal-{config.group_id}-global"
    return f"streamcal-{config.group_id}-{config.instance_id or instance}"


def transaction_timeout_ms(checkpoint_interval: float) -> int:
    """How long the broker lets a transaction stay open before aborting it: ten seconds
    (Kafka Streams' default) plus twice the checkpoint interval (a transaction spans one),
    at most 15 minutes (the broker's default ``transaction.max.timeout.ms``). A processor
    killed without a successor blocks ``read_committed`` readers of its output partitions
    for at most this long.

    >>> transaction_timeout_ms(1.0), transaction_timeout_ms(30), transaction_timeout_ms(1e4)
    (12000, 70000, 900000)
    """
    return int(min(900.0, 10.0 + 2 * checkpoint_interval) * 1000)


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
    out = []
    for topic in topics:
        partition_count(consumer, topic, timeout)
        parts = sorted(consumer.partitions_for_topic(topic))
        out.extend(consumer.partition(topic, p) for p in parts)
    return out


def commit(committer, offsets: dict[tuple[str, int], int]) -> None:
    """Commit ``{(topic, partition): next offset}`` through ``committer`` (a consumer, or
    the global lock); a failure is logged, never raised (the offsets are for lag
    monitoring only: the checkpoints are what a restart resumes from)."""
    if not offsets or committer is None:
        return
    try:
        committer.commit(offsets)
    except Exception as exc:  # noqa: BLE001 - lag monitoring only: never fatal
        log.warning("offset commit failed: %r", exc)
