"""The librdkafka adapter: the port (``streamcal.stream.kafka.port``) on confluent-kafka.

Chosen with ``--kafka-client librdkafka`` (the extra ``streamcal-va[librdkafka]``). The
only module of streamcal that imports confluent-kafka; its errors become the port's where
they cross (``translate``). It reaches into nothing private.

What differs from kafka-python, and how it is bridged:

* settings come in kafka-python's names (``ProcessorConfig.kafka_client_settings``) and
  are turned into librdkafka's here (``config_of``), refusing any it does not know;
* a poll is one ``consume(num_messages=..., timeout=0)``: librdkafka's batch call (about
  half the cost per record of one call per record) on what is fetched already; with
  nothing there, ``poll(timeout)`` waits for the first record and a ``consume`` takes
  what came with it (``consume`` with a timeout would wait for all ``num_messages`` or
  the whole timeout: live input would wait out each idle poll). The records are handed
  over as the port's ``Record``. ``produce_batch`` is not used: it drops headers;
* the producer runs in the processor's own process: librdkafka's I/O threads do its work
  outside the GIL. Delivery reports come for failed records only
  (``delivery.report.only.error``), so a success costs nothing in Python;
* a consumer's position is the one librdkafka keeps (it steps over transaction markers),
  except just after a seek, before the partition's next records: then the seek's offset;
* seeking a partition that librdkafka does not fetch yet (just assigned) is done by
  assigning it again from that offset, at the next poll;
* with ``read_committed``, librdkafka's cached high watermark is already the last stable
  offset, so ``last_stable_offsets`` is None (the merge takes the highwater).

confluent-kafka itself is imported inside functions, so that importing this module stays
cheap (and possible without the extra).
"""

from __future__ import annotations

import functools
import logging
import threading
import time

from streamcal.stream.kafka import port

__all__ = ["Admin", "Consumer", "Producer", "config_of", "has_codec", "translate"]

log = logging.getLogger(__name__)

_NAMES = {  # kafka-python's setting -> librdkafka's
    "client_id": "client.id",
    "security_protocol": "security.protocol",
    "sasl_mechanism": "sasl.mechanism",
    "sasl_plain_username": "sasl.username",
    "sasl_plain_password": "sasl.password",
    "ssl_cafile": "ssl.ca.location",
    "ssl_certfile": "ssl.certificate.location",
    "ssl_keyfile": "ssl.key.location",
    "group_id": "group.id",
    "enable_auto_commit": "enable.auto.commit",
    "session_timeout_ms": "session.timeout.ms",
    "heartbeat_interval_ms": "heartbeat.interval.ms",
    "fetch_max_wait_ms": "fetch.wait.max.ms",
    "isolation_level": "isolation.level",
    "enable_idempotence": "enable.idempotence",
    "linger_ms": "linger.ms",
    "batch_size": "batch.size",
    "transactional_id": "transactional.id",
    "transaction_timeout_ms": "transaction.timeout.ms",
    "acks": "acks",
    "request_timeout_ms": "socket.timeout.ms",
}
_IGNORED = ("api_version", "max_poll_records")  # kafka-python only / taken by the adapter


def config_of(settings: dict) -> dict:
    """librdkafka's configuration for kafka-python-named ``settings``.

    >>> config_of({"bootstrap_servers": ["a:9092", "b:9092"], "auto_offset_reset": "none",
    ...            "compression_type": None, "ssl_check_hostname": False})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'bootstrap.servers': 'a:9092,b:9092', 'auto.offset.reset': 'error',
     'compression.type': 'none', 'ssl.endpoint.identification.algorithm': 'none'}
    >>> config_of({"fetch_min_bytes": 1})
    Traceback (most recent call last):
    ValueError: the librdkafka client has no setting for fetch_min_bytes
    """
    out: dict = {}
    for name, value in settings.items():
        if name in _IGNORED:
            continue
        if name == "bootstrap_servers":
            out["bootstrap.servers"] = value if isinstance(value, str) else ",".join(value)
        elif name == "auto_offset_reset":
            out["auto.offset.reset"] = "error" if value == "none" else value
        elif name == "compression_type":
            out["compression.type"] = value or "none"
        elif name == "ssl_check_hostname":
            out["ssl.endpoint.identification.algorithm"] = "https" if value else "none"
        elif name in _NAMES:
            out[_NAMES[name]] = value
        else:
            raise ValueError(f"the librdkafka client has no setting for {name}")
    return out


def has_codec(name: str) -> bool:
    """librdkafka reads and writes every codec itself."""
    return True


