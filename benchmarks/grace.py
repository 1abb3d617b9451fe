"""Live input against a replay: the merge's grace (`--grace-ms`) side by side (issue 29).

One producer writes events and their labels in record-time order to an events and a
labels topic of 4 partitions each, at RATE records/s (half events, half labels; each
label 1-1000 ms after its event; record timestamps are the times the records are due,
and each is written when due, keyed by event id), for SECONDS, while `streamcal run
--grace-ms G` (its defaults otherwise, one instance, `--scope global`) processes them
live (`--mode sva` unless `--mode` says otherwise: every label moves its calibration, so
one late arrival changes every prediction after it). Then a replay: `streamcal run` with
the same settings over the complete topics.
Printed per rate and grace, side by side:

* equal: the share of the events whose prediction equals the replay's, bit for bit;
* late, stalls: `late_arrivals` and `merge_stalls` of the live run's last metric line;
* p50, p99: latency in ms from an event's record time (when it was due) to its
  prediction's record time (when the processor produced it), and the same less grace 0's
  of the same round (the added latency);
* lag p99: how late the producer wrote (a loaded machine writes late, which the latency
  includes), and the machine's load (1-minute load average) during the run.

Rounds repeat; within a round the graces alternate in a rotating order, so that each
sees the same background load; the table gives each round, then the medians. A local
tansu broker, started here, serves both.

    python benchmarks/grace.py                          # 1,500 and 15,000 records/s
    python benchmarks/grace.py --rates 1500 --graces 0,100 --seconds 10 --repeat 1
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import orjson

# This file is in benchmarks/, next to benchmarks/kafka.py: keep that directory off the
# path so that `import kafka` finds kafka-python.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

PARTITIONS = 4


def schedule(rate: int, seconds: float, seed: int) -> list[tuple[int, str, bytes, bytes]]:
    """(due in ms from the start, topic kind, key, value) of every record, in order."""
    rng = random.Random(seed)
    out = []
    n = int(rate * seconds / 2)
    for i in range(n):
        t = int(1000 * i / (rate / 2))
        x1, x2 = rng.gauss(0, 1), rng.gauss(0, 1)
        y = int(rng.random() < 1 / (1 + 2.718281828 ** -(1.5 * x1 - x2)))
        key = f"e{i}".encode()
        event = {"id": key.decode(), "features": {"x1": x1, "x2": x2}}
        out.append((t, "events", key, orjson.dumps(event)))
        label = {"id": key.decode(), "label": y}
        out.append((t + rng.randint(1, 1000), "labels", key, orjson.dumps(label)))
    out.sort(key=lambda r: r[0])  # stable: an event before its label at the same time
    return out


def produce_live(bootstrap: str, topics: dict, records: list) -> list[float]:
    """Write ``records`` when due (record timestamp = due time); the lag of each write
    behind its due time, in ms."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    lags = []
    t0 = int(time.time() * 1000) + 200
    topics = {k: topics[k] for k in ("events", "labels")}
    for due, kind, key, value in records:
        at = t0 + due
        wait = at / 1000 - time.time()
        if wait > 0:
            time.sleep(wait)
        lags.append(time.time() * 1000 - at)
        producer.send(topics[kind], key=key, value=value, timestamp_ms=at)
    producer.flush()
    producer.close()
    return lags


def create(bootstrap: str, topics: dict) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topics[k], PARTITIONS, 1) for k in ("events", "labels")])
    finally:
        admin.close()


def processor(bootstrap: str, topics: dict, name: str, grace_ms: int, tmp: str, extra=()):
    """A `streamcal run` process; its metric log and its log are in ``tmp``."""
    cmd = [
        sys.executable, "-m", "streamcal", "run", "--bootstrap-servers", bootstrap,
        "--group-id", f"{topics['group']}-{name}", "--no-global-lock",
        "--events-topic", topics["events"], "--labels-topic", topics["labels"],
        "--predictions-topic", f"{topics['predictions']}-{name}",
        "--dead-letter-topic", f"{topics['dead']}-{name}",
        "--metrics-file", os.path.join(tmp, f"metrics-{name}.jsonl"),
        "--metrics-every", "1000", "--grace-ms", str(grace_ms),
        "--log-level", "INFO", "--log-format", "json", *extra,
    ]  # fmt: skip
    log = open(os.path.join(tmp, f"log-{name}.txt"), "w")  # noqa: SIM115 - closed by the caller
    return subprocess.Popen(cmd, stderr=log, stdout=subprocess.DEVNULL, cwd=tmp), log


def wait_started(tmp: str, name: str, timeout: float = 60.0) -> None:
    """Until the processor's log says it runs (its first line, as the clients start)."""
    path = os.path.join(tmp, f"log-{name}.txt")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path) and '"event":"bounds"' in open(path).read():
            time.sleep(1.5)  # the consumer's assignment and first fetches
            return
        time.sleep(0.1)
    raise RuntimeError(f"{name} did not start: {open(path).read()[-2000:]}")


