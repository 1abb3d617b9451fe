"""The merge order does not depend on fetch timing (issue 20), against real tansu brokers.

A `streamcal run` process is paused (SIGSTOP) at a random moment while the rest of the
input is written, then resumed: all its input is then in the topics, so its predictions
must be those of a replay over the same topics from the start (a run over the complete
topics), to the bit. The same with a broker restart during the pause, with two `--scope
partition` instances of which one is killed -9 during the pause (its state directory
deleted), and with an instance that joins while the input is being written.

Each test repeats its scenario RUNS times with the seeds SEEDS (the pause point, the cut
between the halves and the moment of the join come from ``random.Random(seed)``).
RUNS is 2 by default (suite time); set STREAMCAL_TIMING_RUNS=10 for the acceptance runs:

    STREAMCAL_TIMING_RUNS=10 python -m pytest tests/stream/test_merge_timing.py
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from streamcal.stream.config import ProcessorConfig
from streamcal.stream.processor import Processor
from tests._helpers import held_units as held_units_in_log
from tests._kafka_helpers import (
    CHECKPOINT_KEY,
    T0,
    base_settings,
    broker_up,
    create_topics,
    metric_lines,
    own_broker_port,
    produce,
    read_topic,
    scale_out_topics,
    start_tansu,
    synthetic_stream,
)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

RUNS = int(os.environ.get("STREAMCAL_TIMING_RUNS", "2"))
SEEDS = [1000 + i for i in range(RUNS)]
P = 4  # partitions of the events and labels topics
N = 3000  # events; labels 1-100 events late (10 ms apart, up to 1 s), every 97th missing


def stream():
    return synthetic_stream(N, seed=20, shuffle_labels=1000, missing=frozenset(range(3, N, 97)))


def records(topics: dict) -> list:
    """The whole input, in record-time order (as a live source writes it)."""
    events, labels = stream()
    out = [(topics["events"], k, v, ts) for k, v, ts in events]
    out += [(topics["labels"], k, v, ts) for k, v, ts in labels]
    return sorted(out, key=lambda r: r[3])


def halves(topics: dict, rng: random.Random) -> tuple[list, list]:
    """The input cut at a random record time between 20% and 80% of the stream."""
    cut = T0 + 10 * int(N * rng.uniform(0.2, 0.8))
    recs = records(topics)
    return [r for r in recs if r[3] < cut], [r for r in recs if r[3] >= cut]


def seeded_topics(bootstrap: str, unique_topics: dict, tag: str, seed: int) -> tuple:
    """(rng, topics) of one run of a scenario: its random source and its own topics of P
    partitions, created."""
    rng = random.Random(seed)
    topics = scale_out_topics(unique_topics, f"{tag}{seed}")
    create_topics(bootstrap, [topics["events"], topics["labels"]], P)
    return rng, topics


def first_half_written(bootstrap: str, unique_topics: dict, tag: str, seed: int) -> tuple:
    """(rng, topics, first, rest) of one run: the input cut in two (``halves``) and its
    first half written to the run's own topics."""
    rng, topics = seeded_topics(bootstrap, unique_topics, tag, seed)
    first, rest = halves(topics, rng)
    produce(bootstrap, first)
    return rng, topics, first, rest


def settings(bootstrap: str, topics: dict, scope: str, **extra) -> dict:
    values = dict(scope=scope, window=200, checkpoint_interval=0.3, metrics_every=100,
                  merge_wait=60.0)  # fmt: skip
    if scope == "partition":
        values["state_topic"] = topics["state"]
    return base_settings(bootstrap, topics, **{**values, **extra})


def start(bootstrap, topics, tmp_path, name: str, scope: str,
          client: str = "kafka-python") -> subprocess.Popen:  # fmt: skip
    """A `streamcal run` process (logs JSON lines to log-<name>.txt, metrics to
    metrics-<name>.jsonl)."""
    s = settings(bootstrap, topics, scope, state_dir=tmp_path / f"state-{name}",
                 instance_id=name, metrics_file=tmp_path / f"metrics-{name}.jsonl",
                 kafka_client=client)  # fmt: skip
    args = [sys.executable, "-m", "streamcal", "run", "--log-level", "INFO", "--log-format", "json"]
    for key, value in s.items():
        args += ["--" + key.replace("_", "-"), str(value)]
    env = {**os.environ, "STREAMCAL_CHECKPOINT_KEY": CHECKPOINT_KEY}
    with open(tmp_path / f"log-{name}.txt", "a") as err:
        return subprocess.Popen(args, env=env, stderr=err, stdout=subprocess.DEVNULL)


