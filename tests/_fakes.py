"""Stand-ins for kafka-python's consumer side, for the tests of the input path that need no
broker (the merge, the units): records in the shape the processor keeps, and a consumer
that serves records already in the topics in an order a test chooses.
(The same paths against a real broker: tests/stream/test_processor_kafka.py and
test_other_clients.py.)"""

from __future__ import annotations

from kafka.structs import TopicPartition as TP

from streamcal.stream.unit import _Rec as Record

__all__ = ["TP", "ChunkyConsumer", "Record"]


class ChunkyConsumer:
    """Serves all records already in ``data`` ({TP: [Record]}): each poll one partition,
    chosen by ``rng``, and a chunk of 1..``most`` of its next records (as tansu does)."""

    def __init__(self, data: dict, rng, most: int = 7):
        self.data, self.rng, self.most = data, rng, most
        self.pos = dict.fromkeys(data, 0)

    def poll(self, timeout_ms=0, max_records=2000):
        left = [tp for tp in self.data if self.pos[tp] < len(self.data[tp])]
        if not left:
            return {}
        tp = self.rng.choice(left)
        p = self.pos[tp]
        k = min(max_records, self.rng.randint(1, self.most))
        self.pos[tp] = p + k
        return {tp: self.data[tp][p : p + k]}

    def highwater(self, tp):
        return len(self.data[tp])

    def position(self, tp):
        return min(self.pos[tp], len(self.data[tp]))
