"""The processor survives a broker restart: its idempotent producer, which the restarted
broker no longer knows, is recreated and the undelivered outputs are sent again; the
input the broker lost with its data is reported, and with --on-lost-input continue
everything written to it after the restart is read."""

from __future__ import annotations

import threading

import pytest

from streamcal.stream.config import ProcessorConfig
from streamcal.stream.processor import Processor
from tests._helpers import wait_until
from tests._kafka_helpers import (
    base_settings,
    create_topics,
    own_broker_port,
    produce_stream,
    read_topic,
    start_tansu,
    synthetic_stream,
)

pytestmark = pytest.mark.kafka


@pytest.mark.slow
def test_producer_is_recreated_after_a_broker_restart(unique_topics):
    port = own_broker_port()
    bootstrap = f"127.0.0.1:{port}"
    broker = start_tansu(port)
    try:
        events, labels = synthetic_stream(90, seed=21)
        wait_until(lambda: _try_produce(bootstrap, unique_topics, events[:8], labels[:8]), 20,
                   "the broker", interval=0.1)  # fmt: skip
        config = ProcessorConfig.build(**base_settings(bootstrap, unique_topics, merge_wait=1.0,
                                                       on_lost_input="continue"))  # fmt: skip
        processor = Processor(config)
        stop, out = threading.Event(), {}
        thread = threading.Thread(
            target=lambda: out.update(processor.run(stop_event=stop)), daemon=True
        )
        thread.start()
        wait_until(lambda: processor.state.counts["labels"] == 8, 30, "the first labels")
        seen = dict(processor.state.offsets)
        read = {tp for tp, offset in seen.items() if offset > 0}

        # The in-memory broker comes back empty: the producer's id is unknown to it, and
        # the processor's positions are past the ends of the new logs.
        broker.terminate()
        broker.wait()
        broker = start_tansu(port)
        wait_until(lambda: _try_create(bootstrap, unique_topics), 20, "the restarted broker",
                   interval=0.1)  # fmt: skip
        # Each lost position is reported (before anything is written again: a log grown
        # past the position shows no loss) and reading goes on from the new logs' start.
        lost = processor.lost_input
        wait_until(lambda: sum(lost.values()) == len(read), 30, "the lost positions reported")
        produce_stream(bootstrap, unique_topics, events[8:], labels[8:])

        # Everything written after the restart is processed (none skipped) and its
        # predictions reach the new broker.
        wait_until(lambda: processor.state.counts["labels"] == 90, 60, "labels after restart")
        stop.set()
        thread.join(60)
        assert not thread.is_alive()
        preds = read_topic(bootstrap, unique_topics["predictions"], min_count=82)
        assert {r.key for r in preds} == {k.encode() for k, _, _ in events[8:]}
        assert out["events"] == processor.state.counts["events"] == 90
        assert out["lost_input"] == len(read) and out["skipped_offsets"] == 0
        dead = read_topic(bootstrap, unique_topics["dead_letters"])
        assert len(dead) == len(read) and all(b"input lost" in r.value for r in dead)
    finally:
        broker.terminate()
        broker.wait()


def _try_create(bootstrap, topics) -> bool:
    """The input topics with 4 partitions, as before the restart (the processor's
    metadata requests may have had tansu create them already, with as many)."""
    from kafka.errors import TopicAlreadyExistsError

    try:
        create_topics(bootstrap, [topics["events"], topics["labels"]], 4)
    except TopicAlreadyExistsError:
        return True
    except Exception:  # noqa: BLE001 - not up yet
        return False
    return True


def _try_produce(bootstrap, topics, events, labels) -> bool:
    try:
        produce_stream(bootstrap, topics, events, labels)
    except Exception:  # noqa: BLE001 - not up yet
        return False
    return True
