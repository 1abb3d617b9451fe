"""What a broker keeps of the writes it acknowledged, over a restart with its data: noida-db
(the tests' broker for restarts and transactions) restarted gracefully (SIGINT, as
``tests._kafka_helpers.NoidaBroker.restart`` does) or with kill -9, under an idempotent
``acks=all`` producer writing all the while.

Per trial: the records acknowledged before the stop, all those acknowledged, those the
log holds afterwards, and the acknowledged ones it lost. A broker that keeps its log
loses none. Why it matters: ``tests/e2e/test_lost_input.py`` once lost 4 predictions to
it in CI (noida-db 0.2.3, 2 cores at load ~12: 2-16 acknowledged records lost in 4 of 40
graceful restarts with busy loops beside it; 15-516 in 11 of 11 kill -9s), which no client
can recover, so the tests keep their writes out of a restart's way.

    python benchmarks/broker_acks.py --trials 40 --busy 6     # graceful, under load
    python benchmarks/broker_acks.py --trials 6 --kill        # kill -9

Needs the dev extra (noida-db).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]  # benchmarks/kafka.py
sys.path.insert(0, str(HERE.parent))

from tests._kafka_helpers import NoidaBroker, create_topics, find_noida, read_topic  # noqa: E402

PARTITIONS = 4


def trial(k: int, kill: bool, gap_s: float) -> dict:
    """One broker, one producer writing every ``gap_s``, one restart after ~1 s."""
    from kafka import KafkaProducer

    broker = NoidaBroker(find_noida(), Path(tempfile.mkdtemp()) / "data").start()
    topic = f"acks-{k}"
    create_topics(broker.bootstrap_servers, [topic], PARTITIONS)
    acked, lock, stop = set(), threading.Lock(), threading.Event()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all",
                             enable_idempotence=True, linger_ms=5)  # fmt: skip

    def on_ack(i):
        def add(_):
            with lock:
                acked.add(i)

        return add

    def write():
        i = 0
        while not stop.is_set():
            producer.send(topic, key=str(i).encode(), value=b"x").add_callback(on_ack(i))
            i += 1
            time.sleep(gap_s)

    writer = threading.Thread(target=write)
    writer.start()
    time.sleep(1.0 + (k % 5) * 0.1)
    with lock:
        before = set(acked)
    if kill:
        broker.proc.kill()
        broker.proc.wait()
        broker.proc = None
        broker.start()
    else:
        broker.restart()
    time.sleep(1.0)
    stop.set()
    writer.join()
    try:
        producer.flush(timeout=20)
    finally:
        producer.close(timeout=5)
    held = {int(r.key) for r in read_topic(broker.bootstrap_servers, topic)}
    broker.stop()
    return {
        "acked before the stop": len(before),
        "acked": len(acked),
        "in the log": len(held),
        "acked before the stop, lost": len(before - held),
        "acked, lost": len(acked - held),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--kill", action="store_true", help="kill -9 instead of SIGINT")
    ap.add_argument("--busy", type=int, default=0, help="busy loops beside it (load)")
    ap.add_argument("--gap-ms", type=float, default=0.2, help="between two writes")
    args = ap.parse_args()
    busy = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(args.busy)]
    lost = []
    try:
        for k in range(args.trials):
            row = trial(k, args.kill, args.gap_ms / 1000)
            lost.append(row["acked, lost"])
            print(f"trial {k}: " + ", ".join(f"{n} {v}" for n, v in row.items()), flush=True)
    finally:
        for p in busy:
            p.kill()
    losing = [n for n in lost if n]
    print(f"{'kill -9' if args.kill else 'graceful'} restarts: {len(losing)} of {len(lost)} "
          f"lost acknowledged records ({', '.join(map(str, losing)) or 'none'})")  # fmt: skip


if __name__ == "__main__":
    main()
