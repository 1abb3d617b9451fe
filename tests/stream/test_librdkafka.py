"""The librdkafka adapter without a broker: its settings and its translation of
confluent-kafka's errors into the port's. (With brokers: the Kafka tests that take the
``kafka_client`` fixture run with both clients.)"""

from __future__ import annotations

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

from streamcal.stream.config import ProcessorConfig  # noqa: E402
from streamcal.stream.kafka import adapters, clients, librdkafka, port  # noqa: E402


def test_the_processors_settings_all_have_a_librdkafka_name(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("")
    config = ProcessorConfig.build(
        kafka_client="librdkafka", security_protocol="SASL_SSL", sasl_mechanism="PLAIN",
        sasl_username="u", sasl_password="p", ssl_cafile=str(ca), compression_type="zstd",
    )  # fmt: skip
    conf = librdkafka.config_of(
        {**config.kafka_client_settings(), **config.producer_settings(), "linger_ms": 5}
    )
    assert conf["sasl.username"] == "u" and conf["ssl.ca.location"] == str(ca)
    assert conf["compression.type"] == "zstd" and conf["security.protocol"] == "SASL_SSL"
    assert clients.settings(config)[adapters.CLIENT] == "librdkafka"


def test_the_client_setting_is_checked():
    with pytest.raises(ValueError, match="kafka_client must be one of kafka-python, librdkafka"):
        ProcessorConfig.build(kafka_client="rdkafka")
    cfg = ProcessorConfig.from_sources({}, {"STREAMCAL_KAFKA_CLIENT": "librdkafka"})
    assert cfg.kafka_client == "librdkafka"


@pytest.mark.parametrize(
    "code, kind",
    [
        ("_FENCED", port.ProducerFenced),
        ("PRODUCER_FENCED", port.ProducerFenced),
        ("TOPIC_ALREADY_EXISTS", port.TopicExists),
        ("_TIMED_OUT", port.KafkaTimeout),
        ("_TRANSPORT", port.KafkaError),
    ],
)
def test_confluent_kafkas_errors_become_the_ports(code, kind):
    E = confluent_kafka.KafkaError
    exc = confluent_kafka.KafkaException(E(getattr(E, code)))
    out = librdkafka.translate(exc)
    assert type(out) is kind and out.__cause__ is exc and out.code == getattr(E, code)
    other = ValueError("not confluent-kafka's")
    assert librdkafka.translate(other) is other