# ------------------------------------------------------------------ errors
@functools.cache
def _codes() -> dict:
    from confluent_kafka import KafkaError as E

    fenced = (E._FENCED, E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH)
    return {
        **dict.fromkeys(fenced, port.ProducerFenced),
        E.TOPIC_ALREADY_EXISTS: port.TopicExists,
        E._TIMED_OUT: port.KafkaTimeout,
        E._MSG_TIMED_OUT: port.KafkaTimeout,
        E.REQUEST_TIMED_OUT: port.KafkaTimeout,
        E._NO_OFFSET: port.NoPosition,
    }


def error_of(err) -> port.KafkaError:
    """The port's error for a librdkafka ``KafkaError`` (an error code, not an exception)."""
    out = _codes().get(err.code(), port.KafkaError)(f"{err.name()}: {err.str()}")
    out.code = err.code()
    return out


def translate(exc: BaseException) -> BaseException:
    """The port's error for confluent-kafka's ``exc`` (``exc`` itself otherwise)."""
    from confluent_kafka import KafkaException

    if isinstance(exc, KafkaException) and exc.args:
        out = error_of(exc.args[0])
        out.__cause__ = exc
        return out
    return exc


def mapped():
    """Raise confluent-kafka's errors inside as the port's."""
    return port.mapped(translate)


def _ctp(tp, offset: int | None = None):
    from confluent_kafka import TopicPartition

    if offset is None:
        return TopicPartition(tp[0], tp[1])
    return TopicPartition(tp[0], tp[1], offset)


