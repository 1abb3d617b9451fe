"""Scale-out of `streamcal run` against tansu: instances, partitions, kill -9 recovery.

Measured side by side in one run, on the same broker, over 4-partition events and labels
topics holding the same stream (sva, scaled logistic regression, every label joined):

* `--scope global`, one instance;
* `--scope partition`, one instance (state topic on, as deployed);
* `--scope partition`, two instances in one consumer group;
* `--scope partition`, one and two instances of one process each (`--no-producer-process`).

Why the last pair: by default an instance is two busy processes (the processor and its
producer process), so on a 2-core machine one instance already holds both cores and a
second one mostly takes turns with it; with one process per instance, 1 -> 2 instances is
1 -> 2 cores, which shows what the consumer group itself costs (nothing, if the ratio is
near 2). On a machine with a core per process both configurations scale alike.

Every run reads the same input topics, produced once beforehand, from the start (its own
consumer group and output topics). All runs are repeated --repeat times, interleaved
(global, partition, 2 instances, ..., global, ...), and their medians compared: on a
2-core machine shared with other jobs a single run's CPU per event varies by +-20%, and
pairs of single runs gave partition/global ratios from 0.75 to 1.50 (median 1.02, 9
pairs; benchmarks/scopes.py, in process, puts the real difference at 1-4%). The work
compared is the same per event except checkpoints: `--scope global` runs without a state
directory (no checkpoints), `--scope partition` writes its 4 units to the state topic
every --checkpoint-interval (30 s: none within a --quick window; a checkpoint of the 4
units at 60k labels is ~37 ms of CPU against ~23 ms for the one global unit).

Rates are steady-state, from the metric lines (per unit, every --metrics-every labels)
written once the group's assignment is final (the last "adopted units" log line: two
members starting together split the partitions only after a rebalance or two), over all
units. CPU µs per event is
the CPU of every process of the instances (processor and producer child, from /proc,
sampled every 0.2 s) over the same window, so start-up and the group join are left out.

Then the kill -9 run: two `--scope partition` instances (session timeout 6 s, window
1000) on a live stream of --live-rate events/s; once both hold units and have
checkpointed, one is killed with SIGKILL. Recovery time: from the kill to the first
metric line of one of its units from the survivor (lines every 20 labels: within ~0.1 s
of its first predictions). Restore time: the survivor's own log of restoring those units
from the state topic (reading the topic to its end, verifying, unpickling).

The projection to 8, 16 and 32 cores divides cores by the measured CPU per event of
`--scope partition`: a projection, assuming one instance per core and a broker that keeps
up elsewhere, not a measurement.

    python benchmarks/scale.py            # 200k events per run (several minutes)
    python benchmarks/scale.py --quick    # 60k events
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != str(_HERE)]

import orjson  # noqa: E402

_spec = importlib.util.spec_from_file_location("bench_kafka", _HERE / "kafka.py")
bench_kafka = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_kafka)  # produce_input: the same stream as benchmarks/kafka.py

P = 4
KEY = "benchmark-checkpoint-key-0123456789"
_ADOPTED = re.compile(r"^(\S+ \S+) streamcal\.stream\S* adopted units \[([\d, ]*)\].*in ([\d.]+) s")


def tree_cpu(pid: int) -> float:
    """CPU seconds of process ``pid`` and its live descendants (Linux /proc)."""
    total = 0.0
    try:
        total += bench_kafka.broker_cpu(pid)
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                total += sum(tree_cpu(int(c)) for c in fh.read().split())
    except (FileNotFoundError, ProcessLookupError):
        pass
    return total


class Instance:
    """One `streamcal run` process, its log, its metric lines and a CPU timeline."""

    def __init__(self, bs, topics, scope, i, tmp: Path, every, extra=()):
        self.metrics, self.log = tmp / f"metrics-{i}.jsonl", tmp / f"log-{i}.txt"
        cmd = [
            sys.executable, "-m", "streamcal", "run", "--bootstrap-servers", bs,
            "--group-id", topics["group"], "--events-topic", topics["events"],
            "--labels-topic", topics["labels"], "--predictions-topic", topics["predictions"],
            "--dead-letter-topic", topics["dead"], "--mode", "sva", "--model", "logreg",
            "--metrics-file", str(self.metrics), "--metrics-every", str(every),
            "--scope", scope, "--instance-id", f"i{i}", "--state-topic", topics["state"],
            "--log-level", "INFO", *extra,
        ]  # fmt: skip
        env = {**os.environ, "STREAMCAL_CHECKPOINT_KEY": KEY}
        with open(self.log, "w") as err:
            self.proc = subprocess.Popen(cmd, env=env, stderr=err, stdout=subprocess.DEVNULL,
                                         cwd=tempfile.gettempdir())  # fmt: skip
        self.cpu: list[tuple[float, float]] = []
        self.exited_at = float("inf")
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self):
        while self.proc.poll() is None:
            self.cpu.append((time.time(), tree_cpu(self.proc.pid)))
            time.sleep(0.2)
        self.exited_at = time.time()

    def cpu_at(self, t: float) -> float:
        """CPU seconds used by time ``t`` (linear between samples)."""
        prev = (0.0, 0.0)
        for s in self.cpu:
            if s[0] >= t:
                if prev[0] == 0.0:
                    return s[1]
                return prev[1] + (s[1] - prev[1]) * (t - prev[0]) / (s[0] - prev[0])
            prev = s
        return prev[1]

    def lines(self) -> list[dict]:
        if not self.metrics.exists():
            return []
        return [orjson.loads(x) for x in self.metrics.read_bytes().splitlines() if x]

    def adoptions(self) -> list[tuple[float, set, float]]:
        """(epoch time, units, seconds taken) of each "adopted units" log line."""
        out = []
        for line in self.log.read_text(errors="replace").splitlines():
            m = _ADOPTED.match(line)
            if m:
                when = datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                units = {int(u) for u in m[2].split(",") if u.strip()}
                out.append((when, units, float(m[3])))
        return out

    def wait(self, timeout=600):
        rc = self.proc.wait(timeout)
        self._sampler.join()
        if rc not in (0, -signal.SIGKILL):
            raise RuntimeError(f"instance exited with {rc}: {self.log.read_text()[-2000:]}")


def new_topics(bs, tag: str, name: str, n: int | None, inputs: dict | None = None) -> dict:
    """A run's topics and group; with ``inputs``, its events and labels are those (shared
    by several runs), else new ones holding ``n`` events (none if ``n`` is None)."""
    from kafka.admin import KafkaAdminClient, NewTopic

    t = {k: f"scale-{tag}-{name}.{k}" for k in ("events", "labels", "predictions", "dead")}
    t["group"], t["state"] = f"scale-{tag}-{name}", f"scale-{tag}-{name}.state"
    if inputs is not None:
        return {**t, "events": inputs["events"], "labels": inputs["labels"]}
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:  # before anything else touches them: tansu would auto-create 4 partitions anyway
        admin.create_topics([NewTopic(t[k], P, 1) for k in ("events", "labels")])
    finally:
        admin.close()
    if n:
        bench_kafka.produce_input(bs, t["events"], t["labels"], n)
    return t


def steady(instances, every: int) -> tuple[float, float, int]:
    """(events/s, CPU µs/event, events) over the window from the group's final assignment
    (the last adoption) to the first instance leaving (the others then rebalance)."""
    end = min(i.exited_at for i in instances)
    settled = max((a[0] for i in instances for a in i.adoptions() if a[0] < end), default=0.0)
    per_unit: dict = {}
    for inst in instances:
        for x in inst.lines():
            if x["labels"] and not x["labels"] % every and settled <= x["ts"] < end:
                per_unit.setdefault(x["unit"], []).append(x)
    first, last = {}, {}
    for u, xs in per_unit.items():
        xs.sort(key=lambda x: (x["labels"], x["ts"]))
        first[u] = xs[0]
        # The first line at the final count: later ones repeat it while idle.
        last[u] = min((x for x in xs if x["labels"] == xs[-1]["labels"]), key=lambda x: x["ts"])
    events = sum(last[u]["events"] - first[u]["events"] for u in last)
    t0 = min(f["ts"] for f in first.values())
    t1 = max(f["ts"] for f in last.values())
    cpu = sum(i.cpu_at(t1) - i.cpu_at(t0) for i in instances)
    return events / (t1 - t0), 1e6 * cpu / events, events


def throughput(bs, tag, tmp: Path, scope: str, count: int, inputs: dict, every: int, rep=0,
               more=()):  # fmt: skip
    name = f"{scope}-{count}-{rep}"
    topics = new_topics(bs, tag, name, None, inputs)
    extra = ["--max-idle-s", "3", "--session-timeout-ms", "2000", *more]
    if scope == "global":
        extra += ["--state-topic", "none"]  # global: checkpoints in --state-dir only (none here)
    run_dir = tmp / name
    run_dir.mkdir()
    instances = [Instance(bs, topics, scope, i, run_dir, every, extra) for i in range(count)]
    for inst in instances:
        inst.wait()
    return steady(instances, every)


def kill_run(bs, tag, tmp: Path, rate: float, seconds: float, every: int):
    """(recovery s, restore s, units restored, session timeout s) of one kill -9."""
    from kafka import KafkaProducer

    topics = new_topics(bs, tag, "kill", None)
    run_dir = tmp / "kill"
    run_dir.mkdir()
    extra = ["--window", "1000", "--session-timeout-ms", "6000", "--checkpoint-interval", "1"]
    stop = threading.Event()

    def live():  # a paced live stream of events and labels (labels 5 ms after)
        producer = KafkaProducer(bootstrap_servers=bs, linger_ms=5)
        sent, start = 0, time.monotonic()
        while not stop.is_set():
            due = int((time.monotonic() - start) * rate)
            for i in range(sent, due):
                eid = f"e{i}".encode()
                features = {"x0": (i % 97) / 50 - 1, "x1": (i % 89) / 45 - 1}
                x = orjson.dumps({"id": eid.decode(), "features": features})
                y = orjson.dumps({"id": eid.decode(), "label": int(i % 97 < 40 + i % 13)})
                ts = int(time.time() * 1000)
                producer.send(topics["events"], key=eid, value=x, timestamp_ms=ts)
                producer.send(topics["labels"], key=eid, value=y, timestamp_ms=ts + 5)
            sent = max(sent, due)
            time.sleep(0.01)
        producer.flush()
        producer.close()

    feeder = threading.Thread(target=live)
    feeder.start()
    instances = [Instance(bs, topics, "partition", i, run_dir, every, extra) for i in (0, 1)]
    try:
        deadline = time.monotonic() + 120
        while not all(inst.adoptions() for inst in instances) or any(
            len(inst.adoptions()[-1][1]) != P // 2 for inst in instances
        ):
            if time.monotonic() > deadline:
                raise RuntimeError("the two instances did not split the partitions")
            time.sleep(0.2)
        time.sleep(seconds)  # both calibrate and checkpoint for a while
        victim, survivor = instances
        units = {str(u) for u in victim.adoptions()[-1][1]}
        killed_at = time.time()
        victim.proc.send_signal(signal.SIGKILL)
        victim.wait()
        deadline = time.monotonic() + 120
        back = None
        while back is None and time.monotonic() < deadline:
            after = [x["ts"] for x in survivor.lines() if x["unit"] in units
                     and x["ts"] > killed_at]  # fmt: skip
            back = min(after) if after else None
            time.sleep(0.2)
        restore = [a for a in survivor.adoptions() if a[0] > killed_at]
    finally:
        stop.set()
        feeder.join()
        for inst in instances:
            if inst.proc.poll() is None:
                inst.proc.send_signal(signal.SIGTERM)
        for inst in instances:
            inst.wait()
    if back is None:
        raise RuntimeError("the victim's units never came back")
    return back - killed_at, restore[0][2] if restore else float("nan"), len(units), 6.0


SINGLE = ("--no-producer-process",)


def _name(key) -> str:
    scope, count, more = key
    name = f"--scope {scope}, {count} instance{'s' if count > 1 else ''}"
    return name + (", one process each" if more else "")


def _median(xs):
    return sorted(xs)[(len(xs) - 1) // 2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--quick", action="store_true", help="60k events per run")
    ap.add_argument("--live-rate", type=float, default=2000.0, help="events/s of the kill run")
    ap.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="interleaved runs of each one-instance scope (medians compared)",
    )
    args = ap.parse_args()
    n = 60_000 if args.quick else args.events
    every = max(500, n // 200)

    from streamcal.demo.broker import LocalBroker

    tmp = Path(tempfile.mkdtemp(prefix="streamcal-scale-"))
    with LocalBroker() as broker:
        bs = broker.bootstrap_servers
        tag = uuid.uuid4().hex[:8]
        inputs = new_topics(bs, tag, "input", n)
        plan = [("global", 1, ()), ("partition", 1, ()), ("partition", 2, ()),
                ("partition", 1, SINGLE), ("partition", 2, SINGLE)]  # fmt: skip
        runs: dict = {k: [] for k in plan}
        for i, key in enumerate(plan * args.repeat):
            scope, count, more = key
            runs[key].append(throughput(bs, tag, tmp, scope, count, inputs, every, i, more))
            rate, cpu, events = runs[key][-1]
            print(f"{_name(key)}: {rate:,.0f} events/s, "
                  f"{cpu:.1f} CPU µs/event ({events:,} in the window)", flush=True)  # fmt: skip
        # The median run of each (by events/s for the rates, by CPU per event for the CPU).
        rate_of = {k: _median([r[0] for r in v]) for k, v in runs.items()}
        cpu_of = {k: _median([r[1] for r in v]) for k, v in runs.items()}
        recovery, restore, n_units, session = kill_run(bs, tag, tmp, args.live_rate, 8.0, 20)

    print(f"\n{n:,} events over {P} partitions, {os.cpu_count()} cores, tansu in memory; "
          f"each row: the medians of {args.repeat} interleaved runs\n")  # fmt: skip
    print(f"{'run':58s} {'events/s':>10s} {'CPU µs/event':>13s}")
    for key in plan:
        print(f"{_name(key):58s} {rate_of[key]:10,.0f} {cpu_of[key]:13.1f}")
    g1, p1, p2, s1, s2 = plan
    print(
        f"\n2 instances / 1 instance (events/s): {rate_of[p2] / rate_of[p1]:.2f}x; "
        f"one process per instance: {rate_of[s2] / rate_of[s1]:.2f}x (target >= 1.7x)"
    )
    print(f"--scope partition / --scope global (CPU per event): {cpu_of[p1] / cpu_of[g1]:.2f} "
          "(target <= 1.10)")  # fmt: skip
    pairs = zip(runs[g1], runs[p1], strict=True)
    print("  run by run (each partition run after its global one): "
          + ", ".join(f"{p[1] / g[1]:.2f}" for g, p in pairs))  # fmt: skip
    pairs = zip(runs[s1], runs[s2], strict=True)
    print("  one process per instance, run by run (2 / 1): "
          + ", ".join(f"{b[0] / a[0]:.2f}" for a, b in pairs))  # fmt: skip
    print(f"\nkill -9 of one of 2 instances (live {args.live_rate:,.0f} events/s, window 1000, "
          f"session timeout {session:.0f} s):")  # fmt: skip
    print(f"  its {n_units} units predicting again after {recovery:.1f} s "
          f"(target <= session timeout + 5 s = {session + 5:.0f} s)")  # fmt: skip
    print(f"  restoring them from the state topic took {restore:.3f} s "
          f"({restore / n_units:.3f} s per unit)")  # fmt: skip
    cpu = cpu_of[p1]
    print(f"\nProjection (not measured): events/s = cores x 1e6 / {cpu:.1f} CPU µs per event,")
    print("one --scope partition instance per core, at least as many partitions as cores,")
    print("the broker on other machines:")
    for cores in (8, 16, 32):
        print(f"  {cores:2d} cores: {cores * 1e6 / cpu:10,.0f} events/s")


if __name__ == "__main__":
    main()