def wait(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def predictions(bootstrap: str, topic: str, ids: set, timeout: float = 120.0) -> dict:
    """{event id: prediction} once every id of ``ids`` is in the topic; a prediction
    emitted again (a unit restored or moved) must be identical to the first."""
    deadline = time.monotonic() + timeout
    while True:
        got: dict = {}
        for r in read_topic(bootstrap, topic, min_count=len(ids), timeout=30):
            assert got.setdefault(r.key, r.value) == r.value, f"re-emitted {r.key} differs"
        if ids <= set(got) or time.monotonic() > deadline:
            return got
        time.sleep(0.5)


def replay(bootstrap: str, unique_topics: dict, scope: str) -> dict:
    """The predictions of one uninterrupted run over the complete topics."""
    ref = scale_out_topics(unique_topics, f"ref-{scope}")
    create_topics(bootstrap, [ref["events"], ref["labels"]], P)
    produce(bootstrap, records(ref))
    Processor(ProcessorConfig.build(**settings(bootstrap, ref, scope),
                                    checkpoint_key=CHECKPOINT_KEY)).run(max_idle_s=2.0)  # fmt: skip
    want = predictions(bootstrap, ref["predictions"], event_ids())
    assert len(want) == N
    return want


def event_ids(recs=None, topic: str | None = None) -> set:
    """The ids of all events, or of the events of ``recs`` (records of ``topic``)."""
    if recs is None:
        return {k.encode() for k, _, _ in stream()[0]}
    return {k.encode() for t, k, _, _ in recs if t == topic}


def differing(got: dict, want: dict) -> list:
    return sorted(k for k in got if got[k] != want[k])


def stop(procs) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGCONT)
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def events_done(tmp_path, name: str) -> int:
    """Events an instance has processed, from its metric log (a line every 100 labels)."""
    return sum(line["events"] for line in last_metrics(tmp_path, name).values())


def pause_point(tmp_path, name: str, first: list, topics: dict, rng: random.Random) -> None:
    """Wait until the instance has processed a random share of the first half (a third
    of the time all of it: caught up), then a random moment more."""
    n = len(event_ids(first, topics["events"]))
    k = n if rng.random() < 1 / 3 else rng.randrange(n)
    wait(lambda: events_done(tmp_path, name) >= k - 100, 90, f"{k} events processed")
    time.sleep(rng.uniform(0.0, 0.5))


def last_metrics(tmp_path, name: str) -> dict:
    """{unit: last metric line} of an instance's metric log (complete lines: the instance
    may be writing one)."""
    out: dict = {}
    for row in metric_lines(tmp_path / f"metrics-{name}.jsonl"):
        if "category" not in row:
            out[row["unit"]] = row
    return out


# ---------------------------------------------------------------- one instance, paused
def test_paused_instance_equals_a_replay(kafka_broker, unique_topics, tmp_path, kafka_client):
    # the replay reads with kafka-python: both clients give the same predictions
    want = replay(kafka_broker, unique_topics, "global")
    for seed in SEEDS:
        rng, t, first, rest = first_half_written(kafka_broker, unique_topics, "pause", seed)
        proc = start(kafka_broker, t, tmp_path, f"p{seed}", "global", kafka_client)
        try:
            pause_point(tmp_path, f"p{seed}", first, t, rng)
            proc.send_signal(signal.SIGSTOP)
            produce(kafka_broker, rest)
            time.sleep(rng.uniform(0.0, 1.0))
            proc.send_signal(signal.SIGCONT)
            got = predictions(kafka_broker, t["predictions"], event_ids())
        finally:
            stop([proc])
        lines = last_metrics(tmp_path, f"p{seed}")
        bad = differing(got, want)
        assert len(got) == N and not bad, f"seed {seed}: {len(bad)} predictions differ"
        assert lines["global"]["merge_stalls"] == 0 and lines["global"]["late_arrivals"] == 0


# ---------------------------------------------------------------- a broker restart


def test_broker_restart_during_the_pause(unique_topics, tmp_path):
    """The broker (in memory) is restarted while the instance is stopped, and the whole
    input is written to it again at the same offsets: after the resume the instance reads
    on from its positions and its predictions are still those of the replay."""
    port = own_broker_port()
    bootstrap = f"127.0.0.1:{port}"
    broker = start_tansu(port)
    try:
        wait(lambda: broker_up(bootstrap), 30, "the broker")
        want = replay(bootstrap, unique_topics, "global")
        for seed in SEEDS:
            rng, t, first, rest = first_half_written(bootstrap, unique_topics, "restart", seed)
            proc = start(bootstrap, t, tmp_path, f"r{seed}", "global")
            try:
                pause_point(tmp_path, f"r{seed}", first, t, rng)
                proc.send_signal(signal.SIGSTOP)
                broker.terminate()
                broker.wait()
                broker = start_tansu(port)
                wait(lambda: broker_up(bootstrap), 30, "the restarted broker")
                create_topics(bootstrap, [t["events"], t["labels"]], P)
                produce(bootstrap, first)  # the same offsets as before the restart
                produce(bootstrap, rest)
                proc.send_signal(signal.SIGCONT)
                # Predictions made before the restart were lost with the broker's log;
                # every event of the second half is predicted after it.
                got = predictions(bootstrap, t["predictions"], event_ids(rest, t["events"]))
            finally:
                stop([proc])
            bad = differing(got, want)
            assert event_ids(rest, t["events"]) <= set(got), f"seed {seed}"
            assert not bad, f"seed {seed}: {len(bad)} of {len(got)} predictions differ"
            line = last_metrics(tmp_path, f"r{seed}")["global"]
            assert line["merge_stalls"] == 0 and line["late_arrivals"] == 0
    finally:
        broker.terminate()
        broker.wait()


