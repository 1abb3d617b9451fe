"""The kafka-python adapter: the port (``streamcal.stream.kafka.port``) on kafka-python.

The only module of streamcal that imports kafka-python (tests/test_layers.py says so).
Its errors become the port's where they cross (``translate``), so nothing above knows
kafka-python's exception classes. Every reach-in into kafka-python's private parts is
here too, each with a test that fails when kafka-python changes under it
(tests/stream/test_kafka_python.py); kafka-python is pinned to the major version those
tests pass with:

* ``last_stable_offsets`` wraps ``consumer._fetcher._parse_fetched_data`` (kafka-python
  keeps no last stable offset of a fetch response);
* ``never_bump`` overwrites ``producer._transaction_manager._supports_epoch_bump``;
* ``unpark`` clears ``consumer._fetcher._next_partition_records`` once drained, so that
  the records parked for a paused partition come back when it is resumed;
* ``claim_finished_joins`` wraps ``consumer._coordinator.join_group_async`` so that a
  rebalance that finished between two polls (``_join_task``) is not thrown away;
* ``locate`` reads the frame of the fetcher's batch loop on a traceback, and ``fix``
  matches kafka-python's error texts (its errors name neither partition nor offset).

kafka-python itself is imported inside functions, so that importing this module (and the
processor) stays cheap.
"""

from __future__ import annotations

import functools
import logging
import time

from streamcal.stream.kafka import port

__all__ = [
    "Admin",
    "Consumer",
    "Producer",
    "claim_finished_joins",
    "has_codec",
    "last_stable_offsets",
    "locate",
    "never_bump",
    "quiet_false_alarms",
    "translate",
    "unpark",
]

log = logging.getLogger(__name__)


# ------------------------------------------------------------------ errors
@functools.cache
def _error_kinds() -> tuple:
    from kafka import errors as e

    return (
        (e.ProducerFencedError, port.ProducerFenced),
        (e.InvalidProducerEpochError, port.ProducerFenced),
        (e.TopicAlreadyExistsError, port.TopicExists),
        (e.KafkaTimeoutError, port.KafkaTimeout),
        (e.NoOffsetForPartitionError, port.NoPosition),
        (e.KafkaError, port.KafkaError),
    )


def translate(exc: BaseException) -> BaseException:
    """The port's error for kafka-python's ``exc`` (``exc`` itself if it is not one of
    kafka-python's); the original is its ``__cause__``.

    >>> from kafka.errors import ProducerFencedError, KafkaTimeoutError
    >>> type(translate(ProducerFencedError())).__name__, type(translate(KafkaTimeoutError("x")))
    ('ProducerFenced', <class 'streamcal.stream.kafka.port.KafkaTimeout'>)
    >>> e = ValueError("not kafka's"); translate(e) is e
    True
    """
    if isinstance(exc, port.KafkaError):
        return exc
    for kind, ours in _error_kinds():
        if isinstance(exc, kind):
            out = ours(f"{type(exc).__name__}: {exc}")
            out.__cause__ = exc
            return out
    return exc


def mapped():
    """Raise kafka-python's errors inside as the port's."""
    return port.mapped(translate)


def has_codec(name: str) -> bool:
    """Whether kafka-python can read and write the codec ``name`` (its package is there)."""
    import kafka.codec

    return name in ("none", "gzip") or getattr(kafka.codec, f"has_{name}")()


# What a reader aside from the group (``Consumer.records_at``) is built without.
_GROUP_SETTINGS = ("group_id", "session_timeout_ms", "heartbeat_interval_ms",
                   "partition_assignment_strategy", "max_poll_records")  # fmt: skip

_KTP: list = []  # kafka-python's TopicPartition, once imported


def _tp(tp):
    """kafka-python's ``TopicPartition`` for a port one (it checks the class)."""
    if not _KTP:
        from kafka import TopicPartition

        _KTP.append(TopicPartition)
    cls = _KTP[0]
    return tp if tp.__class__ is cls else cls(tp[0], tp[1])


def offset_commits(offsets: dict) -> dict:
    """``{(topic, partition): next offset}`` as kafka-python commits it."""
    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata

    return {TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()}