def predictions(bootstrap: str, topic: str, n: int, timeout: float) -> dict:
    """{key: (value, record timestamp)}: the first prediction of each event, once ``n``
    are read or ``timeout`` has passed."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest")  # fmt: skip
    try:
        deadline = time.monotonic() + timeout
        while not consumer.partitions_for_topic(topic):
            if time.monotonic() > deadline:
                return {}
            consumer.topics()
            time.sleep(0.2)
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out: dict = {}
        while len(out) < n and time.monotonic() < deadline:
            for recs in consumer.poll(timeout_ms=300, max_records=10_000).values():
                for r in recs:
                    out.setdefault(r.key, (r.value, r.timestamp))
        return out
    finally:
        consumer.close()


def last_line(tmp: str, name: str) -> dict:
    with open(os.path.join(tmp, f"metrics-{name}.jsonl"), "rb") as fh:
        lines = [orjson.loads(x) for x in fh if x.strip()]
    return lines[-1] if lines else {}


def stop(proc, log) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()


def quantile(values: list, q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def one_run(bootstrap: str, rate: int, seconds: float, grace: int, seed: int, tmp: str,
            options=()) -> dict:  # fmt: skip
    tag = uuid.uuid4().hex[:8]
    topics = {k: f"grace-{tag}.{k}" for k in ("events", "labels", "predictions", "dead")}
    topics["group"] = f"grace-{tag}"
    create(bootstrap, topics)
    records = schedule(rate, seconds, seed)
    events = {key: due for due, kind, key, _ in records if kind == "events"}
    load = [os.getloadavg()[0]]
    proc, log = processor(bootstrap, topics, "live", grace, tmp, options)
    try:
        wait_started(tmp, "live")
        lags = produce_live(bootstrap, topics, records)
        load.append(os.getloadavg()[0])
        live = predictions(bootstrap, f"{topics['predictions']}-live", len(events), 120 + seconds)
    finally:
        stop(proc, log)
    line = last_line(tmp, "live")
    # The replay: the same settings over the complete topics, from the start.
    proc, log = processor(bootstrap, topics, "replay", grace, tmp, [*options, "--max-idle-s", "3"])
    proc.wait()
    log.close()
    replay = predictions(bootstrap, f"{topics['predictions']}-replay", len(events), 60)
    equal = sum(1 for k, (v, _) in live.items() if k in replay and replay[k][0] == v)
    # Latency: from the event's record timestamp to its prediction's.
    stamps = event_stamps(bootstrap, topics["events"], len(events))
    latency = [ts - stamps[k] for k, (_, ts) in live.items() if k in stamps]
    return {
        "events": len(events),
        "live": len(live),
        "replay": len(replay),
        "equal": equal / len(events),
        "late": line.get("late_arrivals"),
        "stalls": line.get("merge_stalls"),
        "p50": quantile(latency, 0.5),
        "p99": quantile(latency, 0.99),
        "lag99": quantile(lags, 0.99),
        "load": max(load),
    }


def event_stamps(bootstrap: str, topic: str, n: int) -> dict:
    """{key: record timestamp} of the events topic."""
    got = predictions(bootstrap, topic, n, 60)
    return {k: ts for k, (_, ts) in got.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="1500,15000", help="records/s, comma-separated")
    ap.add_argument("--graces", default="0,100,1000", help="--grace-ms values, comma-separated")
    ap.add_argument("--seconds", type=float, default=20.0, help="length of each live run")
    ap.add_argument("--repeat", type=int, default=2, help="rounds")
    ap.add_argument(
        "--mode",
        default="sva",
        help="the processor's --mode (default sva: every label moves the calibration, so one "
        "late arrival changes the predictions after it; the strictest test)",
    )
    args = ap.parse_args()
    rates = [int(r) for r in args.rates.split(",")]
    graces = [int(g) for g in args.graces.split(",")]

    from streamcal.demo.broker import LocalBroker

    results: dict = {}
    with LocalBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        bs = broker.bootstrap_servers
        for rnd in range(args.repeat):
            for rate in rates:
                order = graces[rnd % len(graces) :] + graces[: rnd % len(graces)]
                for grace in order:
                    r = one_run(bs, rate, args.seconds, grace, seed=rnd, tmp=tmp,
                                options=["--mode", args.mode])  # fmt: skip
                    results.setdefault((rate, grace), []).append(r)
                    print(f"round {rnd} rate {rate} grace {grace} ms: "
                          f"{orjson.dumps(r).decode()}", flush=True)  # fmt: skip

    print()
    print(f"Live against a replay: one producer in record-time order to {PARTITIONS} "
          f"partitions, --mode {args.mode}, {args.seconds:g} s per run, {args.repeat} rounds; "
          "latency in ms (event record time to prediction record time)")  # fmt: skip
    head = (f"{'rate/s':>7s} {'grace':>6s} {'round':>5s} {'equal':>7s} {'late':>5s} "
            f"{'stalls':>6s} {'p50':>6s} {'p99':>6s} {'+p50':>6s} {'+p99':>6s} "
            f"{'lag99':>6s} {'load':>5s}")  # fmt: skip
    print(head)
    for rate in rates:
        for grace in graces:
            runs = results[(rate, grace)]
            for i, r in enumerate(runs):
                base = results[(rate, graces[0])][i]
                print(f"{rate:7d} {grace:6d} {i:5d} {100 * r['equal']:6.1f}% {r['late']!s:>5s} "
                      f"{r['stalls']!s:>6s} {r['p50']:6.0f} {r['p99']:6.0f} "
                      f"{r['p50'] - base['p50']:+6.0f} {r['p99'] - base['p99']:+6.0f} "
                      f"{r['lag99']:6.0f} {r['load']:5.2f}")  # fmt: skip
            med = {k: statistics.median(r[k] for r in runs) for k in ("equal", "p50", "p99")}
            print(f"{rate:7d} {grace:6d} {'med':>5s} {100 * med['equal']:6.1f}% "
                  f"{'':5s} {'':6s} {med['p50']:6.0f} {med['p99']:6.0f}")  # fmt: skip


if __name__ == "__main__":
    main()
