"""The kafka-python adapter's reach-ins into kafka-python's private parts, each against
kafka-python itself (no broker): every test here fails when kafka-python changes under
the adapter, so that the pin in pyproject.toml is raised only with the adapter mended.
Also its translation of kafka-python's errors into the port's."""

from __future__ import annotations

import inspect

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka import errors as kerrors

from streamcal.stream.kafka import kafka_python, port

NOWHERE = {"bootstrap_servers": "127.0.0.1:9", "api_version": (2, 5)}  # never connected


@pytest.fixture
def consumer():
    c = KafkaConsumer(**NOWHERE)
    yield c
    c.close()


def test_the_last_stable_offset_is_taken_from_kafka_pythons_own_fetch_parse(consumer):
    from kafka.consumer.fetcher import CompletedFetch, Fetcher
    from kafka.protocol.consumer.fetch import FetchResponse

    assert list(inspect.signature(Fetcher._parse_fetched_data).parameters) == [
        "self", "completed_fetch"]  # fmt: skip
    stable = kafka_python.last_stable_offsets(consumer)
    assert stable == {}  # not None: the reach-in found its place
    tp = TopicPartition("ev", 0)
    data = FetchResponse.FetchableTopicResponse.PartitionData(
        partition_index=0, error_code=0, high_watermark=12, last_stable_offset=7
    )
    # kafka-python's parse runs (and ignores a partition not assigned) after ours
    consumer._fetcher._parse_fetched_data(CompletedFetch(tp, 0, 11, data, None))
    assert stable == {tp: 7}


def test_a_transactional_producer_can_be_kept_from_bumping_its_epoch():
    producer = KafkaProducer(**NOWHERE, transactional_id="t", enable_idempotence=True)
    try:
        manager = producer._transaction_manager
        assert callable(manager._supports_epoch_bump)
        kafka_python.never_bump(producer)
        assert manager._supports_epoch_bump() is False
        # ... and kafka-python still asks it where it decides to bump
        from kafka.producer import transaction_manager

        assert "self._supports_epoch_bump()" in inspect.getsource(transaction_manager)
    finally:
        producer.close(timeout=0)


def _batch(crc_off: bool = False, compression: int = 0) -> bytes:
    from kafka.record import default_records
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, compression, False, -1, -1, -1, 1 << 20)
    for i in range(3):
        builder.append(i, 1000 + i, None, b"v%d" % i + b"x" * 500, [])  # compressible
    good = default_records.calc_crc32c
    if crc_off:
        default_records.calc_crc32c = lambda data: (good(data) + 1) % 2**32
    try:
        return bytes(builder.build())
    finally:
        default_records.calc_crc32c = good


def _read(data: bytes, base: int = 40):
    """Read a batch (written at offset ``base``) the way kafka-python's fetcher does."""
    import struct

    from kafka.consumer.fetcher import Fetcher
    from kafka.record import MemoryRecords

    data = struct.pack(">q", base) + data[8:]  # the broker's offset for the batch
    part = Fetcher.PartitionRecords(base, TopicPartition("ev", 2), MemoryRecords(data))
    return part.take(10)


def test_an_unreadable_batch_is_located_from_kafka_pythons_fetcher_frame():
    assert [r.offset for r in _read(_batch())] == [40, 41, 42]  # a good batch reads
    with pytest.raises(kerrors.CorruptRecordError) as raised:
        _read(_batch(crc_off=True))
    assert kafka_python.locate(raised.value) == (TopicPartition("ev", 2), 40, 43, 1000)
    assert "corrupt" in kafka_python.fix(raised.value)


def test_a_missing_codec_is_told_from_kafka_pythons_error_text(monkeypatch):
    import kafka.codec

    data = _batch(compression=3)  # lz4
    monkeypatch.setattr(kafka.codec, "has_lz4", lambda: False)
    with pytest.raises(kerrors.UnsupportedCodecError) as raised:
        _read(data)
    assert kafka_python.locate(raised.value)[1:3] == (40, 43)
    assert "pip install lz4" in kafka_python.fix(raised.value)


