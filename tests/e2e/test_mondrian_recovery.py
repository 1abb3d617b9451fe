"""`streamcal run --by` against a real tansu broker: kill -9 at random moments and restarts
give the predictions and the per-category metric lines of an uninterrupted run."""

from __future__ import annotations

import random

import pytest

from streamcal.monitoring.metric_log import check_metric_line
from streamcal.monitoring.schema import CATEGORY_ALARM_KEYS, CATEGORY_KEYS
from streamcal.stream.config import ProcessorConfig
from streamcal.stream.processor import Processor
from tests._kafka_helpers import (
    CHECKPOINT_KEY,
    base_settings,
    kill_9_twice_then_finish,
    metric_lines,
    produce_stream,
    same_predictions,
    suffixed,
    synthetic_stream,
    untimed,
)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

SHOPS = ("s0", "s1", "s2", "s3")


def _with_shops(events):
    """A top-level field "shop" (not a feature) on every event; s3 is rare."""
    rng = random.Random(3)
    return [
        (k, {**v, "shop": rng.choices(SHOPS, weights=(5, 3, 2, 1))[0]}, ts) for k, v, ts in events
    ]


def _last_block(lines):
    """The category lines after the last whole-stream line, without wall-clock keys."""
    last = max(i for i, line in enumerate(lines) if "category" not in line)
    return [untimed(line) for line in lines[last + 1 :]]


def test_by_with_kill_9_and_restart_gives_the_uninterrupted_results(
    kafka_broker, unique_topics, tmp_path, streamcal_run
):
    n = 1200
    events, labels = synthetic_stream(n, seed=12, shuffle_labels=300, missing=frozenset({9}))
    events = _with_shops(events)
    ref_topics, crash_topics = suffixed(unique_topics, "ref"), suffixed(unique_topics, "crash")
    produce_stream(kafka_broker, ref_topics, events, labels)
    produce_stream(kafka_broker, crash_topics, events, labels)
    # pretrained with per-category refreshes; 3 of the 4 shops keep a calibration set
    common = dict(
        mode="pretrained",
        window=150,
        refresh_every=40,
        by="shop",
        max_categories=3,
        top_k=2,
        metrics_every=100,
        checkpoint_interval=0.25,
    )

    ref_metrics = tmp_path / "ref-metrics.jsonl"
    ref = ProcessorConfig.build(
        **base_settings(kafka_broker, ref_topics, **common, metrics_file=str(ref_metrics)),
        state_dir=str(tmp_path / "ref-state"),
        checkpoint_key=CHECKPOINT_KEY,
    )
    proc = Processor(ref)
    ref_final = proc.run(max_idle_s=1.5)
    assert proc.state.clf.evictions > 0

    metrics = tmp_path / "metrics.jsonl"
    settings = base_settings(
        kafka_broker, crash_topics, **common, state_dir=tmp_path / "state", metrics_file=metrics
    )
    seed = kill_9_twice_then_finish(streamcal_run, settings, tmp_path / "state", metrics)
    note = f"(kill moments seed {seed})"
    lines = metric_lines(metrics)
    crash_final = max(i for i, line in enumerate(lines) if "category" not in line)
    crash_final = lines[crash_final]
    assert untimed(crash_final) == untimed(ref_final), note
    assert crash_final["events"] == n and crash_final["labels"] == n - 1

    # Per-category lines follow each metric line: the top 2 shops, then "(other)".
    ref_lines = metric_lines(ref_metrics)
    block = _last_block(ref_lines)
    assert [r["category"] for r in block] == ["s0", "s1", "(other)"]
    assert sum(r["labels"] for r in block) == n - 1
    for r in block:
        check_metric_line(r)
        # each category's alarm (on by default) too: kept across the kill -9s
        assert set(CATEGORY_KEYS + CATEGORY_ALARM_KEYS) <= set(r) and r["unit"] == "global"
        assert r["mean_p0"] <= r["mean_p1"]
    assert _last_block(lines) == block, note

    preds = same_predictions(
        kafka_broker, ref_topics["predictions"], crash_topics["predictions"], n, note
    )
    shops = {e[0]: e[1]["shop"] for e in events}
    assert all(p["category"] == shops[p["id"]] for p in preds.values())