# ------------------------------------------------------------------ consumer
class Consumer:
    """A ``KafkaConsumer`` behind the port: the calls the processor makes, with the port's
    values and errors. ``raw`` is the client's consumer (for this adapter's reach-ins)."""

    def __init__(self, raw, settings: dict | None = None):
        self.raw = raw
        claim_finished_joins(raw)
        self._settings = settings or {}  # what a reader for ``records_at`` is built with
        self._reader = None
        self._paused = False  # ever: the fetcher may hold parked records (``unpark``)

    @classmethod
    def build(cls, **settings) -> Consumer:
        """A consumer with kafka-python's ``settings``; in a group, with the range
        assignor (each member gets the same partition numbers of both topics: units)."""
        from kafka import KafkaConsumer
        from kafka.coordinator.assignors.range import RangePartitionAssignor

        if settings.get("group_id") is not None:
            settings.setdefault("partition_assignment_strategy", [RangePartitionAssignor])
        with mapped():
            return cls(KafkaConsumer(**settings), settings)

    def records_at(self, offsets: dict, timeout_ms: int = 5000) -> dict:
        """The port's ``RecordsAt.records_at``: with a consumer of its own (no group),
        kept for the next call; each round polls the partitions not answered yet."""
        want = {_tp(tp): o for tp, o in offsets.items()}
        out: dict = {}
        reader = self._reading()
        try:
            _read_at(reader, want, out, time.monotonic() + timeout_ms / 1000)
        finally:
            reader.assign([])  # nothing fetched until the next call
        return out

    def _reading(self):
        if self._reader is None:
            from kafka import KafkaConsumer

            settings = {k: v for k, v in self._settings.items() if k not in _GROUP_SETTINGS}
            # read_uncommitted: the record at an offset is the same, committed or not, and
            # a read_committed reader that starts after an aborted transaction's first
            # record skips the records after it (kafka-python 3.0.12, measured on noida-db)
            settings.update(auto_offset_reset="none", enable_auto_commit=False,
                            fetch_max_wait_ms=20, max_partition_fetch_bytes=1024,
                            isolation_level="read_uncommitted")  # fmt: skip
            with mapped():
                self._reader = KafkaConsumer(**settings)
        return self._reader

    @staticmethod
    def partition(topic: str, partition: int):
        """The ``TopicPartition`` this client takes fastest (its own)."""
        return _tp((topic, partition))

    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> dict:
        """``{TopicPartition: [Record]}``; raises ``OffsetOutOfRange``, ``LogTruncated``,
        ``Unreadable`` (a batch it cannot read), ``NoPosition`` or ``KafkaError``."""
        from kafka import errors

        if self._paused:
            unpark(self.raw)
        try:
            return self.raw.poll(timeout_ms=timeout_ms, max_records=max_records)
        except errors.OffsetOutOfRangeError as error:
            raise port.OffsetOutOfRange(dict(error.args[0])) from error
        except errors.LogTruncationError as error:
            at = {tp: None if o is None else o.offset for tp, o in error.divergent_offsets.items()}
            raise port.LogTruncated(at) from error
        except Exception as error:
            where = locate(error)
            if where is None:
                raise translate(error) from error
            tp, base, nxt, ts = where
            first = max(base, self.raw.position(tp))
            raise port.Unreadable(tp, first, nxt, ts, error, fix(error)) from error

    def position(self, tp) -> int:
        return self.raw.position(_tp(tp))

    def highwater(self, tp) -> int | None:
        """The end offset the last fetch response of ``tp`` showed (None: none yet)."""
        return self.raw.highwater(_tp(tp))

    def seek(self, tp, offset: int) -> None:
        self.raw.seek(_tp(tp), offset)

    def assign(self, tps) -> None:
        self.raw.assign([_tp(tp) for tp in tps])

    def assignment(self) -> set:
        return self.raw.assignment()

    def pause(self, *tps) -> None:
        """Fetch no more of ``tps`` (the port's ``pause``): kafka-python sends no fetch
        for a paused partition and parks the one response it may hold until ``resume``."""
        self._paused = True
        self.raw.pause(*(_tp(tp) for tp in tps))

    def resume(self, *tps) -> None:
        """Fetch ``tps`` again, from their positions (those not assigned are let be)."""
        assigned = self.raw.assignment()
        self.raw.resume(*(t for t in map(_tp, tps) if t in assigned))

    def topics(self) -> set:
        """The topics of the cluster (a metadata request: brokers that auto-create
        topics create those asked for)."""
        with mapped():
            return self.raw.topics()

    def partitions_for_topic(self, topic: str) -> set | None:
        return self.raw.partitions_for_topic(topic)

    def seek_to_beginning(self, *tps) -> None:
        self.raw.seek_to_beginning(*(_tp(tp) for tp in tps))

    def last_position(self, tp) -> int:
        """The position after seeking ``tp`` to its end."""
        tp = _tp(tp)
        self.raw.seek_to_end(tp)
        return self.raw.position(tp)

    def end_offsets(self, tps, timeout_ms: int | None = None) -> dict:
        with mapped():
            return self.raw.end_offsets([_tp(tp) for tp in tps], timeout_ms=timeout_ms)

    def beginning_offsets(self, tps, timeout_ms: int | None = None) -> dict:
        with mapped():
            return self.raw.beginning_offsets([_tp(tp) for tp in tps], timeout_ms=timeout_ms)

    def committed(self, tp, timeout_ms: int | None = None) -> int | None:
        with mapped():
            return self.raw.committed(_tp(tp), timeout_ms=timeout_ms)

    def commit(self, offsets: dict) -> None:
        """Commit ``{(topic, partition): next offset}`` to the group."""
        with mapped():
            self.raw.commit(offset_commits(offsets))

    def group_metadata(self) -> dict:
        """The group's ``ConsumerGroupMetadata`` fields, for a transaction's offsets."""
        meta = self.raw.group_metadata()
        fields = ("group_id", "generation_id", "member_id", "group_instance_id")
        return {k: getattr(meta, k) for k in fields}

    def subscribe(self, topics, on_revoked, on_assigned) -> None:
        """Join the group over ``topics``; kafka-python calls ``on_revoked(partitions)``
        and ``on_assigned(partitions)`` from inside ``poll``."""
        from kafka import ConsumerRebalanceListener

        class _Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                on_revoked(revoked)

            def on_partitions_assigned(self, assigned):
                on_assigned(assigned)

        self.raw.subscribe(list(topics), listener=_Listener())

    def last_stable_offsets(self) -> dict | None:
        return last_stable_offsets(self.raw)

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close(autocommit=False)
        self.raw.close(autocommit=False)


