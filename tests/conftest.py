"""Shared test fixtures.

Kafka fixtures (tests using them get the ``kafka`` marker automatically, so
``pytest -m "not kafka"`` skips them; they are skipped when tansu is not installed):

* ``kafka_broker`` (session): one in-memory tansu broker; yields ``"127.0.0.1:PORT"``.
* ``unique_topics`` (function): fresh topic names (and a consumer group id) per test, so
  tests sharing the session broker never see each other's records.
* ``tls_broker`` (session): a TLS-only broker with a self-signed certificate for
  127.0.0.1/localhost; yields the :class:`~streamcal.demo.broker.LocalBroker`
  (``.bootstrap_servers``, ``.cert`` = the CA file to trust, ``.client_config()``).
* ``noida_broker`` (function): a noida-db broker of the test's own, whose log survives a
  restart; yields a :class:`tests._kafka_helpers.NoidaBroker` (``.bootstrap_servers``,
  ``.restart()``); skipped when noida-db (the dev extra) is not installed.

Other fixtures:

* ``streamcal_run`` (function): a :class:`tests._helpers.StreamcalRun`, whose ``popen`` and
  ``run`` start ``streamcal run`` as a subprocess with the tests' checkpoint key; processes
  still running at the end of the test are killed.

tansu joins consumer groups in about ``session_timeout_ms / 2``: use 2000-6000 ms in
tests, and ``auto_offset_reset="earliest"`` (see streamcal/demo/broker.py).
"""

from __future__ import annotations

import uuid

import pytest

KAFKA_FIXTURES = {"kafka_broker", "tls_broker", "noida_broker"}


def pytest_configure(config):
    """The inner loop, ``-m "not slow ..."``, runs hypothesis tests with fewer examples (the
    "fast" profile, tests/_helpers.py) unless ``--hypothesis-profile`` chooses one."""
    from hypothesis import settings

    import tests._helpers  # noqa: F401 - registers the profile

    markexpr = config.getoption("markexpr", "") or ""
    if "not slow" in markexpr and not config.getoption("hypothesis_profile", None):
        settings.load_profile("fast")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if KAFKA_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.kafka)


def _tansu_or_skip() -> None:
    from streamcal.demo.broker import BrokerError, find_tansu

    try:
        find_tansu()
    except BrokerError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def kafka_broker():
    """Bootstrap string of a session-wide local tansu broker."""
    from streamcal.demo.broker import LocalBroker

    _tansu_or_skip()
    with LocalBroker() as broker:
        yield broker.bootstrap_servers


@pytest.fixture(params=["kafka-python", "librdkafka"])
def kafka_client(request):
    """Each Kafka client of the processor (``--kafka-client``), for the tests of the Kafka
    edge: the promises hold with both adapters."""
    if request.param == "librdkafka":
        pytest.importorskip("confluent_kafka")
    return request.param


@pytest.fixture
def unique_topics():
    """Fresh names: events, labels, predictions, dead_letters, metrics, and group."""
    tag = uuid.uuid4().hex[:10]
    names = {
        kind: f"test-{tag}.{kind.replace('_', '-')}"
        for kind in ("events", "labels", "predictions", "dead_letters", "metrics")
    }
    names["group"] = f"test-{tag}"
    return names


@pytest.fixture
def streamcal_run():
    """Runs ``streamcal run`` as a subprocess; kills what is still running afterwards."""
    from tests._helpers import StreamcalRun

    runner = StreamcalRun()
    yield runner
    runner.close()


@pytest.fixture(scope="session")
def tls_broker(tmp_path_factory):
    """A TLS-only local broker (self-signed certificate); yields the LocalBroker."""
    from streamcal.demo.broker import LocalBroker
    from tests._helpers import make_self_signed_cert

    _tansu_or_skip()
    cert, key = make_self_signed_cert(tmp_path_factory.mktemp("tls"))
    with LocalBroker(cert=cert, key=key) as broker:
        yield broker


@pytest.fixture
def noida_broker(tmp_path):
    """A noida-db broker on a free loopback port, its data in the test's directory."""
    from tests._kafka_helpers import NoidaBroker, find_noida

    binary = find_noida()
    if binary is None:
        pytest.skip('noida-db is not installed; install it with: pip install -e ".[dev]"')
    broker = NoidaBroker(binary, tmp_path / "noida-data").start()
    yield broker
    broker.stop()
