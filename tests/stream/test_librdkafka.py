"""The librdkafka adapter without a broker: its settings and its translation of
confluent-kafka's errors into the port's. (With brokers: the Kafka tests that take the
``kafka_client`` fixture run with both clients.)"""

from __future__ import annotations

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

from streamcal.stream.config import ProcessorConfig  # noqa: E402
from streamcal.stream.kafka import adapters, clients, librdkafka, port  # noqa: E402
from tests._helpers import wait_until  # noqa: E402


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


class _Closing:
    def __init__(self, log: list, name: str, stuck=None, error=None):
        self.log, self.name, self.stuck, self.error = log, name, stuck, error

    def close(self) -> None:
        self.log.append(self.name)
        if self.stuck is not None:
            self.stuck.wait()
        if self.error is not None:
            raise self.error


def test_a_close_that_never_ends_is_left_behind_with_a_warning(caplog):
    """librdkafka's close can wait forever (a broker handle that never terminates): the
    processor must still exit, so the wait is bounded."""
    import threading
    import time

    closed, stuck = [], threading.Event()
    start = time.monotonic()
    with caplog.at_level("WARNING", logger=librdkafka.__name__):
        librdkafka.bounded_close([_Closing(closed, "reader", stuck), _Closing(closed, "raw")],
                                 0.2)  # fmt: skip
    assert 0.2 <= time.monotonic() - start < 5
    assert closed == ["reader"] and "did not end in 0 s" in caplog.text
    stuck.set()  # the thread left behind goes on and closes the rest
    wait_until(lambda: closed == ["reader", "raw"], 5, "the rest closed")


def test_a_close_that_ends_closes_each_in_turn_and_raises_its_error_as_the_ports():
    closed = []
    librdkafka.bounded_close([_Closing(closed, "reader"), _Closing(closed, "raw")], 5)
    assert closed == ["reader", "raw"]
    E = confluent_kafka.KafkaError
    error = confluent_kafka.KafkaException(E(E._TRANSPORT))
    with pytest.raises(port.KafkaError) as got:
        librdkafka.bounded_close([_Closing(closed, "raw", error=error)], 5)
    assert got.value.__cause__ is error
