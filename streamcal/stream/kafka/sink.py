"""Producing the processor's outputs: an outbox that outlives producer failures, run in the
processor's thread or in a child process of its own.

Every output (prediction, dead letter, metric line) goes through ``send``; ``flush``
returns once every output sent so far is acknowledged by the broker, which is what a
checkpoint needs before it records the input offsets those outputs came from.

Why a child process: kafka-python builds each record batch in pure Python, so ``send``
costs the caller about 18 µs of CPU per record, and the producer's I/O thread (completing
every record's future) takes the same GIL as the processor. Measured with
``benchmarks/kafka.py``: 35 µs of the processor's thread and 15 µs of I/O-thread CPU per
event went to the producer. ``ProducerProcess`` hands the records to a child process in
pickled batches (well under 1 µs per record) and the child runs ``Outbox`` on the other
core. The child ignores SIGINT and SIGTERM (a terminal or a service manager signals the
whole process group; the processor stops it after its last flush) and, if the processor
dies, delivers what it holds and exits when it sees its input pipe close.

The outputs are produced in the order sent, by one idempotent producer at a time.

With exactly-once (``streamcal.stream.exactly_once``) the producer is transactional
(``TransactionalOutbox``, or ``TransactionalProcess`` in the child): the outputs of one
checkpoint interval form one transaction, committed with the input offsets, and nothing is
ever re-sent. A failed send dooms the transaction: ``commit`` aborts it and raises
``TransactionAborted`` (the processor resumes from what was committed); a producer fenced
by a successor raises ``Fenced`` (the processor stops). If the processor dies, the child
aborts the open transaction (``read_committed`` readers go on at once) and exits.
"""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection

from streamcal.errors import BrokerError, SupersededError
from streamcal.stream.kafka import kafka_python
from streamcal.stream.kafka.adapters import split
from streamcal.stream.kafka.port import KafkaError, ProducerFenced
from streamcal.stream.logformat import configure, format_of

__all__ = [
    "Fenced",
    "NoProducer",
    "Outbox",
    "ProducerProcess",
    "TransactionAborted",
    "TransactionalOutbox",
    "TransactionalProcess",
]

log = logging.getLogger(__name__)

_FLUSH_EVERY = 50_000  # outputs kept for re-sending before a flush is forced
_BATCH = 512  # records per message to the child process
_PIPE_SIZE = 1 << 20  # bytes buffered in the pipe to the child (64 KiB by default)


def make_producer(settings: dict):
    """The port's producer with ``settings`` (client settings plus producer options), of
    the adapter they name (``adapters``)."""
    client, settings = split(settings)
    return client.Producer(settings)


class TransactionAborted(BrokerError, RuntimeError):
    """The open transaction was aborted (a send failed, the broker went away, the commit
    failed): its outputs are never seen by ``read_committed`` readers, and the state must
    go back to what was committed."""


class NoProducer(BrokerError, RuntimeError):
    """The producer process could not create its producer: the message says why, with the
    client error's type in it (no repr in a repr)."""

    client_words = False


class Fenced(SupersededError, RuntimeError):
    """Another producer with this transactional id took over (a successor of this
    instance), or the broker aborted this one's transaction on its timeout: stop, without
    a checkpoint."""


class Outbox:
    """A Kafka producer and the outputs sent since the last flush.

    An idempotent producer is unusable after a fatal error (a broker restart causes one):
    ``flush`` then recreates it and re-sends every output not acknowledged, in order.
    """

    open = False  # a transaction is open: never here (at least once)

    def __init__(self, settings: dict):
        self._settings = settings
        self._producer = make_producer(settings)
        self._sent: list = []  # (topic, key, value, partition, delivery handle or None)
        self.failed = False  # set by a failed send (in the I/O thread): flush soon

    def send(self, topic: str, key: bytes | None, value: bytes | None, partition=None) -> None:
        """Send a record (``partition``: None lets the producer choose by key)."""
        sent = True
        try:
            fut = self._producer.send(topic, key, value, partition, self._on_error)
        except Exception as exc:  # a producer in a fatal state refuses new sends
            log.warning("send to %s failed (%r); recreating the producer", topic, exc)
            fut, sent = None, False
        self._sent.append((topic, key, value, partition, fut))
        if not sent or len(self._sent) >= _FLUSH_EVERY:
            self.flush()

    def _on_error(self, exc) -> None:
        # Runs in the producer's I/O thread: only raise a flag for the owner's loop.
        self.failed = True

    def flush(self, attempts: int = 10) -> None:
        """Wait until every output sent so far is acknowledged; recreate the producer and
        re-send what failed. Raises ``RuntimeError`` if outputs still cannot be delivered."""
        for attempt in range(attempts):
            try:
                self._producer.flush(timeout=30)
            except KafkaError as exc:
                log.warning("producer flush failed: %r", exc)
            failed = self._producer.undelivered(self._sent)
            if not failed:
                self._sent.clear()
                self.failed = False
                return
            log.warning(
                "%d outputs not delivered (attempt %d); recreating the producer",
                len(failed),
                attempt + 1,
            )
            try:
                self._producer.close(timeout=0)
            except Exception:  # noqa: BLE001 - the old producer is beyond use anyway
                pass
            time.sleep(min(5.0, 0.2 * 2**attempt))
            try:
                self._producer = make_producer(self._settings)
            except KafkaError as exc:
                log.warning("cannot create a producer: %r", exc)
                self._sent = failed
                continue
            self._sent = []
            for t, k, v, p, _ in failed:
                fut = self._producer.send(t, k, v, p, self._on_error)
                self._sent.append((t, k, v, p, fut))
        raise RuntimeError("outputs could not be delivered; stopping without a checkpoint")

    def ship(self) -> None:
        """Nothing to do: ``send`` hands records to the producer at once."""

    def close(self, timeout: float = 10) -> None:
        self._producer.close(timeout=timeout)