def bounded_close(raws: list, timeout: float) -> None:
    """``close()`` each of ``raws`` in turn, in a thread of its own, waited for at most
    ``timeout`` seconds: past that, a warning and the thread is left behind (it is a
    daemon: the process can still exit). librdkafka's close (``rd_kafka_destroy``) can
    wait forever: seen with 2.16 once a broker had restarted without its data, a broker
    handle "terminating in state TRY_CONNECT" with references left, in 4 of 21 runs of
    a test of tests/e2e/test_fingerprints.py. A processor asked to stop, or stopping on an
    error, must still exit. Its error, if it ends in time, is raised here.

    >>> stuck = threading.Event()
    >>> class Stuck:
    ...     def close(self):
    ...         stuck.wait()
    >>> t = time.monotonic(); bounded_close([Stuck()], 0.05); time.monotonic() - t < 1
    True
    >>> stuck.set()  # the close left behind ends
    """
    failed: list = []

    def close() -> None:
        try:
            for raw in raws:
                raw.close()
        except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
            failed.append(exc)

    thread = threading.Thread(target=close, name="librdkafka-close", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        log.warning("librdkafka's close did not end in %.0f s: left behind (the group "
                    "drops this member when its session times out)", timeout)
    elif failed:
        with mapped():
            raise failed[0]


# ------------------------------------------------------------------ consumer
class Consumer:
    """A librdkafka consumer behind the port (the calls ``kafka_python.Consumer`` offers)."""

    def __init__(self, raw, max_records: int = 500, conf: dict | None = None):
        self.raw = raw
        self._conf = conf or {}  # what a reader for ``records_at`` is built with
        self._reader = None
        self.max_records = max_records
        self._pos: dict = {}  # TopicPartition -> next offset, as sought or read
        self._sought: set = set()  # sought since their last records: _pos is the truth
        self._assigned: list = []  # what ``assign`` was given
        self._reassign = False  # seeks librdkafka refused: assign again before a poll
        self._ctps: dict = {}
        self._error: port.KafkaError | None = None  # of the last consume, raised next

    @classmethod
    def build(cls, **settings) -> Consumer:
        from confluent_kafka import Consumer as Raw

        max_records = settings.pop("max_poll_records", 500)
        conf = config_of(settings)
        conf.setdefault("group.id", "streamcal-reader")  # librdkafka wants one; never committed
        conf["partition.assignment.strategy"] = "range"  # units: see kafka_python
        conf["check.crcs"] = True  # a corrupt batch is an error, as with kafka-python
        conf["enable.auto.offset.store"] = False
        conf["logger"] = logging.getLogger("streamcal.librdkafka")
        with mapped():
            return cls(Raw(conf), max_records, conf)

    def records_at(self, offsets: dict, timeout_ms: int = 5000) -> dict:
        """The port's ``RecordsAt.records_at``: with a consumer of its own, assigned the
        partitions not answered yet at their offsets, kept for the next call (an end of
        partition or an offset out of range: no record there)."""
        want = {port.TopicPartition(tp[0], tp[1]): o for tp, o in offsets.items()}
        out: dict = {}
        reader = self._reading()
        try:
            self._read_at(reader, want, out, time.monotonic() + timeout_ms / 1000)
        finally:
            reader.unassign()  # no fetching in the background until the next call
        return out

    @staticmethod
    def _read_at(reader, want: dict, out: dict, deadline: float) -> None:
        from confluent_kafka import KafkaError as E

        while len(out) < len(want):
            left = {tp: o for tp, o in want.items() if tp not in out}
            if time.monotonic() > deadline:
                raise port.KafkaTimeout(f"no answer for the records at {left}")
            # A short fetch wait: assigning again waits for the fetch in flight.
            reader.assign([_ctp(tp, o) for tp, o in left.items()])
            for m in reader.consume(len(left), 0.2):
                tp = port.TopicPartition(m.topic(), m.partition())
                if tp in out or tp not in left:
                    continue
                err = m.error()
                if err is None:
                    kind, ts = m.timestamp()
                    out[tp] = (port.Record(tp.topic, tp.partition, m.offset(),
                                           ts if kind else -1, m.key(), m.value())
                               if m.offset() == left[tp] else None)  # fmt: skip
                elif err.code() in (E._PARTITION_EOF, E.OFFSET_OUT_OF_RANGE, E._AUTO_OFFSET_RESET):
                    out[tp] = None
                else:
                    raise error_of(err)
            for tp, o in left.items():  # a broker may answer a fetch past its end with none
                hi = reader.get_watermark_offsets(_ctp(tp), cached=True)
                if tp not in out and hi is not None and 0 <= hi[1] <= o:
                    out[tp] = None

    def _reading(self):
        if self._reader is None:
            from confluent_kafka import Consumer as Raw

            conf = {**self._conf, "group.id": "streamcal-reader", "enable.auto.commit": False,
                    "auto.offset.reset": "error", "enable.partition.eof": True,
                    "fetch.wait.max.ms": 1, "max.partition.fetch.bytes": 1024,
                    "isolation.level": "read_uncommitted"}  # fmt: skip (see kafka_python)
            with mapped():
                self._reader = Raw(conf)
        return self._reader

    @staticmethod
    def partition(topic: str, partition: int):
        return port.TopicPartition(topic, partition)

    def _c(self, tp):
        c = self._ctps.get(tp)
        if c is None:
            c = self._ctps[tp] = _ctp(tp)
        return c

    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> dict:
        """``{TopicPartition: [Record]}`` of one ``consume``; the port's errors."""
        error, self._error = self._error, None
        if error is not None:
            raise error
        if self._reassign:
            self._assign_now()
        n = max_records or self.max_records
        try:
            # consume(n, timeout) waits for n records or the whole timeout: live input
            # would wait out each idle poll. What is fetched already, else the first
            # record to come (poll returns it at once) and what came with it.
            msgs = self.raw.consume(n, 0)
            if not msgs and timeout_ms > 0:
                first = self.raw.poll(timeout_ms / 1000)
                if first is not None:
                    msgs = [first, *self.raw.consume(n - 1, 0)] if n > 1 else [first]
        except Exception as exc:
            raise translate(exc) from exc
        out: dict = {}
        last = None
        recs: list = []
        new = tuple.__new__
        for m in msgs:
            err = m.error()
            if err is not None:
                # After the records before it (they are consumed): at the next poll.
                self._error = self._error or self._failure(m, err)
                continue
            key = (m.topic(), m.partition())
            if key != last:
                last = port.TopicPartition(*key)
                recs = out.get(last)
                if recs is None:
                    recs = out[last] = []
            kind, ts = m.timestamp()  # kind 0: the record has none
            recs.append(new(port.Record, (key[0], key[1], m.offset(), ts if kind else -1,
                                          m.key(), m.value(), m.headers() or ())))  # fmt: skip
        pos, sought = self._pos, self._sought
        for tp, rs in out.items():
            pos[tp] = rs[-1].offset + 1
            sought.discard(tp)
        if not out and self._error is not None:
            error, self._error = self._error, None
            raise error
        return out

    def _failure(self, m, err) -> port.KafkaError | None:
        """The port's error for an error event of ``consume`` (None: not one)."""
        from confluent_kafka import KafkaError as E

        code = err.code()
        if code == E._PARTITION_EOF:
            return None
        topic, partition = m.topic(), m.partition()
        if topic is None or partition is None or partition < 0:
            return error_of(err)
        tp = port.TopicPartition(topic, partition)
        position = self._pos.get(tp)
        if code in (E.OFFSET_OUT_OF_RANGE, E._AUTO_OFFSET_RESET, E._NO_OFFSET):
            if position is None:  # assigned by the group, not sought yet: no loss
                return port.NoPosition(f"{tp}: no position yet")
            return port.OffsetOutOfRange({tp: position})
        if code in (E._BAD_MSG, E._BAD_COMPRESSION, E.INVALID_MSG):  # INVALID_MSG: CORRUPT_MESSAGE
            first = m.offset() if m.offset() is not None and m.offset() >= 0 else position
            return port.Unreadable(tp, first, first + 1, -1, error_of(err),
                                   "To fix: re-produce the records with a standard Kafka "
                                   "client and codec")  # fmt: skip
        return error_of(err)

    def position(self, tp) -> int:
        pos = self._pos.get(tp)
        if pos is None or tp in self._sought:
            return pos
        # librdkafka's own steps over transaction markers and aborted records
        got = self.raw.position([self._c(tp)])[0].offset
        return got if got > pos else pos

    def highwater(self, tp) -> int | None:
        hi = self.raw.get_watermark_offsets(self._c(tp), cached=True)
        return None if hi is None or hi[1] < 0 else hi[1]

    def seek(self, tp, offset: int) -> None:
        tp = port.TopicPartition(tp[0], tp[1])
        self._pos[tp] = offset
        self._sought.add(tp)
        if self._reassign:
            return
        try:
            self.raw.seek(_ctp(tp, offset))
        except Exception:  # noqa: BLE001 - not fetched yet: assign it from there
            self._reassign = True

    def _assign_now(self) -> None:
        self.raw.assign([_ctp(tp, self._pos.get(tp, -2)) for tp in self._assigned])  # -2: start
        self._reassign = False

    def assign(self, tps) -> None:
        self._assigned = [port.TopicPartition(t, p) for t, p in tps]
        self._reassign = True  # from the offsets sought before the first poll

    def assignment(self) -> set:
        return {port.TopicPartition(c.topic, c.partition) for c in self.raw.assignment()}

    def pause(self, *tps) -> None:
        """Fetch no more of ``tps``: librdkafka stops fetching them and drops what it had
        prefetched of them (``resume`` fetches again from the position)."""
        self.raw.pause([self._c(tp) for tp in tps])

    def resume(self, *tps) -> None:
        self.raw.resume([self._c(tp) for tp in tps])

    def seek_to_beginning(self, *tps) -> None:
        for tp in tps:
            self.seek(tp, self.beginning_offsets([tp])[port.TopicPartition(*tp)])

    def last_position(self, tp) -> int:
        end = self.end_offsets([tp])[port.TopicPartition(*tp)]
        self.seek(tp, end)
        return end

    def _watermarks(self, tps, timeout_ms, which: int) -> dict:
        timeout = 10.0 if timeout_ms is None else max(timeout_ms, 1) / 1000
        out = {}
        with mapped():
            for tp in tps:
                marks = self.raw.get_watermark_offsets(self._c(tp), timeout=timeout)
                out[port.TopicPartition(tp[0], tp[1])] = marks[which]
        return out

    def end_offsets(self, tps, timeout_ms: int | None = None) -> dict:
        return self._watermarks(tps, timeout_ms, 1)

    def beginning_offsets(self, tps, timeout_ms: int | None = None) -> dict:
        return self._watermarks(tps, timeout_ms, 0)

    def committed(self, tp, timeout_ms: int | None = None) -> int | None:
        timeout = 30.0 if timeout_ms is None else timeout_ms / 1000
        with mapped():
            got = self.raw.committed([self._c(tp)], timeout=timeout)[0]
        return got.offset if got.offset >= 0 else None

    def commit(self, offsets: dict) -> None:
        with mapped():
            self.raw.commit(offsets=[_ctp(tp, o) for tp, o in offsets.items()],
                            asynchronous=False)  # fmt: skip

    def group_metadata(self):
        """librdkafka's group metadata (opaque), for a transaction's offsets."""
        return self.raw.consumer_group_metadata()

    def subscribe(self, topics, on_revoked, on_assigned) -> None:
        # The assignment is what the group gives; its positions are what the processor
        # seeks (until then, librdkafka's: the group's committed offsets).
        def assigned(raw, parts):
            raw.assign(parts)
            self._assigned = [port.TopicPartition(c.topic, c.partition) for c in parts]
            for tp in self._assigned:  # no position of ours until sought
                self._pos.pop(tp, None)
            on_assigned(list(self._assigned))

        def revoked(raw, parts):
            on_revoked([port.TopicPartition(c.topic, c.partition) for c in parts])
            raw.unassign()
            self._assigned = []

        self.raw.subscribe(list(topics), on_assign=assigned, on_revoke=revoked)

    def topics(self) -> set:
        with mapped():
            return set(self.raw.list_topics(timeout=10).topics)

    def partitions_for_topic(self, topic: str) -> set | None:
        with mapped():
            meta = self.raw.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None or not meta.partitions:
            return None
        return set(meta.partitions)

    def last_stable_offsets(self) -> None:
        return None  # the cached highwater is the last stable offset with read_committed

    def close(self, timeout: float = port.CLOSE_TIMEOUT_S) -> None:
        """Leave the group and free the client, waiting at most ``timeout`` seconds."""
        raws = [r for r in (self._reader, self.raw) if r is not None]
        bounded_close(raws, timeout)


# ------------------------------------------------------------------ producer
class _Reports:
    """Failed deliveries, counted and passed on (kept apart from the producer: the client
    holds its callback, which must not hold the client)."""

    def __init__(self):
        self.failed = 0  # since the last ``Producer.undelivered``
        self.on_error = None  # that of the last send

    def report(self, err, msg) -> None:
        if err is None:
            return
        self.failed += 1
        if self.on_error is not None:
            self.on_error(error_of(err))


class Producer:
    """A librdkafka producer behind the port (the calls ``kafka_python.Producer``
    offers). Only failed deliveries are reported (to the ``on_error`` of the last send)."""

    def __init__(self, settings: dict):
        from confluent_kafka import Producer as Raw

        self._reports = _Reports()
        conf = config_of(settings)
        conf["delivery.report.only.error"] = True
        conf["on_delivery"] = self._reports.report
        conf["logger"] = logging.getLogger("streamcal.librdkafka")
        self._unserved = 0
        with mapped():
            self.raw = Raw(conf)

    def send(self, topic: str, key, value, partition=None, on_error=None, timestamp_ms=None):
        self._reports.on_error = on_error
        kw = {} if timestamp_ms is None else {"timestamp": timestamp_ms}
        if partition is not None:
            kw["partition"] = partition
        while True:
            try:
                self.raw.produce(topic, value, key, **kw)
                break
            except BufferError:  # the local queue is full: let it drain
                self.raw.poll(0.05)
            except Exception as exc:
                self._reports.failed += 1  # not queued: undelivered
                raise translate(exc) from exc
        self._unserved += 1
        if self._unserved >= 1000:  # serve delivery reports (failures only)
            self._unserved = 0
            self.raw.poll(0)

    def undelivered(self, sent: list) -> list:
        """The entries of ``sent`` to send again after a ``flush``: all of them if any
        delivery since the last call failed or is still pending (librdkafka names no
        record), else none."""
        left = self.raw.flush(0)
        failed, self._reports.failed = self._reports.failed, 0
        return list(sent) if left or failed else []

    def flush(self, timeout: float | None = None) -> None:
        left = self.raw.flush(30 if timeout is None else timeout)
        if left:
            raise port.KafkaTimeout(f"{left} records not delivered in time")

    def init_transactions(self) -> None:
        with mapped():
            self.raw.init_transactions(60)

    def begin_transaction(self) -> None:
        with mapped():
            self.raw.begin_transaction()

    def send_offsets_to_transaction(self, offsets: dict, group) -> None:
        with mapped():
            self.raw.send_offsets_to_transaction(
                [_ctp(tp, o) for tp, o in offsets.items()], group, 60
            )

    def commit_transaction(self) -> None:
        with mapped():
            self.raw.commit_transaction(60)

    def abort_transaction(self) -> None:
        with mapped():
            self.raw.abort_transaction(60)

    def close(self, timeout: float | None = None) -> None:
        self.raw.flush(port.CLOSE_TIMEOUT_S if timeout is None else timeout)


# ------------------------------------------------------------------ admin
class Admin:
    """librdkafka's admin client behind the port: topic metadata and creation."""

    def __init__(self, settings: dict):
        from confluent_kafka.admin import AdminClient

        with mapped():
            self.raw = AdminClient({**config_of(settings),
                                    "logger": logging.getLogger("streamcal.librdkafka")})

    def list_topics(self) -> list[str]:
        with mapped():
            return list(self.raw.list_topics(timeout=10).topics)

    def create_topic(self, name: str, partitions: int, replication: int = 1,
                     configs: dict | None = None) -> None:  # fmt: skip
        from confluent_kafka.admin import NewTopic

        topic = NewTopic(name, partitions, replication, config=configs or {})
        with mapped():
            self.raw.create_topics([topic])[name].result(30)

    def close(self) -> None:
        pass
