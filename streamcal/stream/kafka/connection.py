"""The processor's connection to Kafka: its brokers, its consumer group and its security.

The first settings of ``streamcal run``'s "Kafka connection" group, declared as every
setting is (``streamcal.stream.settings.declaration``): ``ProcessorConfig`` extends
``KafkaConnection``, so they come first, in this order, in its fields, its help and its
checks; the group's throughput settings follow in ``ProcessorConfig``.
``kafka_client_settings`` makes the options every client is built with from them.

>>> KafkaConnection(bootstrap_servers="a:9092,b:9092", sasl_username="me").kafka_client_settings()
{'bootstrap_servers': ['a:9092', 'b:9092'], 'client_id': 'streamcal',
 'security_protocol': 'PLAINTEXT', 'sasl_plain_username': 'me'}
"""

from __future__ import annotations

from dataclasses import dataclass

from streamcal.stream.settings.constraints import AtLeast, File, OneOf
from streamcal.stream.settings.declaration import setting

__all__ = ["KafkaConnection", "SCOPES", "SECURITY_PROTOCOLS"]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SCOPES = ("global", "partition")


# repr=False: ProcessorConfig's own repr hides the secrets.
@dataclass(frozen=True, repr=False)
class KafkaConnection:
    """The Kafka connection's settings (see ``streamcal run --help``)."""

    bootstrap_servers: str = setting(
        "127.0.0.1:9092", "Kafka bootstrap servers, host:port[,...]", "kafka"
    )
    group_id: str = setting(
        "streamcal",
        "consumer group: with --scope partition the instances sharing the units; with "
        "--scope global the one instance (a second is refused); offsets are committed to it "
        "for lag monitoring (each unit resumes from its checkpoint)",
        "kafka",
    )
    client_id: str = setting("streamcal", "Kafka client id", "kafka")
    scope: str = setting(
        "global",
        "unit of calibration: global (one calibrator over all partitions, one instance per "
        "group) or partition (one per partition number of the co-partitioned events and "
        "labels topics; instances of a group share the partitions)",
        "kafka",
        OneOf(SCOPES),
    )
    instance_id: str | None = setting(
        None, "this instance's name in metric lines (default: host:pid)", "kafka"
    )
    session_timeout_ms: int = setting(
        6000,
        "consumer-group session timeout: how soon a dead instance is noticed",
        "kafka",
        AtLeast(1),
    )
    global_lock: bool = setting(
        True,
        "with --scope global, join the group first and refuse to run if another instance "
        "is in it (no two global calibrators)",
        "kafka",
    )
    security_protocol: str = setting(
        "PLAINTEXT", "one of " + ", ".join(SECURITY_PROTOCOLS), "kafka", OneOf(SECURITY_PROTOCOLS)
    )
    sasl_mechanism: str | None = setting(
        None, "SASL mechanism, e.g. PLAIN or SCRAM-SHA-256", "kafka"
    )
    sasl_username: str | None = setting(None, "SASL user name", "kafka")
    sasl_password: str | None = setting(
        None,
        "SASL password (prefer the environment variable)",
        "kafka",
        secret=True,
    )
    ssl_cafile: str | None = setting(None, "CA certificate file (PEM) for TLS", "kafka", File())
    ssl_certfile: str | None = setting(
        None, "client certificate file (PEM) for TLS", "kafka", File()
    )
    ssl_keyfile: str | None = setting(
        None, "client private key file (PEM) for TLS", "kafka", File()
    )
    ssl_check_hostname: bool = setting(
        True, "check the broker's host name against its certificate", "kafka"
    )

    def kafka_client_settings(self) -> dict:
        """Settings shared by the consumer and the producer (kafka-python names)."""
        out = {
            "bootstrap_servers": self.bootstrap_servers.split(","),
            "client_id": self.client_id,
            "security_protocol": self.security_protocol,
        }
        if self.sasl_mechanism is not None:
            out["sasl_mechanism"] = self.sasl_mechanism
        if self.sasl_username is not None:
            out["sasl_plain_username"] = self.sasl_username
        if self.sasl_password is not None:
            out["sasl_plain_password"] = self.sasl_password
        for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if "SSL" in self.security_protocol:
            out["ssl_check_hostname"] = self.ssl_check_hostname
        return out
