"""What a fingerprint check costs (``streamcal.stream.kafka.fingerprints``, issue 37).

One check is one ``records_at`` (the record at one offset of each input partition, read
by a reader of its own) on ``--partitions`` partitions, on a local tansu broker and, when
installed, a noida-db one, with each client; the figure is the wall time of the call
(median and 90th percentile of ``--checks`` checks at random offsets), plus the time to
make the marks a checkpoint keeps (``fingerprints.rows``, a CRC-32 of each last record).
The processor's loop is blocked for that long once per checkpoint (default: 1 s); per
event it is that time divided by the events of one interval.

    python benchmarks/fingerprints.py
    python benchmarks/fingerprints.py --partitions 16 --checks 200
    python benchmarks/fingerprints.py --records 60000   # ~6 MB a partition, as a real log

With small partitions a fetch returns what it asks for; a partition holding more than a
fetch shows what a real log costs: tansu answers 5-6 MB a partition whatever the reader
asks (it asks for 1 KiB), so one check reads that much of each partition. A check that
gets no answer within its timeout (5 s) is counted, as the processor counts it (it
checks again later), not timed.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
sys.path.insert(0, os.path.dirname(_HERE))  # tests._kafka_helpers: the noida-db broker

from streamcal.stream.kafka import clients, fingerprints  # noqa: E402
from streamcal.stream.kafka.port import KafkaTimeout, Record, TopicPartition  # noqa: E402


def _fill(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    value = b'{"id": "e0000000", "features": {"x1": 0.123456, "x2": -1.234567}}'
    now = int(time.time() * 1000)
    for p in range(partitions):
        for i in range(per_partition):
            producer.send(topic, key=f"e{i}".encode(), value=value, partition=p,
                          timestamp_ms=now + i)  # fmt: skip
    producer.flush(30)
    producer.close()


def _checks(bootstrap: str, client: str, topic: str, partitions: int, n: int, size: int):
    settings = {"bootstrap_servers": bootstrap, "kafka_client": client}
    consumer = clients.consumer(settings, group_id="bench-fingerprints", auto_offset_reset="none")
    rng = random.Random(0)
    times, timeouts = [], 0
    try:
        for i in range(n + 1):
            offsets = {TopicPartition(topic, p): rng.randrange(size) for p in range(partitions)}
            t0 = time.perf_counter()
            try:
                got = consumer.records_at(offsets)
            except KafkaTimeout:
                timeouts += 1
                continue
            if i:  # the first builds the reader
                times.append(time.perf_counter() - t0)
            assert all(r is not None and r.offset == offsets[tp] for tp, r in got.items())
    finally:
        consumer.close()
    times.sort()
    return statistics.median(times), times[int(0.9 * len(times))], timeouts


def _rows_cost(partitions: int) -> float:
    value = b"x" * 200
    last = {("events", p): Record("events", p, 10, 1, b"e1", value) for p in range(partitions)}
    n = 2000
    t0 = time.perf_counter()
    for _ in range(n):
        fingerprints.rows(last)
    return (time.perf_counter() - t0) / n


def _brokers(tmp: Path):
    from streamcal.demo.broker import LocalBroker

    with LocalBroker() as tansu:
        yield "tansu", tansu.bootstrap_servers
    from tests._kafka_helpers import NoidaBroker, find_noida

    binary = find_noida()
    if binary is not None:
        noida = NoidaBroker(binary, tmp / "noida").start()
        try:
            yield "noida-db", noida.bootstrap_servers
        finally:
            noida.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--checks", type=int, default=100)
    ap.add_argument("--records", type=int, default=500, help="records per partition")
    args = ap.parse_args()
    print(f"load {os.getloadavg()[0]:.1f}; {args.records} records a partition")
    print(f"marks of {args.partitions} partitions (rows, at each checkpoint): "
          f"{_rows_cost(args.partitions) * 1e6:.1f} us")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for broker, bootstrap in _brokers(Path(tmp)):
            topic = f"bench-fingerprints-{os.getpid()}"
            _fill(bootstrap, topic, args.partitions, args.records)
            for client in ("kafka-python", "librdkafka"):
                med, p90, late = _checks(bootstrap, client, topic, args.partitions,
                                         args.checks, args.records)  # fmt: skip
                print(f"{broker:9s} {client:13s} one check of {args.partitions} partitions: "
                      f"median {med * 1e3:.1f} ms, p90 {p90 * 1e3:.1f} ms, "
                      f"{late} timed out")  # fmt: skip


if __name__ == "__main__":
    main()
