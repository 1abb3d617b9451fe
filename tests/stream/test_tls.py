"""TLS: clients reach the local broker over SSL only, and the processor passes SSL through."""

from __future__ import annotations

import signal
import socket
import ssl
import struct

import orjson
import pytest
from kafka import KafkaConsumer, KafkaProducer

from streamcal.cli import main
from streamcal.demo.replay import demo_records, replay, replay_counts
from tests._helpers import make_self_signed_cert, wait_until

# ApiVersions v0 request, correlation id 7, client id "t": any Kafka broker answers it.
_BODY = struct.pack(">hhih", 18, 0, 7, 1) + b"t"
API_VERSIONS = struct.pack(">i", len(_BODY)) + _BODY


def _api_versions_correlation_id(sock) -> int | None:
    """Send ApiVersions; the correlation id of the answer, or None if there is none."""
    sock.settimeout(5)
    sock.sendall(API_VERSIONS)
    try:
        head = sock.recv(8)
    except (OSError, ssl.SSLError):
        return None
    if len(head) < 8:
        return None
    return struct.unpack(">ii", head)[1]


def _host_port(bootstrap):
    host, port = bootstrap.rsplit(":", 1)
    return host, int(port)


def test_plaintext_gets_a_kafka_answer_only_from_the_plaintext_broker(kafka_broker, tls_broker):
    # The same bytes that a plaintext broker answers ...
    with socket.create_connection(_host_port(kafka_broker)) as s:
        assert _api_versions_correlation_id(s) == 7
    # ... get no Kafka answer from the TLS broker,
    with socket.create_connection(_host_port(tls_broker.bootstrap_servers)) as s:
        assert _api_versions_correlation_id(s) is None
    # which answers them inside a verified TLS session (certificate for 127.0.0.1).
    context = ssl.create_default_context(cafile=tls_broker.cert)
    host, port = _host_port(tls_broker.bootstrap_servers)
    with socket.create_connection((host, port)) as raw:
        with context.wrap_socket(raw, server_hostname=host) as s:
            assert _api_versions_correlation_id(s) == 7


def test_an_untrusted_certificate_is_refused(tls_broker, tmp_path):
    other_ca, _ = make_self_signed_cert(tmp_path)
    context = ssl.create_default_context(cafile=other_ca)
    host, port = _host_port(tls_broker.bootstrap_servers)
    with socket.create_connection((host, port)) as raw:
        with pytest.raises(ssl.SSLCertVerificationError):
            context.wrap_socket(raw, server_hostname=host)


def test_produce_and_consume_over_ssl(tls_broker, unique_topics):
    config = {
        "bootstrap_servers": tls_broker.bootstrap_servers,
        "security_protocol": "SSL",
        "ssl_cafile": tls_broker.cert,
    }
    assert tls_broker.client_config() == config
    topic = unique_topics["events"]
    producer = KafkaProducer(**config)
    sent = [f"m{i}".encode() for i in range(10)]
    for v in sent:
        producer.send(topic, v)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", **config)
    got = []

    def arrived() -> bool:
        for batch in consumer.poll(200).values():
            got.extend(r.value for r in batch)
        return len(got) >= len(sent)

    try:
        wait_until(arrived, 15, f"{len(sent)} records over TLS", interval=0)
    finally:
        consumer.close()
    assert sorted(got) == sorted(sent)


def test_streamcal_run_over_ssl(tls_broker, unique_topics, tmp_path, kafka_client):
    """`streamcal run --security-protocol SSL --ssl-cafile ...` processes events over TLS."""
    records = demo_records("drift", 60, seed=9, label_delay=3, missing_labels=0.1)
    counts = replay_counts(records)
    producer = KafkaProducer(**tls_broker.client_config())
    replay(producer, records, unique_topics)
    producer.close()
    metrics = tmp_path / "metrics.jsonl"
    argv = ["run", "--bootstrap-servers", tls_broker.bootstrap_servers,
            "--security-protocol", "SSL", "--ssl-cafile", tls_broker.cert,
            "--events-topic", unique_topics["events"], "--labels-topic", unique_topics["labels"],
            "--predictions-topic", unique_topics["predictions"],
            "--dead-letter-topic", unique_topics["dead_letters"],
            "--group-id", unique_topics["group"],
            "--metrics-file", str(metrics), "--max-idle-s", "1",
            "--kafka-client", kafka_client]  # fmt: skip
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    assert main(argv) == 0
    # run in-process: the caller's signal handlers are back afterwards
    assert {sig: signal.getsignal(sig) for sig in handlers} == handlers
    final = orjson.loads(metrics.read_text().splitlines()[-1])
    assert final["events"] == 60
    assert final["labels"] == counts["label"]
    assert final["dead_letters"] == 0


def test_demo_over_ssl(tls_broker, unique_topics, tmp_path, capsys):
    argv = ["demo", "--bootstrap-servers", tls_broker.bootstrap_servers,
            "--security-protocol", "SSL", "--ssl-cafile", tls_broker.cert,
            "--topic-prefix", unique_topics["group"], "--events", "50", "--quiet",
            "--no-report", "--max-idle-s", "1", "--out", str(tmp_path)]  # fmt: skip
    assert main(argv) == 0
    final = orjson.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[-1])
    assert final["events"] == 50
    assert final["labels"] == replay_counts(demo_records("phishing", 50))["label"]
