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
bootstrap, events, labels, out, n, linger_ms, model, settings = sys.argv[1:9]
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
clf = None
if model == "logreg":
    from river import linear_model, preprocessing
    model = preprocessing.StandardScaler() | linear_model.LogisticRegression()
elif model == "va":  # the processor's learner: its model and settings, predict and learn
    import json
    from streamcal.learner import VennAbersClassifier
    from streamcal.stream.models import make_model
    clf = VennAbersClassifier(make_model("logreg"), **json.loads(settings))
    clf.warn_unlearned = clf.watch_delays = False  # as the processor's
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
        if model is None and clf is None:
            if topic == events:
                producer.produce(out, m.value(), m.key())
            continue
        d = loads(m.value())
        if topic == events:
            x = d["features"]
            if clf is None:
                p = model.predict_proba_one(x).get(True, 0.5)
                waiting[d["id"]] = x
            else:  # the base p waits with x: the protection learns from it
                p0, p1, p, score, pp, size = clf.predict_numbers_one(x)
                waiting[d["id"]] = (x, p)
                p = p if pp is None else pp
            producer.produce(out, dumps({"id": d["id"], "p": p}), m.key())
        else:
            x = waiting.pop(d["id"], None)
            if x is None:
                continue
            if clf is None:
                model.learn_one(x, d["label"] == 1)
            else:
                clf.learn_one(x[0], d["label"], p=x[1])
    producer.poll(0)
producer.flush()
print(n / (time.monotonic() - first))
"""


def _cpu(before) -> float:
    return bench.child_cpu(before)


HAND = "hand-written confluent-kafka"
WITH_VA = "the same loop, VennAbersClassifier for the model"
# loop name -> the confluent-kafka loop's model (None: the bare kafka-python loop)
LOOPS = {"bare kafka-python": None, "bare confluent-kafka": "none", HAND: "logreg",
         WITH_VA: "va"}  # fmt: skip
KAFKA_PYTHON = "streamcal run (kafka-python)"
LIBRDKAFKA = "streamcal run --kafka-client librdkafka"
STREAMCAL = {KAFKA_PYTHON: [], LIBRDKAFKA: ["--kafka-client", "librdkafka"]}
BASELINE = "streamcal run (kafka-python), baseline"
_run: dict = {"mode": None}  # "mode": --mode; "python": --baseline-python's interpreter


def classifier_settings(mode: str | None) -> dict:
    """The processor's classifier settings (its defaults, ``--mode`` ``mode``)."""
    from streamcal.stream.config import ProcessorConfig

    return ProcessorConfig(mode=mode).classifier_settings().as_dict()


def run_loop(kind: str, bs: str, topics: dict, n: int, out: str) -> tuple[float, float]:
    """(events/s, CPU seconds) of one loop over the first ``n`` events and labels."""
    import json

    from streamcal.stream.config import ProcessorConfig

    defaults = ProcessorConfig()
    if LOOPS[kind] is None:
        args = [bench.BARE_LOOP, bs, topics["events"], topics["labels"], out, str(n),
                str(defaults.linger_ms), str(defaults.poll_max_records), "0"]  # fmt: skip
    else:
        args = [CONFLUENT_LOOP, bs, topics["events"], topics["labels"], out, str(n),
                str(defaults.linger_ms), LOOPS[kind],
                json.dumps(classifier_settings(_run["mode"]))]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-c", *args], check=True, capture_output=True,
                          text=True, cwd=tempfile.gettempdir())  # fmt: skip
    return float(done.stdout.strip()), _cpu(before)


