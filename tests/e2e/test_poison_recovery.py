"""One poisoned event through a real broker (issue 29): a feature of 1e300 or 1e160, then
its label, costs at most that event. The processor stops after the poisoned label and
starts again from its state directory: every event gets a prediction, before and after
the restart, and the label whose object the model could not learn is one dead letter
naming the feature and its value."""

from __future__ import annotations

import random

import orjson
import pytest

from streamcal.stream.config import ProcessorConfig
from streamcal.stream.processor import Processor
from tests._helpers import CHECKPOINT_KEY
from tests._kafka_helpers import T0, base_settings, produce, read_topic

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

N, AT = 400, 150  # events, and the poisoned one (in the first half)


def records(topics: dict, value: bytes, lo: int, hi: int) -> list:
    rng = random.Random(0)
    out = []
    for i in range(N):
        a, b = rng.gauss(0, 1), rng.gauss(0, 1)
        y = a + 0.5 * rng.gauss(0, 1) > 0
        if not lo <= i < hi:
            continue
        fa = value if i == AT else orjson.dumps(a)
        ev = b'{"id": "e%d", "features": {"a": %s, "b": %s}}' % (i, fa, orjson.dumps(b))
        ts = T0 + 10 * i
        out.append((topics["events"], f"e{i}", ev, ts))
        out.append((topics["labels"], f"e{i}", {"id": f"e{i}", "label": y}, ts + 5))
    return out


@pytest.mark.parametrize(
    "mode, value", [("pretrained", b"1e300"), ("pretrained", b"1e160"), ("sva", b"1e300")]
)
def test_a_poisoned_event_costs_only_itself_across_a_restart(
    kafka_broker, unique_topics, tmp_path, mode, value
):
    settings = base_settings(
        kafka_broker, unique_topics, mode=mode, window=40, state_dir=str(tmp_path / "state"),
        checkpoint_key=CHECKPOINT_KEY,
    )  # fmt: skip
    config = ProcessorConfig.build(**settings)
    half = AT + 1  # the first run ends right after the poisoned label
    produce(kafka_broker, records(unique_topics, value, 0, half))
    first = Processor(config).run(max_idle_s=1.5)
    assert first["predictions"] == half
    produce(kafka_broker, records(unique_topics, value, half, N))
    again = Processor(config)
    assert again.restored
    final = again.run(max_idle_s=1.5)

    preds = read_topic(kafka_broker, unique_topics["predictions"], min_count=N)
    assert sorted({r.key.decode() for r in preds}) == sorted(f"e{i}" for i in range(N))
    assert final["events"] == N and final["predictions"] == N
    dead = [orjson.loads(r.value) for r in read_topic(kafka_broker, unique_topics["dead_letters"],
                                                      min_count=1)]  # fmt: skip
    assert len(dead) == 1
    reason = dead[0]["reason"]
    assert reason.startswith("model could not learn the label of")
    assert f"its feature 'a' = {float(value)!r}" in reason
