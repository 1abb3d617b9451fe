"""Which adapter of the port a client is built with: kafka-python (the default) or
librdkafka (``--kafka-client``). A settings dict names it under ``CLIENT`` (the
processor's are made by ``clients.settings``); the adapter takes the rest.

>>> adapter("kafka-python").__name__, split({"client_id": "x"})[1]
('streamcal.stream.kafka.kafka_python', {'client_id': 'x'})
>>> split({CLIENT: "librdkafka", "client_id": "x"})[0].__name__
'streamcal.stream.kafka.librdkafka'
"""

from __future__ import annotations

import importlib
import importlib.util

__all__ = ["CLIENT", "CLIENTS", "adapter", "split"]

CLIENT = "kafka_client"
CLIENTS = {"kafka-python": "kafka_python", "librdkafka": "librdkafka"}  # name -> module


def adapter(name: str):
    """The adapter module of client ``name`` (one of ``CLIENTS``)."""
    try:
        module = CLIENTS[name]
    except KeyError:
        choices = ", ".join(CLIENTS)
        raise ValueError(f"kafka_client must be one of {choices}; got {name!r}") from None
    if module == "librdkafka" and importlib.util.find_spec("confluent_kafka") is None:
        raise ValueError(
            "kafka_client librdkafka needs confluent-kafka: "
            "pip install 'streamcal-va[librdkafka]'"
        )
    return importlib.import_module(f"streamcal.stream.kafka.{module}")


def split(settings: dict) -> tuple:
    """``(adapter module, settings without CLIENT)``."""
    rest = dict(settings)
    return adapter(rest.pop(CLIENT, "kafka-python")), rest