def _read_at(reader, want: dict, out: dict, deadline: float) -> None:
    """Poll ``reader`` for the record at each offset of ``want`` not in ``out`` yet."""
    from kafka import errors

    while len(out) < len(want):
        left = {tp: o for tp, o in want.items() if tp not in out}
        if time.monotonic() > deadline:
            raise port.KafkaTimeout(f"no answer for the records at {left}")
        reader.assign(list(left))
        for tp, o in left.items():
            reader.seek(tp, o)
        try:
            got = reader.poll(timeout_ms=50, max_records=len(left))
        except errors.OffsetOutOfRangeError as error:  # below its start or past its end
            out.update(dict.fromkeys(error.args[0]))
            continue
        except errors.KafkaError as error:
            raise translate(error) from error
        for tp, recs in got.items():
            out[tp] = recs[0] if recs[0].offset == left[tp] else None
        for tp, o in left.items():  # a fetch at or past the log's end shows no record
            hw = reader.highwater(tp)
            if tp not in out and hw is not None and hw <= o:
                out[tp] = None


def unpark(consumer) -> None:
    """Let ``consumer``'s fetcher return what it parked for partitions since resumed.

    kafka-python (3.0.12) parks the parsed records of a partition paused while they were
    being returned, and takes them back only when no partition's records are in line
    (``_next_partition_records`` None); but it leaves a drained one in line, and sends no
    fetch for a partition with parked records. A resumed partition would then be neither
    returned nor fetched, for good (the merge stalls on it). A drained one in line is as
    good as none: clearing it lets the next poll take the parked records back."""
    fetcher = consumer._fetcher
    current = fetcher._next_partition_records
    if fetcher._paused_partition_records and current is not None and not current:
        fetcher._next_partition_records = None


class _Finished:
    """A join task that finished, shown as one still running (``claim_finished_joins``):
    awaiting it gives its result at once."""

    is_done = False

    def __init__(self, task):
        self._task = task

    def add_callback(self, f, *args, **kwargs):
        return self._task.add_callback(f, *args, **kwargs)

    def add_errback(self, f, *args, **kwargs):
        return self._task.add_errback(f, *args, **kwargs)

    def __await__(self):
        return self._task.__await__()


def claim_finished_joins(consumer) -> None:
    """Have each poll of ``consumer`` take the assignment of a rebalance that finished
    since the last poll, instead of throwing it away and joining the group again.

    kafka-python (3.0.12, and its main branch of August 2026) runs a rebalance's JoinGroup
    and SyncGroup as one task that a poll awaits up to its own timeout only; if the task
    finished before the next poll, that poll drops the assignment and joins anew. The
    processor's revocation callback (it commits the units there) uses up its poll's
    timeout, leaving the join in flight, answered within milliseconds: the member that
    drops it makes the group rebalance again, and can leave a group on noida-db 0.2.3
    stuck for minutes (tests/README.md). Here the poll's join (``join_group_async``, on
    the client's I/O loop, where the task finishes too) shows a task that succeeded as
    still running: kafka-python awaits it and takes its result at once (after an error it
    joins anew, as it should). No-op if kafka-python has no such task."""
    coordinator = getattr(consumer, "_coordinator", None)
    join = getattr(coordinator, "join_group_async", None)
    if join is None or not hasattr(coordinator, "_join_task"):
        return

    async def join_group_async(timeout_ms=None):
        task = coordinator._join_task
        if task is not None and task.__class__ is not _Finished and task.is_done:
            if task.exception is None:
                coordinator._join_task = _Finished(task)
        return await join(timeout_ms=timeout_ms)

    coordinator.join_group_async = join_group_async


