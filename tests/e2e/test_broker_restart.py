"""The processor survives a broker restart: its idempotent producer, which the restarted
broker no longer knows, is recreated and the undelivered outputs are sent again."""

from __future__ import annotations

import threading

import pytest

from streamcal.stream.config import ProcessorConfig
from streamcal.stream.processor import Processor
from tests._helpers import wait_until
from tests._kafka_helpers import (
    base_settings,
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
        config = ProcessorConfig.build(**base_settings(bootstrap, unique_topics, merge_wait=1.0))
        processor = Processor(config)
        stop, out = threading.Event(), {}
        thread = threading.Thread(
            target=lambda: out.update(processor.run(stop_event=stop)), daemon=True
        )
        thread.start()
        wait_until(lambda: processor.state.counts["labels"] == 8, 30, "the first labels")
        seen = dict(processor.state.offsets)

        # The in-memory broker comes back empty: the producer's id is unknown to it.
        broker.terminate()
        broker.wait()
        broker = start_tansu(port)
        wait_until(lambda: _try_produce(bootstrap, unique_topics, events[8:], labels[8:]), 20,
                   "the restarted broker", interval=0.1)  # fmt: skip

        # Records below the processor's positions were lost with the old log; the rest
        # are processed and their predictions reach the new broker.
        wait_until(lambda: processor.state.counts["events"] >= 8 + 40, 60, "events after restart")
        stop.set()
        thread.join(60)
        assert not thread.is_alive()
        preds = read_topic(bootstrap, unique_topics["predictions"])
        after = processor.state.counts["predictions"] - 8
        new_ids = {r.key for r in preds} - {k.encode() for k, _, _ in events[:8]}
        assert after > 40 and len(new_ids) == after
        assert out["events"] == processor.state.counts["events"]
        assert all(processor.state.offsets[k] >= v for k, v in seen.items())
    finally:
        broker.terminate()
        broker.wait()


def _try_produce(bootstrap, topics, events, labels) -> bool:
    try:
        produce_stream(bootstrap, topics, events, labels)
    except Exception:  # noqa: BLE001 - not up yet
        return False
    return True
