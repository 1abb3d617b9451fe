"""`streamcal run --task regression` against a real tansu broker: on a shuffled stream
every prediction has lo <= y_hat <= hi, the final metric line's 90% interval covers
0.87-0.93 of the labels and carries the CRPS and the PIT histogram; a label that is not
a number is a dead letter; its metric log gives the regression report (coverage, CRPS
and PIT figures, the coverage's verdict); kill -9 at random moments and restarts give the
predictions and the final metric line of an uninterrupted run."""

from __future__ import annotations

import json
import random

import pytest

from streamcal.monitoring.metric_log import check_metric_line
from streamcal.monitoring.schema import ALARM_KEYS, REGRESSION_KEYS
from streamcal.stream.config import ProcessorConfig
from streamcal.stream.processor import Processor
from tests._kafka_helpers import (
    CHECKPOINT_KEY,
    base_settings,
    json_values,
    kill_9_then_finish,
    metric_lines,
    produce_stream,
    read_topic,
    same_predictions,
    suffixed,
    synthetic_stream,
    untimed,
)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _regression(labels, events, bad: str):
    """Each label a number from the event's features with noise growing with |x1|;
    event ``bad``'s label is a string."""
    rng = random.Random(7)
    x = {k: v["features"] for k, v, _ in events}
    out = []
    for k, v, ts in labels:
        f = x[k]
        y = 2.0 * f["x1"] - f["x2"] + rng.gauss(0, 0.5 + 0.5 * abs(f["x1"]))
        out.append((k, {**v, "label": "12.5" if k == bad else y}, ts))
    return out


def _check_report(metrics, final: dict, out) -> None:
    """The report of the run's metric log is the regression one, with its numbers."""
    pytest.importorskip("matplotlib")
    from streamcal.monitoring import write_report
    from streamcal.monitoring.report import FIGURES, REGRESSION_FIGURES

    write_report(metrics, out)
    assert all((out / name).stat().st_size > 1000 for name in REGRESSION_FIGURES)
    assert not any((out / name).exists() for name in FIGURES)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["coverage"] == final["coverage"] and summary["crps"] == final["crps"]
    # at least the nominal (this run covers 0.92: ranks of ~100 residuals a bin round
    # outwards, and early residuals of the learning model are wider): not a violation
    assert summary["coverage_verdict"].startswith(("holds", "conservative")), summary


def _settings(bootstrap, topics, **extra):
    settings = base_settings(bootstrap, topics, task="regression", **{"metrics_every": 500,
                                                                        **extra})  # fmt: skip
    del settings["mode"]  # a classifier's setting
    return settings


def test_regression_run_predicts_intervals_that_cover_as_claimed(
    kafka_broker, unique_topics, tmp_path
):
    n = 3000
    events, labels = synthetic_stream(n, seed=21, shuffle_labels=400)
    labels = _regression(labels, events, bad="e30")
    produce_stream(kafka_broker, unique_topics, events, labels)
    metrics = tmp_path / "metrics.jsonl"
    settings = _settings(kafka_broker, unique_topics, metrics_file=str(metrics))
    final = Processor(ProcessorConfig.build(**settings)).run(max_idle_s=1.5)

    assert final["dead_letters"] == 1 and final["labels"] > n - 100
    dead = json_values(read_topic(kafka_broker, unique_topics["dead_letters"], min_count=1))
    assert [d["reason"] for d in dead] == ["label is not a finite number: '12.5'"]
    assert 0.87 <= final["coverage"] <= 0.93 and final["interval_coverage"] == 0.9
    assert final["crps"] > 0 and final["interval_width"] > 0
    assert set(REGRESSION_KEYS + ALARM_KEYS) <= set(final) and "protected_log_loss" not in final
    assert sum(b["count"] for b in final["pit_histogram"]) == final["labels"]
    check_metric_line(metric_lines(metrics)[-1])
    _check_report(metrics, final, tmp_path / "report")

    preds = json_values(read_topic(kafka_broker, unique_topics["predictions"], min_count=n))
    assert len(preds) == n
    bounded = [p for p in preds if p["lo"] is not None and p["hi"] is not None]
    assert len(bounded) > n - 50
    for p in bounded:
        assert p["lo"] <= p["y_hat"] <= p["hi"], p
        assert sorted(p["quantiles"]) == ["0.05", "0.25", "0.5", "0.75", "0.95"]


def test_regression_with_kill_9_and_restart_gives_the_uninterrupted_results(
    kafka_broker, unique_topics, tmp_path, streamcal_run
):
    n = 1500
    events, labels = synthetic_stream(n, seed=23, shuffle_labels=300, missing=frozenset({9}))
    labels = _regression(labels, events, bad="e40")
    ref_topics, crash_topics = suffixed(unique_topics, "ref"), suffixed(unique_topics, "crash")
    produce_stream(kafka_broker, ref_topics, events, labels)
    produce_stream(kafka_broker, crash_topics, events, labels)
    ref = ProcessorConfig.build(
        **_settings(kafka_broker, ref_topics, metrics_every=100, checkpoint_interval=0.25),
        state_dir=str(tmp_path / "ref-state"),
        checkpoint_key=CHECKPOINT_KEY,
    )
    ref_final = Processor(ref).run(max_idle_s=1.5)
    assert ref_final["dead_letters"] == 1 and ref_final["crps"] > 0

    metrics = tmp_path / "metrics.jsonl"
    settings = _settings(kafka_broker, crash_topics, metrics_every=100, checkpoint_interval=0.25,
                         state_dir=tmp_path / "state", metrics_file=metrics)  # fmt: skip
    seed = kill_9_then_finish(streamcal_run, settings, tmp_path / "state", metrics)
    note = f"(kill moments seed {seed})"
    assert untimed(metric_lines(metrics)[-1]) == untimed(ref_final), note
    want = same_predictions(
        kafka_broker, ref_topics["predictions"], crash_topics["predictions"], n, note
    )
    last = list(want.values())[-1]
    assert last["lo"] <= last["y_hat"] <= last["hi"]
