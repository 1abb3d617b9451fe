"""Protected calibration across kill -9 (real tansu broker, `streamcal run` as a
subprocess): restarts give the p_protected, the alarm and the final metric line of an
uninterrupted run, on a stream whose labels flip partway (so the alarm fires)."""

from __future__ import annotations

import pytest

from streamcal.monitoring.schema import ALARM_KEYS, PROTECTION_KEYS
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

SHIFT = 1000  # labels of events from here on are flipped: p is then far from calibrated


def test_kill_9_and_restart_give_the_uninterrupted_p_protected_and_alarm(
    kafka_broker, unique_topics, tmp_path, streamcal_run
):
    n = 1400
    events, labels = synthetic_stream(n, seed=13, shuffle_labels=300, missing=frozenset({8}))
    labels = [(k, {**v, "label": 1 - v["label"]} if int(k[1:]) >= SHIFT else v, ts)
              for k, v, ts in labels]  # fmt: skip
    ref_topics, crash_topics = suffixed(unique_topics, "ref"), suffixed(unique_topics, "crash")
    produce_stream(kafka_broker, ref_topics, events, labels)
    produce_stream(kafka_broker, crash_topics, events, labels)
    common = dict(metrics_every=100, checkpoint_interval=0.25)

    ref = ProcessorConfig.build(
        **base_settings(kafka_broker, ref_topics, **common),
        state_dir=str(tmp_path / "ref-state"),
        checkpoint_key=CHECKPOINT_KEY,
    )
    ref_final = Processor(ref).run(max_idle_s=1.5)
    assert ref_final["alarm"] == 1 and ref_final["alarm_at"] > SHIFT - 300
    assert SHIFT - 300 <= ref_final["alarm_onset"] <= ref_final["alarm_at"]
    assert ref_final["protected_labels"] == ref_final["labels"] == n - 1

    metrics = tmp_path / "metrics.jsonl"
    settings = base_settings(
        kafka_broker, crash_topics, **common, state_dir=tmp_path / "state", metrics_file=metrics
    )
    seed = kill_9_twice_then_finish(streamcal_run, settings, tmp_path / "state", metrics)
    note = f"(kill moments seed {seed})"
    crash_final = metric_lines(metrics)[-1]
    for k in PROTECTION_KEYS + ALARM_KEYS:
        assert crash_final[k] == ref_final[k], (k, note)
    assert untimed(crash_final) == untimed(ref_final), note
    want = same_predictions(
        kafka_broker, ref_topics["predictions"], crash_topics["predictions"], n, note
    )
    assert all("p_protected" in v for v in want.values())
