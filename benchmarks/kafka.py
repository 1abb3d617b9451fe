"""Throughput of `streamcal run` against tansu, side by side with a bare kafka-python loop.

Both read the same two topics (events and labels, all partitions, from the start) on the
same local tansu broker in the same run; the bare loop produces one message per event and
does nothing else, the processor produces a Venn-Abers prediction per event (sva, scaled
logistic regression) and joins every label. Rates are steady-state: measured between the
first and the last metric line of the processor (every --metrics-every labels), and
between the first record and the last flush of the bare loop, which reads every event and
every label, as the processor does. Both use the same client settings (the processor's
defaults: idempotent producer, so acks=all; linger_ms; batch_size 256 KiB;
max_poll_records; fetch_max_wait_ms 100), the same topics and the same partitions. CPU
seconds per event come from the child processes' rusage. The CPU split per event comes
from in-process runs of the processor with and without each Kafka client (no profiler:
cProfile's wall-clock timer charges GIL waits to the Kafka client) and from the
processor's parts timed without Kafka. A control run, the bare loop plus --busy-us of
pure CPU work per event (about the processor's own work), shows what the same Kafka
client costs at the processor's rate: slower loops mean smaller producer batches, more
requests and more GIL hand-offs to kafka-python's I/O thread per event.

    python benchmarks/kafka.py              # 200k events (several minutes)
    python benchmarks/kafka.py --quick      # 20k events
    python benchmarks/kafka.py --merge-only --events 50000   # the merge's release
        # condition now vs before issue 20: backlog throughput, live latency
    python benchmarks/kafka.py --quick --protection-only   # --protect, the alarm alone,
        # neither (add --in-process: their CPU per event without Kafka only)
    python benchmarks/kafka.py --baseline-tree ../old --state-dir  # against an older commit
    python benchmarks/kafka.py --exactly-once --events 50000   # on noida-db: at least once
        # against exactly once (issue 30), events/s and latency at two checkpoint intervals

`streamcal run` protects its predictions and runs the alarm by default (--protect
--alarm); every full run also times `streamcal run --no-protect --no-alarm` (neither, the
outputs of releases before both) beside it (target: protected >= 0.95x neither).

CPU µs/event of a child includes its start-up (imports, numba kernels from cache).
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
import uuid

# This file is named kafka.py: when run as a script its directory comes first on sys.path
# and would shadow the kafka-python package.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

import orjson  # noqa: E402

T0 = 1_700_000_000_000

BARE_LOOP = r"""
import sys, time
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
bootstrap, events, labels, out, n, linger_ms, poll_records, busy_us = sys.argv[1:9]
n, busy = int(n), float(busy_us) / 1e6
consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                         auto_offset_reset="earliest", max_poll_records=int(poll_records),
                         fetch_max_wait_ms=100)
producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True,
                         linger_ms=int(linger_ms), batch_size=256 * 1024)
tps = []
for t in (events, labels):
    while not consumer.partitions_for_topic(t):
        consumer.topics()
        time.sleep(0.05)
    tps += [TopicPartition(t, p) for p in sorted(consumer.partitions_for_topic(t))]
consumer.assign(tps)
for tp in tps:
    consumer.seek(tp, 0)
seen = {events: 0, labels: 0}
first = None
while seen[events] < n or seen[labels] < n:  # all events and all labels, like the processor
    for tp, recs in consumer.poll(timeout_ms=200).items():
        if first is None:
            first = time.monotonic()
        if tp.topic == events:
            for r in recs:
                if busy:  # stand-in for a processor's own work: CPU only, no allocations
                    t = time.thread_time()
                    while time.thread_time() - t < busy:
                        pass
                producer.send(out, key=r.key, value=r.value)
        seen[tp.topic] += len(recs)
