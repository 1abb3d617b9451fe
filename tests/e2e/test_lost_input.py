"""Input lost by the broker, against the brokers' own behaviour (issue 29): tansu restarted
without its data (memory storage: its logs start again at 0, and a fetch past a log's
end gets no records), noida-db restarted with its data (no loss may be reported), and a
topic deleted and recreated on noida-db (Kafka's OFFSET_OUT_OF_RANGE). Each
``--on-lost-input`` policy. (Without a broker: tests/stream/test_lost_input.py; a broker
restart while the processor runs: tests/e2e/test_broker_restart.py.)"""

from __future__ import annotations

import subprocess
import threading

import orjson
import pytest
from kafka.errors import TopicAlreadyExistsError

from streamcal.stream.config import ProcessorConfig
from streamcal.stream.kafka.ordering import LostInput
from streamcal.stream.processor import Processor
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

P = 4  # partitions of both input topics


def _create(bootstrap: str, topics: dict) -> None:
    """The input topics with P partitions (the processor's metadata requests may have had
    tansu create them already, with as many)."""
    try:
        create_topics(bootstrap, [topics["events"], topics["labels"]], P)
    except TopicAlreadyExistsError:
        pass


def _now_in(bootstrap: str, topic: str) -> list:
    """The records of ``topic`` now (none while it does not exist yet)."""
    try:
        return read_topic(bootstrap, topic, timeout=2)
    except TimeoutError:
        return []


def _ids(records) -> set:
    return {k.encode() for k, _, _ in records}


def _read(bootstrap: str, topics: dict) -> set:
    """The (topic, partition) of every input record: where the processor has a position."""
    recs = read_topic(bootstrap, topics["events"]) + read_topic(bootstrap, topics["labels"])
    return {(r.topic, r.partition) for r in recs}


def test_a_broker_that_lost_its_data_stops_streamcal_run_and_continue_reads_what_it_holds(
    unique_topics, streamcal_run, tmp_path, kafka_client
):
    """tansu is restarted (its logs empty) under a running `streamcal run`: it stops with
    exit status 4 and one line naming a partition, its position and what the log holds.
    Started again with --on-lost-input continue, it dead-letters each lost position, reads
    the new logs from their start and predicts every event written after the restart."""
    port = own_broker_port()
    bootstrap, t = f"127.0.0.1:{port}", unique_topics
    broker = start_tansu(port)
    try:
        wait_until(lambda: broker_up(bootstrap), 30, "the broker")
        _create(bootstrap, t)
        events, labels = synthetic_stream(40, seed=29)
        produce_stream(bootstrap, t, events[:20], labels[:20])
        metrics = tmp_path / "metrics.jsonl"
        settings = base_settings(bootstrap, t, state_dir=tmp_path / "state", metrics_file=metrics,
                                 checkpoint_interval=0.2, metrics_every=5,
                                 kafka_client=kafka_client)  # fmt: skip
        with open(tmp_path / "stderr.txt", "wb") as stderr:  # a pipe could fill and block
            proc = streamcal_run.popen(settings, stderr=stderr)
        wait_until(lambda: len(_now_in(bootstrap, t["predictions"])) >= 20, 60,
                   "the first predictions")  # fmt: skip
        wait_until(lambda: has_checkpoint(tmp_path / "state"), 30, "a checkpoint")
        wait_until(lambda: any(x["labels"] == 20 for x in metric_lines(metrics)), 30,
                   "the first labels")  # fmt: skip
        held = _read(bootstrap, t)

        broker.terminate()
        broker.wait()
        broker = start_tansu(port)
        wait_until(lambda: broker_up(bootstrap), 30, "the restarted broker")
        _create(bootstrap, t)
        assert proc.wait(60) == 4
        err = error_of((tmp_path / "stderr.txt").read_text(), whole=False)
        assert err.startswith("streamcal run: error: input lost: topic "), err
        assert "no longer holds offset" in err and "the log holds no record" in err, err
        assert "a broker that lost its data" in err and "--on-lost-input continue" in err, err

        # Go on from what the logs hold, before anything new is written to them (a log
        # that has grown past the position again would show no loss: docs/processor.md).
        proc = streamcal_run.popen(settings, "--on-lost-input", "continue",
                                   stderr=subprocess.DEVNULL)  # fmt: skip

        def lost_positions() -> list:
            dead = [orjson.loads(r.value) for r in _now_in(bootstrap, t["dead_letters"])]
            return [d for d in dead if d["reason"].startswith("input lost")]

        # 120 s: after a broker restart librdkafka reconnects with a growing backoff and
        # refreshes metadata on its own clock; under CI's 4 workers on 2 cores it once took
        # over 60 s (alone: ~15 s). A liveness wait: what is asserted comes after it.
        wait_until(lambda: len(lost_positions()) == len(held), 120, "a dead letter per position")
        assert {(d["source"]["topic"], d["source"]["partition"]) for d in lost_positions()} == held
        assert all("goes on from offset 0" in d["reason"] for d in lost_positions())
        produce_stream(bootstrap, t, events[20:], labels[20:])
        wanted = _ids(events[20:])
        wait_until(lambda: wanted <= {r.key for r in _now_in(bootstrap, t["predictions"])}, 60,
                   "a prediction of every event written after the restart")  # fmt: skip
        proc.terminate()
        assert proc.wait(60) == 0
        final = metric_lines(metrics)[-1]
        assert final["lost_input"] == len(held) and final["skipped_offsets"] == 0
        assert final["events"] == 40  # 20 before the loss, 20 after: none skipped
    finally:
        broker.terminate()
        broker.wait()


