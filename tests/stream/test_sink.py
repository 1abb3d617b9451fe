"""The producer process (streamcal.stream.kafka.sink) against a real tansu broker: order and
completeness of what it produces, flush as a barrier, and what happens when either side
of the pipe dies."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from streamcal.stream.kafka.sink import NoProducer, Outbox, ProducerProcess
from tests._helpers import wait_until
from tests._kafka_helpers import read_topic

SETTINGS = {"enable_idempotence": True, "linger_ms": 5, "batch_size": 256 * 1024}


def _settings(bootstrap: str) -> dict:
    return {"bootstrap_servers": bootstrap.split(","), **SETTINGS}


def _topic() -> str:
    return f"test-sink-{uuid.uuid4().hex[:10]}"


def _records(n: int, topic: str, tag: str = "") -> list:
    return [(topic, f"k{i % 7}".encode(), f"{tag}v{i}".encode()) for i in range(n)]


def _by_key(records) -> dict:
    """Values per key in produced order (one key -> one partition -> ordered)."""
    out: dict = {}
    for r in records:
        out.setdefault(r.key, []).append(r.value)
    return out


@pytest.mark.parametrize("cls", [ProducerProcess, Outbox])
def test_everything_sent_is_delivered_in_order_per_key_after_flush(kafka_broker, cls):
    topic = _topic()
    sent = _records(1500, topic)  # several batches of the pipe (512) and a partial one
    out = cls(_settings(kafka_broker))
    try:
        for t, k, v in sent:
            out.send(t, k, v)
        out.flush()
    finally:
        out.close()
    got = read_topic(kafka_broker, topic, min_count=len(sent))
    assert len(got) == len(sent)
    want: dict = {}
    for _, k, v in sent:
        want.setdefault(k, []).append(v)
    assert _by_key(got) == want


def test_a_dead_producer_process_makes_flush_fail_with_a_reason(kafka_broker):
    out = ProducerProcess(_settings(kafka_broker))
    try:
        os.kill(out._proc.pid, signal.SIGKILL)
        out._proc.wait(timeout=10)
        out.send(_topic(), b"k", b"v")
        with pytest.raises(RuntimeError, match="producer process is gone"):
            out.flush()
    finally:
        out.close(timeout=1)


def test_the_child_ignores_sigterm_and_sigint_and_keeps_delivering(kafka_broker):
    # A service manager or a terminal signals the whole process group: the processor
    # handles the signal (final flush, checkpoint), so its producer must outlive it.
    topic = _topic()
    out = ProducerProcess(_settings(kafka_broker))
    try:
        os.kill(out._proc.pid, signal.SIGTERM)
        os.kill(out._proc.pid, signal.SIGINT)
        time.sleep(0.3)
        assert out._proc.poll() is None
        for t, k, v in _records(20, topic):
            out.send(t, k, v)
        out.flush()
    finally:
        out.close()
    assert out._proc.returncode == 0
    assert len(read_topic(kafka_broker, topic, min_count=20)) == 20


def test_when_the_processor_dies_the_child_delivers_what_it_holds_and_exits(kafka_broker):
    # kill -9 of the processor: outputs handed to the child are produced anyway (they are
    # the ones a restart re-emits identically), and the child does not outlive it.
    topic = _topic()
    code = textwrap.dedent(
        f"""
        import os, signal, sys
        from streamcal.stream.kafka.sink import ProducerProcess
        out = ProducerProcess({_settings(kafka_broker)!r})
        for i in range(700):
            out.send({topic!r}, b"k%d" % (i % 7), b"v%d" % i)
        out.ship()
        print(out._proc.pid, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    child = int(proc.stdout.split()[0])
    got = read_topic(kafka_broker, topic, min_count=700, timeout=30)
    assert len(got) == 700
    wait_until(lambda: not _alive(child), 20, "the orphaned producer process to exit", 0.1)


def test_a_bad_setting_is_reported_by_the_constructor(kafka_broker):
    with pytest.raises(NoProducer, match="cannot create a Kafka producer: ") as exc:
        ProducerProcess({**_settings(kafka_broker), "no_such_option": 1})
    assert isinstance(exc.value, RuntimeError) and "('" not in str(exc.value), exc.value


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie has exited; only its parent (gone) could reap it


def test_only_kafka_pythons_slow_task_false_alarm_is_dropped(caplog):
    from streamcal.stream.kafka.kafka_python import quiet_false_alarms

    quiet_false_alarms()
    quiet_false_alarms()  # idempotent: one filter
    log = logging.getLogger("kafka.net.selector")
    assert len(log.filters) == 1
    with caplog.at_level(logging.WARNING, logger="kafka.net.selector"):
        log.warning("Task %r ran for 0.2s (>0.1s threshold). It is blocking the event loop", 1)
        log.warning("connection to node 1 lost")
    assert [r.getMessage() for r in caplog.records] == ["connection to node 1 lost"]
