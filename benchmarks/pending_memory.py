"""Memory of a long run with labels days late: `streamcal run` against tansu with
--state-dir, events whose labels come 1-3 days later in record time (uniformly), so that
about ``--waiting`` predictions wait once the first three days of record time are read;
the run goes on for ``--days`` of record time (the waiting set turns over, as in
production) and stops when idle. Issue 37 item 3: RSS grew with the process's history
(947 MB at 10^6 waiting, against 424-462 MB for a restarted process holding as many).

Reported: the processor's peak RSS (VmHWM; its producer process apart), RSS (anon and
file-backed) against what waits, sampled every 0.5 s (ten rows and the highest sample;
``--json`` keeps every sample and metric line), and a restart on the same state
directory (its RSS once it has read the last records). All input is in the topics before
a run reads it (one merge order, docs/ordering.md).

    python benchmarks/pending_memory.py --paced --days 4     # 10^6 waiting (~32 minutes)
    python benchmarks/pending_memory.py --waiting 1e5 --days 5  # a backlog (~2 minutes)
    python benchmarks/pending_memory.py --estimate            # records and time, not run

Options after ``--`` go to `streamcal run` (e.g. ``-- --state-memory 128MiB``). Without
``--paced`` all input is in the topics first: a backlog whose labels topic starts a day of
record time after its events topic, which the ordered merge buffers (docs/processor.md).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]  # benchmarks/kafka.py

import numpy as np  # noqa: E402
import orjson  # noqa: E402

DAY_MS = 86_400_000
T0 = 1_700_000_000_000  # ms
MIB = 2**20


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_bench", HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


e2e = _load("pending_e2e")


class DelayedStream:
    """Events ``gap_ms`` apart in record time with 20 gaussian features, each labelled
    ``U(1, 3)`` days later; ``gap_ms`` is such that ``waiting`` wait at a time (the event
    rate times the mean delay of 2 days). ``events(k)`` and ``labels(k)`` give the next
    records of each topic in time order (labels past the last event's time are not sent:
    their events are still waiting at the end)."""

    def __init__(self, waiting: int, days: float, seed: int = 7, features: int = 20):
        self.rng = np.random.default_rng(seed)
        self.gap_ms = 2 * DAY_MS / waiting
        self.n = int(days * DAY_MS / self.gap_ms)
        self.names = [f"f{j:02d}" for j in range(features)]
        self.event_ts = T0 + (np.arange(self.n) * self.gap_ms).astype(np.int64)
        label_ts = self.event_ts + self.rng.uniform(DAY_MS, 3 * DAY_MS, self.n).astype(np.int64)
        order = np.argsort(label_ts, kind="stable")
        keep = label_ts[order] <= self.event_ts[-1]
        self.label_order, self.label_ts = order[keep], label_ts[order][keep]
        self.y = np.zeros(self.n, np.int8)
        self._next_event = self._next_label = 0

    @property
    def n_labels(self) -> int:
        return len(self.label_order)

    def events(self, k: int) -> list:
        first = self._next_event
        k = min(k, self.n - first)
        x = self.rng.standard_normal((k, len(self.names)))
        self.y[first : first + k] = (x[:, 0] - 0.5 * x[:, 1] + self.rng.standard_normal(k)) > 0
        self._next_event += k
        names, ts = self.names, self.event_ts
        return [e2e._pending.Rec("events", 0, first + i, int(ts[first + i]), b"e%d" % (first + i),
                                 orjson.dumps({"id": f"e{first + i}",
                                               "features": dict(zip(names, row, strict=True))}))
                for i, row in enumerate(x.tolist())]  # fmt: skip

    def labels(self, k: int) -> list:
        first = self._next_label
        out = []
        for i in range(first, min(first + k, self.n_labels)):
            eid = int(self.label_order[i])
            value = orjson.dumps({"id": f"e{eid}", "label": int(self.y[eid])})
            out.append(e2e._pending.Rec("labels", 0, i, int(self.label_ts[i]), b"e%d" % eid, value))
        self._next_label += len(out)
        return out


class Sampled(e2e.Run):
    """`streamcal run` with ``values`` and ``extra``; /proc/PID/status sampled every 0.5 s:
    ``series`` of (seconds since start, VmRSS, RssAnon, RssFile, its children's VmRSS),
    ``peak`` (VmHWM) and ``child_peak`` (its producer process)."""

    every = 0.5

    def __init__(self, values: dict, extra: list, env: dict):
        self.series: list = []
        self.wall_started = time.time()
        idle = [] if "--max-idle-s" in extra else ["--max-idle-s", "3"]
        super().__init__(values, *idle, *extra, log=subprocess.PIPE, env=env)

    def _take(self, pid: int) -> None:
        fields = [e2e.vm(pid, f) for f in ("VmRSS", "RssAnon", "RssFile", "VmHWM")]
        if fields[0]:
            child = sum(e2e.vm(c, "VmRSS") for c in e2e.children(pid))
            self.series.append((round(time.monotonic() - self.started, 1), *fields[:3], child))
            self.peak = max(self.peak, fields[3])

    def wait(self) -> None:
        err = self.proc.stderr.read()
        code = super().wait()
        if code != 0:
            raise RuntimeError(f"streamcal run exited with {code}: {err.decode()[-2000:]}")


def estimate(waiting: int, days: float, events_per_s: float = 1050.0) -> dict:
    """Records of a run and a rough time for it (at ``events_per_s`` events with their
    labels through the processor: what the paced run at 10^6 gave on this shared 2-core
    machine, at load 6-14)."""
    n = int(days * waiting / 2)
    labels = int(n * max(0.0, days - 2) / days)
    return {"events": n, "labels": labels, "minutes": round(n / events_per_s / 60, 1)}


def produce_paced(bootstrap: str, t: dict, stream: DelayedStream, metrics: Path, run,
                  window_ms: int = 1_800_000) -> None:  # fmt: skip
    """Produce the stream a record-time window at a time (events and labels up to its end),
    at most two windows ahead of the events the processor has read (its metric lines), as
    a live source would: the labels topic is never days ahead of the events topic."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50, batch_size=1 << 20,
                             max_request_size=16 << 20, acks=1)  # fmt: skip
    sent_before: list = []  # events produced before each window
    end = int(stream.event_ts[0])
    try:
        while stream._next_event < stream.n or stream._next_label < stream.n_labels:
            end += window_ms
            k = int(np.searchsorted(stream.event_ts, end, "right")) - stream._next_event
            j = int(np.searchsorted(stream.label_ts, end, "right")) - stream._next_label
            sent_before.append(stream._next_event)
            for r in stream.events(k) + stream.labels(j):
                producer.send(t[r.topic], key=r.key, value=r.value, timestamp_ms=r.timestamp)
            producer.flush(timeout=300)
            if len(sent_before) > 2:
                target = sent_before[-2]
                e2e.wait_for(lambda target=target: (e2e.lines(metrics) or [{"events": 0}])[-1]
                             ["events"] >= target, 3600, "the processor", run.proc)  # fmt: skip
    finally:
        producer.close()


