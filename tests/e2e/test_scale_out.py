"""Scale-out against a real tansu broker: `--scope partition` instances in one consumer
group, units that move between them, state restored from the state topic, and the
refusals (mismatched partition counts, a second global instance, tampered state)."""

from __future__ import annotations

import functools
import shutil
import signal
import subprocess
import threading
import time

import orjson
import pytest

from streamcal.stream.config import ProcessorConfig
from streamcal.stream.processor import Processor
from streamcal.stream.state.topic import StateTopic
from tests._helpers import held_units, log_records, wait_until
from tests._kafka_helpers import (
    CHECKPOINT_KEY,
    T0,
    base_settings,
    create_topics,
    produce,
    produce_stream,
    read_topic,
    scale_out_topics,
    synthetic_stream,
)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

P = 6  # partitions of the events and labels topics
# These waits poll every 0.1 s: each poll reads the instances' logs.
wait = functools.partial(wait_until, interval=0.1)




def produce_while_stopped(bootstrap: str, procs, records) -> None:
    """Produce ``records`` while ``procs`` are stopped (SIGSTOP), so that they find all of
    them in the topics when they go on. Live input is merged in arrival order refined by
    timestamps (a partition read as caught up while another already has newer records
    can release a unit's events before labels that come later): only input already in
    the topics is read in the one order an uninterrupted run over the whole topics reads
    it. The processes fetch it in one response (no fetch in flight: one is answered
    within fetch_max_wait_ms) and parse it in one poll (--poll-max-records above its
    size)."""
    for p in procs:
        p.send_signal(signal.SIGSTOP)
    time.sleep(0.5)
    produce_at_once(bootstrap, records)


