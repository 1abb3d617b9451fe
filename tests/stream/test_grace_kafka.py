"""The merge's grace (``--grace-ms``) live, against a real tansu broker, with each Kafka
client: records written out of order across partitions by less than the grace are
handled in the replay's order.

Each round writes an event, then, 0.6 s later, the label of the event before it stamped
just before the new event: a replay handles that label first. A `streamcal run` with a
2.5 s grace must give every event the replay's prediction with no late arrival. Beside it,
on the same topics at the same time, one with ``--grace-ms 0`` (the reference: the test
could fail) releases each event before its label is written, so it counts late arrivals
and its predictions differ from the replay's. (``test_grace.py`` checks the merge's
grace on a simulated clock, without a broker.)"""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from streamcal.stream.config import ProcessorConfig
from streamcal.stream.processor import Processor
from tests._helpers import wait_until
from tests._kafka_helpers import (
    T0,
    base_settings,
    create_topics,
    metric_lines,
    produce,
    read_topic,
    suffixed,
    synthetic_stream,
)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

P = 2  # partitions of the events and labels topics
WARM = 100  # events (and labels) written before the live rounds: the model's start
ROUNDS = 6
# s: each label is written this long after the event that follows it in time: long
# enough, on a loaded machine, for the event to be read and, without a grace, released
# before the label can be read
DELAY = 0.6
GRACE_MS = 2500


def warm_up(topics: dict) -> list:
    events, labels = synthetic_stream(WARM, seed=7, missing=frozenset({WARM - 1}))
    recs = [(topics["events"], k, v, ts) for k, v, ts in events]
    recs += [(topics["labels"], k, v, ts) for k, v, ts in labels]
    return sorted(recs, key=lambda r: r[3])


def live_round(topics: dict, i: int) -> tuple:
    """(event record, label record) of round ``i``: event ``l{i}``, and the label of the
    one before it (of the last warm-up event in round 0) stamped 1 ms before ``l{i}``."""
    ts = T0 + 10 * WARM + 1000 * (i + 1)
    x = ((i * 37) % 11 - 5) / 3
    event = (topics["events"], f"l{i}", {"id": f"l{i}", "features": {"x1": x, "x2": -x}}, ts)
    before = f"l{i - 1}" if i else f"e{WARM - 1}"
    label = (topics["labels"], before, {"id": before, "label": i % 2}, ts - 1)
    return event, label


def settings(bootstrap: str, topics: dict, tmp_path, name: str, **extra) -> dict:
    return base_settings(bootstrap, topics, metrics_file=tmp_path / f"metrics-{name}.jsonl",
                         metrics_every=1, **extra)  # fmt: skip


def last_line(tmp_path, name: str) -> dict:
    lines = [x for x in metric_lines(tmp_path / f"metrics-{name}.jsonl") if "category" not in x]
    return lines[-1] if lines else {}


def predictions(bootstrap: str, topic: str, n: int) -> dict:
    return {r.key: r.value for r in read_topic(bootstrap, topic, min_count=n, timeout=60)}


def test_live_input_out_of_order_within_the_grace_equals_a_replay(
    kafka_broker, unique_topics, tmp_path, streamcal_run, kafka_client
):
    t = unique_topics
    create_topics(kafka_broker, [t["events"], t["labels"]], P)
    produce(kafka_broker, warm_up(t))
    # Each arm reads the same input into outputs and a group of its own.
    arms = {name: {**suffixed(t, name), "events": t["events"], "labels": t["labels"]}
            for name in ("grace", "none", "replay")}  # fmt: skip
    procs = {}
    for name, grace in (("grace", GRACE_MS), ("none", 0)):
        s = settings(kafka_broker, arms[name], tmp_path, name, grace_ms=grace,
                     kafka_client=kafka_client)  # fmt: skip
        with open(tmp_path / f"log-{name}.txt", "w") as err:
            procs[name] = streamcal_run.popen(s, stdout=subprocess.DEVNULL, stderr=err)
    try:
        for name in procs:  # both have read the warm-up: from here on they read live input
            wait_until(lambda name=name: last_line(tmp_path, name).get("events") == WARM, 90,
                       f"{name}: the warm-up processed")  # fmt: skip
        for i in range(ROUNDS):
            event, label = live_round(t, i)
            produce(kafka_broker, [event], partition=i % P)
            time.sleep(DELAY)
            produce(kafka_broker, [label], partition=(i + 1) % P)
            time.sleep(0.5)
        n = WARM + ROUNDS
        got = {name: predictions(kafka_broker, arms[name]["predictions"], n) for name in procs}
    finally:
        for p in procs.values():
            p.send_signal(signal.SIGTERM)
        for p in procs.values():
            p.wait(timeout=60)
    # The replay: one run over the complete topics (kafka-python; both clients give the
    # same predictions).
    replay = base_settings(kafka_broker, arms["replay"])
    Processor(ProcessorConfig.build(**replay)).run(max_idle_s=2.0)
    want = predictions(kafka_broker, arms["replay"]["predictions"], n)
    assert len(want) == n and set(got["grace"]) == set(want)
    differ = {name: sorted(k for k in want if got[name].get(k) != want[k]) for name in got}
    lines = {name: last_line(tmp_path, name) for name in procs}
    assert lines["grace"]["late_arrivals"] == 0 and lines["grace"]["merge_stalls"] == 0
    assert not differ["grace"], differ["grace"]
    # Without a grace the same input arrives late, and the predictions after it differ.
    assert lines["none"]["late_arrivals"] > 0 and differ["none"], (lines["none"], differ)
