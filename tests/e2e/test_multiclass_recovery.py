"""`streamcal run --task multiclass` against a real tansu broker: kill -9 at random moments
and restarts give the predictions, the metric lines and the per-class lines of an
uninterrupted run; a label that cannot be a class is a dead letter."""

from __future__ import annotations

import random

import pytest

from streamcal.monitoring.metric_log import check_metric_line
from streamcal.monitoring.schema import ALARM_KEYS, CLASS_KEYS, MULTICLASS_KEYS
from streamcal.stream.config import ProcessorConfig
from streamcal.stream.processor import Processor
from tests._kafka_helpers import (
    CHECKPOINT_KEY,
    base_settings,
    json_values,
    kill_9_twice_then_finish,
    metric_lines,
    produce_stream,
    read_topic,
    same_predictions,
    suffixed,
    synthetic_stream,
    untimed,
)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

CLASSES = ("low", "mid", 3)  # strings and an integer (the class "3")


def _multiclass(labels, events, bad: str):
    """Each label a class from the event's features, with noise; event ``bad``'s label is
    a float."""
    rng = random.Random(4)
    x = {k: v["features"] for k, v, _ in events}
    out = []
    for k, v, ts in labels:
        s = x[k]["x1"] + 0.5 * x[k]["x2"] + rng.gauss(0, 0.7)
        c = CLASSES[0] if s < -0.5 else CLASSES[1] if s < 0.5 else CLASSES[2]
        out.append((k, {**v, "label": 2.5 if k == bad else c}, ts))
    return out


def _settings(bootstrap, topics, **extra):
    settings = base_settings(bootstrap, topics, task="multiclass", model="gnb", window=150,
                             refresh_every=40, metrics_every=100, checkpoint_interval=0.25,
                             **extra)  # fmt: skip
    del settings["mode"]  # multiclass: pretrained, the default
    return settings


def test_multiclass_with_kill_9_and_restart_gives_the_uninterrupted_results(
    kafka_broker, unique_topics, tmp_path, streamcal_run
):
    n = 1000
    events, labels = synthetic_stream(n, seed=13, shuffle_labels=300, missing=frozenset({8}))
    labels = _multiclass(labels, events, bad="e20")
    ref_topics, crash_topics = suffixed(unique_topics, "ref"), suffixed(unique_topics, "crash")
    produce_stream(kafka_broker, ref_topics, events, labels)
    produce_stream(kafka_broker, crash_topics, events, labels)

    ref_metrics = tmp_path / "ref-metrics.jsonl"
    ref = ProcessorConfig.build(
        **_settings(kafka_broker, ref_topics, metrics_file=str(ref_metrics)),
        state_dir=str(tmp_path / "ref-state"),
        checkpoint_key=CHECKPOINT_KEY,
    )
    ref_final = Processor(ref).run(max_idle_s=1.5)
    assert ref_final["dead_letters"] == 1 and ref_final["classes"] == 3
    dead = json_values(read_topic(kafka_broker, ref_topics["dead_letters"], min_count=1))
    assert [d["reason"] for d in dead] == ["label is not a class (a string or an integer): 2.5"]

    metrics = tmp_path / "metrics.jsonl"
    settings = _settings(kafka_broker, crash_topics, state_dir=tmp_path / "state",
                         metrics_file=metrics)  # fmt: skip
    seed = kill_9_twice_then_finish(streamcal_run, settings, tmp_path / "state", metrics)
    note = f"(kill moments seed {seed})"
    lines = metric_lines(metrics)
    whole = [line for line in lines if "class" not in line]
    assert untimed(whole[-1]) == untimed(ref_final), note
    # the alarm (on by default) is kept across the kill -9s; no protection for multiclass
    assert set(MULTICLASS_KEYS + ALARM_KEYS) <= set(ref_final) and ref_final["alarm"] == 0
    assert ref_final["log_martingale"] != 0.0 and "protected_log_loss" not in ref_final

    # per-class lines follow each metric line: the last block is the same
    def last_block(lines):
        last = max(i for i, line in enumerate(lines) if "class" not in line)
        return [untimed(line) for line in lines[last + 1 :]]

    block = last_block(metric_lines(ref_metrics))
    assert sorted(r["class"] for r in block) == ["3", "low", "mid"]
    for r in block:
        check_metric_line(r)
        assert set(CLASS_KEYS) <= set(r) and r["unit"] == "global"
        assert r["mean_p0"] - 0.05 <= r["frequency"] <= r["mean_p1"] + 0.05
    assert last_block(lines) == block, note

    want = same_predictions(
        kafka_broker, ref_topics["predictions"], crash_topics["predictions"], n, note
    )
    last = list(want.values())[-1]
    assert last["scheme"] == "one-vs-rest" and sorted(last["probabilities"]) == ["3", "low", "mid"]
    assert last["label"] in last["probabilities"] and last["p0"] <= last["p"] <= last["p1"]
    assert sorted(last["intervals"]) == ["3", "low", "mid"]