# ---------------------------------------------------------------- scale-out
def held_units(tmp_path, name: str) -> set:
    """The units instance ``name`` holds now, from its JSON log."""
    return held_units_in_log(tmp_path / f"log-{name}.txt")


def test_survivor_of_a_kill_9_equals_one_uninterrupted_instance(
    kafka_broker, unique_topics, tmp_path
):
    want = replay(kafka_broker, unique_topics, "partition")
    for seed in SEEDS:
        rng, t, first, rest = first_half_written(kafka_broker, unique_topics, "kill", seed)
        a, b = f"k{seed}a", f"k{seed}b"
        procs = [start(kafka_broker, t, tmp_path, name, "partition") for name in (a, b)]
        try:
            wait(lambda a=a, b=b: held_units(tmp_path, a) and held_units(tmp_path, b), 90,
                 "two members")  # fmt: skip
            time.sleep(rng.uniform(0.0, 4.0))
            for p in procs:
                p.send_signal(signal.SIGSTOP)
            produce(kafka_broker, rest)
            procs[0].send_signal(signal.SIGKILL)
            procs[0].wait()
            shutil.rmtree(tmp_path / f"state-{a}", ignore_errors=True)
            procs[1].send_signal(signal.SIGCONT)
            got = predictions(kafka_broker, t["predictions"], event_ids())
        finally:
            stop(procs)
        bad = differing(got, want)
        assert len(got) == N and not bad, f"seed {seed}: {len(bad)} predictions differ"
        lines = last_metrics(tmp_path, b)
        assert set(lines) == {str(u) for u in range(P)}, f"seed {seed}: {sorted(lines)}"
        assert all(x["late_arrivals"] == 0 and x["merge_stalls"] == 0 for x in lines.values())


def test_instance_joining_while_input_is_written(kafka_broker, unique_topics, tmp_path):
    """Input is written live, in record-time order, while a second instance joins. Live,
    a record can become readable after a later record of another partition has been
    released: such a unit counts a late arrival and may differ from the replay. Every
    unit without late arrivals or stalls equals the replay."""
    want = replay(kafka_broker, unique_topics, "partition")
    checked = 0
    for seed in SEEDS:
        rng, t = seeded_topics(kafka_broker, unique_topics, "join", seed)
        recs = records(t)
        chunks = [recs[i : i + 300] for i in range(0, len(recs), 300)]
        a, b = f"j{seed}a", f"j{seed}b"
        procs = [start(kafka_broker, t, tmp_path, a, "partition")]

        def write(chunks=chunks):
            for chunk in chunks:  # about 3 s of record time every 0.2 s
                produce(kafka_broker, chunk)
                time.sleep(0.2)

        writer = threading.Thread(target=write)
        try:
            wait(lambda a=a: held_units(tmp_path, a), 90, "the first member")
            writer.start()
            time.sleep(rng.uniform(0.0, 0.2 * len(chunks)))
            procs.append(start(kafka_broker, t, tmp_path, b, "partition"))
            wait(lambda b=b: held_units(tmp_path, b), 90, "the joiner")
            writer.join()
            got = predictions(kafka_broker, t["predictions"], event_ids())
        finally:
            if writer.is_alive():
                writer.join()
            stop(procs)
        assert len(got) == N
        late = {u: 0 for u in map(str, range(P))}
        for name in (a, b):
            for u, line in last_metrics(tmp_path, name).items():
                late[u] += line["late_arrivals"] + line["merge_stalls"]
        units = _units_of_events(kafka_broker, t)
        for u in range(P):
            ids = {k for k, p in units.items() if p == u}
            bad = [k for k in ids if got[k] != want[k]]
            if late[str(u)] == 0:
                checked += 1
                assert not bad, f"seed {seed} unit {u}: {len(bad)} differ, no late arrival"
    assert checked > 0


def _units_of_events(bootstrap: str, topics: dict) -> dict:
    """{event id: partition} of the events topic."""
    return {r.key: r.partition for r in read_topic(bootstrap, topics["events"], min_count=N)}