producer.flush()
print(n / (time.monotonic() - first))
"""


def produce_input(bootstrap: str, events: str, labels: str, n: int, seed: int = 0,
                  t0: int = T0) -> None:  # fmt: skip
    """``n`` events and their labels (5 ms later), record timestamps 10 ms apart from
    ``t0`` (noida-db deletes records stamped more than 7 days ago: give it now)."""
    from kafka import KafkaProducer

    rng = random.Random(seed)
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=512 * 1024)
    for i in range(n):
        x = [rng.gauss(0, 1) for _ in range(5)]
        z = 1.2 * x[0] - 0.8 * x[1] + 0.5 * x[2] * x[3]
        y = 1 if rng.random() < 1 / (1 + 2.718281828**-z) else 0
        eid = f"e{i}".encode()
        ts = t0 + 10 * i
        feats = {f"x{j}": v for j, v in enumerate(x)}
        producer.send(events, key=eid, value=orjson.dumps({"id": eid.decode(), "features": feats}),
                      timestamp_ms=ts)  # fmt: skip
        producer.send(labels, key=eid, value=orjson.dumps({"id": eid.decode(), "label": y}),
                      timestamp_ms=ts + 5)  # fmt: skip
    producer.flush()
    producer.close()


def broker_cpu(pid: int) -> float:
    """CPU seconds used so far by the broker process (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child_cpu(before) -> float:
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def thread_cpu(pid: int) -> dict:
    """{thread id: (its name, CPU seconds so far)} of the process ``pid`` (Linux /proc)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as fh:
                name = fh.read().strip()
            with open(f"/proc/{pid}/task/{tid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended
            continue
        out[tid] = (name, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))
    return out


def run_streamcal(bootstrap, topics, n, every, extra=(), env=None, python=None,
                  mode: str | None = "sva", threads: dict | None = None,
                  ) -> tuple[float, float, dict]:  # fmt: skip
    """(events/s, CPU s per event, last metric line) of ``streamcal run`` by ``python`` (an
    install's interpreter; this one by default), in ``mode`` (None: the processor's
    default mode). With ``threads`` (a dict) the process's threads are read every 0.1 s:
    it gets {thread id: (name, CPU seconds)} as last read (a thread's last 0.1 s lost)."""
    tmp = tempfile.mkdtemp()
    metrics = os.path.join(tmp, "metrics.jsonl")
    cmd = [
        python or sys.executable, "-m", "streamcal", "run",
        "--bootstrap-servers", bootstrap, "--group-id", topics["group"],
        "--events-topic", topics["events"], "--labels-topic", topics["labels"],
        "--predictions-topic", topics["predictions"], "--dead-letter-topic", topics["dead"],
        *(() if mode is None else ("--mode", mode)), "--model", "logreg",
        "--metrics-file", metrics,
        "--metrics-every", str(every), "--max-idle-s", "2", *extra,
    ]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    if threads is None:
        subprocess.run(cmd, check=True, cwd=tempfile.gettempdir(), env=env)
    else:
        proc = subprocess.Popen(cmd, cwd=tempfile.gettempdir(), env=env)
        while proc.poll() is None:
            try:
                threads.update(thread_cpu(proc.pid))
            except OSError:  # it exited meanwhile
                pass
            time.sleep(0.1)
        if proc.returncode:
            raise subprocess.CalledProcessError(proc.returncode, cmd)
    cpu = child_cpu(before)
    with open(metrics, "rb") as fh:
        lines = [orjson.loads(x) for x in fh]
    steady = [x for x in lines if x["labels"] % every == 0 and x["labels"] > 0]
    # The first line per label count: the final line repeats the last count after the
    # --max-idle-s wait, which must not count as processing time.
    first: dict = {}
    for x in steady:
        first.setdefault(x["labels"], x)
    steady = list(first.values())
    a, b = steady[0], steady[-1]
    rate = (b["events"] - a["events"]) / (b["ts"] - a["ts"])
    return rate, cpu / n, lines[-1]


def run_bare(bootstrap, topics, n, busy_us: float = 0.0) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    from streamcal.stream.config import ProcessorConfig

    defaults = ProcessorConfig()  # the processor's own client settings, for a like-for-like loop
    out = subprocess.run(
        [sys.executable, "-c", BARE_LOOP, bootstrap, topics["events"], topics["labels"],
         topics["bare_out"], str(n), str(defaults.linger_ms), str(defaults.poll_max_records),
         str(busy_us)],
        check=True, capture_output=True, text=True, cwd=tempfile.gettempdir(),
    )  # fmt: skip
    return float(out.stdout.strip()), child_cpu(before) / n


class MemoryConsumer:
    """The records of ``make_records`` served like a KafkaConsumer (4 partitions per topic,
    one partition per poll answer, as tansu does): the processor without a Kafka consumer."""

    def __init__(self, topics: dict, n: int, partitions: int = 4):
        from collections import namedtuple

        from kafka import TopicPartition

        rec = namedtuple("Rec", "topic partition offset timestamp key value")
        self.data = {}
        for topic, recs in zip((topics["events"], topics["labels"]), make_records(n), strict=True):
            for p in range(partitions):
                self.data[TopicPartition(topic, p)] = [
                    rec(topic, p, i, r.timestamp, r.key, r.value)
                    for i, r in enumerate(recs[p::partitions])
                ]
        self.pos = dict.fromkeys(self.data, 0)
        self.paused: set = set()  # the merge's bound pauses a partition it holds enough of

    def partitions_for_topic(self, topic):
        return {tp.partition for tp in self.data if tp.topic == topic}

    @staticmethod
    def partition(topic, partition):
        from kafka import TopicPartition

        return TopicPartition(topic, partition)

    def pause(self, *tps):
        self.paused.update(tps)

    def resume(self, *tps):
        self.paused.difference_update(tps)

    def poll(self, timeout_ms=0, max_records=2000):
        for tp, recs in self.data.items():
            p = self.pos[tp]
            if p < len(recs) and tp not in self.paused:
                self.pos[tp] = p + min(max_records, 500)
                return {tp: recs[p : p + min(max_records, 500)]}
        time.sleep(timeout_ms / 1000)
        return {}

    def highwater(self, tp):
        return len(self.data[tp])

    def end_offsets(self, tps, timeout_ms=None):
        return {tp: len(self.data[tp]) for tp in tps}

    def position(self, tp):
        return min(self.pos[tp], len(self.data[tp]))

    def assign(self, tps):
        pass

    def seek(self, tp, offset):
        self.pos[tp] = offset

    def commit(self, offsets):
        pass

    def records_at(self, offsets, timeout_ms=5000):
        """The record at each offset (the fingerprints' check): the log never changes here."""
        out = {}
        for tp, offset in offsets.items():
            recs = self.data[self.partition(*tp)]
            out[tp] = recs[offset] if 0 <= offset < len(recs) else None
        return out

    def close(self):
        pass


def cpu_us(fn, n: int) -> float:
    """CPU µs per item of ``fn()`` over ``n`` items, under the GC settings Processor.run
    uses (frozen heap, rare gen-0 passes): with CPython's defaults, a timing loop's own
    lists of results would trigger collections that walk everything alive and charge them
    to the part timed."""
    import gc

    from streamcal.stream.gc_tuning import GcTuning

    gc.collect()
    tuning = GcTuning()
    tuning.start()
    try:
        t = time.process_time()
        fn()
        return 1e6 * (time.process_time() - t) / n
    finally:
        tuning.stop()


KAFKA_VARIANTS = (  # name, consume, produce, producer in a child process
    ("full (Kafka in and out)", True, True, True),
    ("full, producer in the thread", True, True, False),
    ("no producer (outputs dropped)", True, False, False),
    ("no consumer (records from memory)", False, True, True),
    ("neither (no Kafka)", False, False, False),
)


class _NullOutbox:
    """Outputs dropped: the processor without a Kafka producer."""

    failed = False

    def send(self, topic, key, value):
        pass

    ship = flush = close = lambda self, *a, **k: None


def kafka_split(bootstrap, topics, n, rounds: int = 2) -> dict:
    """CPU µs per event of the processor in process, with and without each Kafka client.

    No profiler: the main thread's CPU (``time.thread_time``) and all of it
    (``time.process_time``, which adds kafka-python's I/O threads, plus the producer
    process's CPU, from rusage of children once it has exited). cProfile's default
    timer is wall-clock, so it charges to the Kafka client the time the main thread waits
    for the GIL while the producer's I/O thread runs (``socket.send`` in the producer's
    wakeup, lock acquires): that, not CPU, was most of the "Kafka client" share it showed.
    Best (least CPU) of ``rounds`` alternating rounds."""
    from streamcal.stream.config import ProcessorConfig
    from streamcal.stream.processor import Processor

    best: dict = {}
    for r in range(rounds):
        for name, consume, produce, child in KAFKA_VARIANTS:
            config = ProcessorConfig.build(
                bootstrap_servers=bootstrap, group_id=f"{topics['group']}-split-{r}",
                events_topic=topics["events"], labels_topic=topics["labels"],
                predictions_topic=f"{topics['predictions']}-split-{r}",
                dead_letter_topic=topics["dead"], mode="sva", model="logreg",
                metrics_file="none", producer_process=child,
            )  # fmt: skip
            proc = Processor(config)
            if not consume:  # built before the clock starts: generating records is not ours
                memory = MemoryConsumer(topics, n)
                proc._make_consumer = lambda memory=memory: memory
            if not produce:
                proc._make_outbox = _NullOutbox
            proc.state.clf.predict_interval_one({"x0": 0.0})  # load the numba kernels first
            stop = threading.Event()
            # The topics may hold more than n events: stop after n (checked every 1000 records).
            progress = lambda events, stop=stop: events >= n and stop.set()  # noqa: E731
            kids = resource.getrusage(resource.RUSAGE_CHILDREN)
            wall, cpu, main = time.monotonic(), time.process_time(), time.thread_time()
            proc.run(stop_event=stop, max_idle_s=0.5, progress=progress)
            wall = time.monotonic() - wall - (0.0 if stop.is_set() else 0.5)
            cpu = time.process_time() - cpu + child_cpu(kids)
            main = time.thread_time() - main
            events = proc.state.counts["events"]
            assert events >= n, proc.state.counts
            row = (events / wall, 1e6 * main / events, 1e6 * cpu / events)
            if name not in best or row[2] < best[name][2]:
                best[name] = row
    return best


def make_records(n: int, seed: int = 1):
    """(events, labels) as ConsumerRecord-like tuples, the same stream as produce_input."""
    from collections import namedtuple

    rec = namedtuple("Rec", "topic partition offset timestamp key value")
    rng = random.Random(seed)
    events, labels = [], []
    for i in range(n):
        x = [rng.gauss(0, 1) for _ in range(5)]
        z = 1.2 * x[0] - 0.8 * x[1] + 0.5 * x[2] * x[3]
        y = 1 if rng.random() < 1 / (1 + 2.718281828**-z) else 0
        eid = f"e{i}"
        feats = {f"x{j}": v for j, v in enumerate(x)}
        ev = orjson.dumps({"id": eid, "features": feats})
        events.append(rec("events", 0, i, T0 + 10 * i, eid.encode(), ev))
        lab = orjson.dumps({"id": eid, "label": y})
        labels.append(rec("labels", 0, i, T0 + 10 * i + 5, eid.encode(), lab))
    return events, labels


def logic_split(n: int) -> list[tuple[str, float]]:
    """CPU µs per event of the processor's work without Kafka (outputs dropped), and of its
    parts run alone on the same stream: no profiler, after a warm-up (numba kernels)."""
    from streamcal.learner import VennAbersClassifier
    from streamcal.monitoring.tracker import CalibrationTracker
    from streamcal.stream.config import ProcessorConfig
    from streamcal.stream.messages import Fields, decode_event, decode_label
    from streamcal.stream.models import make_model
    from streamcal.stream.processor import Processor

    warm, (events, labels) = 2000, make_records(n + 2000)
    config = ProcessorConfig.build(
        events_topic="events", labels_topic="labels", mode="sva", metrics_file="none"
    )
    proc = Processor(config)
    unit = proc.state
    unit.send = lambda topic, key, value: None

    def timed(fn) -> float:
        return cpu_us(fn, n)

    def all_records(lo, hi):
        for ev, lab in zip(events[lo:hi], labels[lo:hi], strict=True):
            unit.on_event(ev)
            unit.on_label(lab)

    all_records(0, warm)
    total = timed(lambda: all_records(warm, warm + n))

    fields = Fields()
    decoded = [(decode_event(e.value, fields), decode_label(lb.value, fields))
               for e, lb in zip(events, labels, strict=True)]  # fmt: skip
    dec = timed(lambda: [(decode_event(e.value, fields), decode_label(lb.value, fields))
                         for e, lb in zip(events[warm:], labels[warm:], strict=True)])  # fmt: skip
    clf = VennAbersClassifier(make_model("logreg"), mode="sva")

    def learner(lo, hi):
        for ev, lab in decoded[lo:hi]:
            clf.predict_interval_one(ev.x)
            clf.learn_one(ev.x, lab.y)

    learner(0, warm)
    va = timed(lambda: learner(warm, warm + n))
    model = make_model("logreg")

    def bare_model():
        for ev, lab in decoded[warm:]:
            model.predict_proba_one(ev.x)
            model.learn_one(ev.x, lab.y)

    river_only = timed(bare_model)
    tracker = CalibrationTracker()
    track = timed(lambda: [tracker.update(0.3, 0.4, lab.y, score=0.35, p=0.36)
                           for _, lab in decoded[warm:]])  # fmt: skip
    dumps = timed(lambda: [orjson.dumps({"id": e.id, "p0": 0.1, "p1": 0.2, "p": 0.15,
                                         "p_square": 0.15, "score": 0.3,
                                         "calibration_size": 1000, "version": "0.1"})
                           for e, _ in decoded[warm:]])  # fmt: skip
    rest = total - dec - va - track - dumps
    return [
        ("decode events + labels (JSON)", dec),
        ("encode predictions (JSON)", dumps),
        ("river model alone", river_only),
        ("VennAbersClassifier (model + calibration)", va),
        ("CalibrationTracker.update", track),
        ("processor bookkeeping (rest)", rest),
        ("total without Kafka", total),
    ]


# ---------------------------------------------------------------- the merge's condition
def _merge_classes():
    """(name, OrderedMerge class) of the release condition now and before issue 20."""
    from streamcal.stream.kafka.ordering import OrderedMerge

    class Counted(OrderedMerge):
        """Counts the end-offset questions to the broker."""

        asked = 0

        def _confirm(self, timeout):
            done = super()._confirm(timeout)
            type(self).asked += done
            return done

    class StaleHighwater(Counted):
        """The condition before issue 20: a partition whose position has reached the
        highwater of its last fetch counts as caught up (no question to the broker)."""

        def _confirm(self, timeout):
            c = self.consumer
            for p in self.partitions:
                hw = c.highwater(p)
                if hw is not None and c.position(p) >= hw:
                    self._confirmed[p] = self._polls
            self._floor = None
            return True

    return [("end offsets (now)", Counted), ("stale highwater (before)", StaleHighwater)]


def _with_merge(cls, fn):
    from streamcal.stream.kafka import ordering

    saved, ordering.OrderedMerge = ordering.OrderedMerge, cls
    try:
        return fn()
    finally:
        ordering.OrderedMerge = saved


def _config(bootstrap, topics, **extra):
    from streamcal.stream.config import ProcessorConfig

    return ProcessorConfig.build(
        bootstrap_servers=bootstrap, group_id=topics["group"], events_topic=topics["events"],
        labels_topic=topics["labels"], predictions_topic=topics["predictions"],
        dead_letter_topic=topics["dead"], mode="sva", model="logreg", metrics_file="none",
        **extra,
    )  # fmt: skip


def merge_throughput(bootstrap, topics, n, every, rounds: int) -> dict:
    """Events/s of the processor in process over the same topics (a backlog) with each
    condition, alternating; best of ``rounds``."""
    from streamcal.stream.processor import Processor

    out: dict = {}
    for rep in range(rounds):
        for name, cls in _merge_classes():
            t = {**topics, "group": f"{topics['group']}-m{rep}-{cls.__name__}",
                 "predictions": f"{topics['predictions']}-m{rep}-{cls.__name__}"}  # fmt: skip
            lines: list = []
            proc = Processor(_config(bootstrap, t, metrics_every=every))
            cls.asked = 0
            _with_merge(cls, lambda p=proc, o=lines: p.run(max_idle_s=2.0, on_metrics=o.append))
            first: dict = {}
            for x in lines:
                if x["labels"] % every == 0 and x["labels"] > 0:
                    first.setdefault(x["labels"], x)
            a, b = min(first.values(), key=lambda x: x["labels"]), max(
                first.values(), key=lambda x: x["labels"])  # fmt: skip
            rate = (b["events"] - a["events"]) / (b["ts"] - a["ts"])
            best = out.get(name, (0.0, 0))
            out[name] = max(best, (rate, cls.asked))
            print(f"merge {name}: {rate:,.0f} events/s, {cls.asked} end-offset questions",
                  flush=True)  # fmt: skip
    return out


def merge_latency(bootstrap, tag: str, rate: int, seconds: float, rounds: int) -> dict:
    """Live input at ``rate`` events/s (and as many labels, 50 ms later) for ``seconds``:
    the latency from an event's record time (its production) to its prediction's record
    time, for each condition, alternating; p50/p99/max in ms over all rounds."""
    from kafka import KafkaProducer

    from streamcal.stream.processor import Processor

    got: dict = {name: [] for name, _ in _merge_classes()}
    asked: dict = dict.fromkeys(got, 0)
    stalls: dict = dict.fromkeys(got, 0)
    for rep in range(rounds):
        for name, cls in _merge_classes():
            t = {k: f"bench-{tag}.live{rep}-{cls.__name__}.{k}"
                 for k in ("events", "labels", "predictions", "dead")}  # fmt: skip
            t["group"] = f"bench-{tag}-live{rep}-{cls.__name__}"
            producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=1)
            for k in ("events", "labels"):  # create the topics before the processor starts
                producer.send(t[k], key=b"warm-up", value=b"{", timestamp_ms=T0)
            producer.flush()
            proc = Processor(_config(bootstrap, t))
            stop = threading.Event()
            cls.asked = 0
            runner = threading.Thread(
                target=_with_merge, args=(cls, lambda p=proc, e=stop: p.run(stop_event=e))
            )
            runner.start()
            time.sleep(3.0)  # start-up
            sent, labels, rng = {}, [], random.Random(rep)
            t0, i = time.monotonic(), 0
            while time.monotonic() - t0 < seconds:
                now_ms = int(time.time() * 1000)
                while i < rate * (time.monotonic() - t0):
                    eid = f"e{i}"
                    x = [rng.gauss(0, 1) for _ in range(2)]
                    producer.send(t["events"], key=eid.encode(), timestamp_ms=now_ms,
                                  value=orjson.dumps({"id": eid, "features": {"x0": x[0],
                                                      "x1": x[1]}}))  # fmt: skip
                    sent[eid.encode()] = now_ms
                    labels.append((now_ms + 50, eid, int(x[0] > 0)))
                    i += 1
                while labels and labels[0][0] <= now_ms:
                    ts, eid, y = labels.pop(0)
                    producer.send(t["labels"], key=eid.encode(), timestamp_ms=now_ms,
                                  value=orjson.dumps({"id": eid, "label": y}))  # fmt: skip
                time.sleep(0.002)
            producer.flush()
            producer.close()
            time.sleep(2.0)
            stop.set()
            runner.join()
            asked[name] += cls.asked
            stalls[name] += proc.merge_stalls
            for r in _read_all(bootstrap, t["predictions"], len(sent)):
                if r.key in sent:
                    got[name].append(r.timestamp - sent[r.key])
    out = {}
    for name, lat in got.items():
        lat.sort()
        k = len(lat)
        q50, q99 = (lat[min(k - 1, int(f * k))] if k else 0 for f in (0.5, 0.99))
        out[name] = (k, q50, q99, lat[-1] if k else 0, asked[name], stalls[name])
    return out


def _read_all(bootstrap: str, topic: str, n: int, timeout: float = 30.0) -> list:
    """The records of ``topic`` from the start, once ``n`` are read (or ``timeout``)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        out: list = []
        deadline = time.monotonic() + timeout
        while len(out) < n and time.monotonic() < deadline:
            for recs in consumer.poll(timeout_ms=200).values():
                out.extend(recs)
        return out
    finally:
        consumer.close()


def print_merge(thr: dict, lat: dict, rate: int, seconds: float) -> None:
    print()
    print("The merge's release condition (issue 20), the processor in process:")
    print(f"  {'':28s} {'events/s':>9s} {'questions':>10s}")
    for name, (r, asked) in thr.items():
        print(f"  {name:28s} {r:9,.0f} {asked:10d}")
    names = list(thr)
    print(f"  throughput now / before: {thr[names[0]][0] / thr[names[1]][0]:.3f} (target >= 0.95)")
    print(f"  live input, {rate} events/s + labels 50 ms later for {seconds:g} s; latency "
          "from event production to prediction (ms)")  # fmt: skip
    print(f"  {'':28s} {'preds':>6s} {'p50':>6s} {'p99':>6s} {'max':>6s} {'questions':>10s}"
          f" {'stalls':>7s}")  # fmt: skip
    for name, (k, p50, p99, mx, asked, stall) in lat.items():
        print(f"  {name:28s} {k:6d} {p50:6d} {p99:6d} {mx:6d} {asked:10d} {stall:7d}")


# The settings compared by --protection-only: the default (protection and the alarm), the
# alarm alone, neither.
PROTECTION_ARMS = {
    "--protect": {},
    "--no-protect": {"protect": False},
    "--no-protect --no-alarm": {"protect": False, "alarm": False},
}
NEITHER = "--no-protect --no-alarm"


def protection_logic(n: int, repeat: int, mode: str = "sva") -> dict:
    """CPU µs per event (and its label) of a unit in ``mode`` without Kafka, with
    protection and the alarm, the alarm alone and neither, alternating: one figure per arm
    and round (``repeat`` rounds), for their own cost per event, which the noisy events/s
    of the runs above hide."""
    from streamcal.stream.config import ProcessorConfig
    from streamcal.stream.unit import CalibrationUnit

    warm, (events, labels) = 2000, make_records(n + 2000)
    rounds: dict = {flag: [] for flag in PROTECTION_ARMS}
    for _ in range(repeat):
        for flag, settings in PROTECTION_ARMS.items():
            config = ProcessorConfig.build(events_topic="events", labels_topic="labels",
                                           mode=mode, metrics_file="none",
                                           **settings)  # fmt: skip
            unit = CalibrationUnit(config, send=lambda topic, key, value: None)

            def feed(lo, hi, unit=unit):
                for ev, lab in zip(events[lo:hi], labels[lo:hi], strict=True):
                    unit.on_event(ev)
                    unit.on_label(lab)

            feed(0, warm)
            rounds[flag].append(cpu_us(lambda feed=feed: feed(warm, warm + n), n))
    return rounds


_KEY = {"STREAMCAL_CHECKPOINT_KEY": "benchmark-key-0123456789abcdef"}  # a --state-dir's


def _median(xs):
    xs = sorted(xs)
    return (xs[(len(xs) - 1) // 2] + xs[len(xs) // 2]) / 2


def _print_best(runs: dict, name=lambda k: k) -> dict:
    """The table of ``runs`` ({arm: [(events/s, CPU s/event, final line), ...]}): each
    arm's best events/s and least CPU per event; returns {arm: best events/s}."""
    print(f"{'':28s} {'events/s':>10s} {'CPU µs/event':>13s}")
    best = {}
    for arm, results in runs.items():
        best[arm] = max(r for r, _, _ in results)
        cpu = min(c for _, c, _ in results)
        print(f"{name(arm):28s} {best[arm]:10,.0f} {1e6 * cpu:13,.0f}")
    return best


def print_protection_logic(n: int, repeat: int) -> None:
    """``protection_logic`` of the default mode and of sva: medians and ranges of each arm,
    and of each round's extra cost over neither (the arms of a round run back to back)."""
    print(f"without Kafka (one unit, in-process, {n:,} events after 2,000 of warm-up, "
          f"{repeat} alternating rounds): CPU µs per event, median (range)")  # fmt: skip
    for mode in ("pretrained", "sva"):
        rounds = protection_logic(n, repeat, mode)
        cells = []
        for flag in reversed(PROTECTION_ARMS):
            xs = rounds[flag]
            cells.append(f"{flag} {_median(xs):.1f} ({min(xs):.1f}-{max(xs):.1f})")
        print(f"  {mode}: " + "; ".join(cells))
        for flag, what in (("--no-protect", "the alarm alone"), ("--protect", "--protect")):
            extra = [a - b for a, b in zip(rounds[flag], rounds[NEITHER], strict=True)]
            print(f"    {what}: +{_median(extra):.1f} µs per event "
                  f"(range {min(extra):+.1f} to {max(extra):+.1f})")  # fmt: skip


def protection_runs(bs, topics, n, every, repeat: int) -> None:
    """``streamcal run`` with protection and the alarm, the alarm alone and neither,
    alternating; prints the table."""
    runs: dict = {flag: [] for flag in PROTECTION_ARMS}
    tag = topics["group"]
    for rep in range(repeat):
        for flag, results in runs.items():
            name = flag.replace(" ", "")
            topics = {**topics, "predictions": f"{tag}.predictions{name}-{rep}",
                      "group": f"{tag}{name}-{rep}"}  # fmt: skip
            results.append(run_streamcal(bs, topics, n, every, flag.split()))
            print(f"streamcal run {flag}: {results[-1][0]:,.0f} events/s", flush=True)
    print()
    print(f"{n:,} events + {n:,} labels, sva + scaled logistic regression, tansu on loopback;"
          f" best of {repeat} alternating runs")  # fmt: skip
    best = _print_best(runs, lambda flag: "streamcal run " + flag)
    for flag in ("--protect", "--no-protect"):
        ratio = best[flag] / best[NEITHER]
        # Each pair of runs back to back shares the machine's load of the moment: the
        # median of their ratios is steadier than the ratio of two bests taken apart.
        pairs = sorted(a[0] / b[0] for a, b in zip(runs[flag], runs[NEITHER], strict=True))
        median = _median(pairs)
        print(f"ratio {flag} / {NEITHER}: {ratio:.2f} events/s, best over best; median "
              f"of the {len(pairs)} pairs {median:.2f} (range {pairs[0]:.2f}-{pairs[-1]:.2f})"
              + ("; target >= 0.95" if flag == "--protect" else ""))  # fmt: skip
    print_protection_logic(n, repeat)
    final = runs["--protect"][-1][2]
    print(f"final (protected): log_loss={final['log_loss']:.4f} "
          f"protected_log_loss={final['protected_log_loss']:.4f} "
          f"log_martingale={final['log_martingale']:.2f} alarm={final['alarm']}")  # fmt: skip


def baseline_runs(bs, topics, n, every, repeat: int, tree: str, state: bool,
                  mode: str = "sva") -> None:  # fmt: skip
    """``streamcal run`` of this checkout and of the checkout ``tree`` (a git worktree of
    an earlier commit, put first on PYTHONPATH), alternating; prints the table. With
    ``state`` both run with a --state-dir (checkpoints at each one's default interval)."""
    envs = {"this checkout": {**os.environ, **_KEY},
            "baseline": {**os.environ, **_KEY, "PYTHONPATH": os.path.abspath(tree)}}  # fmt: skip
    runs: dict = {name: [] for name in envs}
    tag = topics["group"]
    for rep in range(repeat):
        for name, env in envs.items():
            run = name.split()[0]
            topics = {**topics, "predictions": f"{tag}.predictions-{run}-{rep}",
                      "group": f"{tag}-{run}-{rep}"}  # fmt: skip
            extra = ["--mode", mode] + (["--state-dir", tempfile.mkdtemp()] if state else [])
            runs[name].append(run_streamcal(bs, topics, n, every, extra, env=env))
            print(f"{name}: {runs[name][-1][0]:,.0f} events/s", flush=True)
    print()
    where = ", --state-dir" if state else ""
    print(f"{n:,} events + {n:,} labels, {mode} + scaled logistic regression, tansu on "
          f"loopback{where}; best of {repeat} alternating runs")  # fmt: skip
    best = _print_best(runs)
    pairs = sorted(a[0] / b[0] for a, b in zip(*runs.values(), strict=True))
    median = _median(pairs)
    print(f"ratio this / baseline: {best['this checkout'] / best['baseline']:.2f} best over "
          f"best; median of the {len(pairs)} pairs {median:.2f} (range {pairs[0]:.2f}-"
          f"{pairs[-1]:.2f})")  # fmt: skip


# --exactly-once: the guarantees compared, each with a state directory, at each interval.
GUARANTEES = ("at-least-once", "exactly-once")
EOS_INTERVALS = (1.0, 0.2)  # the default checkpoint interval, and a short one


def _guarantee_args(guarantee: str, interval: float) -> list:
    return ["--processing-guarantee", guarantee, "--checkpoint-interval", str(interval),
            "--state-dir", tempfile.mkdtemp(), "--no-global-lock"]  # fmt: skip


THREAD = "exactly-once --no-producer-process"  # the transactional producer in the thread


def eos_throughput(bs, topics, n, every, repeat: int) -> dict:
    """``streamcal run`` over the same backlog at least once and exactly once, alternating
    (pairs back to back), at each of ``EOS_INTERVALS``, and exactly once with the producer
    in the processor's thread at the default interval: {(arm, interval): [events/s, ...]}."""
    runs: dict = {(g, i): [] for i in EOS_INTERVALS for g in GUARANTEES}
    runs[(THREAD, EOS_INTERVALS[0])] = []
    tag = topics["group"]
    for rep in range(repeat):
        for (arm, interval), results in runs.items():
            name = f"{arm.replace(' ', '')}-{interval:g}-{rep}"
            t = {**topics, "predictions": f"{tag}.predictions-{name}", "group": f"{tag}-{name}"}
            extra = _guarantee_args(arm.split()[0], interval) + arm.split()[1:]
            results.append(run_streamcal(bs, t, n, every, extra, env={**os.environ, **_KEY})[0])
            print(f"streamcal run {arm} --checkpoint-interval {interval:g}: "
                  f"{results[-1]:,.0f} events/s", flush=True)  # fmt: skip
    return runs


def eos_latency(bs, tag: str, rate: int, seconds: float) -> dict:
    """Live input at ``rate`` events/s (labels 50 ms later) for ``seconds``, through
    ``streamcal run`` with each guarantee at each interval: the latency from an event's
    production to the moment a read_committed reader receives its prediction,
    {(guarantee, interval): (predictions, p50 ms, p99 ms, max ms)}."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    out = {}
    for interval in EOS_INTERVALS:
        for guarantee in GUARANTEES:
            name = f"live-{guarantee}-{interval:g}"
            t = {k: f"bench-{tag}.{name}.{k}" for k in ("events", "labels", "predictions",
                                                          "dead")}  # fmt: skip
            t["group"] = f"bench-{tag}-{name}"
            producer = KafkaProducer(bootstrap_servers=bs, linger_ms=1)
            for k in ("events", "labels", "predictions"):  # create the topics first
                producer.send(t[k], key=b"warm-up", value=b"{")
            producer.flush()
            cmd = [
                sys.executable, "-m", "streamcal", "run", "--bootstrap-servers", bs,
                "--group-id", t["group"], "--events-topic", t["events"],
                "--labels-topic", t["labels"], "--predictions-topic", t["predictions"],
                "--dead-letter-topic", t["dead"], "--mode", "sva", "--model", "logreg",
                "--metrics-file", "none", *_guarantee_args(guarantee, interval),
            ]  # fmt: skip
            proc = subprocess.Popen(cmd, cwd=tempfile.gettempdir(), env={**os.environ, **_KEY},
                                    stderr=subprocess.DEVNULL)  # fmt: skip
            reader = KafkaConsumer(bootstrap_servers=bs, isolation_level="read_committed",
                                   fetch_max_wait_ms=20, enable_auto_commit=False)  # fmt: skip
            tp = TopicPartition(t["predictions"], 0)
            reader.assign([tp])
            reader.seek_to_end(tp)
            seen: dict = {}
            stop = threading.Event()

            def read(reader=reader, seen=seen, stop=stop):
                while not stop.is_set():
                    for recs in reader.poll(timeout_ms=50).values():
                        now = time.time()
                        for r in recs:
                            seen.setdefault(r.key, now)

            thread = threading.Thread(target=read)
            thread.start()
            time.sleep(4.0)  # start-up
            sent, labels, rng = {}, [], random.Random(0)
            t0, i = time.monotonic(), 0
            while time.monotonic() - t0 < seconds:
                now = time.time()
                while i < rate * (time.monotonic() - t0):
                    eid = f"e{i}"
                    x = [rng.gauss(0, 1) for _ in range(2)]
                    producer.send(t["events"], key=eid.encode(), timestamp_ms=int(now * 1000),
                                  value=orjson.dumps({"id": eid, "features": {"x0": x[0],
                                                      "x1": x[1]}}))  # fmt: skip
                    sent[eid.encode()] = now
                    labels.append((now + 0.05, eid, int(x[0] > 0)))
                    i += 1
                while labels and labels[0][0] <= now:
                    _, eid, y = labels.pop(0)
                    producer.send(t["labels"], key=eid.encode(), timestamp_ms=int(now * 1000),
                                  value=orjson.dumps({"id": eid, "label": y}))  # fmt: skip
                time.sleep(0.002)
            producer.flush()
            producer.close()
            deadline = time.monotonic() + 3 * interval + 10
            while len(seen) < len(sent) and time.monotonic() < deadline:
                time.sleep(0.1)
            proc.terminate()
            proc.wait(60)
            stop.set()
            thread.join()
            reader.close()
            lat = sorted(1000 * (seen[k] - v) for k, v in sent.items() if k in seen)
            k = len(lat)
            q50, q99 = (lat[min(k - 1, int(f * k))] if k else 0.0 for f in (0.5, 0.99))
            out[(guarantee, interval)] = (k, len(sent), q50, q99, lat[-1] if k else 0.0)
            print(f"live {guarantee} --checkpoint-interval {interval:g}: {k}/{len(sent)} "
                  f"predictions, p50 {q50:.0f} ms, p99 {q99:.0f} ms", flush=True)  # fmt: skip
    return out


def print_eos(n: int, thr: dict, lat: dict, rate: int, seconds: float, load: tuple) -> None:
    print()
    print(f"{n:,} events + {n:,} labels, sva + scaled logistic regression, noida-db on loopback,"
          f" --state-dir, --no-global-lock; {len(next(iter(thr.values())))} alternating rounds;"
          f" load average before {load[0]:.2f}, after {load[1]:.2f}")  # fmt: skip
    print(f"  {'':56s} {'events/s median (range)':>26s}")
    for (g, i), xs in thr.items():
        cell = f"{_median(xs):,.0f} ({min(xs):,.0f}-{max(xs):,.0f})"
        print(f"  {g + ' --checkpoint-interval ' + format(i, 'g'):56s} {cell:>26s}")
    ratios = [("exactly-once", "at-least-once", i) for i in EOS_INTERVALS]
    ratios.append((THREAD, "exactly-once", EOS_INTERVALS[0]))
    for arm, base, i in ratios:
        pairs = sorted(e / a for a, e in zip(thr[(base, i)], thr[(arm, i)], strict=True))
        target = "; target >= 0.8" if (arm, i) == ("exactly-once", EOS_INTERVALS[0]) else ""
        print(f"  {arm} / {base} at {i:g} s: median of the {len(pairs)} pairs "
              f"{_median(pairs):.2f} (range {pairs[0]:.2f}-{pairs[-1]:.2f}){target}")  # fmt: skip
    print(f"  live input, {rate} events/s + labels 50 ms later for {seconds:g} s: latency from "
          "an event's production to a read_committed reader receiving its prediction (ms)")
    print(f"  {'':56s} {'predictions':>13s} {'p50':>6s} {'p99':>6s} {'max':>6s}")
    for (g, i), (k, sent, p50, p99, mx) in lat.items():
        name = g + " --checkpoint-interval " + format(i, "g")
        print(f"  {name:56s} {f'{k}/{sent}':>13s} {p50:6.0f} {p99:6.0f} {mx:6.0f}")


class _Noida:
    """A noida-db broker for the lifetime of a ``with`` block (the dev extra's; its helper
    lives with the tests)."""

    def __enter__(self):
        sys.path.insert(0, os.path.dirname(_HERE))
        from tests._kafka_helpers import NoidaBroker, find_noida

        binary = find_noida()
        if binary is None:
            raise SystemExit('noida-db is not installed: pip install -e ".[dev]"')
        self._dir = tempfile.mkdtemp()
        self.broker = NoidaBroker(binary, os.path.join(self._dir, "data")).start()
        self.bootstrap_servers = self.broker.bootstrap_servers
        return self

    def __exit__(self, *exc):
        self.broker.stop()


def exactly_once_main(args, n: int, every: int) -> None:
    with _Noida() as broker:
        bs = broker.bootstrap_servers
        tag = uuid.uuid4().hex[:8]
        topics = {k: f"bench-{tag}.{k}" for k in ("events", "labels", "predictions", "dead")}
        topics["group"] = f"bench-{tag}"
        t = time.monotonic()
        produce_input(bs, topics["events"], topics["labels"], n, t0=int(time.time() * 1000))
        print(f"produced {n} events + {n} labels in {time.monotonic() - t:.1f} s", flush=True)
        before = os.getloadavg()[0]
        thr = eos_throughput(bs, topics, n, every, args.repeat)
        lat = eos_latency(bs, tag, args.live_rate, args.live_seconds)
        print_eos(n, thr, lat, args.live_rate, args.live_seconds, (before, os.getloadavg()[0]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--quick", action="store_true", help="20k events")
    ap.add_argument("--profile-events", type=int, default=None, help="events in the profile run")
    ap.add_argument("--repeat", type=int, default=2, help="alternating runs of each (best kept)")
    ap.add_argument(
        "--busy-us",
        type=float,
        default=50.0,
        help="CPU µs per event of the control loop: the bare loop plus this much busy work "
        "(about the processor's own work without Kafka; 0: no control run)",
    )
    ap.add_argument(
        "--merge-only",
        action="store_true",
        help="only the merge's release condition, now vs before (throughput, latency)",
    )
    ap.add_argument("--live-rate", type=int, default=500, help="events/s of the latency run")
    ap.add_argument("--live-seconds", type=float, default=10.0, help="length of the latency run")
    ap.add_argument(
        "--protection-only",
        action="store_true",
        help="only streamcal run with --protect, --no-protect (the alarm alone) and "
        "--no-protect --no-alarm, alternating (no bare loop, control or CPU split)",
    )
    ap.add_argument(
        "--in-process",
        action="store_true",
        help="with --protection-only: only the in-process part (no streamcal run)",
    )
    ap.add_argument(
        "--baseline-tree",
        metavar="DIR",
        help="only streamcal run of this checkout against the one in DIR (e.g. `git worktree "
        "add ../old <commit>`), alternating",
    )
    ap.add_argument(
        "--state-dir", action="store_true", help="with --baseline-tree: both with a --state-dir"
    )
    ap.add_argument(
        "--exactly-once",
        action="store_true",
        help="only streamcal run at least once and exactly once (--state-dir), alternating, "
        "at checkpoint intervals 1 s and 0.2 s, and their latency to a read_committed reader "
        "(--live-rate, --live-seconds), on a noida-db broker (transactions honoured)",
    )
    ap.add_argument("--mode", default="sva", help="with --baseline-tree: the Venn-Abers mode")
    args = ap.parse_args()
    n = 20_000 if args.quick else args.events
    n_prof = args.profile_events or min(n, 20_000)
    every = max(1000, n // 40)
    if args.exactly_once:
        exactly_once_main(args, n, every)
        return

    from streamcal.demo.broker import LocalBroker

    with LocalBroker() as broker:
        bs = broker.bootstrap_servers
        tag = uuid.uuid4().hex[:8]
        topics = {k: f"bench-{tag}.{k}" for k in ("events", "labels", "predictions", "dead",
                                                   "bare_out")}  # fmt: skip
        topics["group"] = f"bench-{tag}"
        t = time.monotonic()
        produce_input(bs, topics["events"], topics["labels"], n)
        print(f"produced {n} events + {n} labels in {time.monotonic() - t:.1f} s", flush=True)

        if args.merge_only:
            thr = merge_throughput(bs, topics, n, every, args.repeat)
            lat = merge_latency(bs, tag, args.live_rate, args.live_seconds, args.repeat)
            print_merge(thr, lat, args.live_rate, args.live_seconds)
            return
        if args.protection_only:
            if args.in_process:
                print_protection_logic(n, args.repeat)
            else:
                protection_runs(bs, topics, n, every, args.repeat)
            return
        if args.baseline_tree:
            baseline_runs(bs, topics, n, every, args.repeat, args.baseline_tree, args.state_dir,
                          args.mode)  # fmt: skip
            return
        bare, sc, thread, busy, unprotected = [], [], [], [], []
        tansu: dict = {"bare": [], "streamcal": []}  # broker CPU seconds per run
        for rep in range(args.repeat):  # alternate, so both see the same background load
            topics["bare_out"] = f"bench-{tag}.bare-out-{rep}"
            topics["predictions"] = f"bench-{tag}.predictions-{rep}"
            topics["group"] = f"bench-{tag}-{rep}"
            b0 = broker_cpu(broker.pid)
            bare.append(run_bare(bs, topics, n))
            tansu["bare"].append(broker_cpu(broker.pid) - b0)
            print(f"bare loop: {bare[-1][0]:,.0f} events/s", flush=True)
            if args.busy_us:
                topics["bare_out"] = f"bench-{tag}.busy-out-{rep}"
                busy.append(run_bare(bs, topics, n, args.busy_us))
                print(f"bare loop + busy work: {busy[-1][0]:,.0f} events/s", flush=True)
            b0 = broker_cpu(broker.pid)
            sc.append(run_streamcal(bs, topics, n, every))
            tansu["streamcal"].append(broker_cpu(broker.pid) - b0)
            print(f"streamcal run: {sc[-1][0]:,.0f} events/s", flush=True)
            topics["predictions"] = f"bench-{tag}.predictions-unprotected-{rep}"
            topics["group"] = f"bench-{tag}-unprotected-{rep}"
            unprotected.append(run_streamcal(bs, topics, n, every, NEITHER.split()))
            print(f"streamcal run {NEITHER}: {unprotected[-1][0]:,.0f} events/s", flush=True)
            topics["predictions"] = f"bench-{tag}.predictions-thread-{rep}"
            topics["group"] = f"bench-{tag}-thread-{rep}"
            thread.append(run_streamcal(bs, topics, n, every, ["--no-producer-process"]))
            print(f"streamcal run --no-producer-process: {thread[-1][0]:,.0f} events/s", flush=True)
        # Its own topics of n_prof events: a consumer stopped early on bigger topics would
        # have fetched (and paid for) records it never hands out.
        split_topics = {**topics, **{k: f"{topics[k]}-split" for k in ("events", "labels")}}
        produce_input(bs, split_topics["events"], split_topics["labels"], n_prof)
        split = kafka_split(bs, split_topics, n_prof)
    logic = logic_split(n_prof)
    # Best of the repeats: background load only ever slows a run down.
    bare_rate, bare_cpu = max(r for r, _ in bare), min(c for _, c in bare)
    sc_rate, sc_cpu = max(r for r, _, _ in sc), min(c for _, c, _ in sc)
    final = sc[-1][2]

    print()
    print(f"{n:,} events + {n:,} labels, sva + scaled logistic regression, tansu on loopback;"
          f" best of {args.repeat} alternating runs")  # fmt: skip
    print(f"{'':28s} {'events/s':>10s} {'CPU µs/event':>13s}")
    print(f"{'bare kafka-python loop':28s} {bare_rate:10,.0f} {1e6 * bare_cpu:13,.0f}")
    if busy:
        busy_rate, busy_cpu = max(r for r, _ in busy), min(c for _, c in busy)
        label = f"bare + {args.busy_us:g} µs busy/event"
        print(f"{label:28s} {busy_rate:10,.0f} {1e6 * busy_cpu:13,.0f}")
    print(f"{'streamcal run':28s} {sc_rate:10,.0f} {1e6 * sc_cpu:13,.0f}")
    th_rate, th_cpu = max(r for r, _, _ in thread), min(c for _, c, _ in thread)
    label = "  --no-producer-process"
    print(f"{label:28s} {th_rate:10,.0f} {1e6 * th_cpu:13,.0f}")
    up_rate, up_cpu = max(r for r, _, _ in unprotected), min(c for _, c, _ in unprotected)
    label = "  " + NEITHER
    print(f"{label:28s} {up_rate:10,.0f} {1e6 * up_cpu:13,.0f}")
    print(f"the broker's CPU per event (µs): {1e6 * min(tansu['bare']) / n:.0f} during the bare "
          f"loop, {1e6 * min(tansu['streamcal']) / n:.0f} during streamcal run")  # fmt: skip
    print(f"ratio streamcal / bare: {sc_rate / bare_rate:.2f} events/s (target >= 0.60), "
          f"{bare_cpu / sc_cpu:.2f} by CPU per event")  # fmt: skip
    print(f"ratio protected / {NEITHER}: {sc_rate / up_rate:.2f} events/s (target >= 0.95)")
    if busy:
        print(f"ratio streamcal / (bare + busy work): {sc_rate / busy_rate:.2f} events/s; "
              f"(bare + busy) / bare: {busy_rate / bare_rate:.2f}")  # fmt: skip
    print(f"final: events={final['events']} labels={final['labels']} "
          f"log_loss={final['log_loss']:.4f} raw_log_loss={final['raw_log_loss']:.4f}")  # fmt: skip
    print()
    print(f"CPU per event without Kafka ({n_prof:,} events, no profiler, after warm-up)")
    for part, us in logic:
        print(f"  {part:42s} {us:8.1f} µs")
    print()
    print(f"The processor in process, {n_prof:,} events, with and without each Kafka client "
          "(no profiler; best of 2 alternating rounds)")  # fmt: skip
    print(f"  {'':36s} {'events/s':>9s} {'main-thread µs':>15s} {'all CPU µs':>11s}")
    for name, (rate, main, cpu) in split.items():
        print(f"  {name:36s} {rate:9,.0f} {main:15.1f} {cpu:11.1f}")
    full, inthread, noprod, nocons, neither = (split[v[0]] for v in KAFKA_VARIANTS)
    print("  CPU µs/event by part (differences of the rows above):")
    print(f"    Kafka consumer (main thread)                   {noprod[1] - neither[1]:7.1f}")
    print(f"    producer in the thread: main thread            {inthread[1] - noprod[1]:7.1f}")
    print(f"    producer in the thread: its I/O thread         "
          f"{inthread[2] - inthread[1] - (noprod[2] - noprod[1]):7.1f}")  # fmt: skip
    print(f"    producer process: main thread (hand-off)       {full[1] - noprod[1]:7.1f}")
    print(f"    producer process: the child (with its start-up) "
          f"{full[2] - full[1] - (noprod[2] - noprod[1]):6.1f}")  # fmt: skip
    print(f"    processor without Kafka (main)                 {neither[1]:7.1f}  (split above)")


if __name__ == "__main__":
    main()
