"""Recovery of the stream processor (real tansu broker, `streamcal run` as a subprocess):
kill -9 at random moments and restart gives the same predictions and final metrics as an
uninterrupted run; SIGTERM stops cleanly with a final checkpoint; a tampered checkpoint
is refused before anything is consumed."""

from __future__ import annotations

import signal
import subprocess

import pytest

from streamcal.stream.config import ProcessorConfig
from streamcal.stream.processor import Processor
from streamcal.stream.state.kv import KVStore
from streamcal.stream.state.units import SNAPSHOT
from tests._helpers import checkpoint_env, error_of, stored_state
from tests._kafka_helpers import (
    CHECKPOINT_KEY,
    base_settings,
    kill_9_then_finish,
    metric_lines,
    produce_stream,
    read_topic,
    same_predictions,
    suffixed,
    synthetic_stream,
    untimed,
    wait_for_lines,
)

pytestmark = pytest.mark.kafka

@pytest.mark.slow
def test_kill_9_and_restart_gives_the_uninterrupted_results(
    kafka_broker, unique_topics, tmp_path, streamcal_run
):
    n = 1500
    events, labels = synthetic_stream(n, seed=11, shuffle_labels=400, missing=frozenset({5, 77}))
    ref_topics, crash_topics = suffixed(unique_topics, "ref"), suffixed(unique_topics, "crash")
    produce_stream(kafka_broker, ref_topics, events, labels)
    produce_stream(kafka_broker, crash_topics, events, labels)
    common = dict(window=300, metrics_every=100, checkpoint_interval=0.25)

    # Uninterrupted reference run, in process.
    ref = ProcessorConfig.build(
        **base_settings(kafka_broker, ref_topics, **common),
        state_dir=str(tmp_path / "ref-state"),
        checkpoint_key=CHECKPOINT_KEY,
    )
    ref_final = Processor(ref).run(max_idle_s=1.5)

    # The same input, with kill -9 at random moments and restarts.
    metrics = tmp_path / "metrics.jsonl"
    settings = base_settings(
        kafka_broker, crash_topics, **common, state_dir=tmp_path / "state", metrics_file=metrics
    )
    seed = kill_9_then_finish(streamcal_run, settings, tmp_path / "state", metrics)
    crash_final = metric_lines(metrics)[-1]

    note = f"(kill moments seed {seed})"
    assert ref_final["merge_stalls"] == crash_final["merge_stalls"] == 0
    assert untimed(crash_final) == untimed(ref_final), note
    assert crash_final["events"] == n and crash_final["labels"] == n - 2
    same_predictions(kafka_broker, ref_topics["predictions"], crash_topics["predictions"], n, note)


@pytest.mark.slow
def test_sigterm_stops_cleanly_with_a_final_checkpoint(
    kafka_broker, unique_topics, tmp_path, streamcal_run
):
    n = 2000
    events, labels = synthetic_stream(n, seed=12, label_delay_ms=3)
    produce_stream(kafka_broker, unique_topics, events, labels)
    metrics = tmp_path / "metrics.jsonl"
    state = tmp_path / "state"
    settings = base_settings(
        kafka_broker, unique_topics, metrics_every=100, state_dir=state, metrics_file=metrics,
        checkpoint_interval=3600,
    )  # fmt: skip
    proc = streamcal_run.popen(settings, stderr=subprocess.PIPE)
    wait_for_lines(metrics, 0, proc)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0, proc.stderr.read().decode()[-2000:]

    saved = stored_state(state)
    assert saved["checkpoints"] == 1  # the interval is an hour: this is the final checkpoint
    counts = saved["counts"]
    last = metric_lines(metrics)[-1]
    assert 0 < counts["events"] == last["events"] < n
    # The offsets stored are exactly the records that were processed.
    assert sum(o for _, _, o in saved["offsets"]) == counts["events"] + counts["labels"]
    # Every prediction was flushed before the checkpoint.
    preds = read_topic(kafka_broker, unique_topics["predictions"])
    assert len(preds) == counts["predictions"] == last["predictions"]

    # Restart: resumes at the stored offsets; no prediction is produced twice.
    done = streamcal_run.run(settings, "--max-idle-s", "1.5")
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    preds = read_topic(kafka_broker, unique_topics["predictions"], min_count=n)
    assert sorted(r.key for r in preds) == sorted(f"e{i}".encode() for i in range(n))
    assert metric_lines(metrics)[-1]["labels"] == n


@pytest.mark.parametrize("how", ["flip a byte", "other key"])
def test_tampered_checkpoint_is_refused(kafka_broker, unique_topics, tmp_path, how, streamcal_run):
    events, labels = synthetic_stream(30, seed=13)
    produce_stream(kafka_broker, unique_topics, events, labels)
    state = tmp_path / "state"
    settings = base_settings(kafka_broker, unique_topics, state_dir=state)
    config = ProcessorConfig.build(**settings, checkpoint_key=CHECKPOINT_KEY)
    Processor(config).run(max_idle_s=0.5)
    if how == "flip a byte":
        store = KVStore(state / "store")
        data = bytearray(store.get(SNAPSHOT))
        data[len(data) // 2] ^= 0x01
        store.commit({SNAPSHOT: bytes(data)})
        store.close()
        env = checkpoint_env()
    else:
        env = checkpoint_env(STREAMCAL_CHECKPOINT_KEY="a-different-key-of-enough-bytes")
    # A dead broker address: refusing must happen before any connection is tried.
    settings["bootstrap_servers"] = "127.0.0.1:9"
    done = streamcal_run.run(settings, env=env, timeout=60)
    err = error_of(done.stderr.decode())
    assert done.returncode == 2
    assert "failed authentication" in err and "refusing" in err


def test_checkpoint_of_other_settings_is_refused(kafka_broker, unique_topics, tmp_path):
    events, labels = synthetic_stream(10, seed=14)
    produce_stream(kafka_broker, unique_topics, events, labels)
    settings = base_settings(kafka_broker, unique_topics, state_dir=tmp_path / "state")
    Processor(ProcessorConfig.build(**settings, checkpoint_key=CHECKPOINT_KEY)).run(max_idle_s=0.5)
    settings["model"] = "gnb"
    with pytest.raises(Exception, match="model='logreg'"):
        Processor(ProcessorConfig.build(**settings, checkpoint_key=CHECKPOINT_KEY))
