"""Waiting predictions end to end: `streamcal run` against tansu with --state-dir and its
defaults otherwise (issue 27's "done when"). Events have 20 numeric features; after the
fill, each step is a new event and a label for a random waiting event (benchmarks/pending.py's
stream), so the number waiting stays put. All input is in the topics before a run reads it,
so that every run reads it in the one merge order (docs/ordering.md). Each part has a tansu
broker of its own (``LocalBroker``, in memory).

a. **2×10^6 waiting** (--waiting): a run fills them and stops when idle; the input gets the
   labels (--steps-fraction of the waiting); a restart joins them. Every label joins (the
   final metric line's labels = labels sent, no dead letters); the peak RSS of the process
   (VmHWM, sampled from /proc; its producer process apart); bytes per waiting prediction in
   the store directory; the restart's time from exec to its first prediction, against a
   start on empty state (a new state directory, same topics), twice each.
b. **kill -9 three times** at random moments of the label phase with 10^6 waiting
   (--kill-waiting): the predictions (by id, every re-emitted copy too), the labels joined and
   the log loss equal those of an uninterrupted run over the same topics.
c. **scale-out**: `--scope partition`, 2 partitions of ~10^6 waiting each (--move-waiting per
   unit), 2 instances; the instance holding unit 0 is killed with kill -9 in the label phase and
   its state directory deleted; the other takes the unit over from the state topic. Its
   predictions equal those of one instance run uninterrupted; the state topic's value bytes
   per checkpoint of the moved unit, against the changes each carried and the store's size.

    python benchmarks/pending_e2e.py                 # full scale (~15 minutes)
    python benchmarks/pending_e2e.py --scale 0.01    # a quick run (~2 minutes)
    python benchmarks/pending_e2e.py --parts b --scale 0.1

tests/e2e/test_pending_e2e.py runs --scale 0.01 and asserts the same properties.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]  # benchmarks/kafka.py

import orjson  # noqa: E402

KEY = "pending-e2e-checkpoint-key-0123"
ENV = {**os.environ, "STREAMCAL_CHECKPOINT_KEY": KEY}
GIB = 2**30


def _load_pending():
    spec = importlib.util.spec_from_file_location("pending_bench", HERE / "pending.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_pending = _load_pending()
Stream, disk_bytes = _pending.Stream, _pending.disk_bytes


# ---------------------------------------------------------------- topics
def names(tag: str) -> dict:
    t = f"pe2e-{tag}-{uuid.uuid4().hex[:8]}"
    return {"events": f"{t}.events", "labels": f"{t}.labels", "dead": f"{t}.dead",
            "group": t, "state": f"{t}.state"}  # fmt: skip


def create(bootstrap: str, topics, partitions: int = 1) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(t, partitions, 1) for t in topics])
    finally:
        admin.close()


def produce(bootstrap: str, topics: dict, batches) -> int:
    """Produce the records of ``batches`` (lists of pending.Rec, whose topic is "events" or
    "labels"), keyed by event id; returns how many."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50, batch_size=1 << 20,
                             max_request_size=16 << 20, acks=1)  # fmt: skip
    n = 0
    try:
        for batch in batches:
            for r in batch:
                producer.send(topics[r.topic], key=r.key, value=r.value, timestamp_ms=r.timestamp)
            n += len(batch)
        producer.flush(timeout=300)
    finally:
        producer.close()
    return n


def in_batches(make, total: int, size: int = 10_000):
    for i in range(0, total, size):
        yield make(min(size, total - i))