def _running(processor: Processor) -> tuple[threading.Event, threading.Thread, dict]:
    """``processor`` running in a thread: (its stop event, the thread, {"error": what it
    raised})."""
    stop, out = threading.Event(), {}

    def run():
        try:
            processor.run(stop_event=stop)
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return stop, thread, out


def test_a_broker_that_keeps_its_log_over_a_restart_loses_nothing(noida_broker, unique_topics):
    """noida-db restarted with its data under a running processor (default policy: stop):
    no loss is reported and every event is predicted once."""
    bootstrap, t = noida_broker.bootstrap_servers, unique_topics
    create_topics(bootstrap, [t["events"], t["labels"]], P)
    events, labels = stream_now(*synthetic_stream(60, seed=30))
    produce_stream(bootstrap, t, events[:30], labels[:30])
    processor = Processor(ProcessorConfig.build(**base_settings(bootstrap, t,
                                                                global_lock=False)))  # fmt: skip
    stop, thread, out = _running(processor)
    try:
        wait_until(lambda: processor.state.counts["labels"] == 30 or out, 60, "the first half")
        # The first half's predictions in the log before the broker stops: noida-db 0.2.3
        # acknowledges writes that reach it while it stops, and loses them (an idempotent
        # producer writing every 0.2 ms beside busy loops: 2-16 acknowledged records lost
        # in 4 of 40 graceful restarts; a kill -9 lost 15-516 in 11 of 11). Once, in CI,
        # that took 4 predictions, and the producer's next batch was refused as
        # OutOfOrderSequenceNumber. No client can recover a write its broker acknowledged
        # and dropped, so the test keeps that race out of what it checks.
        assert len(read_topic(bootstrap, t["predictions"], timeout=60, min_count=30)) >= 30
        noida_broker.restart()
        produce_stream(bootstrap, t, events[30:], labels[30:])
        wait_until(lambda: processor.state.counts["labels"] == 60 or out, 90, "the second half")
    finally:
        stop.set()
        thread.join(60)
    assert not out, out
    assert processor.lost_input == {} and processor.skipped_offsets == {}
    counts = processor.state.counts
    assert (counts["events"], counts["predictions"], counts["dead_letters"]) == (60, 60, 0)
    assert {r.key for r in read_topic(bootstrap, t["predictions"], min_count=60)} == _ids(events)


def test_a_topic_deleted_and_recreated_stops_the_processor(noida_broker, unique_topics):
    """Kafka's way (noida-db answers as Kafka does): a fetch past the end of the recreated
    topic's log is OFFSET_OUT_OF_RANGE, which the processor reports instead of starting
    the topic again silently."""
    from kafka.admin import KafkaAdminClient

    bootstrap, t = noida_broker.bootstrap_servers, unique_topics
    create_topics(bootstrap, [t["events"], t["labels"]], P)
    events, labels = stream_now(*synthetic_stream(30, seed=31))
    produce_stream(bootstrap, t, events, labels)
    processor = Processor(ProcessorConfig.build(**base_settings(bootstrap, t,
                                                                global_lock=False)))  # fmt: skip
    stop, thread, out = _running(processor)
    try:
        wait_until(lambda: processor.state.counts["labels"] == 30 or out, 60, "the input")
        assert not out, out
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            admin.delete_topics([t["events"], t["labels"]])
        finally:
            admin.close()
        done: set = set()
        wait_until(lambda: _recreated(bootstrap, t, done), 30, "the topics recreated")
        thread.join(60)
    finally:
        stop.set()
        thread.join(60)
    error = out.get("error")
    assert isinstance(error, LostInput), out
    assert error.position > error.end == 0 and "no longer holds offset" in str(error)
    assert processor.state.counts["events"] == 30  # what was read before stays counted


def _recreated(bootstrap: str, topics: dict, done: set) -> bool:
    """Create each input topic again once its deletion is through (True when both are;
    ``done``: those created so far). noida-db creates a topic that a client asks about,
    with one partition: the processor's metadata requests may have done it first, which
    counts once its log is new (empty)."""
    from kafka import KafkaConsumer, TopicPartition

    for name in (topics["events"], topics["labels"]):
        if name in done:
            continue
        try:
            create_topics(bootstrap, [name], P)
            done.add(name)
        except TopicAlreadyExistsError:
            consumer = KafkaConsumer(bootstrap_servers=bootstrap)
            try:
                tp = TopicPartition(name, 0)
                if consumer.end_offsets([tp])[tp] == 0:
                    done.add(name)
            finally:
                consumer.close()
    return {topics["events"], topics["labels"]} <= done
