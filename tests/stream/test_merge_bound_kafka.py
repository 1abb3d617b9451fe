"""The merge's buffer bound against a real broker, with each Kafka client: a backlog whose
labels start far later in record time than its events (the case of docs/processor.md,
"Reading a backlog") is read with a bound small enough to pause the labels partitions
again and again, and gives what an unbounded read gives: the same records in the same
order, none lost or repeated across a pause, and the same predictions to the bit."""

from __future__ import annotations

import pytest

from streamcal.stream.config import ProcessorConfig
from streamcal.stream.kafka import clients
from streamcal.stream.kafka.ordering import OrderedMerge
from streamcal.stream.processor import Processor
from tests._kafka_helpers import (
    base_settings,
    create_topics,
    produce,
    read_topic,
    scale_out_topics,
    synthetic_stream,
)

pytestmark = pytest.mark.kafka

N = 2000  # events 10 ms apart; each label 8 s of record time later (400 events on)
P = 2  # partitions of each topic
SMALL = 8 * 1024  # bytes: a few records per partition, far below one fetch
POLL = 100  # records per poll: a fetch response takes many polls, paused in between


def backlog(bootstrap: str, unique_topics: dict, tag: str) -> dict:
    """Topics of their own holding the whole backlog: the events first, then the labels
    (all in the topics before anything reads them)."""
    topics = scale_out_topics(unique_topics, tag)
    create_topics(bootstrap, [topics["events"], topics["labels"]], P)
    events, labels = synthetic_stream(N, seed=37, label_delay_ms=8000)
    produce(bootstrap, [(topics["events"], k, v, ts) for k, v, ts in events])
    produce(bootstrap, [(topics["labels"], k, v, ts) for k, v, ts in labels])
    return topics


def merged(bootstrap: str, topics: dict, client: str, bound: int | None) -> tuple:
    """(topic, partition, offset) of every record a merge over ``topics`` releases, and
    the number of pauses."""
    config = ProcessorConfig.build(**base_settings(bootstrap, topics, kafka_client=client,
                                                   poll_max_records=POLL))  # fmt: skip
    consumer = clients.input_consumer(config)
    pauses = []
    try:
        tps = [consumer.partition(t, p) for t in (topics["events"], topics["labels"])
               for p in range(P)]  # fmt: skip
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        pause = consumer.pause

        def counted(*tps):
            pauses.append(tps)
            pause(*tps)

        consumer.pause = counted
        ranks = {topics["events"]: 0, topics["labels"]: 1}
        merge = OrderedMerge(consumer, tps, ranks, max_wait=30.0, poll_records=POLL,
                             buffer_bytes=bound)  # fmt: skip
        out = []
        while len(out) < 2 * N:
            item = merge.next(5.0)
            assert item is not None, f"nothing released after {len(out)}"
            out.append((item[1].topic, item[1].partition, item[1].offset))
        assert merge.next(0.5) is None and merge.caught_up() and merge.stalls == 0
        return out, len(pauses)
    finally:
        consumer.close()


def test_a_bounded_merge_releases_what_an_unbounded_one_does(kafka_broker, unique_topics,
                                                             kafka_client):  # fmt: skip
    topics = backlog(kafka_broker, unique_topics, "m")
    free, _ = merged(kafka_broker, topics, kafka_client, None)
    got, pauses = merged(kafka_broker, topics, kafka_client, SMALL)
    assert pauses > 10
    assert got == free
    for tp in {(t, p) for t, p, _ in got}:  # nothing lost or read twice across a pause
        offsets = [o for t, p, o in got if (t, p) == tp]
        assert offsets == list(range(len(offsets)))


def test_a_bounded_backlog_run_predicts_as_a_replay(kafka_broker, unique_topics,
                                                    kafka_client, monkeypatch):  # fmt: skip
    topics = backlog(kafka_broker, unique_topics, "p")
    want = run(kafka_broker, topics, "replay", "kafka-python", merge_buffer=2**30)

    from streamcal.stream.kafka import adapters

    pauses = []
    adapter = adapters.adapter(kafka_client).Consumer
    pause = adapter.pause
    monkeypatch.setattr(adapter, "pause", lambda self, *tps: (pauses.append(tps),
                                                             pause(self, *tps)))  # fmt: skip
    got = run(kafka_broker, topics, "bounded", kafka_client, merge_buffer=SMALL)
    assert len(pauses) > 10
    assert len(got) == N and got == want


def run(bootstrap: str, topics: dict, name: str, client: str, **extra) -> dict:
    """{event id: prediction (its bytes)} of one run over ``topics`` to a predictions
    topic of its own."""
    out = f"{topics['predictions']}-{name}"
    config = ProcessorConfig.build(**base_settings(
        bootstrap, {**topics, "group": f"{topics['group']}-{name}"}, predictions_topic=out,
        kafka_client=client, poll_max_records=POLL, **extra))  # fmt: skip
    final = Processor(config).run(max_idle_s=2.0)
    assert final["events"] == N and final["labels"] == N and final["merge_stalls"] == 0
    return {r.key: r.value for r in read_topic(bootstrap, out, min_count=N)}
