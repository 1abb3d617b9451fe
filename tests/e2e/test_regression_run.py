"""`streamcal run --task regression` against a real tansu broker: on a shuffled stream
every prediction has lo <= y_hat <= hi, the final metric line's 90% interval covers
0.87-0.93 of the labels and carries the CRPS and the PIT histogram; a label that is not
a number is a dead letter."""

from __future__ import annotations

import random

import pytest

from streamcal.monitoring.metric_log import check_metric_line
from streamcal.monitoring.schema import ALARM_KEYS, REGRESSION_KEYS
from streamcal.stream.config import ProcessorConfig
from streamcal.stream.processor import Processor
from tests._kafka_helpers import (
    base_settings,
    json_values,
    metric_lines,
    produce_stream,
    read_topic,
    synthetic_stream,
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


def test_regression_run_predicts_intervals_that_cover_as_claimed(
    kafka_broker, unique_topics, tmp_path
):
    n = 3000
    events, labels = synthetic_stream(n, seed=21, shuffle_labels=400)
    labels = _regression(labels, events, bad="e30")
    produce_stream(kafka_broker, unique_topics, events, labels)
    metrics = tmp_path / "metrics.jsonl"
    settings = base_settings(kafka_broker, unique_topics, task="regression",
                             metrics_every=500, metrics_file=str(metrics))  # fmt: skip
    del settings["mode"]  # a classifier's setting
    final = Processor(ProcessorConfig.build(**settings)).run(max_idle_s=1.5)

    assert final["dead_letters"] == 1 and final["labels"] > n - 100
    dead = json_values(read_topic(kafka_broker, unique_topics["dead_letters"], min_count=1))
    assert [d["reason"] for d in dead] == ["label is not a finite number: '12.5'"]
    assert 0.87 <= final["coverage"] <= 0.93 and final["interval_coverage"] == 0.9
    assert final["crps"] > 0 and final["interval_width"] > 0
    assert set(REGRESSION_KEYS + ALARM_KEYS) <= set(final) and "protected_log_loss" not in final
    assert sum(b["count"] for b in final["pit_histogram"]) == final["labels"]
    check_metric_line(metric_lines(metrics)[-1])

    preds = json_values(read_topic(kafka_broker, unique_topics["predictions"], min_count=n))
    assert len(preds) == n
    bounded = [p for p in preds if p["lo"] is not None and p["hi"] is not None]
    assert len(bounded) > n - 50
    for p in bounded:
        assert p["lo"] <= p["y_hat"] <= p["hi"], p
        assert sorted(p["quantiles"]) == ["0.05", "0.25", "0.5", "0.75", "0.95"]