def run_arm(arm: str, bs: str, topics: dict, n: int, tag: str,
            threads: dict | None = None) -> tuple[float, float]:  # fmt: skip
    """(events/s, CPU seconds) of ``arm`` over topics of ``n`` events (``threads``: see
    ``bench.run_streamcal``)."""
    out = f"{topics['events']}.out-{tag}"
    if arm in LOOPS:
        return run_loop(arm, bs, topics, n, out)
    every = max(500, n // 40)
    t = {**topics, "predictions": out, "group": out, "dead": out + "-dead"}
    extra = ["--state-dir", tempfile.mkdtemp(), *STREAMCAL.get(arm, ())]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    rate, _, _ = bench.run_streamcal(bs, t, n, every, extra, env={**os.environ, **bench._KEY},
                                     python=_run.get("python") if arm == BASELINE else None,
                                     mode=_run["mode"], threads=threads)  # fmt: skip
    return rate, _cpu(before)


def _thread_groups(threads: dict) -> dict:
    """CPU seconds by kind of thread: librdkafka's own (named rdk:...) and the rest (the
    interpreter's: the processor's loop and its helper threads)."""
    out = {"librdkafka's threads": 0.0, "Python's threads": 0.0}
    for name, seconds in threads.values():
        out["librdkafka's threads" if name.startswith("rdk:") else "Python's threads"] += seconds
    return out


def thread_split(bs: str, inputs: dict, n: int, repeat: int, flags: list) -> None:
    """``streamcal run --kafka-client librdkafka``'s marginal CPU per event by thread kind,
    ``repeat`` rounds; with ``flags`` (more flags of ``streamcal run``) each round also
    runs it with them, alternating."""
    variants = {LIBRDKAFKA: STREAMCAL[LIBRDKAFKA]}
    if flags:
        variants[f"{LIBRDKAFKA} {' '.join(flags)}"] = [*STREAMCAL[LIBRDKAFKA], *flags]
    rows: dict = {}
    for rep in range(repeat):
        for arm, extra in variants.items():
            STREAMCAL[arm] = extra
            got = {}
            for size in (n, SMALL):
                threads: dict = {}
                tag = f"t{rep}-{list(variants).index(arm)}-{size}"
                _, total = run_arm(arm, bs, inputs[size], size, tag, threads)
                got[size] = {**_thread_groups(threads), "the whole process": total}
            for name in got[n]:
                rows.setdefault((arm, name), []).append(1e6 * (got[n][name] - got[SMALL][name])
                                                        / (n - SMALL))  # fmt: skip
            print(f"round {rep + 1}, {arm}: {_load()}: " + ", ".join(
                f"{k} {v[-1]:.1f}" for (a, k), v in rows.items() if a == arm), flush=True)
    print("\nmarginal CPU µs per event by thread, median (range)")
    for (arm, name), xs in rows.items():
        print(f"{arm + ': ' + name:72s} {_cell(xs)}")


RIVER = "river model alone: predict_proba_one, learn_one"
CLASSIFIER = "VennAbersClassifier alone: predict_numbers_one, learn_one"
LATE = "the same, each label 500 events after its event"
TASK = "the learner as the unit calls it: task predict, refuse, learn, track"


def learner_alone(n: int, mode: str | None) -> dict:
    """CPU µs per event (with its label) of the learner without Kafka nor the stream, on
    decoded events, each label right after its event (the order the processor's merge
    gives this benchmark's input), after 2,000 of warm-up: the river model, the
    classifier with the processor's settings (also with each label 500 events late, as
    the loops' batches bring them), and the unit's task around it (the tracker's update
    and its check of the prediction)."""
    from collections import deque

    from streamcal.stream.config import ProcessorConfig
    from streamcal.stream.messages import Fields, decode_event, decode_label
    from streamcal.stream.models import make_model
    from streamcal.stream.unit import CalibrationUnit

    warm = 2000
    fields = Fields()
    decoded = [(decode_event(e.value, fields), decode_label(lb.value, fields))
               for e, lb in zip(*bench.make_records(n + warm), strict=True)]  # fmt: skip
    config = ProcessorConfig.build(events_topic="events", labels_topic="labels", mode=mode,
                                   metrics_file="none")  # fmt: skip
    model = make_model("logreg")
    unit = CalibrationUnit(config, send=lambda topic, key, value: None)
    task, tracker, clf = unit.task, unit.tracker, unit.clf
    alone, late = task.new_classifier(), task.new_classifier()
    alone.warn_unlearned = alone.watch_delays = late.warn_unlearned = late.watch_delays = False

    def river(rows):
        for ev, lab in rows:
            model.predict_proba_one(ev.x).get(True, 0.5)
            model.learn_one(ev.x, lab.y)

    def classifier(rows):
        for ev, lab in rows:
            numbers = alone.predict_numbers_one(ev.x)
            alone.learn_one(ev.x, lab.y, p=numbers[2])

    def labels_late(rows, lag=500):
        # as a consumer's batches give them: the pretrained mode's score of a prediction
        # is reused by its label only if no other object was scored in between
        waiting = deque()
        for ev, lab in rows:
            waiting.append((ev.x, lab.y, late.predict_numbers_one(ev.x)[2]))
            if len(waiting) > lag:
                x, y, p = waiting.popleft()
                late.learn_one(x, y, p=p)
        for x, y, p in waiting:
            late.learn_one(x, y, p=p)

    def as_the_unit(rows):
        for ev, lab in rows:
            _, pred = task.predict(clf, ev)
            if task.refuse(clf, pred, lab.y, ev.id) is None:
                task.learn(clf, pred, lab.y)
                task.track(clf, tracker, pred, lab.y)

    out = {}
    arms = (river, classifier, labels_late, as_the_unit)
    for name, fn in zip(learner_alone_names(), arms, strict=True):
        fn(decoded[:warm])
        out[name] = bench.cpu_us(lambda fn=fn: fn(decoded[warm:]), n)
    unit.store.close()
    return out


SPLIT = {  # what the processor runs with, in process
    "whole (protection and alarm on)": {},
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


def split_once(n: int, extra: dict, mode: str | None) -> float:
    """CPU µs per event (with its label) of the processor in process, once."""
    import threading
    import time

    from streamcal.stream.config import ProcessorConfig
    from streamcal.stream.processor import Processor

    topics = {"events": "events", "labels": "labels"}
    settings = {k: v for k, v in extra.items() if k != "stub"}
    config = ProcessorConfig.build(
        events_topic="events", labels_topic="labels", mode=mode, model="logreg",
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
    return 1e6 * (time.process_time() - cpu) / proc.state.counts["events"]


def _load() -> str:
    return "load average " + ", ".join(f"{x:.1f}" for x in os.getloadavg())


def _cell(xs: list) -> str:
    """Median (range) of ``xs``."""
    return f"{bench._median(xs):7.1f} ({min(xs):.1f}-{max(xs):.1f})"


_warm: set = set()  # the split's arms run once already in this process


def split_round(n: int, mode: str | None) -> dict:
    """One round of the split: each arm once, the learner alone after them. Each arm runs
    once over 3,000 events first in a process: numba loads a kernel at its first call
    (the store's packing, the protector's and the alarm's learning: 0.3 s or more), which
    would otherwise be charged to the first arm that calls it."""
    for name, extra in SPLIT.items():
        if (name, mode) not in _warm:
            split_once(3000, extra, mode)
            _warm.add((name, mode))
    rows = {name: split_once(n, extra, mode) for name, extra in SPLIT.items()}
    return {**rows, **learner_alone(n, mode)}


def _split_elsewhere(tree: str, n: int, mode: str | None) -> dict:
    """``split_round`` run by the streamcal of the checkout ``tree`` (first on PYTHONPATH:
    an earlier commit's worktree), in a process of its own."""
    import json

    cmd = [sys.executable, os.path.abspath(__file__), "--split", str(n), "--json"]
    env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
    done = subprocess.run(cmd + (["--mode", mode] if mode else []), check=True, env=env,
                          capture_output=True, text=True)  # fmt: skip
    return json.loads(done.stdout.splitlines()[-1])


def processor_split(n: int, repeat: int, mode: str | None, trees: dict | None = None) -> None:
    """CPU µs per event (with its label) of the processor in process and of the learner
    alone: ``repeat`` rounds, the arms alternating within each; medians (ranges). With
    ``trees`` ({name: checkout}), each round runs every checkout's split in turn (each in
    a process of its own) and the per-round ratios to the first are printed too."""
    rows: dict = {}
    for r in range(repeat):
        print(f"round {r + 1}: {_load()}", flush=True)
        for tree, path in (trees or {"": None}).items():
            got = split_round(n, mode) if path is None else _split_elsewhere(path, n, mode)
            for name, us in got.items():
                rows.setdefault((tree, name), []).append(us)
            if trees:
                print(f"  {tree}: " + ", ".join(f"{us:.1f}" for us in got.values()), flush=True)
    print(f"\nin process, no broker, mode {mode or 'the default'}: CPU µs per event with its "
          f"label, median (range) of {repeat} rounds; {_load()}")  # fmt: skip
    for (tree, name), xs in rows.items():
        print(f"{tree + ' ' if tree else ''}{name:72s} {_cell(xs)}")
    if trees and len(trees) > 1:
        first, *others = trees
        for other in others:
            print(f"\n{other} / {first}, per round: median (range)")
            for name in SPLIT | dict.fromkeys(learner_alone_names()):
                xs = [a / b for a, b in zip(rows[(other, name)], rows[(first, name)],
                                            strict=True)]  # fmt: skip
                print(f"{name:72s} {bench._median(xs):5.3f} ({min(xs):.3f}-{max(xs):.3f})")


def learner_alone_names() -> tuple:
    return (RIVER, CLASSIFIER, LATE, TASK)


def _report(arms, marginal: dict, rates: dict, alone: dict, n: int, repeat: int) -> None:
    """The table and the ratios, each a median (range) of the rounds' own ratios."""
    print(f"\n{n:,} events + {n:,} labels, less {SMALL:,} + {SMALL:,} (start-up cancelled); "
          f"tansu on loopback; mode {_run['mode'] or 'the default'}; {repeat} alternating "
          f"rounds, median (range)")  # fmt: skip
    print(f"{'':72s} {'events/s':>9s} {'marginal CPU µs/event':>22s}")
    for arm in arms:
        print(f"{arm:72s} {bench._median(rates[arm]):9,.0f} {_cell(marginal[arm])}")
    print("\nwithout Kafka, in this process (no start-up to cancel): CPU µs per event")
    for name, xs in alone.items():
        print(f"{name:72s} {'':9s} {_cell(xs)}")

    def ratio(a, b, what):
        xs = [x / y for x, y in zip(a, b, strict=True)]
        print(f"{what:72s} {bench._median(xs):5.2f} ({min(xs):.2f}-{max(xs):.2f})")

    print()
    rd, kp, hand = marginal[LIBRDKAFKA], marginal[KAFKA_PYTHON], marginal[HAND]
    ratio(rd, hand, "librdkafka path / hand-written loop (target <= 2.5)")
    ratio(rd, kp, "librdkafka path / kafka-python path (target <= 0.4)")
    ratio(marginal[WITH_VA], hand, "loop with VennAbersClassifier / hand-written loop")
    ratio(rd, marginal[WITH_VA], "librdkafka path / loop with VennAbersClassifier")
    ratio(alone[TASK], rd, "the learner as the unit calls it / librdkafka path")
    ratio(alone[CLASSIFIER], hand, "VennAbersClassifier alone / hand-written loop")
    if BASELINE in marginal:
        ratio(kp, marginal[BASELINE], "kafka-python path / the baseline install's (target <= 1)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--mode", default=None,
                    help="the Venn-Abers mode of every arm (default: the processor's)")
    ap.add_argument("--split", type=int, metavar="EVENTS", default=None,
                    help="no broker: where the processor's CPU goes, over EVENTS events")
    ap.add_argument("--baseline-python", metavar="PYTHON", default=None,
                    help="also run streamcal run (kafka-python) of the install of PYTHON")
    ap.add_argument("--split-tree", metavar="NAME=DIR", action="append", default=[],
                    help="--split: also run the split of the checkout DIR (an earlier "
                    "commit's worktree), alternating with this one's, as NAME")
    ap.add_argument("--threads", action="store_true",
                    help="only the librdkafka path, its CPU split by thread")
    ap.add_argument("--with-flags", default="", metavar="FLAGS",
                    help="--threads: also run it with these flags of streamcal run")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # one round
    args = ap.parse_args()
    _run["mode"] = args.mode
    if args.split and args.json:
        import json

        print(json.dumps(split_round(args.split, args.mode)))
        return
    if args.split:
        trees = dict(t.split("=", 1) for t in args.split_tree)
        trees = {"this checkout": _HERE + "/..", **trees} if trees else None
        processor_split(args.split, args.repeat, args.mode, trees)
        return
    n = args.events
    arms = (*LOOPS, *STREAMCAL)
    if args.baseline_python:
        _run["python"] = args.baseline_python
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
        if args.threads:
            thread_split(bs, inputs, n, args.repeat, args.with_flags.split())
            return
        marginal: dict = {a: [] for a in arms}
        rates: dict = {a: [] for a in arms}
        alone: dict = {}
        for rep in range(args.repeat):  # alternating: each sees the same background load
            print(f"round {rep + 1}: {_load()}", flush=True)
            for arm in arms:
                cpu = {}
                for size in (n, SMALL):
                    rate, cpu[size] = run_arm(arm, bs, inputs[size], size,
                                              f"{rep}-{arms.index(arm)}-{size}")  # fmt: skip
                    if size == n:
                        rates[arm].append(rate)
                marginal[arm].append(1e6 * (cpu[n] - cpu[SMALL]) / (n - SMALL))
                print(f"  {arm}: {rates[arm][-1]:,.0f} events/s, "
                      f"{marginal[arm][-1]:.1f} µs/event", flush=True)  # fmt: skip
            for name, us in learner_alone(min(n, 40_000), args.mode).items():
                alone.setdefault(name, []).append(us)
                print(f"  {name}: {us:.1f} µs/event", flush=True)
    print(f"after the rounds: {_load()}")
    _report(arms, marginal, rates, alone, n, args.repeat)


if __name__ == "__main__":
    main()