def consumer(bootstrap: str, topic: str):
    """A consumer of every partition of ``topic`` from its start."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      auto_offset_reset="earliest", fetch_max_wait_ms=50,
                      max_partition_fetch_bytes=8 << 20)  # fmt: skip
    while not c.partitions_for_topic(topic):
        c.topics()
        time.sleep(0.05)
    tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic))]
    c.assign(tps)
    for tp in tps:
        c.seek(tp, 0)
    return c, tps


def read_all(bootstrap: str, topic: str, on_record, idle: float = 3.0) -> None:
    """Call ``on_record`` with every record of ``topic`` (to each partition's highwater mark,
    read after a fetch: tansu's ListOffsets answer falls short of the end)."""
    c, tps = consumer(bootstrap, topic)
    try:
        quiet = time.monotonic()
        while True:
            got = c.poll(timeout_ms=200, max_records=50_000)
            for recs in got.values():
                for r in recs:
                    on_record(r)
            if got:
                quiet = time.monotonic()
            done = all(c.highwater(tp) is not None and c.position(tp) >= c.highwater(tp)
                       for tp in tps)  # fmt: skip
            if done or time.monotonic() - quiet > idle:
                return
    finally:
        c.close()


def predictions(bootstrap: str, topic: str) -> dict:
    """{event id: digest of its prediction}, checking that every re-emitted copy of a
    prediction is byte for byte the first."""
    got: dict = {}
    differ = []

    def take(r):
        digest = hashlib.blake2b(r.value, digest_size=16).digest()
        if got.setdefault(r.key, digest) != digest:
            differ.append(r.key)

    read_all(bootstrap, topic, take)
    assert not differ, f"{len(differ)} re-emitted predictions differ, e.g. {differ[:3]}"
    return got


def first_record(bootstrap: str, topic: str, proc, timeout: float = 600.0) -> float:
    """Monotonic time at which ``topic`` (new, empty) first holds a record."""
    c, _ = consumer(bootstrap, topic)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if c.poll(timeout_ms=50, max_records=1):
                return time.monotonic()
            if proc.poll() is not None:
                raise RuntimeError(f"streamcal run exited with {proc.returncode} before any output")
        raise TimeoutError(f"no record in {topic} within {timeout:g} s")
    finally:
        c.close()


# ---------------------------------------------------------------- streamcal run
def settings(bootstrap: str, topics: dict, state_dir, predictions_topic: str, metrics,
             **extra) -> dict:  # fmt: skip
    values = dict(bootstrap_servers=bootstrap, group_id=topics["group"],
                  events_topic=topics["events"], labels_topic=topics["labels"],
                  predictions_topic=predictions_topic, dead_letter_topic=topics["dead"],
                  state_dir=state_dir, metrics_file=metrics)  # fmt: skip
    return {**values, **extra}


def run_args(values: dict) -> list[str]:
    """The command line of `streamcal run` with ``values`` (setting name -> value)."""
    args = [sys.executable, "-m", "streamcal", "run"]
    for k, v in values.items():
        args += ["--" + k.replace("_", "-"), str(v)]
    return args


class Run:
    """`streamcal run` with ``settings`` as a subprocess, its memory sampled from /proc:
    ``peak`` (VmHWM of the processor) and ``child_peak`` (its producer process)."""

    every = 0.2  # seconds between samples

    def __init__(self, values: dict, *extra: str, log=None, env=None):
        self.started = time.monotonic()
        self.proc = subprocess.Popen(run_args(values) + list(extra), env=env or ENV,
                                     cwd=tempfile.gettempdir(), stdout=subprocess.DEVNULL,
                                     stderr=log or subprocess.DEVNULL)  # fmt: skip
        self.peak = self.child_peak = 0
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        pid = self.proc.pid
        while self.proc.poll() is None:
            self._take(pid)
            for child in children(pid):
                self.child_peak = max(self.child_peak, vm(child, "VmHWM"))
            time.sleep(self.every)

    def _take(self, pid: int) -> None:
        self.peak = max(self.peak, vm(pid, "VmHWM"))

    def wait(self, timeout: float | None = None) -> int:
        code = self.proc.wait(timeout)
        self._sampler.join()
        return code

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.wait()


def vm(pid: int, field: str) -> int:
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def children(pid: int) -> list[int]:
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                out += [int(c) for c in fh.read().split()]
    except OSError:
        pass
    return out


def lines(path) -> list[dict]:
    try:
        with open(path, "rb") as fh:
            return [orjson.loads(x) for x in fh if x.endswith(b"\n")]
    except FileNotFoundError:
        return []


def wait_for(predicate, timeout: float, what: str, proc=None):
    deadline = time.monotonic() + timeout
    while not (got := predicate()):
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"streamcal run exited with {proc.returncode} waiting for {what}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.1)
    return got


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def until_idle(values: dict) -> Run:
    run = Run(values, "--max-idle-s", "3")
    assert run.wait() == 0, f"streamcal run failed: {values}"
    return run


def restart_time(bootstrap: str, values: dict, then_kill: bool) -> tuple[float, Run]:
    """Seconds from exec to the first prediction of a run writing to a new topic."""
    topic = values["predictions_topic"]
    create(bootstrap, [topic])
    run = Run(values, "--max-idle-s", "3")
    seconds = first_record(bootstrap, topic, run.proc) - run.started
    if then_kill:
        run.kill()
    else:
        assert run.wait() == 0
    return seconds, run


# ---------------------------------------------------------------- a. 2x10^6 waiting
def part_a(bootstrap: str, work: Path, n: int, steps: int, seed: int = 1) -> dict:
    t = names("a")
    create(bootstrap, [t["events"], t["labels"]])
    stream = Stream(n, n + steps + 200, 20, seed=seed)
    produce(bootstrap, t, in_batches(stream.fill, n))
    state = work / "a-state"
    out = {"n": n, "steps": steps, "load": [load()]}
    # The fill, from empty state: its start is the first "start on empty state".
    values = settings(bootstrap, t, state, t["group"] + ".p1", work / "a-m1.jsonl")
    empty1, fill = restart_time(bootstrap, values, then_kill=False)
    first = lines(work / "a-m1.jsonl")[-1]
    out.update(fill_peak=fill.peak, fill_child_peak=fill.child_peak, fill_waiting=first["pending"],
               disk_after_fill=disk_bytes(state / "store") / n, load_fill=load())  # fmt: skip
    produce(bootstrap, t, in_batches(stream.steps, steps))
    metrics = work / "a-m2.jsonl"
    values = settings(bootstrap, t, state, t["group"] + ".p2", metrics)
    restart1, joins = restart_time(bootstrap, values, then_kill=False)
    last = lines(metrics)[-1]
    out.update(labels=last["labels"], dead_letters=last["dead_letters"], waiting=last["pending"],
               labels_lost=last["labels_lost"], evicted=last["evicted"],
               join_peak=joins.peak, join_child_peak=joins.child_peak,
               disk=disk_bytes(state / "store") / n, load_join=load())  # fmt: skip
    # A second pair: a restart with a few more steps to read, and another empty start.
    produce(bootstrap, t, [stream.steps(100)])
    values = settings(bootstrap, t, state, t["group"] + ".p3", work / "a-m3.jsonl")
    restart2, _ = restart_time(bootstrap, values, then_kill=False)
    g = dict(t, group=t["group"] + "-empty")
    values = settings(bootstrap, g, work / "a-empty", g["group"] + ".p", work / "a-m4.jsonl")
    empty2, _ = restart_time(bootstrap, values, then_kill=True)
    shutil.rmtree(work / "a-empty", ignore_errors=True)
    out.update(restart=[restart1, restart2], empty=[empty1, empty2], load_end=load())
    out["checks"] = {
        "every label joins": out["labels"] == steps and out["dead_letters"] == 0,
        "RSS <= 1 GiB": max(out["fill_peak"], out["join_peak"]) <= GIB,
        "<= 500 B per waiting on disk": out["disk"] <= 500,
        "restart <= 5 s slower than empty": max(out["restart"]) - min(out["empty"]) <= 5.0,
    }
    return out


# ---------------------------------------------------------------- b. kill -9 x 3
def part_b(bootstrap: str, work: Path, n: int, steps: int, seed: int = 2, kills: int = 3) -> dict:
    t = names("b")
    create(bootstrap, [t["events"], t["labels"]])
    stream = Stream(n, n + steps + 1, 20, seed=seed)
    produce(bootstrap, t, in_batches(stream.fill, n))
    produce(bootstrap, t, in_batches(stream.steps, steps))
    out = {"n": n, "steps": steps, "load": [load()]}
    # Uninterrupted.
    ref = settings(bootstrap, t, work / "b-ref", t["group"] + ".ref", work / "b-ref.jsonl")
    t0 = time.monotonic()
    until_idle(ref)
    ref_lines = lines(work / "b-ref.jsonl")
    labelled = [x for x in ref_lines if x["labels"]]
    label_phase = labelled[-1]["ts"] - labelled[0]["ts"] if len(labelled) > 1 else 1.0
    out.update(uninterrupted_s=time.monotonic() - t0, label_phase_s=label_phase)
    # Killed at random moments of the label phase (once a metric line of this run shows
    # labels: the fill is done and n wait), then run to the end.
    g = dict(t, group=t["group"] + "-x")
    values = settings(bootstrap, g, work / "b-x", t["group"] + ".x", work / "b-x.jsonl")
    rng = random.Random(seed)
    moments = []
    for _ in range(kills):
        seen = len(lines(work / "b-x.jsonl"))
        run = Run(values)
        wait_for(lambda seen=seen: any(x["labels"] for x in lines(work / "b-x.jsonl")[seen:]),
                 1800, "the label phase", run.proc)  # fmt: skip
        pause = rng.uniform(0, label_phase / kills)
        time.sleep(pause)
        assert run.proc.poll() is None, "the run ended before its kill"
        line = lines(work / "b-x.jsonl")[-1]
        run.kill()
        moments.append({"after_s": round(time.monotonic() - run.started, 1),
                        "labels": line["labels"], "waiting": line["pending"]})  # fmt: skip
    until_idle(values)
    want = predictions(bootstrap, ref["predictions_topic"])
    got = predictions(bootstrap, values["predictions_topic"])
    a, b = ref_lines[-1], lines(work / "b-x.jsonl")[-1]
    untimed = ("ts", "events_per_s", "merge_stalls", "instance")
    out.update(kills=moments, predictions=len(got), load_end=load(),
               labels=(a["labels"], b["labels"]), log_loss=(a["log_loss"], b["log_loss"]),
               merge_stalls=(a["merge_stalls"], b["merge_stalls"]))  # fmt: skip
    out["checks"] = {
        "predictions identical": got == want and len(got) == n + steps,
        "labels joined identical": a["labels"] == b["labels"] == steps,
        "log loss identical": a["log_loss"] == b["log_loss"],
        "final metric lines identical": {k: v for k, v in a.items() if k not in untimed}
        == {k: v for k, v in b.items() if k not in untimed},
    }
    return out


# ---------------------------------------------------------------- c. scale-out
def held(log: Path) -> set:
    units: set = set()
    try:
        text = log.read_bytes()
    except FileNotFoundError:
        return units
    for line in text.splitlines():
        if not line.startswith(b"{"):
            continue
        try:
            r = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if r.get("event") == "adopted":
            units |= set(r["units"])
        elif r.get("event") == "released":
            units -= set(r["units"])
    return units


def adopted(log: Path) -> list[dict]:
    out = []
    for line in log.read_bytes().splitlines():
        if line.startswith(b"{") and b'"adopted"' in line:
            out.append(orjson.loads(line))
    return out


def part_c(bootstrap: str, work: Path, per_unit: int, steps: int, seed: int = 3) -> dict:
    t = names("c")
    create(bootstrap, [t["events"], t["labels"]], partitions=2)
    n = 2 * per_unit
    stream = Stream(n, n + steps + 1, 20, seed=seed)
    produce(bootstrap, t, in_batches(stream.fill, n))
    produce(bootstrap, t, in_batches(stream.steps, steps))
    out = {"n": n, "steps": steps, "load": [load()]}
    scope = {"scope": "partition"}
    # One instance, uninterrupted.
    r = dict(t, group=t["group"] + "-ref", state=t["group"] + "-ref.state")
    ref = settings(bootstrap, r, work / "c-ref", t["group"] + ".ref", work / "c-ref.jsonl",
                   state_topic=r["state"], **scope)  # fmt: skip
    until_idle(ref)
    # Two instances; the one holding unit 0 dies in the label phase, its directory too.
    runs, logs, dirs = [], [], []
    for i in range(2):
        dirs.append(work / f"c-state-{i}")
        logs.append(work / f"c-log-{i}.txt")
        values = settings(bootstrap, t, dirs[i], t["group"] + ".x", work / f"c-m{i}.jsonl",
                          state_topic=t["state"], instance_id=f"i{i}", **scope)  # fmt: skip
        runs.append(Run(values, "--log-level", "INFO", "--log-format", "json",
                        log=open(logs[i], "w")))  # fmt: skip
    try:
        wait_for(lambda: held(logs[0]) | held(logs[1]) == {0, 1} and held(logs[0])
                 and held(logs[1]), 300, "two instances sharing the units")  # fmt: skip
        victim = 0 if 0 in held(logs[0]) else 1
        metrics = work / f"c-m{victim}.jsonl"

        def unit0_labelled():
            return [x for x in lines(metrics) if x["unit"] == "0" and x["labels"]]

        wait_for(unit0_labelled, 3600, "unit 0's label phase", runs[victim].proc)
        time.sleep(random.Random(seed).uniform(0, 3))
        last = [x for x in lines(metrics) if x["unit"] == "0"][-1]
        out["moved"] = {"waiting": last["pending"], "labels": last["labels"]}
        runs[victim].kill()
        shutil.rmtree(dirs[victim])
        killed = time.monotonic()
        other = 1 - victim
        wait_for(lambda: held(logs[other]) == {0, 1}, 600, "the takeover", runs[other].proc)
        out["takeover_s"] = time.monotonic() - killed
        took = [a for a in adopted(logs[other]) if 0 in a["units"]][-1]
        out["rebuilt_from"] = [k for k, v in took["source"].items() if 0 in v]
        out["adopt_s"] = took["seconds"]
        want = predictions(bootstrap, ref["predictions_topic"])
        topic = t["group"] + ".x"

        def all_handled():  # the latest metric line of each unit counts its events
            latest = {x["unit"]: x["events"] for x in lines(work / f"c-m{other}.jsonl")}
            return sum(latest.values()) >= n + steps

        wait_for(all_handled, 3600, "every event handled", runs[other].proc)
        runs[other].proc.send_signal(signal.SIGTERM)
        assert runs[other].wait(120) == 0
        got = predictions(bootstrap, topic)
    finally:
        for run in runs:
            if run.proc.poll() is None:
                run.kill()
    per_checkpoint = state_topic_bytes(bootstrap, t, unit=0)
    out.update(predictions=len(got), state_topic=per_checkpoint, load_end=load())
    deltas = [c for c in per_checkpoint if c["kind"] == "delta"]
    out["checks"] = {
        "predictions identical": got == want and len(got) == n + steps,
        "moved unit rebuilt from the state topic": out["rebuilt_from"] == ["state_topic"],
        # A delta holds the changes and a slice of the store's roll of the same size (at
        # least _MIN_REFRESH), sealed: what changed, whatever waits.
        "state-topic bytes follow the changes": all(
            c["bytes"] <= 1.25 * (c["change_bytes"] + max(c["change_bytes"], 256 << 10)) + 8192
            for c in deltas
        ),
    }
    return out


def state_topic_bytes(bootstrap: str, t: dict, unit: int) -> list[dict]:
    """Per checkpoint of ``unit`` in the state topic, by writer (epoch) and kind: value
    bytes, and for a delta the changes it carries (unsealed with the key) and the bytes of
    the store once it is applied (the store's data size, rebuilt as the topic is read)."""
    from streamcal.stream.state.checkpoint import unseal

    groups: dict = {}
    prefix = f"{t['group']}/{unit}/".encode()

    def take(r):
        if r.value is None or not r.key.startswith(prefix):
            return
        head, _, chunk = r.value.partition(b"\n")
        h = orjson.loads(head)
        g = groups.setdefault(h["id"], {"epoch": h["epoch"], "kind": h["kind"], "seq": h["seq"],
                                        "bytes": 0, "chunks": {}, "offset": r.offset})  # fmt: skip
        g["bytes"] += len(r.value)
        g["chunks"][h["part"]] = chunk

    read_all(bootstrap, t["state"], take)
    out, sizes, store = [], {}, 0
    for g in sorted(groups.values(), key=lambda g: g["offset"]):
        row = {k: g[k] for k in ("epoch", "kind", "seq", "bytes")}
        if g["kind"] == "delta":
            data = b"".join(g["chunks"][i] for i in sorted(g["chunks"]))
            delta = unseal(KEY.encode(), data, "state-topic delta")
            changes = delta["changes"]
            row["changes"] = len(changes)
            row["change_bytes"] = sum(len(k) + len(v or b"") for k, v in changes.items())
            row["refresh_bytes"] = sum(len(k) + len(v) for k, v in delta["refresh"])
            for k, v in changes.items():
                store -= sizes.pop(k, 0)
                if v is not None:
                    sizes[k] = len(k) + len(v)
                    store += sizes[k]
            row["store_bytes"] = store
        out.append(row)
    return out


def summarize_topic(rows: list[dict]) -> list[str]:
    """The moved unit's deltas, writer by writer (an epoch each: the instance that held it
    first, the one that took it over), by quarter: bytes per checkpoint against the changes
    it carried and the store's size."""
    med = statistics.median
    out = ["| writer | deltas | store MiB at the end | median changes | median change KiB | "
           "median bytes KiB | max bytes KiB | bytes / change bytes |",
           "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    epochs = list(dict.fromkeys(r["epoch"] for r in rows if r["kind"] == "delta"))
    for w, epoch in enumerate(epochs, 1):
        deltas = [r for r in rows if r["kind"] == "delta" and r["epoch"] == epoch]
        q = max(1, -(-len(deltas) // 4))
        for i in range(0, len(deltas), q):
            part = deltas[i : i + q]
            ratio = sum(r["bytes"] for r in part) / max(1, sum(r["change_bytes"] for r in part))
            out.append(
                f"| {w} | {i + 1}-{i + len(part)} | {part[-1]['store_bytes'] / 2**20:,.1f} | "
                f"{med(r['changes'] for r in part):,.0f} | "
                f"{med(r['change_bytes'] for r in part) / 1024:,.0f} | "
                f"{med(r['bytes'] for r in part) / 1024:,.0f} | "
                f"{max(r['bytes'] for r in part) / 1024:,.0f} | {ratio:.2f} |"
            )
    snaps = [r["bytes"] for r in rows if r["kind"] == "snapshot"]
    if snaps:
        out.append(f"\nsnapshots: {len(snaps)}, {', '.join(f'{b / 1024:,.0f}' for b in snaps)} KiB")
    return out


# ---------------------------------------------------------------- main
def run_parts(bootstrap_of, parts: str, scale: float, work: Path, steps_fraction: float,
              waiting: int, kill_waiting: int, move_waiting: int) -> dict:  # fmt: skip
    """Run ``parts`` ("abc") at ``scale``, each against the broker ``bootstrap_of()`` gives
    (a context manager yielding a bootstrap string)."""
    results = {}
    plans = {
        "a": (part_a, int(waiting * scale)),
        "b": (part_b, int(kill_waiting * scale)),
        "c": (part_c, int(move_waiting * scale)),
    }
    for p in parts:
        fn, n = plans[p]
        steps = max(2000, int(n * steps_fraction)) * (2 if p == "c" else 1)
        directory = work / p
        directory.mkdir(parents=True, exist_ok=True)
        t = time.monotonic()
        with bootstrap_of() as bootstrap:
            results[p] = fn(bootstrap, directory, n, steps)
        results[p]["wall_s"] = time.monotonic() - t
        shutil.rmtree(directory, ignore_errors=True)
        print(f"part {p}: {json.dumps(results[p], default=str)}", file=sys.stderr, flush=True)
    return results


class _Broker:
    def __enter__(self):
        from streamcal.demo.broker import LocalBroker

        self.broker = LocalBroker().__enter__()
        return self.broker.bootstrap_servers

    def __exit__(self, *exc):
        self.broker.__exit__(*exc)


def report(results: dict) -> str:
    out = []
    if "a" in results:
        a = results["a"]
        out += [f"a. {a['n']:,} waiting, {a['steps']:,} labels (load {a['load'][0]} at start, "
                f"{a['load_fill']} after the fill, {a['load_end']} at the end)",  # fmt: skip
                "| peak RSS MiB fill / joins (producer process) | B/waiting on disk after the "
                "fill / at the end | labels joined / sent | dead letters | restart s | empty "
                "start s |", "|---|---|---|---|---|---|",
                f"| {a['fill_peak'] / 2**20:,.0f} / {a['join_peak'] / 2**20:,.0f} "
                f"({a['fill_child_peak'] / 2**20:,.0f} / {a['join_child_peak'] / 2**20:,.0f}) | "
                f"{a['disk_after_fill']:,.0f} / {a['disk']:,.0f} | {a['labels']:,} / "
                f"{a['steps']:,} | {a['dead_letters']} | "
                f"{', '.join(f'{x:.1f}' for x in a['restart'])} | "
                f"{', '.join(f'{x:.1f}' for x in a['empty'])} |"]  # fmt: skip
    if "b" in results:
        b = results["b"]
        out += ["", f"b. {b['n']:,} waiting, {b['steps']:,} labels, kill -9 at {b['kills']} "
                f"(load {b['load'][0]} at start, {b['load_end']} at the end); {b['predictions']:,}"
                f" predictions; labels {b['labels']}; log loss {b['log_loss']}; merge stalls "
                f"{b['merge_stalls']}"]  # fmt: skip
    if "c" in results:
        c = results["c"]
        out += ["", f"c. {c['n']:,} events over 2 units, {c['steps']:,} labels; unit 0 moved "
                f"with {c['moved']}, takeover {c['takeover_s']:.1f} s (adoption "
                f"{c['adopt_s']:.1f} s, from {c['rebuilt_from']}); {c['predictions']:,} "
                f"predictions (load {c['load'][0]} at start, {c['load_end']} at the end)",
                "", "state topic, unit 0: its deltas by writer, by quarter:",
                *summarize_topic(c["state_topic"])]  # fmt: skip
    for p, r in results.items():
        for name, ok in r["checks"].items():
            out.append(f"{p}. {name}: {'yes' if ok else 'NO'}")
    return "\n".join(out)


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=float, default=1.0, help="of every size (0.01: a quick run)")
    p.add_argument("--parts", default="abc")
    p.add_argument("--waiting", type=int, default=2_000_000, help="part a")
    p.add_argument("--kill-waiting", type=int, default=1_000_000, help="part b")
    p.add_argument("--move-waiting", type=int, default=1_000_000, help="part c, per unit")
    p.add_argument("--steps-fraction", type=float, default=0.1,
                   help="labels (each with a new event) per waiting prediction")  # fmt: skip
    p.add_argument("--out-dir", default=None, help="where the state directories go")
    p.add_argument("--json", help="also write the results here")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    work = Path(tempfile.mkdtemp(prefix="pending-e2e-", dir=args.out_dir))
    try:
        results = run_parts(_Broker, args.parts, args.scale, work, args.steps_fraction,
                            args.waiting, args.kill_waiting, args.move_waiting)  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, default=str))
    print(report(results))
    return 0 if all(all(r["checks"].values()) for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
