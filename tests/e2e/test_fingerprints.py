"""Input the broker lost is never skipped silently, even once the log has grown past the
processor's position again (issue 37 item 1: record fingerprints). tansu restarted
without its data, then written to past every position, with `streamcal run` (a)
restarted on its state dir after its exit 4, (b) restarted 0.1 s after each exit as a
supervisor does, (c) SIGSTOPped across the broker restart: each ends in exit status 4, or
with --on-lost-input continue counts and dead-letters each position and predicts every
event written after the restart. noida-db, which keeps its log over a restart, restarted
under live writes: no loss is reported where none is, and every prediction is of an
event its log holds. (Without a broker: tests/stream/test_fingerprints.py.)"""

from __future__ import annotations

import signal
import subprocess
import threading
import time

import orjson
import pytest

from tests._helpers import error_of, wait_until
from tests._kafka_helpers import (
    base_settings,
    broker_up,
    create_topics,
    has_checkpoint,
    metric_lines,
    own_broker_port,
    produce_stream,
    read_topic,
    start_tansu,
    stream_now,
    synthetic_stream,
)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

P = 2  # partitions of both input topics
N1, N2 = 20, 80  # events before the broker's restart, and after (past every position)


def _now_in(bootstrap: str, topic: str) -> list:
    try:
        return read_topic(bootstrap, topic, timeout=2)
    except TimeoutError:
        return []


def _lost_letters(bootstrap: str, topics: dict) -> list:
    dead = [orjson.loads(r.value) for r in _now_in(bootstrap, topics["dead_letters"])]
    return [d for d in dead if d["reason"].startswith("input lost")]


class Tansu:
    """A tansu broker of the test's own, restarted without its data by ``restart``."""

    def __init__(self, topics: dict):
        self.port = own_broker_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.topics = topics
        self.proc = self._start()

    def _start(self):
        proc = start_tansu(self.port)
        wait_until(lambda: broker_up(self.bootstrap), 30, "the broker")
        try:
            create_topics(self.bootstrap, [self.topics["events"], self.topics["labels"]], P)
        except Exception:  # noqa: BLE001 - a processor's metadata request created them
            pass
        return proc

    def restart(self) -> None:
        self.stop()
        self.proc = self._start()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()


@pytest.fixture
def tansu(unique_topics):
    broker = Tansu(unique_topics)
    yield broker
    broker.stop()


def _first_run(tansu, streamcal_run, tmp_path, kafka_client, *extra):
    """`streamcal run` on N1 events and labels, until they are checkpointed: (its process,
    its settings, the stream, the (topic, partition) it read)."""
    t = tansu.topics
    events, labels = synthetic_stream(N1 + N2, seed=37)
    produce_stream(tansu.bootstrap, t, events[:N1], labels[:N1])
    settings = base_settings(tansu.bootstrap, t, state_dir=tmp_path / "state",
                             metrics_file=tmp_path / "metrics.jsonl", checkpoint_interval=0.2,
                             metrics_every=5, kafka_client=kafka_client)  # fmt: skip
    proc = streamcal_run.popen(settings, *extra, stderr=open(tmp_path / "stderr.txt", "wb"))
    wait_until(lambda: any(x["labels"] == N1 for x in metric_lines(tmp_path / "metrics.jsonl")),
               60, "the first labels")  # fmt: skip
    wait_until(lambda: has_checkpoint(tmp_path / "state"), 30, "a checkpoint")
    time.sleep(0.5)  # a checkpoint after the last record
    recs = read_topic(tansu.bootstrap, t["events"]) + read_topic(tansu.bootstrap, t["labels"])
    return proc, settings, (events, labels), {(r.topic, r.partition) for r in recs}


def _refill(tansu, stream) -> set:
    """Write the N2 events after the restart (more than any partition held): their ids."""
    events, labels = stream
    produce_stream(tansu.bootstrap, tansu.topics, events[N1:], labels[N1:])
    return {k.encode() for k, _, _ in events[N1:]}


def _last_error(tmp_path) -> str:
    return error_of((tmp_path / "stderr.txt").read_text(), whole=False)


def _continue_reads_everything(tansu, streamcal_run, settings, wanted, held, tmp_path,
                               proc=None):  # fmt: skip
    """--on-lost-input continue: a dead letter per position read, every event written
    after the restart predicted, lost_input counted."""
    bootstrap, t = tansu.bootstrap, tansu.topics
    if proc is None:
        proc = streamcal_run.popen(settings, "--on-lost-input", "continue",
                                   stderr=subprocess.DEVNULL)  # fmt: skip
    wait_until(lambda: len(_lost_letters(bootstrap, t)) >= len(held), 120,
               "a dead letter per position")  # fmt: skip
    wait_until(lambda: wanted <= {r.key for r in _now_in(bootstrap, t["predictions"])}, 60,
               "a prediction of every event written after the restart")  # fmt: skip
    proc.terminate()
    # 120 s: the final checkpoint flushes through a producer that may still be reconnecting
    # after the broker's restart (librdkafka's backoff, see tests/e2e/test_lost_input.py).
    assert proc.wait(120) == 0
    # Delivery is at least once: a dead letter sent just after the broker's restart may
    # be sent again by the recreated producer; what is counted is lost_input.
    letters = {(d["source"]["topic"], d["source"]["partition"], d["reason"])
               for d in _lost_letters(bootstrap, t)}  # fmt: skip
    assert {(topic, partition) for topic, partition, _ in letters} == held
    assert len(letters) == len(held), letters
    assert all("goes on from offset 0" in reason for *_, reason in letters)
    final = metric_lines(tmp_path / "metrics.jsonl")[-1]
    assert final["lost_input"] == len(held), final