class TransactionalOutbox:
    """A transactional producer: the outputs of one checkpoint interval in one transaction.

    ``settings`` hold a ``transactional_id``. ``init_transactions`` at start fences every
    earlier producer with that id and aborts (or completes) what it left open. A
    transaction begins with the first ``send`` after a commit (``open``); ``commit(offsets,
    group)`` adds the input offsets (``{(topic, partition): next offset}``) for consumer
    group ``group`` (``ConsumerGroupMetadata`` fields) and commits. Nothing is re-sent: a
    failed send dooms the transaction, and ``commit`` then aborts it and raises
    ``TransactionAborted``; ``Fenced`` if a successor took over. While ``muted``, sends
    are dropped (outputs of input read again whose outputs were committed).
    """

    failed = False  # a failed send is reported by commit, never retried by a flush

    def __init__(self, settings: dict):
        self._settings = settings
        self.transactional_id = settings["transactional_id"]
        self.open = False
        self.muted = False
        self._error: BaseException | None = None  # what doomed the open transaction
        # Each transaction's number: a send's failure dooms only its own transaction. An
        # abort fails the sends still queued (TransactionAbortedError), and their errbacks
        # run in the producer's thread, possibly after the next transaction has begun.
        self._generation = 0
        self._lock = threading.Lock()
        self._errback = functools.partial(self._doom, generation=0)  # the open one's
        self._producer = self._start()

    def _start(self):
        producer = make_producer(self._settings)
        try:
            producer.init_transactions()
        except BaseException:
            producer.close(timeout=0)
            raise
        return producer

    def send(self, topic: str, key: bytes | None, value: bytes | None, partition=None) -> None:
        if self.muted or self._error is not None:
            return
        try:
            if not self.open:
                self._producer.begin_transaction()
                self.open = True
            self._producer.send(topic, key, value, partition, self._errback)
        except Exception as exc:  # noqa: BLE001 - a producer in an error state: doomed
            self._doom(exc)

    def _doom(self, exc, generation: int | None = None) -> None:
        # May run in the producer's I/O thread: only keep the first error, and only for the
        # transaction still open (``generation``: the one the failed send belonged to).
        with self._lock:
            if self._error is None and generation in (None, self._generation):
                self._error = exc

    def _ended(self) -> None:
        """The open transaction ended (committed or aborted): what failed in it is done."""
        with self._lock:
            self._generation += 1
            self._error = None
        self._errback = functools.partial(self._doom, generation=self._generation)

    def ship(self) -> None:
        """Nothing to do: ``send`` hands records to the producer at once."""

    def flush(self) -> None:
        """Wait until what was sent reached the broker (the transaction stays open)."""
        try:
            self._producer.flush(timeout=30)
        except KafkaError as exc:
            self._doom(exc)

    def commit(self, offsets: dict, group: dict | None) -> None:
        """Commit the open transaction (one is begun for ``offsets`` alone if none is open)
        with ``offsets`` for consumer group ``group``. Raises ``TransactionAborted`` (after
        aborting) or ``Fenced``; nothing of the transaction is then committed."""
        if self._error is not None:
            self._abort_after(self._error)
        if not self.open and not offsets:
            return
        try:
            if not self.open:
                self._producer.begin_transaction()
                self.open = True
            if offsets:
                self._producer.send_offsets_to_transaction(offsets, group)
            self._producer.commit_transaction()
        except Exception as exc:  # noqa: BLE001 - aborted, or fenced: see _abort_after
            self._abort_after(exc)
        self.open = False
        self._ended()

    def _abort_after(self, exc: BaseException):
        if _fenced(exc):
            self.open = False
            self._ended()
            raise Fenced(self._fenced_text(exc)) from None
        log.warning("transaction failed (%r); aborting it", exc)
        self.abort()
        raise TransactionAborted(f"transaction aborted: {exc!r}") from None

    def _fenced_text(self, exc) -> str:
        return (
            f"fenced: another producer with transactional id {self.transactional_id!r} took "
            "over (a successor of this instance), or the broker aborted this one's transaction "
            f"after its timeout ({exc!r}); stopping without a checkpoint"
        )

    def abort(self, replace: bool = True) -> None:
        """Abort the open transaction, if any (its outputs are never seen by
        ``read_committed`` readers). A producer that cannot abort, or that failed without
        a transaction open (it could not begin one), is replaced (unless not ``replace``):
        the new one's ``init_transactions`` ends whatever the old one left. (Were this
        instance a zombie, that would fence its successor, whose next commit then fails:
        each commit is still all or nothing, and each instance resumes from what was
        committed.)"""
        error = self._error
        self._ended()  # before the abort, which fails the sends still queued
        was_open, self.open = self.open, False
        if was_open:
            try:
                self._producer.abort_transaction()
                return
            except Exception as exc:  # noqa: BLE001
                if _fenced(exc):
                    raise Fenced(self._fenced_text(exc)) from None
                log.warning("aborting the transaction failed (%r)", exc)
        elif error is None:
            return
        if replace:
            self._replace()

    def _replace(self, attempts: int = 10) -> None:
        try:
            self._producer.close(timeout=0)
        except Exception:  # noqa: BLE001 - the old producer is beyond use anyway
            pass
        for attempt in range(attempts):
            try:
                self._producer = self._start()
                return
            except KafkaError as exc:
                if _fenced(exc):
                    raise Fenced(self._fenced_text(exc)) from None
                log.warning("cannot start a transactional producer (attempt %d): %r",
                            attempt + 1, exc)  # fmt: skip
                time.sleep(min(5.0, 0.2 * 2**attempt))
        raise RuntimeError("cannot start a transactional producer; stopping without a checkpoint")

    def close(self, timeout: float = 10) -> None:
        """Close the producer; an open transaction is aborted first (not committed), never
        by a new producer (the broker aborts it after its timeout, or a successor does)."""
        try:
            self.abort(replace=False)
        except Exception as exc:  # noqa: BLE001 - closing anyway
            log.warning("closing the transactional producer: %r", exc)
        self._producer.close(timeout=timeout)


