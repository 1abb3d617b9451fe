"""The label horizon on a real broker (tansu): a stream whose only labels are the
positives, run with ``--label-horizon 30s --label-default 0``, is calibrated (Corollary 1
in the final metric line) and scores the log loss of the same stream with its negatives
sent explicitly at 30 s; a kill -9 and restart in the middle of horizons gives the
uninterrupted run's results."""

from __future__ import annotations

import math
import random

import pytest

from streamcal.stream.config import ProcessorConfig
from streamcal.stream.processor import Processor
from tests._kafka_helpers import (
    CHECKPOINT_KEY,
    T0,
    base_settings,
    kill_9_then_finish,
    metric_lines,
    produce_stream,
    same_predictions,
    suffixed,
    untimed,
)

pytestmark = pytest.mark.kafka

HORIZON_MS = 30_000


def delayed_stream(n: int, seed: int, negatives: str, step_ms: int = 100):
    """Events 100 ms apart (a logistic stream of two features); positives labelled within
    5 s, negatives ``"never"`` or ``"at-horizon"`` (30 s after their event). A last event,
    without a label, comes 40 s after the others: every other one matures before it."""
    rng = random.Random(seed)
    events, labels = [], []
    for i in range(n):
        x1, x2 = rng.gauss(0, 1), rng.gauss(0, 1)
        y = int(rng.random() < 1 / (1 + math.exp(-(1.5 * x1 - x2 - 0.5))))
        ts, eid = T0 + step_ms * i, f"e{i}"
        events.append((eid, {"id": eid, "features": {"x1": x1, "x2": x2}}, ts))
        quick = rng.randrange(200, 5000)
        if y:
            labels.append((eid, {"id": eid, "label": 1}, ts + quick))
        elif negatives == "at-horizon":
            labels.append((eid, {"id": eid, "label": 0}, ts + HORIZON_MS))
    last = events[-1][2] + HORIZON_MS + 10_000
    events.append(("end", {"id": "end", "features": {"x1": 0.0, "x2": 0.0}}, last))
    return events, labels


def run(bootstrap, topics, **settings) -> dict:
    values = base_settings(bootstrap, topics, window=500, metrics_every=500, **settings)
    del values["mode"]  # the default mode, as `streamcal run` has it
    return Processor(ProcessorConfig.build(**values)).run(max_idle_s=1.5)


def corollary_1(line: dict, z: float = 3.0) -> bool:
    """mean p0 <= frequency <= mean p1, within ``z`` standard errors of the frequency."""
    f, n = line["frequency"], line["labels"]
    se = math.sqrt(max(f * (1 - f), 1e-9) / n)
    return line["mean_p0"] - z * se <= f <= line["mean_p1"] + z * se


@pytest.mark.slow
def test_only_positives_with_a_default_score_as_explicit_negatives_at_the_horizon(
    kafka_broker, unique_topics
):
    n = 5000
    implicit, explicit = suffixed(unique_topics, "implicit"), suffixed(unique_topics, "explicit")
    produce_stream(kafka_broker, implicit, *delayed_stream(n, 5, "never"))
    produce_stream(kafka_broker, explicit, *delayed_stream(n, 5, "at-horizon"))
    horizon = dict(label_horizon="30s")
    got = run(kafka_broker, implicit, **horizon, label_default="0")
    want = run(kafka_broker, explicit, **horizon)
    assert got["labels"] == want["labels"] == n
    assert got["labels_defaulted"] == got["labels"] - round(got["frequency"] * got["labels"])
    assert corollary_1(got), {k: got[k] for k in ("mean_p0", "frequency", "mean_p1")}
    assert got["log_loss"] <= 1.05 * want["log_loss"], (got["log_loss"], want["log_loss"])
    print(
        f"\nhorizon 30s, default 0, positives only: log loss {got['log_loss']:.4f}, "
        f"mean p0 {got['mean_p0']:.4f} <= freq {got['frequency']:.4f} <= mean p1 "
        f"{got['mean_p1']:.4f}; explicit negatives at 30 s: {want['log_loss']:.4f}"
    )


@pytest.mark.slow
def test_kill_9_in_the_middle_of_horizons_gives_the_uninterrupted_results(
    kafka_broker, unique_topics, tmp_path, streamcal_run
):
    n = 3000
    ref_topics, crash_topics = suffixed(unique_topics, "ref"), suffixed(unique_topics, "crash")
    for topics in (ref_topics, crash_topics):
        produce_stream(kafka_broker, topics, *delayed_stream(n, 9, "never", step_ms=20))
    common = dict(window=300, metrics_every=100, checkpoint_interval=0.25, label_horizon="5s",
                  label_default="0")  # fmt: skip
    ref = ProcessorConfig.build(**base_settings(kafka_broker, ref_topics, **common),
                                state_dir=str(tmp_path / "ref-state"),
                                checkpoint_key=CHECKPOINT_KEY)  # fmt: skip
    ref_final = Processor(ref).run(max_idle_s=1.5)
    metrics = tmp_path / "metrics.jsonl"
    settings = base_settings(kafka_broker, crash_topics, **common,
                             state_dir=tmp_path / "state", metrics_file=metrics)  # fmt: skip
    seed = kill_9_then_finish(streamcal_run, settings, tmp_path / "state", metrics)
    crash_final = metric_lines(metrics)[-1]
    note = f"(kill moments seed {seed})"
    assert untimed(crash_final) == untimed(ref_final), note
    assert crash_final["labels_defaulted"] > 0 and crash_final["labels"] == n
    assert max(line["pending"] for line in metric_lines(metrics)) > 100  # mid-horizons
    same_predictions(kafka_broker, ref_topics["predictions"], crash_topics["predictions"],
                     n + 1, note)  # the last event too  # fmt: skip