def test_restarted_after_exit_4_on_a_refilled_log_it_refuses_again(
    tansu, streamcal_run, tmp_path, kafka_client
):
    """(a) The broker restarts empty: exit 4 (the log is below the position). The log then
    grows past every position; the processor restarted on its state dir exits 4 again
    (its fingerprints), and with --on-lost-input continue reads the new log from 0."""
    proc, settings, stream, held = _first_run(tansu, streamcal_run, tmp_path, kafka_client)
    tansu.restart()
    assert proc.wait(60) == 4
    wanted = _refill(tansu, stream)

    with open(tmp_path / "stderr.txt", "wb") as stderr:
        assert streamcal_run.popen(settings, stderr=stderr).wait(60) == 4
    err = _last_error(tmp_path)
    assert err.startswith("streamcal run: error: input lost: topic "), err
    assert "but not the record read at offset" in err and "written to again" in err, err
    _continue_reads_everything(tansu, streamcal_run, settings, wanted, held, tmp_path)


def test_a_supervisor_restarting_it_every_0_1_s_never_skips(tansu, streamcal_run, tmp_path):
    """(b) As docker-compose's `restart: unless-stopped` does: restarted 0.1 s after each
    exit while the new log is written: every run ends in exit status 4."""
    proc, settings, stream, held = _first_run(tansu, streamcal_run, tmp_path, "kafka-python")
    tansu.restart()
    codes = [proc.wait(60)]
    writer = threading.Thread(target=_refill, args=(tansu, stream))
    writer.start()
    while writer.is_alive() or len(codes) < 4:
        time.sleep(0.1)
        with open(tmp_path / "stderr.txt", "wb") as stderr:
            codes.append(streamcal_run.popen(settings, stderr=stderr).wait(60))
        assert codes[-1] == 4, (codes, _last_error(tmp_path))
    writer.join()
    assert "input lost: topic " in _last_error(tmp_path)
    assert set(codes) == {4}, codes


@pytest.mark.parametrize("policy", ["stop", "continue"])
def test_paused_across_the_broker_s_restart_it_stops_or_counts(
    tansu, streamcal_run, tmp_path, kafka_client, policy
):
    """(c) SIGSTOPped while the broker restarts empty and its log grows past every
    position, then SIGCONTed: exit 4, or with continue each position counted and
    dead-lettered and every event written after the restart predicted."""
    proc, settings, stream, held = _first_run(tansu, streamcal_run, tmp_path, kafka_client,
                                              "--on-lost-input", policy)  # fmt: skip
    proc.send_signal(signal.SIGSTOP)
    try:
        tansu.restart()
        wanted = _refill(tansu, stream)
    finally:
        proc.send_signal(signal.SIGCONT)
    if policy == "stop":
        assert proc.wait(60) == 4
        err = _last_error(tmp_path)
        assert "input lost: topic " in err and "--on-lost-input continue" in err, err
    else:
        _continue_reads_everything(tansu, streamcal_run, settings, wanted, held, tmp_path, proc)


@pytest.mark.parametrize("how", ["graceful", "kill -9"])
def test_noida_restarted_under_live_writes_predicts_only_what_its_log_holds(
    noida_broker, unique_topics, streamcal_run, tmp_path, how
):
    """noida-db restarted (with its data) while events are written and the processor
    reads: no silent divergence. Either no loss is counted and every prediction is of an
    event the log holds, or the loss is counted and dead-lettered (continue)."""
    bootstrap, t = noida_broker.bootstrap_servers, unique_topics
    create_topics(bootstrap, [t["events"], t["labels"]], P)
    events, labels = stream_now(*synthetic_stream(1500, seed=38))
    metrics = tmp_path / "metrics.jsonl"
    settings = base_settings(bootstrap, t, state_dir=tmp_path / "state", metrics_file=metrics,
                             checkpoint_interval=0.2, metrics_every=5,
                             global_lock=False)  # fmt: skip
    proc = streamcal_run.popen(settings, "--on-lost-input", "continue",
                               stderr=open(tmp_path / "stderr.txt", "wb"))  # fmt: skip
    writer = threading.Thread(target=_write_slowly, args=(bootstrap, t, events, labels))
    writer.start()
    time.sleep(1.5)
    if how == "kill -9":
        noida_broker.proc.kill()
        noida_broker.proc.wait()
        noida_broker.start()
    else:
        noida_broker.restart()
    writer.join(120)
    ids = {k.encode() for k, _, _ in events}
    held = {r.key for r in read_topic(bootstrap, t["events"])}
    wait_until(lambda: held <= {r.key for r in _now_in(bootstrap, t["predictions"])}, 90,
               "a prediction of every event the log holds")  # fmt: skip
    proc.terminate()
    assert proc.wait(60) == 0
    predicted = {r.key for r in read_topic(bootstrap, t["predictions"])}
    final = metric_lines(metrics)[-1]
    gone = predicted - held  # predicted from records the log no longer holds
    assert predicted <= ids
    assert not gone or final["lost_input"] > 0, (len(gone), final)
    assert final["lost_input"] == len(_lost_letters(bootstrap, t)), final


def _write_slowly(bootstrap: str, topics: dict, events, labels, chunk: int = 100) -> None:
    """Write in chunks, 0.2 s apart, retrying a chunk while the broker is away."""
    for i in range(0, len(events), chunk):
        deadline = time.monotonic() + 60
        while True:
            try:
                produce_stream(bootstrap, topics, events[i : i + chunk], labels[i : i + chunk])
                break
            except Exception:  # noqa: BLE001 - the broker is restarting
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        time.sleep(0.02)