def test_a_poll_raises_the_ports_errors():
    class Raw:
        position = staticmethod(lambda tp: 40)

        def __init__(self, exc):
            self.exc = exc

        def poll(self, timeout_ms=0, max_records=None):
            raise self.exc

    tp = TopicPartition("ev", 0)
    cases = [
        (kerrors.OffsetOutOfRangeError({tp: 9}), port.OffsetOutOfRange, "positions", {tp: 9}),
        (kerrors.NoOffsetForPartitionError(), port.NoPosition, None, None),
        (kerrors.KafkaTimeoutError("x"), port.KafkaTimeout, None, None),
        (kerrors.KafkaConnectionError("x"), port.KafkaError, None, None),
    ]
    for exc, kind, field, value in cases:
        with pytest.raises(kind) as raised:
            kafka_python.Consumer(Raw(exc)).poll()
        assert raised.value.__cause__ is exc
        if field:
            assert getattr(raised.value, field) == value
    with pytest.raises(port.KafkaError) as raised:  # not from reading a batch
        kafka_python.Consumer(Raw(kerrors.CorruptRecordError("x"))).poll()
    assert not isinstance(raised.value, port.Unreadable)
    with pytest.raises(ZeroDivisionError):  # not kafka-python's: as it is
        kafka_python.Consumer(Raw(ZeroDivisionError())).poll()


def test_records_parked_for_a_paused_partition_come_back_once_it_is_resumed(consumer):
    """kafka-python parks the parsed records of a partition paused while they were being
    returned; with a drained partition's records left in line, it never takes them back
    (nor fetches that partition again) unless ``unpark`` clears the drained ones."""
    import struct

    from kafka.consumer.fetcher import Fetcher
    from kafka.record import MemoryRecords

    a, b = TopicPartition("ev", 0), TopicPartition("ev", 1)
    consumer.assign([a, b])
    consumer.seek(a, 40)
    consumer.seek(b, 0)
    fetcher = consumer._fetcher
    data = struct.pack(">q", 40) + _batch()[8:]
    fetcher._paused_partition_records[a] = Fetcher.PartitionRecords(40, a, MemoryRecords(data))
    drained = Fetcher.PartitionRecords(0, b, MemoryRecords(b""))
    drained.drain()
    fetcher._next_partition_records = drained
    consumer.pause(a)
    consumer.resume(a)
    assert fetcher.fetched_records(10) == ({}, False)  # parked for good
    assert a not in fetcher._fetchable_partitions()  # and not fetched again either
    kafka_python.unpark(consumer)
    got, _ = fetcher.fetched_records(10)
    assert [r.offset for r in got[a]] == [40, 41, 42]


def test_a_join_that_finished_between_polls_is_shown_to_kafka_python_as_running():
    """kafka-python's poll sends a new JoinGroup when its ``_join_task`` is done; with the
    poll's join wrapped by ``claim_finished_joins``, a task that succeeded reads as still
    running, and awaiting it gives its result; one that failed is left as it is. (The
    live behaviour: tests/stream/test_group_join.py.)"""
    import asyncio
    import types

    from kafka.coordinator.base import BaseCoordinator
    from kafka.future import Future

    assert "self._join_task.is_done" in inspect.getsource(BaseCoordinator.join_group_async)
    grouped = KafkaConsumer(**NOWHERE, group_id="g")
    try:
        assert grouped._coordinator._join_task is None  # the place is there
        kafka_python.claim_finished_joins(grouped)
        assert grouped._coordinator.join_group_async.__qualname__.startswith("claim_finished")
    finally:
        grouped.close()

    seen: list = []

    async def join_group_async(timeout_ms=None):  # what kafka-python's checks and awaits
        task = coordinator._join_task
        seen.append(task.is_done)
        task.add_callback(seen.append)

    coordinator = types.SimpleNamespace(_join_task=None, join_group_async=join_group_async)
    kafka_python.claim_finished_joins(types.SimpleNamespace(_coordinator=coordinator))
    coordinator._join_task = Future().success(b"assignment")
    asyncio.run(coordinator.join_group_async(timeout_ms=0))
    assert seen == [False, b"assignment"]
    seen.clear()
    coordinator._join_task = Future().failure(kerrors.RebalanceInProgressError())
    asyncio.run(coordinator.join_group_async(timeout_ms=0))
    assert seen == [True]
