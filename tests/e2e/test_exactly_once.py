"""Exactly-once processing against noida-db, a broker that hides aborted transactions from
``read_committed`` readers (issue 30): kill -9 at random moments, a crash between the
Kafka commit and the local one, a zombie fenced by its successor, aborted and open
upstream transactions, and a graceful hand-over of ``--scope partition`` units.

noida-db never expires a group member killed with kill -9, so the killed runs use
``--scope global --no-global-lock``: the transactional id (one per group) is what fences
a predecessor. (The protocol: streamcal/stream/exactly_once.py; without a broker:
tests/stream/test_exactly_once.py.)"""

from __future__ import annotations

import collections
import logging
import random
import signal
import subprocess
import sys
import time

import orjson
import pytest

from streamcal.stream.config import ProcessorConfig
from streamcal.stream.processor import Processor
from tests._helpers import (
    checkpoint_env,
    error_of,
    held_units,
    stored_state,
    streamcal_run_args,
    wait_until,
)
from tests._kafka_helpers import (
    CHECKPOINT_KEY,
    base_settings,
    create_topics,
    kill_9_then_finish,
    metric_lines,
    produce,
    read_topic,
    stream_now,
    suffixed,
    synthetic_stream,
    untimed,
)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

P = 4  # partitions of both input topics
EOS = "exactly-once"


def _topics(bootstrap: str, topics: dict) -> None:
    create_topics(bootstrap, [topics["events"], topics["labels"]], P)


