"""CPU per event of `--scope partition` against `--scope global`, in process, without Kafka.

Both scopes run the processor's own loop (``Processor.run``: the ordered merge, the units,
metric lines, the final checkpoint) over the same stream served from memory (4 partitions
per topic, round robin, one partition per poll answer, as tansu does), outputs dropped,
interleaved (global, partition, global, ...). The partition scope goes through the group
membership code (``subscribe``, the assignment callback, ``MergeView``) and writes its
checkpoints to a state topic whose records are dropped (sealing and pickling still run).
What it leaves out is Kafka itself: the consumer group's heartbeats and the producer;
``benchmarks/scale.py`` measures those, with more noise.

Three measurements per scope:

* CPU µs per event of the whole run (``time.process_time``), median and best of --repeat;
* the units alone: the merged record sequence fed to 1 unit or to 4 units by partition
  (the price of 4 models, trackers and stores each seeing 1/4 of the stream);
* a split by part, from cProfile with a CPU-time timer on the main thread (cumulative
  µs per event; the profiler inflates every figure, compare the columns, not the sums).

    python benchmarks/scopes.py             # 60k events
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import statistics
import sys
import threading
import time
import zlib
from collections import namedtuple
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != str(_HERE)]

_spec = importlib.util.spec_from_file_location("bench_kafka", _HERE / "kafka.py")
bench_kafka = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_kafka)  # make_records: the stream of benchmarks/kafka.py

P = 4
KEY = "benchmark-checkpoint-key-0123456789"
_Rec = namedtuple("_Rec", "topic partition offset timestamp key value")


class MemoryGroupConsumer(bench_kafka.MemoryConsumer):
    """benchmarks/kafka.py's in-memory consumer, for ``subscribe`` too (the whole
    assignment handed to the listener at the first poll), its partitions served in turn.
    Records go to a partition by their key, as the producer of benchmarks/kafka.py puts
    them, so that events and labels are co-partitioned as ``--scope partition`` needs."""

    def __init__(self, n: int):
        from kafka import TopicPartition

        self.data = {}
        for topic, recs in zip(("events", "labels"), bench_kafka.make_records(n), strict=True):
            parts: dict = {p: [] for p in range(P)}
            for r in recs:
                p = zlib.crc32(r.key) % P
                parts[p].append(_Rec(topic, p, len(parts[p]), r.timestamp, r.key, r.value))
            for p, recs_p in parts.items():
                self.data[TopicPartition(topic, p)] = recs_p
        self.pos = dict.fromkeys(self.data, 0)
        self._order, self._next = list(self.data), 0
        self._listener = None

    def topics(self):
        return {"events", "labels"}

    def subscribe(self, topics, listener=None):
        self._listener = listener

    def poll(self, timeout_ms=0, max_records=2000):
        if self._listener is not None:
            listener, self._listener = self._listener, None
            listener.on_partitions_assigned(list(self.data))
            return {}
        for _ in self._order:
            tp = self._order[self._next]
            self._next = (self._next + 1) % len(self._order)
            p, recs = self.pos[tp], self.data[tp]
            if p < len(recs):
                k = min(max_records, 500)
                self.pos[tp] = p + k
                return {tp: recs[p : p + k]}
        time.sleep(timeout_ms / 1000)
        return {}


def _config(scope: str, every: int):
    from streamcal.stream.config import ProcessorConfig

    return ProcessorConfig.build(
        bootstrap_servers="memory:0", group_id="g", events_topic="events",
        labels_topic="labels", predictions_topic="predictions", dead_letter_topic="dead",
        mode="sva", model="logreg", metrics_file=os.devnull, metrics_every=every,
        scope=scope, state_topic="state" if scope == "partition" else "none",
        global_lock=False, checkpoint_key=KEY,
    )  # fmt: skip


def run_scope(scope: str, n: int, every: int, profiler=None) -> float:
    """CPU µs per event of ``Processor.run`` over the stream, in process."""
    from streamcal.stream.processor import Processor
    from streamcal.stream.state import topic as state_topic

    # The state topic without a broker: its records go to the dropped outputs.
    state_topic.StateTopic.create = lambda self, partitions=1: None
    state_topic.StateTopic.read = lambda self, timeout=60.0, units=None: {}
    config = _config(scope, every)
    proc = Processor(config)
    memory = MemoryGroupConsumer(n)
    proc._make_consumer = lambda: memory
    proc._make_outbox = bench_kafka._NullOutbox
    proc.unit_class(config, None).clf.predict_interval_one({"x0": 0.0})  # numba kernels
    stop = threading.Event()
    progress = lambda events: events >= n and stop.set()  # noqa: E731
    gc.collect()
    t = time.process_time()
    if profiler is not None:
        profiler.enable()
    proc.run(stop_event=stop, max_idle_s=0.2, progress=progress)
    if profiler is not None:
        profiler.disable()
    cpu = time.process_time() - t
    return 1e6 * cpu / sum(u.counts["events"] for u in proc.units.values())


def units_alone(n: int, every: int, units: int) -> float:
    """CPU µs per event of the merged stream fed to ``units`` units (1, or one per
    partition), outputs dropped, under the processor's GC settings."""
    from streamcal.stream.unit import CalibrationUnit

    memory = MemoryGroupConsumer(n)
    seq = sorted(
        (r.timestamp, tp.topic != "events", r.partition, r.offset, r)
        for tp, recs in memory.data.items()
        for r in recs
    )
    config = _config("partition", every)
    made = {p: CalibrationUnit(config, p, lambda t, k, v: None) for p in range(P)}
    route = made if units == P else dict.fromkeys(made, made[0])

    def feed():
        for _, is_label, p, _, rec in seq:
            unit = route[p]
            if is_label:
                unit.on_label(rec)
            else:
                unit.on_event(rec)

    return bench_kafka.cpu_us(feed, n)


