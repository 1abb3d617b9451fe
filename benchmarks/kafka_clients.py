"""The two Kafka clients of `streamcal run` side by side with loops a user would write
(issue 36), on one local tansu broker, the same topics (4 partitions each):

* a bare kafka-python loop and a bare confluent-kafka loop: read every event and label,
  produce one message per event, nothing else;
* the hand-written confluent-kafka loop: the same river model as `streamcal run --model
  logreg` (scaled logistic regression) predicts each event, the event waits in a dict
  until its label comes, the label is learnt, one JSON per event is produced;
* `streamcal run --state-dir` with kafka-python (its producer in a child process) and with
  `--kafka-client librdkafka`.

Each is run over ``--events`` events and over 2,000, alternating, ``--repeat`` times; the
figure is the marginal CPU per event: (CPU of the big run - CPU of the small run) /
(difference of events), every process counted with its children (start-up, imports and
connections cancel out). Events/s of the big run (steady state for `streamcal run`: from
its first to its last metric line; for the loops: from the first record to the last
flush).

    python benchmarks/kafka_clients.py                   # 100k events, 2 rounds
    python benchmarks/kafka_clients.py --events 20000 --repeat 1
    python benchmarks/kafka_clients.py --split 40000   # where the processor's CPU goes
    python benchmarks/kafka_clients.py --baseline-python ../old/.venv/bin/python

``--baseline-python`` adds ``streamcal run`` (kafka-python) of another install (an older
commit's, in its own venv) as one more arm, for issue 36's "the kafka-python path costs
no more CPU per event than it did".

``--split`` runs no broker: the processor in process (records from memory, outputs
dropped, a --state-dir), whole, with protection and the alarm off, and with the learner
(predict, learn, track) replaced by a constant, so that what is left is the stream's own
work (decoding, the merge, the waiting store and its checkpoints, encoding).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import subprocess
import sys
import tempfile
import uuid

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
_spec = importlib.util.spec_from_file_location("bench_kafka", os.path.join(_HERE, "kafka.py"))
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

SMALL = 2_000

CONFLUENT_LOOP = r"""
import sys, time
import orjson
from confluent_kafka import Consumer, Producer, TopicPartition
bootstrap, events, labels, out, n, linger_ms, model = sys.argv[1:8]
n = int(n)
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": out, "enable.auto.commit": False,
                     "fetch.wait.max.ms": 100})
producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                     "linger.ms": int(linger_ms), "batch.size": 256 * 1024})
parts = []
for t in (events, labels):
    meta = consumer.list_topics(t, timeout=30).topics[t]
    parts += [TopicPartition(t, p, 0) for p in sorted(meta.partitions)]
consumer.assign(parts)
if model == "logreg":
    from river import linear_model, preprocessing
    model = preprocessing.StandardScaler() | linear_model.LogisticRegression()
else:
    model = None
waiting = {}
seen = {events: 0, labels: 0}
first = None
dumps, loads = orjson.dumps, orjson.loads
while seen[events] < n or seen[labels] < n:
    for m in consumer.consume(500, 0.2):
        if m.error():
            continue
        if first is None:
            first = time.monotonic()
        topic = m.topic()
        seen[topic] += 1
        if model is None:
            if topic == events:
                producer.produce(out, m.value(), m.key())
            continue
        d = loads(m.value())
        if topic == events:
            x = d["features"]
            p = model.predict_proba_one(x).get(True, 0.5)
            waiting[d["id"]] = x
            producer.produce(out, dumps({"id": d["id"], "p": p}), m.key())
        else:
            x = waiting.pop(d["id"], None)
            if x is not None:
                model.learn_one(x, d["label"] == 1)
    producer.poll(0)
