"""SASL: `streamcal run` over SASL/SCRAM-SHA-512 with each Kafka client, against tansu
behind a SCRAM front (``tests/_sasl_front.py``: tansu's own SCRAM users cannot be made on
its memory storage once ``--authentication`` is on). Every connection of the processor,
its producer and its group authenticates; a wrong password is refused. (The set-ups
that cannot work are told against tansu with ``--authentication`` in
``test_errors_say_where.py``.)"""

from __future__ import annotations

import subprocess

import orjson
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from streamcal.cli import main
from streamcal.demo.replay import demo_records, replay, replay_counts
from streamcal.stream.kafka.preflight import SetupError, check_broker
from tests._helpers import wait_until
from tests._kafka_helpers import broker_up, own_broker_port
from tests._sasl_front import MECHANISM, SaslFront

pytestmark = pytest.mark.kafka

USER, PASSWORD = "alice", "secret"
SASL = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": MECHANISM,
        "sasl_plain_username": USER}  # fmt: skip


@pytest.fixture(scope="module")
def sasl_broker():
    """(bootstrap of the SCRAM front, the front): tansu behind it advertises the front."""
    from streamcal.demo.broker import find_tansu

    port = own_broker_port()
    front = SaslFront(("127.0.0.1", port), USER, PASSWORD)
    url, advertised = f"tcp://127.0.0.1:{port}", f"tcp://127.0.0.1:{front.port}"
    proc = subprocess.Popen(
        [find_tansu(), "broker", "--listener-url", url, "--advertised-listener-url", advertised,
         "--storage-engine", "memory://tansu/"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_until(lambda: broker_up(f"127.0.0.1:{port}"), 30, "tansu behind the SCRAM front")
        yield f"127.0.0.1:{front.port}", front
    finally:
        proc.kill()  # its memory storage: nothing to keep
        proc.wait(10)
        front.close()


def test_streamcal_run_over_sasl_scram(sasl_broker, unique_topics, tmp_path, monkeypatch,
                                       kafka_client):  # fmt: skip
    bootstrap, front = sasl_broker
    with pytest.raises(SetupError, match="check --sasl-username and --sasl-password"):
        check_broker({"bootstrap_servers": [bootstrap], **SASL, "sasl_plain_password": "oops"})
    records = demo_records("drift", 60, seed=9, label_delay=3, missing_labels=0.1)
    counts = replay_counts(records)
    producer = KafkaProducer(bootstrap_servers=bootstrap, **SASL, sasl_plain_password=PASSWORD)
    replay(producer, records, unique_topics)
    producer.close()
    before = front.accepted
    metrics = tmp_path / "metrics.jsonl"
    monkeypatch.setenv("STREAMCAL_SASL_PASSWORD", PASSWORD)
    argv = ["run", "--bootstrap-servers", bootstrap, "--security-protocol", "SASL_PLAINTEXT",
            "--sasl-mechanism", MECHANISM, "--sasl-username", USER,
            "--events-topic", unique_topics["events"], "--labels-topic", unique_topics["labels"],
            "--predictions-topic", unique_topics["predictions"],
            "--dead-letter-topic", unique_topics["dead_letters"],
            "--group-id", unique_topics["group"], "--session-timeout-ms", "2000",
            "--metrics-file", str(metrics), "--max-idle-s", "1",
            "--kafka-client", kafka_client]  # fmt: skip
    assert main(argv) == 0
    final = orjson.loads(metrics.read_text().splitlines()[-1])
    assert (final["events"], final["labels"], final["dead_letters"]) == (60, counts["label"], 0)
    assert front.accepted > before  # the processor's connections authenticated
    assert len(predictions(bootstrap, unique_topics["predictions"], 60)) == 60


def predictions(bootstrap: str, topic: str, n: int) -> set:
    """The event ids of ``topic``'s records, read over SASL until ``n`` are there."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, **SASL, sasl_plain_password=PASSWORD,
                             auto_offset_reset="earliest", enable_auto_commit=False)  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)])
        ids: set = set()
        wait_until(lambda: ids.update(r.key for rs in consumer.poll(200).values() for r in rs)
                   or len(ids) >= n, 30, f"{n} predictions over SASL")  # fmt: skip
        return ids
    finally:
        consumer.close()