def part_m(bootstrap: str, work: Path, waiting: int, days: float, extra: list,
           env: dict, paced: bool = False) -> dict:  # fmt: skip
    t = e2e.names("m")
    e2e.create(bootstrap, [t["events"], t["labels"]])
    stream = DelayedStream(waiting, days)
    out = {"waiting_target": waiting, "days": days, "events": stream.n, "paced": paced,
           "labels_sent": stream.n_labels, "extra": extra, "load": [e2e.load()]}  # fmt: skip
    ttl = ["--pending-ttl", "4d"]
    metrics = work / "m.jsonl"
    values = e2e.settings(bootstrap, t, work / "state", t["group"] + ".p", metrics)
    t0 = time.monotonic()
    if paced:  # the processor reads as the source writes (idle for a while: it waits)
        run = Sampled(values, ttl + ["--metrics-interval", "1", "--max-idle-s", "30"] + extra,
                      env)  # fmt: skip
        produce_paced(bootstrap, t, stream, metrics, run)
    else:  # a backlog: the labels topic starts a day of record time after the events
        e2e.produce(bootstrap, t, e2e.in_batches(stream.events, stream.n))
        e2e.produce(bootstrap, t, e2e.in_batches(stream.labels, stream.n_labels))
        out["produce_s"] = round(time.monotonic() - t0, 1)
        run = Sampled(values, ttl + extra, env)
    run.wait()
    got = e2e.lines(metrics)
    last = got[-1]
    out.update(run_s=round(time.monotonic() - run.started, 1), peak=run.peak,
               child_peak=run.child_peak, labels=last["labels"], waiting=last["pending"],
               expired=last["expired"], dead_letters=last["dead_letters"],
               stalls=last.get("merge_stalls"),
               max_waiting=max(x["pending"] or 0 for x in got),
               series=rss_against_waiting(run, got), load_run=e2e.load(), metric_lines=got,
               samples=[(*x, run.wall_started + x[0]) for x in run.series])  # fmt: skip
    # A restart on the same state: what a process holding as many, without the history,
    # takes (it reads the last metric line's position and stops when idle).
    values = e2e.settings(bootstrap, t, work / "state", t["group"] + ".p2", work / "m2.jsonl")
    again = Sampled(values, ttl + extra, env)
    again.wait()
    out.update(restart_peak=again.peak, restart_rss=again.series[-1][1] if again.series else 0,
               load_end=e2e.load())  # fmt: skip
    return out


