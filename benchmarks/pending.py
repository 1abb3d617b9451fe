"""Waiting predictions at 10^4..10^7: the unit with its store on disk, beside the old design
that held them in memory (issue 27, item 6).

Each size runs in a process of its own (so that RSS is its own), the unit driven in process:
a ``CalibrationUnit`` held by ``UnitStates`` with a state directory and a checkpoint key,
outputs sent nowhere, default settings otherwise (20 numeric features per event):

1. fill: N events, no labels (N waiting), with a checkpoint (``UnitStates.save_changed``)
   every --checkpoint-interval seconds of wall time, as the processor's loop does;
2. steady: each step one new event and one label for a random waiting event (which ids
   wait is a numpy array: the label's slot takes the new event's id), checkpoints as above;
   the first --warmup steps are not timed;
3. restart: close, then a new ``UnitStates.restore_global`` and one record (a label for a
   waiting event), timed to the record handled.

Figures per size: RSS at the end of the steady phase (VmRSS, and VmHWM: the peak) and its
share per waiting prediction (RSS / N); bytes per waiting prediction on disk (the store
directory's allocated blocks / N; the old design: its newest checkpoint file); the longest
checkpoint (the wall time of the save call: the loop stops for it; its CPU beside it, so that
a wait for the CPU shows) and the longest single record; restart to the first record; µs per
label + event (the two records' handling, checkpoints excluded; this thread's CPU and the
other threads' beside it: RocksDB's flushes and compactions) and its ratio to the first size's.
The old design is the tree before the store (--old-tree, run with PYTHONPATH there), skipped
where its ~2.9 KB per waiting prediction (issue 27's peak at 10^6) would not fit in the memory
available.

    python benchmarks/pending.py                           # 10^4, 10^5, 10^6 (~3 minutes)
    python benchmarks/pending.py --sizes 1e4,1e7,1e4       # 10^7 between two 10^4 (~12
                                                           # minutes, ~2.5 GB of disk)
    python benchmarks/pending.py --sizes 1e4,1e6 --checkpoint-interval 3 --no-old
        # ~18,000 steps per checkpoint: what 1 s holds at 18,000 events/s with their labels
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

HERE = Path(__file__).resolve().parent
# Run as a script, benchmarks/ comes first on sys.path, and benchmarks/kafka.py would shadow
# the kafka-python package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]

import numpy as np  # noqa: E402
import orjson  # noqa: E402

NEW_TREE = HERE.parent
OLD_TREE = Path("/work/wt/old-7cf907c")  # commit 7cf907c: the design before the store
OLD_BYTES = 2900  # per waiting prediction, the old design's peak (issue 27: 2.8 GiB at 10^6)
KEY = "pending-benchmark-checkpoint-key"
T0 = 1_700_000_000_000  # ms; records 1 ms apart, far inside the default one-day TTL
BATCH = 10_000  # records made at a time
GC_GEN0 = 50_000  # the gen-0 threshold Processor.run sets (with gc.freeze), here for both
clock = time.perf_counter


class Rec(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes
    value: bytes


def status(field: str) -> int:
    """A field of /proc/self/status in bytes (VmRSS, VmHWM)."""
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def disk_bytes(path: Path) -> int:
    """Allocated bytes of the files under ``path`` (what du counts)."""
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file())


class Stream:
    """Events e0, e1, ... with ``features`` gaussian features and a label that depends on
    two of them; labels for random waiting events. What waits is ``waiting`` (int32 ids)
    and the labels ``y`` (int8 by id): no Python object per event."""

    def __init__(self, n: int, total: int, features: int, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.names = [f"f{j:02d}" for j in range(features)]
        self.y = np.zeros(total, np.int8)
        self.waiting = np.full(n, -1, np.int32)
        self.next_id = self.t = 0
        self.offsets = {"events": 0, "labels": 0}

    def _rec(self, topic: str, eid: int, value: dict) -> Rec:
        offset, self.offsets[topic] = self.offsets[topic], self.offsets[topic] + 1
        self.t += 1
        key = b"e%d" % eid
        return Rec(topic, 0, offset, T0 + self.t, key, orjson.dumps(value))

    def _events(self, k: int) -> list[Rec]:
        x = self.rng.standard_normal((k, len(self.names)))
        first = self.next_id
        self.y[first : first + k] = (x[:, 0] - 0.5 * x[:, 1] + self.rng.standard_normal(k)) > 0
        self.next_id += k
        names = self.names
        return [self._rec("events", first + i, {"id": f"e{first + i}",
                          "features": dict(zip(names, row, strict=True))})
                for i, row in enumerate(x.tolist())]  # fmt: skip

    def fill(self, k: int) -> list[Rec]:
        """The next ``k`` events, all waiting afterwards."""
        first = self.next_id
        self.waiting[first : first + k] = np.arange(first, first + k)
        return self._events(k)

    def label(self, slot: int) -> Rec:
        eid = int(self.waiting[slot])
        return self._rec("labels", eid, {"id": f"e{eid}", "label": int(self.y[eid])})

    def steps(self, k: int) -> list[Rec]:
        """``k`` steps: a new event, then a label for a random waiting event (whose slot
        the new event takes), in that order."""
        events = self._events(k)
        out = []
        for ev, slot in zip(events, self.rng.integers(len(self.waiting), size=k).tolist(),
                            strict=True):  # fmt: skip
            out += (ev, self.label(slot))
            self.waiting[slot] = int(ev.key[1:])
        return out


class Run:
    """The unit under ``UnitStates``, with a checkpoint every ``interval`` s of wall time."""

    def __init__(self, state_dir: Path, interval: float):
        from streamcal.stream.config import ProcessorConfig
        from streamcal.stream.state.units import UnitStates
        from streamcal.stream.unit import TopicRank

        settings = dict(events_topic="events", labels_topic="labels", state_dir=str(state_dir),
                        checkpoint_key=KEY, metrics_file="none")  # fmt: skip
        if "pending_max_bytes" not in ProcessorConfig.__dataclass_fields__:
            settings["pending_max"] = 10**9  # the old design: its count bound out of the way
        self.config = ProcessorConfig.build(**settings)
        self.UnitStates, self.ranks = UnitStates, {"events": TopicRank.EVENT,
                                                   "labels": TopicRank.LABEL}  # fmt: skip
        self.interval = interval
        self.open()

    def open(self) -> None:
        self.states = self.UnitStates(self.config, self.config.key_bytes())
        self.states.restore_global()
        self.unit = self.states.held[None]
        self.unit.send = lambda topic, key, value: None
        self.last = time.monotonic()
        self.stalls: list[float] = []
        gc.freeze()  # as Processor.run does once its clients are up
        gc.set_threshold(GC_GEN0, *gc.get_threshold()[1:])

    def close(self) -> None:
        if hasattr(self.states, "close"):  # the old design has nothing to close
            self.states.close()
        self.states = self.unit = None
        gc.collect()

    def feed(self, recs, timed: bool = False) -> tuple[float, float, float, float]:
        """Handle ``recs`` (checkpoints on time). When ``timed``: the seconds spent handling
        them, the longest single one, and the CPU seconds of this thread (checkpoints
        excluded) and of the others (RocksDB's flushes and compactions) meanwhile."""
        handle, ranks, changed = self.unit.handle, self.ranks, self.states.changed
        full = getattr(self.states, "full", lambda: False)
        total = longest = 0.0
        cpu, proc, saves = time.thread_time(), time.process_time(), len(self.stalls)
        for i, rec in enumerate(recs):
            if timed:
                t = clock()
                handle(ranks[rec.topic], rec)
                dt = clock() - t
                total += dt
                longest = max(longest, dt)
            else:
                handle(ranks[rec.topic], rec)
            changed.add(None)
            # As the processor's loop: on time, or once a unit has many writes waiting
            # (``UnitStates.full``; the design before the store has no such check).
            if i % 256 == 255 and (time.monotonic() - self.last >= self.interval or full()):
                self.checkpoint()
        cpu = time.thread_time() - cpu
        others = max(0.0, time.process_time() - proc - cpu)  # clock granularity
        return total, longest, cpu - sum(c for _, c in self.stalls[saves:]), others

    def checkpoint(self) -> None:
        t, cpu = clock(), time.thread_time()
        self.states.save_changed()
        self.stalls.append((clock() - t, time.thread_time() - cpu))
        self.last = time.monotonic()


def child(args) -> dict:
    """Measure one size with the streamcal on sys.path; print the figures as JSON."""
    import streamcal

    n, steps = args.child, args.steps
    state_dir = Path(args.state_dir)
    stream = Stream(n, n + steps + 1, args.features, seed=args.seed)
    run = Run(state_dir, args.checkpoint_interval)
    load = [os.getloadavg()[0]]
    t = time.monotonic()
    for i in range(0, n, BATCH):
        run.feed(stream.fill(min(BATCH, n - i)))
    run.checkpoint()
    fill_s, fill_stall = time.monotonic() - t, max(run.stalls)[0]
    run.stalls = []
    run.feed(stream.steps(args.warmup))
    handled = longest = cpu = others = 0.0
    t = time.monotonic()
    for i in range(0, steps - args.warmup, BATCH // 2):
        h, m, c, o = run.feed(stream.steps(min(BATCH // 2, steps - args.warmup - i)), timed=True)
        handled, longest, cpu, others = handled + h, max(longest, m), cpu + c, others + o
    steady_s = time.monotonic() - t
    timed = steps - args.warmup
    run.checkpoint()
    unit = run.unit
    counts = dict(unit.counts)
    waiting = unit.snapshot()["pending"]
    assert waiting == n and counts["labels"] == steps and counts["dead_letters"] == 0, counts
    rss, hwm = status("VmRSS"), status("VmHWM")
    store = state_dir / "store"
    if store.is_dir():  # the store
        disk = disk_bytes(store)
    else:  # the old design: checkpoint files, the newest counts
        disk = max(state_dir.glob("checkpoint-*.ckpt")).stat().st_size
    stalls = sorted(run.stalls)
    run.close()
    t = clock()
    run.open()
    run.feed([stream.label(0)])
    restart = clock() - t
    assert run.unit.counts["labels"] == steps + 1, run.unit.counts
    load.append(os.getloadavg()[0])
    return {
        "n": n, "tree": str(Path(streamcal.__file__).parents[1]), "rss": rss, "hwm": hwm,
        "rss_per_waiting": rss / n, "disk_per_waiting": disk / n,
        "stall_max": stalls[-1][0], "stall_max_cpu": stalls[-1][1],
        "stall_median": stalls[len(stalls) // 2][0],
        "checkpoints": len(stalls), "steps_per_checkpoint": timed / len(stalls),
        "fill_stall_max": fill_stall, "fill_s": fill_s, "longest_record": longest,
        "restart": restart, "us_per_step": 1e6 * handled / timed,
        "cpu_per_step": 1e6 * cpu / timed, "others_per_step": 1e6 * others / timed,
        "steady_s": steady_s, "load": load,
    }  # fmt: skip


def measure(n: int, design: str, args, root: Path) -> dict:
    """Run the child for ``n`` waiting predictions in the ``design``'s tree."""
    tree = NEW_TREE if design == "new" else args.old_tree
    state_dir = Path(tempfile.mkdtemp(prefix=f"pending-{design}-{n}-", dir=root))
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(n),
           "--state-dir", str(state_dir), "--steps", str(args.steps),
           "--warmup", str(args.warmup), "--features", str(args.features),
           "--checkpoint-interval", str(args.checkpoint_interval),
           "--seed", str(args.seed)]  # fmt: skip
    try:
        out = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
        if out.returncode:
            raise RuntimeError(f"{design} {n}: {out.stderr[-3000:]}")
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)
    row = json.loads(out.stdout.strip().splitlines()[-1])
    assert Path(row["tree"]).resolve() == Path(tree).resolve(), (row["tree"], tree)
    return row


def fits_old(n: int) -> bool:
    for line in open("/proc/meminfo"):
        if line.startswith("MemAvailable:"):
            return n * OLD_BYTES < 0.7 * int(line.split()[1]) * 1024
    return False


def mib(b: float) -> str:
    return f"{b / 2**20:,.0f}"


def table(rows: list[dict]) -> str:
    base = next((r for r in rows if r.get("design") == "new"), None)
    out = ["| waiting | design | RSS MiB (peak) | RSS B per waiting | disk B per waiting | "
           "checkpoint ms: longest (its CPU), median; longest in the fill | steps per "
           "checkpoint | longest record ms | restart s | µs per label + event: wall (CPU; other "
           "threads' CPU) | vs first: wall (CPU) | load |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        if "skipped" in r:
            out.append(f"| {r['n']:.0e} | {r['design']} | {r['skipped']} |" + " |" * 9)
            continue
        ratio = ""
        if r["design"] == "new":
            ratio = (f"{r['us_per_step'] / base['us_per_step']:.2f}× "
                     f"({r['cpu_per_step'] / base['cpu_per_step']:.2f}×)")  # fmt: skip
        ms = {k: f"{1e3 * r[k]:,.0f}" for k in r if k.startswith(("stall", "fill_stall"))}
        out.append(
            f"| {r['n']:.0e} | {r['design']} | {mib(r['rss'])} ({mib(r['hwm'])}) | "
            f"{r['rss_per_waiting']:,.0f} | {r['disk_per_waiting']:,.0f} | "
            f"{ms['stall_max']} ({ms['stall_max_cpu']}), {ms['stall_median']}; "
            f"{ms['fill_stall_max']} | {r['steps_per_checkpoint']:,.0f} | "
            f"{1e3 * r['longest_record']:,.1f} | {r['restart']:.2f} | {r['us_per_step']:.0f} "
            f"({r['cpu_per_step']:.0f}; {r['others_per_step']:.0f}) | "
            f"{ratio} | {r['load'][0]:.1f}–{r['load'][1]:.1f} |"
        )
    return "\n".join(out)


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1e4,1e5,1e6", help="waiting predictions, comma-separated")
    p.add_argument("--steps", type=int, default=60_000, help="steady steps (label + event)")
    p.add_argument("--warmup", type=int, default=5_000, help="first steady steps not timed")
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--checkpoint-interval", type=float, default=1.0, help="seconds (wall)")
    p.add_argument("--old-tree", type=Path, default=OLD_TREE)
    p.add_argument("--no-old", action="store_true", help="the store only")
    p.add_argument("--out-dir", default=None, help="where the state directories go")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    p.add_argument("--state-dir", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    if args.child is not None:
        print(json.dumps(child(args)), flush=True)
        return
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    root = Path(tempfile.mkdtemp(prefix="pending-bench-", dir=args.out_dir))
    rows = []
    try:
        for n in sizes:
            for design in ("new", "old"):
                if design == "old" and args.no_old:
                    continue
                if design == "old" and not fits_old(n):
                    rows.append({"n": n, "design": design, "skipped": "skipped: would not "
                                 f"fit in memory (~{n * OLD_BYTES / 2**30:.0f} GiB)"})  # fmt: skip
                    continue
                t = time.monotonic()
                rows.append({**measure(n, design, args, root), "design": design})
                print(f"{design} {n:.0e}: {time.monotonic() - t:.0f} s; "
                      f"{json.dumps(rows[-1])}", file=sys.stderr, flush=True)  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(table(rows))


if __name__ == "__main__":
    main()
