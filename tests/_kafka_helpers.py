"""Helpers for the stream processor's Kafka tests: produce test streams, read topics back."""

from __future__ import annotations

import importlib.util
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import orjson

from tests._helpers import CHECKPOINT_KEY, wait_until

__all__ = [
    "CHECKPOINT_KEY",
    "NoidaBroker",
    "T0",
    "TIMING_KEYS",
    "base_settings",
    "broker_up",
    "create_topics",
    "find_noida",
    "json_values",
    "kill_9_twice_then_finish",
    "metric_lines",
    "own_broker_port",
    "produce",
    "produce_stream",
    "read_topic",
    "same_predictions",
    "scale_out_topics",
    "start_tansu",
    "suffixed",
    "synthetic_stream",
    "untimed",
    "wait_for_lines",
]

T0 = 1_700_000_000_000  # ms: record timestamps of the synthetic streams start here


def produce(bootstrap: str, records, partition: int | None = None) -> None:
    """Produce ``(topic, key, value, timestamp_ms)`` tuples (value: bytes or a JSON object),
    to ``partition`` if given (else the producer's choice by key)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        for topic, key, value, ts in records:
            if not isinstance(value, bytes | None):
                value = orjson.dumps(value)
            producer.send(
                topic, key=key.encode() if isinstance(key, str) else key, value=value,
                timestamp_ms=ts, partition=partition,
            )  # fmt: skip
        producer.flush(timeout=30)
    finally:
        producer.close()


def read_topic(bootstrap: str, topic: str, timeout: float = 20.0, min_count: int = 0) -> list:
    """All records of ``topic`` (ConsumerRecords, in (partition, offset) order), read until
    every partition is at its highwater mark and at least ``min_count`` were seen."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    try:
        deadline = time.monotonic() + timeout

        def partitions():
            consumer.topics()  # a metadata request: partitions_for_topic reads the cache
            return consumer.partitions_for_topic(topic)

        wait_until(partitions, timeout, f"the partitions of {topic}")
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        out = []  # what is there at the deadline, if not min_count: callers compare it
        while time.monotonic() < deadline:
            for recs in consumer.poll(timeout_ms=200).values():
                out.extend(recs)
            done = all(
                consumer.highwater(tp) is not None
                and consumer.position(tp) >= consumer.highwater(tp)
                for tp in tps
            )
            if done and len(out) >= min_count:
                break
        out.sort(key=lambda r: (r.partition, r.offset))
        return out
    finally:
        consumer.close()


def json_values(records) -> list:
    return [orjson.loads(r.value) for r in records]


def synthetic_stream(
    n: int,
    seed: int = 0,
    label_delay_ms: int = 1,
    shuffle_labels: int = 0,
    missing: frozenset = frozenset(),
):
    """Events e0..e{n-1} 10 ms apart with two features; label i at event time + delay.

    ``shuffle_labels``: labels get an extra random delay of up to that many ms (out of
    order and late). ``missing``: indices whose label is never sent.
    Returns (events, labels) as lists of (key, value, ts)."""
    rng = random.Random(seed)
    events, labels = [], []
    for i in range(n):
        x1, x2 = rng.gauss(0, 1), rng.gauss(0, 1)
        y = int(rng.random() < 1 / (1 + 2.718281828 ** -(1.5 * x1 - x2)))
        ts = T0 + 10 * i
        eid = f"e{i}"
        events.append((eid, {"id": eid, "features": {"x1": x1, "x2": x2}}, ts))
        if i not in missing:
            delay = label_delay_ms + (rng.randrange(shuffle_labels) if shuffle_labels else 0)
            labels.append((eid, {"id": eid, "label": y}, ts + delay))
    return events, labels


def produce_stream(bootstrap: str, topics: dict, events, labels) -> None:
    """Produce in timestamp order, as a live source would (late labels are written late)."""
    records = [(topics["events"], k, v, ts) for k, v, ts in events]
    records += [(topics["labels"], k, v, ts) for k, v, ts in labels]
    produce(bootstrap, sorted(records, key=lambda r: r[3]))