def _fenced(exc) -> bool:
    """Whether ``exc`` (the port's, or the client's from a failed send) says this producer
    was fenced."""
    return isinstance(kafka_python.translate(exc), ProducerFenced)


class ProducerProcess:
    """``Outbox`` in a child process: the same ``send`` / ``flush`` / ``close``.

    ``send`` buffers; ``ship`` hands the buffer to the child (the processor calls it after
    each burst of records, and ``send`` when the buffer is full). ``flush`` ships, waits
    for the child's ``Outbox.flush`` and raises ``RuntimeError`` with the child's reason if
    it failed or the child is gone.
    """

    failed = False  # the child handles failed sends itself
    open = False  # a transaction is open: never here (at least once)

    def __init__(self, settings: dict):
        self._proc = subprocess.Popen(
            [sys.executable, "-c", "from streamcal.stream.kafka.sink import _child; _child()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
        )
        # Connections (length-prefixed pickles) over the child's stdin and stdout.
        self._out = Connection(os.dup(self._proc.stdin.fileno()), readable=False)
        self._in = Connection(os.dup(self._proc.stdout.fileno()), writable=False)
        self._proc.stdin.close()
        self._proc.stdout.close()
        try:  # Linux: room for ~8k records, so a pause of the child does not stall us at once
            fcntl.fcntl(self._out.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
        except (AttributeError, OSError):  # not Linux, or above /proc/sys/fs/pipe-max-size
            pass
        self._buf: list = []
        # The child logs at the processor's level and in its format (the CLI's --log-level
        # and --log-format).
        level = logging.getLogger().getEffectiveLevel()
        self._request(("start", settings, level, format_of()))

    def send(self, topic: str, key: bytes | None, value: bytes | None, partition=None) -> None:
        self._buf.append((topic, key, value, partition))
        if len(self._buf) >= _BATCH:
            self.ship()

    def ship(self) -> None:
        if self._buf:
            try:
                self._out.send(self._buf)
            except OSError as exc:
                raise RuntimeError(f"the producer process is gone ({exc!r})") from None
            self._buf = []

    def _request(self, msg) -> None:
        try:
            self._out.send(msg)
            reply = self._in.recv()
        except (OSError, EOFError) as exc:
            raise RuntimeError(
                f"the producer process is gone (exit code {self._proc.poll()}, {exc!r})"
            ) from None
        if reply != "ok":
            if type(reply) is tuple:  # (kind, message) of a transactional request
                raise _REPLY_ERRORS.get(reply[0], RuntimeError)(reply[1])
            raise RuntimeError(reply)

    def flush(self) -> None:
        self.ship()
        self._request(("flush",))

    def close(self, timeout: float = 10) -> None:
        """Deliver what is buffered (best effort), stop the child and wait for it."""
        try:
            self.ship()
            self._request(("close", timeout))
        except RuntimeError as exc:
            log.warning("closing the producer process: %s", exc)
        finally:
            self._out.close()
            self._in.close()
            try:
                self._proc.wait(timeout=timeout + 5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()


class TransactionalProcess(ProducerProcess):
    """``TransactionalOutbox`` in a child process: ``send`` (dropped while ``muted``),
    ``commit`` and ``abort`` as there, ``close`` aborts an open transaction."""

    muted = False

    def send(self, topic: str, key: bytes | None, value: bytes | None, partition=None) -> None:
        if self.muted:
            return
        self.open = True
        super().send(topic, key, value, partition)

    def commit(self, offsets: dict, group: dict | None) -> None:
        self.ship()
        try:
            self._request(("commit", offsets, group))
        finally:
            self.open = False

    def abort(self) -> None:
        self._buf = []
        try:
            self._request(("abort",))
        finally:
            self.open = False

    def flush(self) -> None:
        """Ship what is buffered (the child sends it into the open transaction)."""
        self.ship()


_REPLY_ERRORS = {"aborted": TransactionAborted, "fenced": Fenced, "error": RuntimeError,
                 "unstarted": NoProducer}  # fmt: skip


def _said(exc: Exception) -> str:
    """``exc`` in words, its type named once.

    >>> _said(TypeError("bad option")), _said(ValueError("ValueError: twice"))
    ('TypeError: bad option', 'ValueError: twice')
    """
    name, text = type(exc).__name__, str(exc)
    return text if name in text else f"{name}: {text}" if text else name


def _transact(outbox, msg) -> object:
    """Run a ``commit`` or ``abort`` request on ``outbox``; the reply to send."""
    try:
        if msg[0] == "commit":
            outbox.commit(msg[1], msg[2])
        else:
            outbox.abort()
    except TransactionAborted as exc:
        return ("aborted", str(exc))
    except Fenced as exc:
        return ("fenced", str(exc))
    except Exception as exc:  # noqa: BLE001 - reported to the processor
        return ("error", repr(exc))
    return "ok"


def _child() -> None:
    """The child's loop: batches of records in, ``Outbox`` calls, a reply per request."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # The replies own the original stdout; anything printed goes to stderr instead.
    inp = Connection(os.dup(0), writable=False)
    out = Connection(os.dup(1), readable=False)
    os.dup2(2, 1)
    outbox = None
    reply = out.send
    while True:
        try:
            # Wake up now and then to act on a failed send even while no records come.
            if not inp.poll(0.5):
                if outbox is not None and outbox.failed:
                    _try_flush(outbox)
                continue
            msg = inp.recv()
        except EOFError:  # the processor is gone: deliver what we hold, then stop
            if isinstance(outbox, TransactionalOutbox):
                outbox.close()  # never commit for a processor that died: abort
            elif outbox is not None:
                _try_flush(outbox)
                outbox.close()
            return
        if type(msg) is list:
            for t, k, v, p in msg:
                outbox.send(t, k, v, p)
            if outbox.failed:
                _try_flush(outbox)
        elif msg[0] == "flush":
            reply(_try_flush(outbox))
        elif msg[0] in ("commit", "abort"):
            reply(_transact(outbox, msg))
        elif msg[0] == "start":
            configure(msg[2], msg[3], process="producer")
            kafka_python.quiet_false_alarms()
            try:
                kind = TransactionalOutbox if msg[1].get("transactional_id") else Outbox
                outbox = kind(msg[1])
            except Exception as exc:  # noqa: BLE001 - reported to the processor
                reply(("unstarted", f"cannot create a Kafka producer: {_said(exc)}"))
                return
            reply("ok")
        elif msg[0] == "close":
            status = _try_flush(outbox)
            outbox.close(msg[1])
            reply(status)
            return


def _try_flush(outbox: Outbox) -> str:
    try:
        outbox.flush()
    except Exception as exc:  # noqa: BLE001 - reported to the processor
        return str(exc)
    return "ok"