def last_stable_offsets(consumer) -> dict | None:
    """``{TopicPartition: last stable offset}``, kept up to date from ``consumer``'s fetch
    responses (a ``read_committed`` consumer's position stops there while an upstream
    transaction is open, below the highwater).

    kafka-python keeps only the highwater of a fetch response; its last stable offset
    (Fetch v4+) is taken here by wrapping the fetcher's parse of each response. A value
    may be stale (from a response discarded after a seek), lower than the broker's: the
    merge takes it only as a hint, as it takes the highwater. None if kafka-python's
    internals differ from 2.2-3.0's: the merge then takes the highwater, and a partition
    held by an open upstream transaction waits ``--merge-wait`` (counted in
    ``merge_stalls``)."""
    stable: dict = {}
    fetcher = getattr(consumer, "_fetcher", None)
    parse = getattr(fetcher, "_parse_fetched_data", None)
    if parse is None:
        log.warning("kafka-python %s: the last stable offsets of fetches are not available; "
                    "an open upstream transaction will count as a merge stall",
                    _kafka_version())  # fmt: skip
        return None

    def parse_and_keep(completed_fetch):
        data = completed_fetch.partition_data
        lso = getattr(data, "last_stable_offset", -1)
        if lso is not None and lso >= 0 and getattr(data, "error_code", 0) == 0:
            stable[completed_fetch.topic_partition] = lso
        return parse(completed_fetch)

    fetcher._parse_fetched_data = parse_and_keep
    return stable


def _kafka_version() -> str:
    import kafka

    return getattr(kafka, "__version__", "?")


def locate(exc: BaseException):
    """(TopicPartition, base offset, next offset, first timestamp) of the record batch
    whose reading raised ``exc``, or None if ``exc`` did not come from reading a batch.

    kafka-python names neither the partition nor the offsets in these errors (and its
    consumer is left spinning on the failed partition until it is seeked elsewhere); the
    frame of the fetcher's batch loop, still on the traceback, holds both."""
    tb = exc.__traceback__
    found = None
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name == "_unpack_records":
            local = frame.f_locals
            batch, parts = local.get("batch"), local.get("self")
            tp = getattr(parts, "topic_partition", None)
            if batch is not None and tp is not None:
                base = batch.base_offset
                nxt = getattr(batch, "next_offset", base + 1)  # legacy: one wrapper offset
                ts = getattr(batch, "first_timestamp", getattr(batch, "timestamp", -1))
                found = (tp, base, nxt, ts if ts is not None else -1)
        tb = tb.tb_next
    return found


_CODEC_PACKAGES = {"snappy": "python-snappy", "lz4": "lz4", "zstd": "zstandard"}


def fix(cause: BaseException) -> str:
    """What to do about a batch kafka-python could not read, from its error's text.

    >>> fix(RuntimeError("Libraries for lz4 compression codec not found"))[:36]
    'To fix: install the lz4 codec, `pip '
    """
    text = str(cause)
    for codec, package in _CODEC_PACKAGES.items():
        if f"for {codec} compression codec not found" in text:
            return (
                f"To fix: install the {codec} codec, `pip install {package}` (a dependency "
                "of streamcal-va: reinstalling streamcal-va brings it back)"
            )
    if "Unrecognized compression type" in text:
        return (
            "To fix: the producer used a codec kafka-python does not know; have it produce "
            "with none, gzip, snappy, lz4 or zstd"
        )
    if "crc" in text.lower():
        return (
            "To fix: the batch is corrupt (its checksum does not match); re-produce the "
            "records from the source"
        )
    return "To fix: re-produce the records with a standard Kafka client and codec"


# ------------------------------------------------------------------ producer
def _new_producer(settings: dict):
    from kafka import KafkaProducer

    return KafkaProducer(**settings)