_PARTS = (  # (label, file, function): cumulative time of these, per event
    ("decode an event", "messages.py", "decode_event"),
    ("decode a label", "messages.py", "decode_label"),
    ("VennAbersClassifier.predict_interval_one", "classifier.py", "predict_interval_one"),
    ("VennAbersClassifier.learn_one", "classifier.py", "learn_one"),
    ("CalibrationTracker.update", "tracker.py", "update"),
    ("hand-off to the (dropped) outputs", "benchmarks/scopes.py", "send"),
    ("ordered merge: next (polls)", "ordering.py", "next"),
    ("ordered merge: ready", "ordering.py", "ready"),
    ("metric lines", "metrics.py", "emit_unit"),
    ("checkpoints (final one, state topic)", "processor.py", "checkpoint"),
    ("unit: an event, all of it", "unit.py", "on_event"),
    ("unit: a label, all of it", "unit.py", "on_label"),
    ("the loop, all of it", "processor.py", "_loop"),
)


def profile_split(n: int, every: int) -> dict:
    import cProfile
    import pstats

    out = {}
    for scope in ("global", "partition"):
        profiler = cProfile.Profile(time.thread_time)
        run_scope(scope, n, every, profiler)
        stats = pstats.Stats(profiler).stats
        # The largest match: tracker.py has two update()s, the outer one calls the other.
        out[scope] = [
            1e6
            * max(
                (v[3] for (path, _, name), v in stats.items()
                 if name == fn and path.endswith(file)),
                default=0.0,
            )
            / n
            for _, file, fn in _PARTS
        ]  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=60_000)
    ap.add_argument("--repeat", type=int, default=3, help="interleaved runs of each")
    args = ap.parse_args()
    n, every = args.events, max(500, args.events // 200)

    run_scope("global", min(n, 5000), every)  # warm-up: imports, kernels, caches
    whole: dict = {"global": [], "partition": []}
    alone: dict = {1: [], P: []}
    for _ in range(args.repeat):
        for scope in whole:
            whole[scope].append(run_scope(scope, n, every))
        for k in alone:
            alone[k].append(units_alone(n, every, k))
    split = profile_split(n, every)

    print(f"\n{n:,} events, sva + scaled logistic regression, in process, no Kafka; "
          f"median (best) of {args.repeat} interleaved runs, CPU µs per event\n")  # fmt: skip
    g, p = whole["global"], whole["partition"]
    print(f"{'':44s} {'global':>15s} {'partition':>15s} {'ratio':>6s}")
    print(f"{'Processor.run':44s} {statistics.median(g):7.1f} ({min(g):5.1f}) "
          f"{statistics.median(p):7.1f} ({min(p):5.1f}) "
          f"{statistics.median(p) / statistics.median(g):6.2f}")  # fmt: skip
    a1, a4 = alone[1], alone[P]
    print(f"{'the units alone (1 unit / 4 units)':44s} {statistics.median(a1):7.1f} "
          f"({min(a1):5.1f}) {statistics.median(a4):7.1f} ({min(a4):5.1f}) "
          f"{statistics.median(a4) / statistics.median(a1):6.2f}")  # fmt: skip
    print("\nsplit by part (cProfile, main-thread CPU, cumulative µs per event, one run each)")
    for (label, _, _), gu, pu in zip(_PARTS, split["global"], split["partition"], strict=True):
        print(f"  {label:42s} {gu:15.1f} {pu:15.1f}")


if __name__ == "__main__":
    main()