def create_topics(bootstrap: str, names, partitions: int) -> None:
    """Create topics with ``partitions`` (tansu auto-creates 4 on any metadata request)."""
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(n, partitions, 1) for n in names])
    finally:
        admin.close()


def own_broker_port() -> int:
    """A free loopback port for a tansu broker of the test's own (``start_tansu``); skips
    the test where tansu is not installed."""
    import pytest

    from streamcal.demo.broker import BrokerError, find_tansu, free_port

    try:
        find_tansu()
    except BrokerError as exc:
        pytest.skip(str(exc))
    return free_port()


def start_tansu(port: int) -> subprocess.Popen:
    """A tansu broker of its own on ``port`` (memory storage), for a test that restarts it."""
    from streamcal.demo.broker import find_tansu

    url = f"tcp://127.0.0.1:{port}"
    return subprocess.Popen(
        [find_tansu(), "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def broker_up(bootstrap: str) -> bool:
    """Whether a broker answers on ``bootstrap`` (for ``wait_until`` after a (re)start)."""
    from kafka.admin import KafkaAdminClient

    try:
        KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=2000).close()
    except Exception:  # noqa: BLE001 - not up yet
        return False
    return True


def find_noida() -> str | None:
    """The noida-db binary of the noida-db package (the dev extra), or None."""
    spec = importlib.util.find_spec("noida_db")
    for location in (spec.submodule_search_locations or []) if spec else []:
        binary = Path(location) / "noida-db"
        if binary.is_file():
            if not os.access(binary, os.X_OK):
                binary.chmod(0o755)  # as the package's own launcher does before each run
            return str(binary)
    return None


class NoidaBroker:
    """A noida-db broker, Kafka only, on a free loopback port, its data in ``data_dir``: a
    broker whose log survives a restart (tansu's memory storage does not). It speaks
    Kafka's protocol with Kafka's answers (OFFSET_OUT_OF_RANGE for a fetch outside a log).
    ``stop`` is graceful (SIGINT, its Ctrl-C); a group member killed with -9 is never
    expired there, so tests use ``--scope global`` without the global lock. It deletes
    records stamped longer ago than its retention (7 days) within seconds: give records
    current timestamps. (It warns that the C library lacks a symbol version, then runs.)"""

    def __init__(self, binary: str, data_dir):
        from streamcal.demo.broker import free_port

        self.binary, self.data_dir = binary, Path(data_dir)
        self.port = free_port()
        self.bootstrap_servers = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> NoidaBroker:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.data_dir.parent / "noida.log", "ab") as log:
            self.proc = subprocess.Popen(
                [self.binary, "start", "--only", "kafka", "--kafka-port", str(self.port),
                 "--data-dir", str(self.data_dir)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        wait_until(self._up, 30, f"noida-db on {self.bootstrap_servers}", interval=0.1)
        return self

    def _up(self) -> bool:
        assert self.proc.poll() is None, f"noida-db exited with {self.proc.returncode}"
        return broker_up(self.bootstrap_servers)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def restart(self) -> None:
        """Stop, then start again on the same port with the same data."""
        self.stop()
        self.start()


def base_settings(bootstrap: str, topics: dict, **extra) -> dict:
    """Processor settings for the test topics (sva, no window limit unless given)."""
    settings = dict(
        bootstrap_servers=bootstrap,
        group_id=topics["group"],
        events_topic=topics["events"],
        labels_topic=topics["labels"],
        predictions_topic=topics["predictions"],
        dead_letter_topic=topics["dead_letters"],
        metrics_file="none",
        mode="sva",
        model="logreg",
        merge_wait=10.0,
        session_timeout_ms=2000,  # tansu joins a group in about half of it
    )
    settings.update(extra)
    return settings


# ---------------------------------------------------------------- kill -9 and restart
# Keys of a metric line that depend on wall-clock time, not on the input.
TIMING_KEYS = ("ts", "events_per_s", "merge_stalls", "instance")


def untimed(line: dict) -> dict:
    """A metric line without the keys that depend on wall-clock time."""
    return {k: v for k, v in line.items() if k not in TIMING_KEYS}


def metric_lines(path) -> list[dict]:
    """The complete lines of a metric log (none if it does not exist yet)."""
    if not os.path.exists(path):
        return []
    with open(path, "rb") as fh:
        return [orjson.loads(line) for line in fh if line.endswith(b"\n")]


def suffixed(topics: dict, suffix: str) -> dict:
    """The names of ``topics`` (and the group) with ``-suffix``: a second set of topics."""
    return {k: f"{v}-{suffix}" for k, v in topics.items()}


def scale_out_topics(topics: dict, suffix: str) -> dict:
    """``suffixed(topics, suffix)`` plus the state topic of its group (``--scope
    partition``)."""
    t = suffixed(topics, suffix)
    t["state"] = f"{t['group']}.state"
    return t


def _while_running(proc, check):
    """``check``, as a predicate for wait_until that fails at once if ``proc`` exited."""

    def predicate():
        assert proc.poll() is None, f"processor exited early with {proc.returncode}"
        return check()

    return predicate


def wait_for_lines(path, more_than: int, proc, timeout: float = 60.0) -> None:
    """Wait until the metric log ``path`` has more than ``more_than`` lines (fails at once
    if the process ``proc`` that writes it exits)."""
    more = _while_running(proc, lambda: len(metric_lines(path)) > more_than)
    wait_until(more, timeout, f"more than {more_than} lines in {path}")


def has_checkpoint(state_dir, unit=None) -> bool:
    """Whether the unit's state store in ``state_dir`` holds a commit, seen from outside
    while a processor holds the store open (RocksDB locks it): its write-ahead log has
    data, or a table file exists (the log is only cut once data exists)."""
    store = Path(state_dir) / ("store" if unit is None else f"unit-{unit}/store")
    return any(p.stat().st_size > 0 for p in store.glob("*.log")) or any(store.glob("*.sst"))


def kill_9_twice_then_finish(streamcal_run, settings: dict, state_dir, metrics) -> int:
    """Run ``streamcal run`` with ``settings`` as a subprocess (``streamcal_run``: the
    fixture), kill it with kill -9 at a random moment after its first checkpoint, twice,
    then run it to the end of its input (``--max-idle-s 1.5``). Returns the seed of the
    kill moments (for failure notes)."""
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    kills = 0
    for _ in range(2):
        proc = streamcal_run.popen(settings, stderr=subprocess.DEVNULL)
        try:
            wait_for_lines(metrics, len(metric_lines(metrics)), proc)
            # Kill only once a checkpoint exists (else the restart has nothing to resume
            # from, and a fast processor could be killed twice before its first one).
            checkpointed = _while_running(proc, lambda: has_checkpoint(state_dir))
            wait_until(checkpointed, 60, "a checkpoint", interval=0.02)
            time.sleep(rng.uniform(0.0, 0.6))
        finally:
            if proc.poll() is None:
                proc.kill()
                kills += 1
            proc.wait()
    assert kills == 2
    assert has_checkpoint(state_dir), "no checkpoint to resume from"
    done = streamcal_run.run(settings, "--max-idle-s", "1.5")
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return seed


def same_predictions(bootstrap: str, ref_topic: str, topic: str, n: int, note: str) -> dict:
    """The ``n`` predictions of ``ref_topic`` by key (JSON objects), after checking that
    ``topic`` holds the same ones, each re-emitted copy identical to the first."""
    want = {r.key: orjson.loads(r.value) for r in read_topic(bootstrap, ref_topic, min_count=n)}
    got: dict = {}
    for r in read_topic(bootstrap, topic, min_count=n):
        v = orjson.loads(r.value)
        assert got.setdefault(r.key, v) == v, f"re-emitted prediction differs {note}"
    assert len(want) == n and got == want, note
    return want