producer.flush()
print(n / (time.monotonic() - first))
"""


def _cpu(before) -> float:
    return bench.child_cpu(before)


def run_loop(kind: str, bs: str, topics: dict, n: int, out: str) -> tuple[float, float]:
    """(events/s, CPU seconds) of one loop over the first ``n`` events and labels."""
    from streamcal.stream.config import ProcessorConfig

    defaults = ProcessorConfig()
    if kind == "bare kafka-python":
        args = [bench.BARE_LOOP, bs, topics["events"], topics["labels"], out, str(n),
                str(defaults.linger_ms), str(defaults.poll_max_records), "0"]  # fmt: skip
    else:
        model = "logreg" if kind == "hand-written confluent-kafka" else "none"
        args = [CONFLUENT_LOOP, bs, topics["events"], topics["labels"], out, str(n),
                str(defaults.linger_ms), model]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-c", *args], check=True, capture_output=True,
                          text=True, cwd=tempfile.gettempdir())  # fmt: skip
    return float(done.stdout.strip()), _cpu(before)


STREAMCAL = {
    "streamcal run (kafka-python)": [],
    "streamcal run --kafka-client librdkafka": ["--kafka-client", "librdkafka"],
}
LOOPS = ("bare kafka-python", "bare confluent-kafka", "hand-written confluent-kafka")
BASELINE = "streamcal run (kafka-python), baseline"
_baseline: dict = {}  # "python": the baseline install's interpreter (--baseline-python)


def run_arm(arm: str, bs: str, topics: dict, n: int, tag: str) -> tuple[float, float]:
    """(events/s, CPU seconds) of ``arm`` over topics of ``n`` events."""
    out = f"{topics['events']}.out-{tag}"
    if arm in LOOPS:
        return run_loop(arm, bs, topics, n, out)
    every = max(500, n // 40)
    t = {**topics, "predictions": out, "group": out, "dead": out + "-dead"}
    extra = ["--state-dir", tempfile.mkdtemp(), *STREAMCAL.get(arm, ())]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    rate, _, _ = bench.run_streamcal(bs, t, n, every, extra, env={**os.environ, **bench._KEY},
                                     python=_baseline.get("python") if arm == BASELINE else None)
    return rate, _cpu(before)


SPLIT = {  # what the processor runs with, in process
    "whole (sva, protection and alarm on)": {},
    "protection and alarm off": {"protect": False, "alarm": False},
    "learner replaced by a constant (the stream's own work)": {"stub": True},
}


def _stub_learner(task) -> None:
    """A task whose predict, learn and track cost nothing (the same output every time)."""
    from streamcal.stream.tasks.binary import PendingPrediction

    def predict(clf, ev):
        out = {"id": ev.id, "p0": 0.1, "p1": 0.2, "p": 0.15, "p_square": 0.15, "score": 0.3,
               "calibration_size": 100, "version": "x"}  # fmt: skip
        return out, PendingPrediction(ev.x, 0.1, 0.2, 0.15, 0.3, None, 0.15)

    task.predict = predict
    task.learn = task.track = lambda *args: None


def processor_split(n: int, repeat: int) -> None:
    """CPU µs per event (with its label) of the processor in process, best of ``repeat``."""
    import threading
    import time

    from streamcal.stream.config import ProcessorConfig
    from streamcal.stream.processor import Processor

    topics = {"events": "events", "labels": "labels"}
    for name, extra in SPLIT.items():
        best = float("inf")
        for _ in range(repeat):
            settings = {k: v for k, v in extra.items() if k != "stub"}
            config = ProcessorConfig.build(
                events_topic="events", labels_topic="labels", mode="sva", model="logreg",
                metrics_file="none", producer_process=False, global_lock=False,
                state_dir=tempfile.mkdtemp(), checkpoint_key=bench._KEY[
                    "STREAMCAL_CHECKPOINT_KEY"], **settings)  # fmt: skip
            proc = Processor(config)
            memory = bench.MemoryConsumer(topics, n)
            proc._make_consumer = lambda memory=memory: memory
            proc._make_outbox = bench._NullOutbox
            if extra.get("stub"):
                _stub_learner(proc.state.task)
            proc.state.clf.predict_interval_one({"x0": 0.0})  # the numba kernels loaded
            stop = threading.Event()
            progress = lambda events, stop=stop: events >= n and stop.set()  # noqa: E731
            cpu = time.process_time()
            proc.run(stop_event=stop, max_idle_s=0.3, progress=progress)
            best = min(best, 1e6 * (time.process_time() - cpu) / proc.state.counts["events"])
        print(f"{name:56s} {best:6.1f} µs per event", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--split", type=int, metavar="EVENTS", default=None,
                    help="no broker: where the processor's CPU goes, over EVENTS events")
    ap.add_argument("--baseline-python", metavar="PYTHON", default=None,
                    help="also run streamcal run (kafka-python) of the install of PYTHON")
    args = ap.parse_args()
    if args.split:
        processor_split(args.split, args.repeat)
        return
    n = args.events
    arms = (*LOOPS, *STREAMCAL)
    if args.baseline_python:
        _baseline["python"] = args.baseline_python
        arms = (*arms, BASELINE)
    from streamcal.demo.broker import LocalBroker

    with LocalBroker() as broker:
        bs = broker.bootstrap_servers
        tag = uuid.uuid4().hex[:8]
        inputs = {}
        for size in (n, SMALL):
            topics = {k: f"clients-{tag}-{size}.{k}" for k in ("events", "labels")}
            bench.produce_input(bs, topics["events"], topics["labels"], size)
            inputs[size] = topics
        cpu: dict = {(a, s): [] for a in arms for s in (n, SMALL)}
        rates: dict = {a: [] for a in arms}
        for rep in range(args.repeat):  # alternating: each sees the same background load
            for arm in arms:
                for size in (n, SMALL):
                    rate, seconds = run_arm(arm, bs, inputs[size], size, f"{rep}-{len(cpu)}-"
                                            f"{arms.index(arm)}-{size}")  # fmt: skip
                    cpu[(arm, size)].append(seconds)
                    if size == n:
                        rates[arm].append(rate)
                print(f"{arm}: {rates[arm][-1]:,.0f} events/s", flush=True)
    print()
    print(f"{n:,} events + {n:,} labels, less {SMALL:,} + {SMALL:,} (start-up cancelled); "
          f"tansu on loopback; best of {args.repeat} alternating rounds")  # fmt: skip
    print(f"{'':42s} {'events/s':>9s} {'marginal CPU µs/event':>22s}")
    marginal = {}
    for arm in arms:
        big, small = min(cpu[(arm, n)]), min(cpu[(arm, SMALL)])
        marginal[arm] = 1e6 * (big - small) / (n - SMALL)
        print(f"{arm:42s} {max(rates[arm]):9,.0f} {marginal[arm]:22.1f}")
    hand = marginal["hand-written confluent-kafka"]
    rd = marginal["streamcal run --kafka-client librdkafka"]
    kp = marginal["streamcal run (kafka-python)"]
    print(f"librdkafka path / hand-written loop: {rd / hand:.2f} (target <= 2.5)")
    print(f"librdkafka path / kafka-python path: {rd / kp:.2f} (target <= 0.4)")
    if BASELINE in marginal:
        print(f"kafka-python path / the baseline install's: {kp / marginal[BASELINE]:.2f} "
              f"(target <= 1)")  # fmt: skip


if __name__ == "__main__":
    main()