class Producer:
    """A ``KafkaProducer`` behind the port: ``send`` (with an errback for a failed
    delivery; returns a handle for ``delivered``), ``flush`` and transactions, raising
    the port's errors."""

    def __init__(self, settings: dict):
        with mapped():
            self.raw = _new_producer(settings)

    def send(self, topic: str, key, value, partition=None, on_error=None, timestamp_ms=None):
        """Send a record; ``on_error(exc)`` runs in the client's I/O thread if it fails."""
        fut = self.raw.send(topic, key=key, value=value, partition=partition,
                            timestamp_ms=timestamp_ms)  # fmt: skip
        if on_error is not None:
            fut.add_errback(on_error)
        return fut

    @staticmethod
    def undelivered(sent: list) -> list:
        """The entries ``(topic, key, value, partition, handle of send or None)`` of
        ``sent`` not acknowledged (after a ``flush``)."""
        return [o for o in sent if o[4] is None or not o[4].is_done or o[4].failed()]

    def flush(self, timeout: float | None = None) -> None:
        with mapped():
            self.raw.flush(timeout=timeout)

    def init_transactions(self) -> None:
        never_bump(self.raw)
        with mapped():
            self.raw.init_transactions()

    def begin_transaction(self) -> None:
        with mapped():
            self.raw.begin_transaction()

    def send_offsets_to_transaction(self, offsets: dict, group: dict | None) -> None:
        """Add ``{(topic, partition): next offset}`` for group ``group`` (its
        ``ConsumerGroupMetadata`` fields) to the open transaction."""
        from kafka.structs import ConsumerGroupMetadata

        with mapped():
            self.raw.send_offsets_to_transaction(
                offset_commits(offsets), ConsumerGroupMetadata(**(group or {}))
            )

    def commit_transaction(self) -> None:
        with mapped():
            self.raw.commit_transaction()

    def abort_transaction(self) -> None:
        with mapped():
            self.raw.abort_transaction()

    def close(self, timeout: float | None = None) -> None:
        self.raw.close(timeout=timeout)


def never_bump(producer) -> None:
    """Make ``producer`` (transactional) take its epoch from ``init_transactions`` only.

    kafka-python 2.3+ recovers a produce refused for a stale epoch (or an unknown producer
    id, an out-of-order sequence) by bumping the epoch itself (KIP-360), and when the
    broker refuses the bump, by asking for a new producer id: either makes a fenced
    producer fence its successor back. Apache Kafka refuses a bump from a stale epoch
    (PRODUCER_FENCED: fatal), but noida-db 0.2.3 grants it (measured: a zombie at epoch 0
    got epoch 2 over its successor's 1, whose next produce then failed). Without the bump
    those errors are fatal for a transactional producer (kafka-python's rule for brokers
    before 2.5): the commit raises ``Fenced`` and the processor stops; a restart starts a
    producer afresh. No-op if kafka-python has no such recovery."""
    manager = getattr(producer, "_transaction_manager", None)
    if manager is not None and hasattr(manager, "_supports_epoch_bump"):
        manager._supports_epoch_bump = lambda: False


# ------------------------------------------------------------------ admin
class Admin:
    """A ``KafkaAdminClient`` behind the port: topic metadata and creation."""

    def __init__(self, settings: dict):
        from kafka.admin import KafkaAdminClient

        with mapped():
            self.raw = KafkaAdminClient(**settings)

    def list_topics(self) -> list[str]:
        with mapped():
            return self.raw.list_topics()

    def create_topic(self, name: str, partitions: int, replication: int = 1,
                     configs: dict | None = None) -> None:  # fmt: skip
        """Create topic ``name``; ``TopicExists`` if it exists."""
        from kafka.admin import NewTopic

        with mapped():
            self.raw.create_topics([NewTopic(name, partitions, replication,
                                             topic_configs=configs or {})])  # fmt: skip

    def close(self) -> None:
        self.raw.close()


def sasl_exchange(mechanism: str, settings: dict):
    """kafka-python's client side of a SASL exchange (``auth_bytes``, ``receive``,
    ``is_done``, ``is_authenticated``) for ``mechanism`` with the client ``settings``."""
    from kafka.net.sasl import get_sasl_mechanism

    return get_sasl_mechanism(mechanism)(**settings)


def quiet_false_alarms() -> None:
    """Drop kafka-python's "Task ... is blocking the event loop" warnings (idempotent).

    It times its I/O tasks by the wall clock, so a task that waited for the GIL or for a
    CPU (the processor, its producer process and the broker share the machine) is reported
    as blocking: a false alarm for us, seen about once a second under load.
    """
    selector = logging.getLogger("kafka.net.selector")
    if _not_slow_task not in selector.filters:
        selector.addFilter(_not_slow_task)


def _not_slow_task(record: logging.LogRecord) -> bool:
    return "blocking the event loop" not in record.getMessage()