def produce_at_once(bootstrap: str, records) -> None:
    """Produce ``records`` in one request, so that a consumer reading live sees all the
    partitions' new records together: the merge order, hence the predictions, are then
    those of a run over the complete topics (live, a partition read as caught up while
    another already has newer records can interleave a unit's events and labels
    differently)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=60_000,
                             batch_size=4 << 20, max_request_size=64 << 20)  # fmt: skip
    try:
        for topic, key, value, ts in records:
            value = value if isinstance(value, bytes) else orjson.dumps(value)
            producer.send(topic, key=key.encode(), value=value, timestamp_ms=ts)
        producer.flush(timeout=30)
    finally:
        producer.close()




def settings(bootstrap, topics, **extra) -> dict:
    values = dict(scope="partition", state_topic=topics["state"], window=200,
                  checkpoint_interval=0.3, metrics_every=100,
                  poll_max_records=20_000)  # fmt: skip
    return base_settings(bootstrap, topics, **{**values, **extra})


def stream(n: int, seed: int):
    events, labels = synthetic_stream(n, seed=seed, shuffle_labels=300,
                                      missing=frozenset(range(3, n, 97)))  # fmt: skip
    return events, labels


def bad_records(topics: dict) -> list:
    return [
        (topics["events"], "bad1", b"{oops", T0 + 55),
        (topics["labels"], "e7", b'{"id": "e7", "label": 5}', T0 + 77),
        (topics["labels"], "ghost", b'{"id": "ghost", "label": 1}', T0 + 99),
    ]


def final_states(bootstrap, topics) -> dict:
    """{unit: state} of the newest checkpoint of every unit in the state topic."""
    st = StateTopic({"bootstrap_servers": bootstrap}, topics["state"], topics["group"],
                    CHECKPOINT_KEY.encode(), None)  # fmt: skip
    return {u: plans[0].state for u, plans in st.restore(range(P)).items()}


def predictions(bootstrap, topic, n, timeout: float = 90.0) -> dict:
    """{event id: prediction} once n distinct ids are in the topic (re-emitted predictions,
    after a unit moved or was restored, count once and must be identical)."""

    def all_of_them():
        got: dict = {}
        for r in read_topic(bootstrap, topic, min_count=n, timeout=30):
            assert got.setdefault(r.key, r.value) == r.value, (
                f"re-emitted prediction differs: {r.key}"
            )
        return got if len(got) >= n else None

    return wait_until(all_of_them, timeout, f"{n} distinct ids in {topic}", interval=0.5)


def reference(bootstrap, unique_topics, records, n, **extra) -> tuple[dict, dict]:
    ref = scale_out_topics(unique_topics, "ref")
    create_topics(bootstrap, [ref["events"], ref["labels"]], P)
    produce(bootstrap, records(ref))
    config = ProcessorConfig.build(**settings(bootstrap, ref, **extra),
                                   checkpoint_key=CHECKPOINT_KEY)  # fmt: skip
    Processor(config).run(max_idle_s=2.0)
    return predictions(bootstrap, ref["predictions"], n), final_states(bootstrap, ref)


def start(streamcal_run, bootstrap, topics, tmp_path, i: int, **extra):
    """A `streamcal run --scope partition` process, logging at INFO to log-<i>.txt (JSON
    lines: the tests key on their records' fields)."""
    log_path = tmp_path / f"log-{i}.txt"
    s = settings(bootstrap, topics, state_dir=tmp_path / f"state-{i}", instance_id=f"i{i}",
                 metrics_file=tmp_path / f"metrics-{i}.jsonl", **extra)  # fmt: skip
    with open(log_path, "w") as err:
        proc = streamcal_run.popen(s, "--log-level", "INFO", "--log-format", "json",
                                   stderr=err, stdout=subprocess.DEVNULL)  # fmt: skip
    return proc, log_path


def stop_all(procs) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        assert p.wait(timeout=60) in (0, -signal.SIGKILL)


def split(first_log, joiner_log) -> bool:
    """True once the joiner holds units and the two instances' units partition the set.
    Never two holders of a unit: the joiner's log is read first, and the first instance
    released a unit before the joiner was assigned it, so its log read after shows that."""
    joiner = held_units(joiner_log)
    first = held_units(first_log)
    assert not first & joiner, (first, joiner)
    return bool(joiner) and first | joiner == set(range(P))


def partitioned(logs) -> bool:
    """True when every instance holds units and their units partition the set."""
    held = [held_units(x) for x in logs]
    return all(held) and sum(map(len, held)) == P and set().union(*held) == set(range(P))


# also with a label horizon: what waits for it moves with its unit
@pytest.mark.parametrize("extra", [{}, {"label_horizon": "1s", "label_default": "0"}],
                         ids=["", "horizon"])  # fmt: skip
def test_an_instance_joining_mid_stream_takes_units_over(
    kafka_broker, unique_topics, tmp_path, streamcal_run, extra
):
    n = 2000
    events, labels = stream(n, seed=5)
    cut = T0 + 10 * (n // 2)

    def records(t, half=None):
        out = [(t["events"], k, v, ts) for k, v, ts in events]
        out += [(t["labels"], k, v, ts) for k, v, ts in labels]
        out += bad_records(t)
        if half is not None:
            out = [r for r in out if (r[3] < cut) == (half == 0)]
        return sorted(out, key=lambda r: r[3])

    want, want_states = reference(kafka_broker, unique_topics, records, n, **extra)
    run = scale_out_topics(unique_topics, "join")
    create_topics(kafka_broker, [run["events"], run["labels"]], P)
    produce(kafka_broker, records(run, 0))
    procs = []
    try:
        proc, first_log = start(streamcal_run, kafka_broker, run, tmp_path, 0, **extra)
        procs.append(proc)
        wait(lambda: held_units(first_log) == set(range(P)), 60, "the first instance")
        # It works through the first half, then a second instance joins.
        wait(lambda: len(read_topic(kafka_broker, run["predictions"])) >= n // 2, 60, "half")
        proc, second_log = start(streamcal_run, kafka_broker, run, tmp_path, 1, **extra)
        procs.append(proc)
        wait(lambda: split(first_log, second_log), 90, "the two instances to share the units")
        produce_while_stopped(kafka_broker, procs, records(run, 1))
        for p in procs:
            p.send_signal(signal.SIGCONT)
        got = predictions(kafka_broker, run["predictions"], n)
        stop_all(procs)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert len(got) == n and got == want  # no prediction lost, none different
    states = final_states(kafka_broker, run)
    for u in range(P):  # each label joined once: the same counts as the reference
        assert states[u]["counts"] == want_states[u]["counts"], u
    joined = sum(s["counts"]["labels"] for s in states.values())
    if extra:  # labels and defaults of the events a second older than their unit's last
        assert sum(s["counts"]["labels_defaulted"] for s in states.values()) > 0
        assert joined > n * 0.8
    else:
        assert joined == len(labels)
    reasons = [
        orjson.loads(r.value)["reason"] for r in read_topic(kafka_broker, run["dead_letters"])
    ]
    assert not [r for r in reasons if "duplicate" in r], reasons


def test_kill_9_with_lost_state_dir_restores_from_the_state_topic(
    kafka_broker, unique_topics, tmp_path, streamcal_run, kafka_client
):
    n = 3000
    events, labels = stream(n, seed=21)
    cut = T0 + 10 * (n // 2)  # the first half of the stream, by record time
    first = [e for e in events if e[2] < cut]
    first_labels = [lab for lab in labels if lab[2] < cut]

    def records(t, part=None):
        ev, lab = (events, labels) if part is None else part
        out = [(t["events"], k, v, ts) for k, v, ts in ev]
        out += [(t["labels"], k, v, ts) for k, v, ts in lab]
        out += bad_records(t) if part is None or part[0] is first else []
        return sorted(out, key=lambda r: r[3])

    want, want_states = reference(kafka_broker, unique_topics, records, n)
    assert len(want) == n

    run = scale_out_topics(unique_topics, "run")
    create_topics(kafka_broker, [run["events"], run["labels"]], P)
    produce(kafka_broker, records(run, (first, first_labels)))
    procs, logs, dirs = [], [], []
    try:
        for i in range(3):
            dirs.append(tmp_path / f"state-{i}")
            logs.append(tmp_path / f"log-{i}.txt")
            s = settings(kafka_broker, run, state_dir=dirs[i], instance_id=f"i{i}",
                         metrics_file=tmp_path / f"metrics-{i}.jsonl",
                         kafka_client=kafka_client)  # fmt: skip
            with open(logs[i], "w") as err:
                procs.append(streamcal_run.popen(s, "--log-level", "INFO", "--log-format",
                                                 "json", stderr=err,
                                                 stdout=subprocess.DEVNULL))  # fmt: skip
        # All three hold units (the group has spread the six partitions over them).
        wait(lambda: partitioned(logs), 90, "three members sharing the units")
        victim = held_units(logs[0])
        topic = StateTopic({"bootstrap_servers": kafka_broker}, run["state"], run["group"],
                           CHECKPOINT_KEY.encode(), None)  # fmt: skip
        wait(lambda: victim <= set(topic.restore(victim)), 30, "the victim's checkpoints")
        # The second half comes while all are stopped; then the victim dies mid-stream.
        rest = (events[len(first) :], [lab for lab in labels if lab[2] >= cut])
        produce_while_stopped(kafka_broker, procs, records(run, rest))
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait()
        shutil.rmtree(dirs[0])
        killed_at = time.monotonic()
        seen = [len(log_records(x)) for x in logs]
        for p in procs[1:]:
            p.send_signal(signal.SIGCONT)
        # The survivors take the victim's units over (from the state topic).
        wait(lambda: held_units(logs[1]) | held_units(logs[2]) == set(range(P)), 60, "takeover")
        takeover = time.monotonic() - killed_at
        got = predictions(kafka_broker, run["predictions"], n)
        for p in procs[1:]:
            p.send_signal(signal.SIGTERM)
        for p in procs[1:]:
            assert p.wait(timeout=60) == 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    # The victim's units came from the state topic (its state dir is gone), or from a
    # survivor's own checkpoint of a unit it held before the victim had it, when that
    # covers as much input (the victim's units may have been caught up when it got them).
    from_topic, from_own = set(), set()
    for x, skip in zip(logs[1:], seen[1:], strict=True):
        adopted = [(i, r) for i, r in enumerate(log_records(x)) if r.get("event") == "adopted"]
        held_before = {u for i, r in adopted if i < skip for u in r["units"]}
        for r in (r for i, r in adopted if i >= skip):
            from_topic |= set(r["source"]["state_topic"])
            from_own |= set(r["source"]["local"]) & held_before
    assert victim <= from_topic | from_own, (victim, from_topic, from_own)
    assert got == want, f"{len(set(got) ^ set(want))} ids differ; takeover {takeover:.1f} s"
    states = final_states(kafka_broker, run)
    reasons = sorted({orjson.loads(r.value)["reason"][:60]
                      for r in read_topic(kafka_broker, run["dead_letters"])})  # fmt: skip
    for u in range(P):
        assert states[u]["counts"] == want_states[u]["counts"], (u, reasons)
        assert states[u]["tracker"] == want_states[u]["tracker"], u
    assert sum(s["counts"]["labels"] for s in states.values()) == len(labels)
    # bad1 and e7's label 5 are dead letters; the ghost label waits (label_wait: 300 s)
    assert sum(s["counts"]["dead_letters"] for s in states.values()) == 2
    assert sum(s["pending"]["labels"] for s in states.values()) == 1
    # The three metric logs add up to the whole stream: every unit, every label.
    from streamcal.monitoring.report import write_report

    write_report([tmp_path / f"metrics-{i}.jsonl" for i in range(3)], tmp_path / "report")
    summary = orjson.loads((tmp_path / "report" / "summary.json").read_bytes())
    assert set(summary["units"]) == {str(u) for u in range(P)}
    assert summary["labels"] == len(labels) and summary["dead_letters"] == 2
    assert summary["events"] == n


def _error_line(stderr: str) -> str:
    """The error, which must be one line of its own (log lines may come before it, e.g.
    the store backend's when numba is missing)."""
    errors = [line for line in stderr.splitlines() if line.startswith("streamcal run: error:")]
    assert len(errors) == 1, stderr
    return errors[0]


def test_mismatched_partition_counts_are_refused(kafka_broker, unique_topics, streamcal_run):
    t = scale_out_topics(unique_topics, "mismatch")
    create_topics(kafka_broker, [t["events"]], 3)
    create_topics(kafka_broker, [t["labels"]], 2)
    s = settings(kafka_broker, t, state_topic="none")
    done = streamcal_run.run(s, "--max-idle-s", "1", timeout=60)
    err = done.stderr.decode().strip()
    assert done.returncode == 2, err
    assert "co-partitioned" in _error_line(err) and "has 3 partitions" in _error_line(err)


def test_second_global_instance_is_refused(kafka_broker, unique_topics, streamcal_run):
    t = scale_out_topics(unique_topics, "global")
    events, labels = synthetic_stream(50, seed=3)
    produce_stream(kafka_broker, t, events, labels)
    first = Processor(ProcessorConfig.build(**base_settings(kafka_broker, t)))
    stop = threading.Event()
    runner = threading.Thread(target=first.run, kwargs={"stop_event": stop})
    runner.start()
    try:
        wait(lambda: first.state.counts["events"] == 50, 60, "the first instance")
        s = base_settings(kafka_broker, t)
        done = streamcal_run.run(s, "--max-idle-s", "1", timeout=60)
        err = done.stderr.decode().strip()
        assert done.returncode == 2, err
        assert "refusing to run a second --scope global" in _error_line(err)
    finally:
        stop.set()
        runner.join(60)


@pytest.mark.parametrize("how", ["flip a byte", "other key"])
def test_tampered_state_topic_records_are_skipped_never_unpickled(
    kafka_broker, unique_topics, how, streamcal_run
):
    """A forged record of unit 0 (a copy of its newest snapshot with a byte flipped; or a
    payload that would run code, sealed with another key, under a new id whose header
    claims to cover far more input) is skipped: the restore uses the newest authenticated
    snapshot, and a new instance runs (exit 0) from it."""
    t = scale_out_topics(unique_topics, "tamper" + how[0])
    create_topics(kafka_broker, [t["events"], t["labels"]], 2)
    events, labels = synthetic_stream(60, seed=4)
    produce_stream(kafka_broker, t, events, labels)
    config = ProcessorConfig.build(**settings(kafka_broker, t), checkpoint_key=CHECKPOINT_KEY)
    Processor(config).run(max_idle_s=1.0)
    st = StateTopic({"bootstrap_servers": kafka_broker}, t["state"], t["group"],
                    CHECKPOINT_KEY.encode(), None)  # fmt: skip
    want = st.restore([0])[0][0].sealed
    unit0 = [r for r in read_topic(kafka_broker, t["state"]) if r.value is not None
             and orjson.loads(r.value.partition(b"\n")[0])["unit"] == 0
             and orjson.loads(r.value.partition(b"\n")[0])["kind"] == "snapshot"]  # fmt: skip
    rec = unit0[-1]
    head, _, body = rec.value.partition(b"\n")
    h = orjson.loads(head)
    h["id"], h["offsets"] = "forged", [[t["events"], 0, 10**9]]
    if how == "flip a byte":
        body = bytearray(body)
        body[len(body) // 2] ^= 1
        forged = orjson.dumps(h) + b"\n" + bytes(body)
    else:  # a checkpoint sealed with another key, carrying a payload that runs code
        import hashlib
        import hmac
        import pickle

        class Boom:
            def __reduce__(self):
                return (exec, ("raise SystemExit('unpickled!')",))

        payload = pickle.dumps({"version": 2, "state": Boom()})
        magic = b"STREAMCAL-CHECKPOINT v2\n"
        tag = hmac.new(b"another key of 16+ bytes", magic + payload, hashlib.sha256).digest()
        forged = orjson.dumps(h) + b"\n" + magic + tag + payload
    produce(kafka_broker, [(t["state"], rec.key, forged, None)], partition=rec.partition)
    st = StateTopic({"bootstrap_servers": kafka_broker}, t["state"], t["group"],
                    CHECKPOINT_KEY.encode(), None)  # fmt: skip
    plans = st.restore([0])[0]
    assert plans[0].sealed == want and st.rejected == 1
    # A new instance (no local state) runs, unit 0 from its authenticated snapshot.
    s = settings(kafka_broker, t)
    done = streamcal_run.run(s, "--max-idle-s", "1", "--log-level", "INFO", timeout=90)
    err = done.stderr.decode()
    assert done.returncode == 0, err[-2000:]
    assert "failed authentication" in err and "unpickled" not in err
    assert st.restore([0])[0][0].state["counts"]["rejected_state_records"] == 1  # counted