def _with_bad_records(n: int, seed: int) -> tuple[list, list]:
    """``synthetic_stream(n)`` with labels interleaved out of order, stamped from now, and
    bad records mixed in: malformed events, labels that are not 0 or 1, and labels of no
    event (dead-lettered when their wait ends, by a later record)."""
    events, labels = synthetic_stream(n, seed=seed, shuffle_labels=500)
    rng = random.Random(seed)
    for i in rng.sample(range(n), n // 80):
        events.append((f"bad{i}", f'{{"id": "bad{i}", "features": '.encode(), events[i][2]))
    for i in rng.sample(range(n), n // 80):
        labels.append((f"e{i}", {"id": f"e{i}", "label": "maybe"}, labels[i][2] + 1))
    for i in rng.sample(range(n), n // 80):
        labels.append((f"ghost{i}", {"id": f"ghost{i}", "label": 1}, events[i][2]))
    return stream_now(events, labels)


def _produce(bootstrap: str, topics: dict, events, labels) -> None:
    records = [(topics["events"], k, v, ts) for k, v, ts in events]
    records += [(topics["labels"], k, v, ts) for k, v, ts in labels]
    produce(bootstrap, sorted(records, key=lambda r: r[3]))


def _outputs(topics: dict, suffix: str) -> dict:
    """``topics`` with output topics and a group of their own (the inputs shared)."""
    own = suffixed(topics, suffix)
    return {**topics, **{k: own[k] for k in ("predictions", "dead_letters", "group")}}


def _committed(bootstrap: str, topic: str, n: int = 0) -> list:
    return read_topic(bootstrap, topic, timeout=60, min_count=n, isolation_level="read_committed")


def _once(records, note: str) -> dict:
    """key -> value of ``records``, after checking that no key comes twice."""
    counts = collections.Counter(r.key for r in records)
    twice = [k for k, c in counts.items() if c > 1]
    assert not twice, f"{len(twice)} keys more than once, e.g. {twice[:3]} {note}"
    return {r.key: r.value for r in records}


def _same_outputs(bootstrap: str, ref: dict, got: dict, n: int, note: str) -> None:
    """``got``'s predictions and dead letters, read ``read_committed``, are ``ref``'s:
    each exactly once, byte for byte."""
    want = _once(_committed(bootstrap, ref["predictions"], n), "(reference)")
    assert len(want) == n
    have = _once(_committed(bootstrap, got["predictions"], n), note)
    assert len(have) == n, f"{n - len(have)} predictions missing {note}"
    assert have == want, note
    dead_want = collections.Counter(r.value for r in _committed(bootstrap, ref["dead_letters"]))
    dead = collections.Counter(r.value for r in _committed(bootstrap, got["dead_letters"]))
    assert dead_want and max(dead_want.values()) == 1
    assert max(dead.values()) == 1, f"a dead letter more than once {note}"
    assert dead == dead_want, note


def _settings(bootstrap: str, topics: dict, tmp_path, name: str, **extra) -> dict:
    """Exactly-once settings of run ``name`` (``kafka_client`` in ``extra``: its client)."""
    return base_settings(bootstrap, topics, processing_guarantee=EOS, metrics_every=500,
                         label_wait=5.0, state_dir=tmp_path / f"{name}-state",
                         metrics_file=tmp_path / f"{name}-metrics.jsonl", global_lock=False,
                         **extra)  # fmt: skip


def _killed_and_uninterrupted(streamcal_run, bootstrap: str, t: dict, tmp_path, n: int,
                              kills: int, kafka_client=None, **extra) -> tuple:  # fmt: skip
    """An uninterrupted run over the input topics of ``t`` and one killed -9 ``kills``
    times (with ``kafka_client``, if given: the reference is kafka-python's), each to
    outputs of its own, with ``extra`` settings; checks that their outputs
    are the same, each exactly once. Returns the killed run's topics, both final metric
    lines and the note naming the kill moments' seed."""
    ref_t, crash_t = _outputs(t, "ref"), _outputs(t, "crash")
    ref = _settings(bootstrap, ref_t, tmp_path, "ref", **extra)
    done = streamcal_run.run(ref, "--max-idle-s", "1.5", timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    if kafka_client is not None:
        extra = {**extra, "kafka_client": kafka_client}
    crash = _settings(bootstrap, crash_t, tmp_path, "crash", **extra)
    metrics = tmp_path / "crash-metrics.jsonl"
    with open(tmp_path / "killed-stderr.txt", "wb") as stderr:
        seed = kill_9_then_finish(streamcal_run, crash, crash["state_dir"], metrics,
                                  kills=kills, pause=1.0, stderr=stderr)  # fmt: skip
    note = f"(kill moments seed {seed})"
    _same_outputs(bootstrap, ref_t, crash_t, n, note)
    return crash_t, metric_lines(metrics)[-1], metric_lines(ref["metrics_file"])[-1], note


def test_kill_9_four_times_gives_every_prediction_and_dead_letter_exactly_once(
    noida_broker, unique_topics, tmp_path, streamcal_run, kafka_client
):
    """The issue's acceptance: 12,000 events with their labels interleaved and bad records
    mixed in, killed with kill -9 four times at random moments and restarted: a
    read_committed reader gets each prediction and each dead letter exactly once, equal to
    an uninterrupted run's, and the final metric line (labels joined, log loss) is the
    same."""
    bootstrap, t = noida_broker.bootstrap_servers, unique_topics
    n = 12_000
    _topics(bootstrap, t)
    events, labels = _with_bad_records(n, seed=30)
    _produce(bootstrap, t, events, labels)
    crash_t, final, ref_final, note = _killed_and_uninterrupted(
        streamcal_run, bootstrap, t, tmp_path, n, kills=4, kafka_client=kafka_client,
        checkpoint_interval=0.5,
    )  # fmt: skip
    assert final["labels"] == n and final["dead_letters"] == ref_final["dead_letters"] > 0
    assert untimed(final) == untimed(ref_final), note
    # The kills were not all at idle moments: one found a transaction open (its outputs,
    # aborted, are seen by a read_uncommitted reader), or one fell between the
    # transaction's commit and the store's, so that a restart read again without output
    # (under load, the later kills can all fall in that re-reading: 1 run of 6 at load 11).
    everything = read_topic(bootstrap, crash_t["predictions"], min_count=n)
    replayed = "reading again without output" in (tmp_path / "killed-stderr.txt").read_text()
    assert len(everything) > n or replayed, f"no kill caught an open transaction {note}"


def test_with_a_label_horizon_kill_9_keeps_every_output_exactly_once(
    noida_broker, unique_topics, tmp_path, streamcal_run
):
    """A horizon shorter than many labels' delays (late labels are dead letters) and a
    default, killed twice: each output exactly once, the final line the reference's."""
    bootstrap, t = noida_broker.bootstrap_servers, unique_topics
    n = 4000
    _topics(bootstrap, t)
    _produce(bootstrap, t, *_with_bad_records(n, seed=31))
    _, final, ref_final, note = _killed_and_uninterrupted(
        streamcal_run, bootstrap, t, tmp_path, n, kills=2, checkpoint_interval=0.5,
        label_horizon="0.3s", label_default="0",
    )  # fmt: skip
    assert untimed(final) == untimed(ref_final), note
    assert final["labels_late"] > 100 and final["labels_defaulted"] > 100


# Runs `streamcal run` with kill -9 right after the Kafka commit of its CRASH_AT-th
# checkpoint, before the local stores are committed: the window between the two commits.
CRASH_BETWEEN_COMMITS = r"""
import os, sys, time
from streamcal.stream.state import units

original, calls = units.UnitStates.commit_stores, []


def commit_stores(self, staged):
    calls.append(1)
    if len(calls) == int(os.environ["CRASH_AT"]):
        os.kill(os.getpid(), 9)
    return original(self, staged)


units.UnitStates.commit_stores = commit_stores
# Each record a little slower (6,000 take about 3 s), so that several checkpoints, at
# 0.2 s, fall within the input however fast the machine handles it: the third commit
# then comes with input before and after it.
from streamcal.stream.unit import CalibrationUnit
handle = CalibrationUnit.handle


def slow_handle(self, rank, rec, message=None):
    time.sleep(0.0005)
    return handle(self, rank, rec, message)


CalibrationUnit.handle = slow_handle
from streamcal.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _group_offsets(bootstrap: str, topics: dict) -> int:
    """The sum of the offsets committed to ``topics``'s group for the input partitions."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=topics["group"],
                             enable_auto_commit=False)  # fmt: skip
    try:
        tps = [TopicPartition(topics[k], p) for k in ("events", "labels") for p in range(P)]
        return sum(consumer.committed(tp) or 0 for tp in tps)
    finally:
        consumer.close()


def test_a_crash_between_the_kafka_commit_and_the_local_one(
    noida_broker, unique_topics, tmp_path, streamcal_run
):
    """kill -9 after a checkpoint's transaction committed and before the stores did: the
    local state is then behind the offsets committed to the group. The restart reads that
    input again without output (and says so), then goes on: every prediction and dead
    letter exactly once, equal to an uninterrupted run's."""
    bootstrap, t = noida_broker.bootstrap_servers, unique_topics
    n = 3000
    _topics(bootstrap, t)
    events, labels = _with_bad_records(n, seed=33)
    _produce(bootstrap, t, events, labels)
    ref_t, crash_t = _outputs(t, "ref"), _outputs(t, "crash")
    ref = _settings(bootstrap, ref_t, tmp_path, "ref", checkpoint_interval=0.2)
    done = streamcal_run.run(ref, "--max-idle-s", "1.5")
    assert done.returncode == 0, done.stderr.decode()[-2000:]

    crash = _settings(bootstrap, crash_t, tmp_path, "crash", checkpoint_interval=0.2)
    args = ["run", *streamcal_run_args(crash)[4:]]
    killed = subprocess.run([sys.executable, "-c", CRASH_BETWEEN_COMMITS, *args],
                            env=checkpoint_env(CRASH_AT="3"), capture_output=True,
                            timeout=120)  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
    local = sum(o for _, _, o in stored_state(crash["state_dir"])["offsets"])
    assert 0 < local < _group_offsets(bootstrap, crash_t)  # the window was hit

    done = streamcal_run.run(crash, "--max-idle-s", "1.5")
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert "reading again without output" in done.stderr.decode()
    _same_outputs(bootstrap, ref_t, crash_t, n, "(crash between the commits)")
    final = metric_lines(crash["metrics_file"])[-1]
    assert untimed(final) == untimed(metric_lines(ref["metrics_file"])[-1])


def test_a_zombie_is_fenced_once_its_successor_starts(
    noida_broker, unique_topics, tmp_path, streamcal_run, kafka_client
):
    """Instance A holds everything it produced in an open transaction (an hour's checkpoint
    interval) when instance B of the same group starts: B's producer fences A's and aborts
    that transaction, and A, which never learns it while idle, stops with exit status 5 at
    its next commit. A read_committed reader sees B's outputs only, each exactly once,
    equal to an uninterrupted run's (a read_uncommitted one sees A's aborted ones too)."""
    bootstrap, t = noida_broker.bootstrap_servers, unique_topics
    n = 2000
    _topics(bootstrap, t)
    events, labels = _with_bad_records(n, seed=34)
    half = sorted(e[2] for e in events)[len(events) // 2]
    early = ([e for e in events if e[2] < half], [x for x in labels if x[2] < half])
    late = ([e for e in events if e[2] >= half], [x for x in labels if x[2] >= half])
    _produce(bootstrap, t, *early)
    ref_t, run_t = _outputs(t, "ref"), _outputs(t, "run")

    zombie = _settings(bootstrap, run_t, tmp_path, "a", checkpoint_interval=3600,
                       kafka_client=kafka_client)
    with open(tmp_path / "a-stderr.txt", "wb") as err:
        a = streamcal_run.popen(zombie, stderr=err)
    first = sum(1 for key, _, _ in early[0] if key.startswith("e"))  # not the bad ones
    # read_topic's own wait for the topic as long as this one's (A creates it once started)
    wait_until(lambda: len(read_topic(bootstrap, run_t["predictions"], 60)) >= first, 60,
               "A's first predictions (uncommitted)")  # fmt: skip
    assert _committed(bootstrap, run_t["predictions"]) == []
    successor = _settings(bootstrap, run_t, tmp_path, "b", checkpoint_interval=0.5,
                          kafka_client=kafka_client)
    with open(tmp_path / "b-stderr.txt", "wb") as err:
        b = streamcal_run.popen(successor, stderr=err)
    wait_until(lambda: len(_committed(bootstrap, run_t["predictions"])) >= first, 60,
               "B's predictions of the first half")  # fmt: skip
    _produce(bootstrap, t, *late)  # both read it; only B's outputs may count
    time.sleep(2.0)
    assert a.poll() is None  # idle or not, A has not committed since: it does not know yet
    a.send_signal(signal.SIGTERM)  # its final checkpoint: the commit is refused
    assert a.wait(60) == 5
    err = error_of((tmp_path / "a-stderr.txt").read_text(), whole=False)
    assert err.startswith("streamcal run: error: fenced: another producer with transactional")
    wait_until(lambda: len(_committed(bootstrap, run_t["predictions"])) >= n, 60, "B's outputs")
    b.send_signal(signal.SIGTERM)
    assert b.wait(60) == 0

    ref = _settings(bootstrap, ref_t, tmp_path, "ref")
    done = streamcal_run.run(ref, "--max-idle-s", "1.5")
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    _same_outputs(bootstrap, ref_t, run_t, n, "(a zombie and its successor)")
    assert len(read_topic(bootstrap, run_t["predictions"])) >= n + first  # A's, aborted


def _upstream(bootstrap: str, tag: str):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"upstream-{tag}",
                             linger_ms=5)  # fmt: skip
    producer.init_transactions()
    return producer


def _send(producer, topics: dict, events, labels) -> None:
    for kind, records in (("events", events), ("labels", labels)):
        for k, v, ts in records:
            value = v if isinstance(v, bytes) else orjson.dumps(v)
            producer.send(topics[kind], key=k.encode(), value=value, timestamp_ms=ts)


def test_aborted_upstream_input_is_never_processed_and_an_open_one_holds_nothing_back(
    noida_broker, unique_topics
):
    """Input written in upstream transactions, some aborted (other events, flipped labels,
    a malformed record), and one left open: the processor reads what was committed only,
    and the partition held by the open transaction (its position at the last stable offset,
    below the highwater) does not stall the merge nor the idle exit. Once that transaction
    commits, its record is read."""
    bootstrap, t = noida_broker.bootstrap_servers, unique_topics
    n = 300
    _topics(bootstrap, t)
    events, labels = stream_now(*synthetic_stream(n, seed=35))
    ghosts = [(f"x{k}", v, ts) for k, v, ts in events[:50]]
    flipped = [(k, {**v, "label": 1 - v["label"]}, ts) for k, v, ts in labels[:50]]
    upstream = _upstream(bootstrap, t["group"])
    for chunk in range(3):
        part = slice(chunk * n // 3, (chunk + 1) * n // 3)
        upstream.begin_transaction()
        _send(upstream, t, events[part], labels[part])
        upstream.commit_transaction()
        upstream.begin_transaction()
        _send(upstream, t, ghosts, flipped + [("bad", b"{oops", labels[0][2])])
        upstream.flush()
        upstream.abort_transaction()
    late = [("late", {"id": "late", "features": {"x1": 0.5, "x2": 0.1}}, events[-1][2] + 5)]
    upstream.begin_transaction()  # left open while the processor runs
    _send(upstream, t, late, [])
    upstream.flush()

    settings = base_settings(bootstrap, t, processing_guarantee=EOS, global_lock=False,
                             merge_wait=60.0)  # fmt: skip
    started = time.monotonic()
    first = Processor(ProcessorConfig.build(**settings)).run(max_idle_s=1.0)
    took = time.monotonic() - started
    # held back by the open transaction, the run would last the merge_wait: far more than
    # the run itself takes even on a loaded machine (20 s seen at load 20)
    assert first["merge_stalls"] == 0 and took < 45, (first["merge_stalls"], took)
    assert (first["events"], first["labels"], first["dead_letters"]) == (n, n, 0)
    preds = _once(_committed(bootstrap, t["predictions"], n), "(upstream transactions)")
    assert set(preds) == {k.encode() for k, _, _ in events}

    upstream.commit_transaction()
    upstream.close()
    second = Processor(ProcessorConfig.build(**settings)).run(max_idle_s=1.0)
    assert second["events"] == n + 1 and second["merge_stalls"] == 0
    preds = _once(_committed(bootstrap, t["predictions"], n + 1), "(after the commit)")
    assert len(preds) == n + 1 and b"late" in preds


def test_units_handed_over_gracefully_keep_every_output_exactly_once(
    noida_broker, unique_topics, tmp_path, streamcal_run, kafka_client
):
    """--scope partition on noida-db (a member killed with kill -9 is never expired there,
    so only graceful hand-overs): a second instance joins mid-stream and takes units over
    (the first commits their transaction before giving them up), then the first stops
    (SIGTERM) and the second takes the rest. Every prediction and dead letter exactly
    once, equal to an uninterrupted --scope partition run's."""
    from tests.e2e.test_scale_out import produce_while_stopped, start

    def shared(first_log, second_log) -> bool:  # both hold units, never the same ones
        first, second = held_units(first_log), held_units(second_log)
        assert not first & second, (first, second)
        return bool(first and second) and first | second == set(range(P))

    bootstrap, t = noida_broker.bootstrap_servers, unique_topics
    n = 3000
    events, labels = _with_bad_records(n, seed=36)
    records = sorted([(k, "events", key, v, ts) for k, (key, v, ts) in enumerate(events)]
                     + [(k, "labels", key, v, ts) for k, (key, v, ts) in enumerate(labels)],
                     key=lambda r: r[-1])  # fmt: skip
    thirds = [records[i * len(records) // 3 : (i + 1) * len(records) // 3] for i in range(3)]

    def as_records(topics, part):
        return [(topics[kind], key, v, ts) for _, kind, key, v, ts in part]

    eos = dict(processing_guarantee=EOS, poll_max_records=20_000, metrics_every=500,
               label_wait=5.0, session_timeout_ms=6000)  # fmt: skip
    ref_t, run_t = (
        {**_outputs(t, s), "state": f"{t['group']}-{s}.state"} for s in ("ref", "run")
    )
    _topics(bootstrap, t)
    produce(bootstrap, as_records(t, thirds[0]))
    procs = []
    try:
        first, first_log = start(streamcal_run, bootstrap, run_t, tmp_path, 0, **eos,
                                 kafka_client=kafka_client)  # the reference: kafka-python
        procs.append(first)
        wait_until(lambda: held_units(first_log) == set(range(P)), 60, "the first instance",
                   interval=0.1)  # fmt: skip
        wait_until(lambda: len(_committed(bootstrap, run_t["predictions"])) > 0, 60,
                   "the first predictions")  # fmt: skip
        second, second_log = start(streamcal_run, bootstrap, run_t, tmp_path, 1, **eos,
                                   kafka_client=kafka_client)
        procs.append(second)
        # a few seconds; it took minutes when kafka-python dropped a finished rebalance and
        # noida-db then lost the joiner's JoinGroup answer (tests/README.md, noida-db)
        wait_until(lambda: shared(first_log, second_log), 90, "the two to share the units",
                   interval=0.1)  # fmt: skip
        produce_while_stopped(bootstrap, procs, as_records(t, thirds[1]))
        for p in procs:
            p.send_signal(signal.SIGCONT)
        first.send_signal(signal.SIGTERM)
        assert first.wait(60) == 0
        wait_until(lambda: held_units(second_log) == set(range(P)), 60, "the second instance",
                   interval=0.1)  # fmt: skip
        produce_while_stopped(bootstrap, [second], as_records(t, thirds[2]))
        second.send_signal(signal.SIGCONT)
        wait_until(lambda: len(_committed(bootstrap, run_t["predictions"])) >= n, 90,
                   "every prediction")  # fmt: skip
        second.send_signal(signal.SIGTERM)
        assert second.wait(60) == 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    ref = base_settings(bootstrap, ref_t, scope="partition", state_topic=ref_t["state"],
                        window=200, **eos)  # fmt: skip
    Processor(ProcessorConfig.build(**ref, checkpoint_key=CHECKPOINT_KEY)).run(max_idle_s=2.0)
    _same_outputs(bootstrap, ref_t, run_t, n, "(units handed over)")


@pytest.mark.parametrize("scope", ["global", "partition"])
def test_an_aborted_transaction_takes_the_processor_back_to_its_last_commit(
    noida_broker, unique_topics, tmp_path, monkeypatch, caplog, scope
):
    """Two checkpoints' transactions fail (a send doomed, as a broker that went away does):
    each is aborted, the units go back to their stores' last commit and read that input
    again, in process. Every output exactly once, equal to an uninterrupted run's."""
    from kafka.errors import KafkaTimeoutError

    from streamcal.stream.kafka import sink

    bootstrap, t = noida_broker.bootstrap_servers, unique_topics
    n = 6000  # enough for several checkpoints before the final one, which must not fail
    _topics(bootstrap, t)
    _produce(bootstrap, t, *_with_bad_records(n, seed=37))
    ref_t, run_t = _outputs(t, "ref"), _outputs(t, "run")

    def run(topics, name):
        settings = _settings(bootstrap, topics, tmp_path, name, checkpoint_interval=0.2,
                             producer_process=False, scope=scope, session_timeout_ms=6000,
                             state_topic=f"{topics['group']}.state")  # fmt: skip
        config = ProcessorConfig.build(**settings, checkpoint_key=CHECKPOINT_KEY)
        return Processor(config).run(max_idle_s=1.5)

    ref_final = run(ref_t, "ref")
    commit, calls = sink.TransactionalOutbox.commit, []

    def doomed_twice(self, offsets, group):
        calls.append(1)
        if len(calls) in (2, 3):
            self._doom(KafkaTimeoutError("injected"))
        return commit(self, offsets, group)

    monkeypatch.setattr(sink.TransactionalOutbox, "commit", doomed_twice)
    with caplog.at_level(logging.WARNING, "streamcal.stream.processor"):
        final = run(run_t, "run")
    assert caplog.text.count("going back to the last checkpoint") == 2
    _same_outputs(bootstrap, ref_t, run_t, n, "(two transactions aborted)")
    assert untimed(final) == untimed(ref_final)
    assert len(read_topic(bootstrap, run_t["predictions"])) > n  # the aborted ones