def rss_against_waiting(run: Sampled, got: list) -> list:
    """Ten rows over the run and its highest sample: (s, waiting, RSS MiB, anon MiB, file
    MiB), the waiting count from the metric line nearest in wall time."""
    if not run.series or not got:
        return []
    rows = []
    step = max(1, len(run.series) // 10)
    top = max(run.series, key=lambda x: x[1])  # the highest sample: where a transient is
    for s, rss, anon, file, _child in sorted({*run.series[::step], *run.series[-1:], top}):
        near = min(got, key=lambda x: abs(x["ts"] - (run.wall_started + s)))
        rows.append((s, near["pending"], round(rss / MIB), round(anon / MIB), round(file / MIB)))
    return rows


def report(m: dict) -> str:
    how = "produced as the processor reads" if m["paced"] else "all in the topics first"
    out = [f"{m['events']:,} events over {m['days']:g} days of record time, labels 1-3 days "
           f"late ({m['labels_sent']:,} sent, {how}); streamcal run "
           f"{' '.join(m['extra']) or '(defaults)'}"
           f" (load {m['load'][0]} at start, {m['load_run']} after the run, {m['load_end']} at "
           "the end)",
           f"run {m['run_s']:.0f} s: labels joined {m['labels']:,}, waiting at the end "
           f"{m['waiting']:,} (at most {m['max_waiting']:,}), expired {m['expired']}, dead "
           f"letters {m['dead_letters']}, merge stalls {m['stalls']}",
           f"peak RSS {m['peak'] / MIB:,.0f} MiB (producer process {m['child_peak'] / MIB:,.0f});"
           f" a restart on the same state: {m['restart_rss'] / MIB:,.0f} MiB (peak "
           f"{m['restart_peak'] / MIB:,.0f})",
           "| s | waiting | RSS MiB | anon | file |", "|---|---|---|---|---|"]  # fmt: skip
    out += [f"| {s:.0f} | {w:,} | {r:,} | {a:,} | {f:,} |" for s, w, r, a, f in m["series"]]
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--waiting", type=float, default=1e6)
    p.add_argument("--days", type=float, default=6.0, help="of record time (> 3)")
    p.add_argument("--estimate", action="store_true", help="say the sizes and a time only")
    p.add_argument("--paced", action="store_true",
                   help="produce as a live source would, a window ahead of the processor "
                   "(default: all input first, a backlog whose labels start a day later)")
    p.add_argument("--env", action="append", default=[], help="NAME=VALUE for the run")
    p.add_argument("--json", help="also write the results here")
    p.add_argument("extra", nargs="*", help="after --: options of streamcal run")
    args = p.parse_args(argv)
    waiting = int(args.waiting)
    if args.estimate:
        print(json.dumps(estimate(waiting, args.days)))
        return 0
    env = {**e2e.ENV, **dict(kv.split("=", 1) for kv in args.env)}
    work = Path(tempfile.mkdtemp(prefix="pending-memory-"))
    try:
        with e2e._Broker() as bootstrap:
            result = part_m(bootstrap, work, waiting, args.days, args.extra, env, args.paced)
    finally:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(result))
    print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
