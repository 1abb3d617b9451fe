"""The port: what the stream processor asks of a Kafka client, in streamcal's own values.

Everything above ``streamcal.stream.kafka`` speaks these values; only an adapter module
(``kafka_python``, the default client) imports a client library, and it translates the
client's errors into the ones below where they cross the port, the way httpx's
``map_exceptions`` translates its transports' errors. What a client's consumer, producer
and admin must offer is spelled out by the adapter's classes; the values are:

* ``TopicPartition`` -- a partition of a topic, a plain ``(topic, partition)`` tuple (the
  adapter's own partitions compare and hash equal to it);
* ``Record`` -- a consumed record: topic, partition, offset, timestamp (ms), key, value,
  headers. An adapter may hand over its client's records when they have these attributes
  (kafka-python's do), so that no record is copied on the way in;
* ``Unreadable`` -- an offset range of a partition that the client could not read (a
  corrupt batch, a codec it lacks), raised by a poll;
* ``OffsetOutOfRange`` and ``LogTruncated`` -- a position the broker's log no longer
  holds, raised by a poll (``streamcal.stream.kafka.ordering``: lost input);
* ``KafkaError`` and its kinds -- whatever else went wrong in the client.

A consumer's ``pause(*partitions)`` stops fetching them (what the client had fetched of
them is not returned, and must not grow) until ``resume(*partitions)``; records then come
on from the position, none lost or repeated (the ordered merge bounds its buffers so).

One operation is typed here because it is not a client's own call but made of them:
``RecordsAt.records_at``, the record at one offset of each of some partitions, read
aside from the consumer's position (``streamcal.stream.kafka.fingerprints`` checks with
it that the log still holds what was read).

>>> tp = TopicPartition("events", 3)
>>> tp == ("events", 3), tp.topic, tp.partition
(True, 'events', 3)
>>> r = Record("events", 3, 41, 1_700_000_000_000, b"k", b"{}")
>>> r.offset, r.headers
(41, ())
"""

from __future__ import annotations

import contextlib
from typing import NamedTuple, Protocol

from streamcal.errors import BrokerError

__all__ = [
    "CLOSE_TIMEOUT_S",
    "KafkaError",
    "KafkaTimeout",
    "LogTruncated",
    "NoPosition",
    "OffsetOutOfRange",
    "ProducerFenced",
    "Record",
    "RecordsAt",
    "TopicExists",
    "TopicPartition",
    "Unreadable",
    "mapped",
]


# How long the processor waits for a client to close when it stops (the outbox's last
# flush, the consumer leaving its group): past that it exits all the same.
CLOSE_TIMEOUT_S = 10.0


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class Record(NamedTuple):
    """A consumed record (``timestamp`` in ms since the epoch, -1 for none)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple = ()


class RecordsAt(Protocol):
    """What an adapter's consumer offers to read records aside from its position."""

    def records_at(self, offsets: dict, timeout_ms: int = 5000) -> dict:
        """``{TopicPartition: the Record at that offset, or None}`` for ``offsets``
        (``{TopicPartition: offset}``), read with a reader of its own (the consumer's
        positions and buffers are untouched), ``read_uncommitted`` (a record is the same
        whether its transaction committed or not). None: the log holds no record there (it
        starts after the offset or ends at or before it, or the offset is not a record's:
        a transaction marker). ``KafkaTimeout`` if the
        broker did not tell within ``timeout_ms``."""
        ...


class KafkaError(BrokerError, RuntimeError):
    """Something went wrong in the Kafka client (its own error is the ``__cause__``)."""


class KafkaTimeout(KafkaError):
    """The client gave up waiting for the broker."""


class TopicExists(KafkaError):
    """A topic to be created exists already."""


class NoPosition(KafkaError):
    """A partition assigned by the group has no position yet (the processor seeks it)."""


class ProducerFenced(KafkaError):
    """A transactional producer was fenced by a successor with its transactional id (or
    its epoch is stale): it can do nothing more."""


class OffsetOutOfRange(KafkaError):
    """The broker's log no longer holds these positions: ``positions`` is
    ``{TopicPartition: position}``."""

    def __init__(self, positions: dict):
        self.positions = positions
        super().__init__(f"offsets out of range: {positions}")


class LogTruncated(KafkaError):
    """The leader's log was truncated below these positions: ``truncated_at`` is
    ``{TopicPartition: offset where it diverged, or None if unknown}``."""

    def __init__(self, truncated_at: dict):
        self.truncated_at = truncated_at
        super().__init__(f"log truncated: {truncated_at}")


class Unreadable(KafkaError):
    """The batch of ``tp`` holding offsets ``first``..``next - 1`` cannot be read
    (``timestamp``: its first record's, -1 if unknown; ``cause``: the client's error,
    ``fix``: what to do about it, one sentence)."""

    def __init__(self, tp, first: int, next: int, timestamp: int, cause: BaseException,
                 fix: str):  # fmt: skip
        self.tp, self.first, self.next, self.timestamp = tp, first, next, timestamp
        self.cause, self.fix = cause, fix
        super().__init__(f"{tp}: offsets {first}..{next - 1} unreadable: {cause!r}")


@contextlib.contextmanager
def mapped(translate):
    """Raise the client's errors inside as the port's: ``translate(exc)`` gives the port's
    error for a client's one (``exc`` itself for any other, which is raised as it is).

    >>> with mapped(lambda exc: KafkaTimeout("no answer") if exc.args == ("t",) else exc):
    ...     raise OSError("t")
    Traceback (most recent call last):
    streamcal.stream.kafka.port.KafkaTimeout: no answer
    """
    try:
        yield
    except Exception as exc:
        out = translate(exc)
        if out is exc:
            raise
        raise out from exc
