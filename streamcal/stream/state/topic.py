"""The state topic: every unit's checkpoint in Kafka, so state outlives the machine.

Each checkpoint of a partition unit is sealed exactly as a checkpoint file is
(``checkpoint.seal``: HMAC-SHA256 over the plain-data payload) and written as one or more
records keyed ``<group>/<unit>/<part>``. A record's value is a JSON header line then a
chunk of the sealed bytes::

    {"group": ..., "unit": 3, "id": "<checkpoint id>", "part": 0, "parts": 2,
     "offsets": [["events", 3, 1200], ["labels", 3, 1187]]}\\n<chunk>

Chunks keep every record under the broker's message limit (``state_chunk_bytes``). One
key per part, so that a compacted topic (Apache Kafka, ``cleanup.policy=compact``; see
docs/deploy.md), which keeps the last record per key, keeps every part of the newest
checkpoint. The offsets in the header say which input the checkpoint covers (used to
pick the newest, and for operators); the ones restored are those inside the
authenticated payload.

Restore reads the topic to its end (tansu does not compact, so a reader sees every
checkpoint ever written) and keeps, per unit, the complete checkpoint that covers the
most input. The parts are joined and unsealed: authentication comes first, so a
tampered or foreign record is refused before anything is unpickled.
"""

from __future__ import annotations

import logging
import time
import uuid

import orjson

from streamcal.stream.kafka import clients
from streamcal.stream.state.checkpoint import seal, unseal
from streamcal.stream.state.errors import CheckpointError

__all__ = ["StateTopic"]

log = logging.getLogger(__name__)


class StateTopic:
    """Write units' checkpoints through ``outbox`` (the processor's producer) and read
    the newest ones back with a consumer of its own."""

    def __init__(self, client_settings: dict, topic: str, group: str, key: bytes, outbox,
                 chunk_bytes: int = 512 * 1024):  # fmt: skip
        self.settings = client_settings
        self.topic, self.group, self.key = topic, group, key
        self.outbox = outbox
        self.chunk_bytes = max(1024, int(chunk_bytes))

    def create(self, partitions: int = 1) -> None:
        """Create the topic unless it exists (on Apache Kafka, better created beforehand
        with cleanup.policy=compact: see docs/deploy.md)."""
        from kafka.admin import NewTopic
        from kafka.errors import TopicAlreadyExistsError

        admin = clients.admin(self.settings)
        try:
            if self.topic not in admin.list_topics():
                admin.create_topics([NewTopic(self.topic, partitions, 1)])
        except TopicAlreadyExistsError:
            pass
        finally:
            admin.close()

    def _record_key(self, unit, part: int) -> bytes:
        return f"{self.group}/{unit}/{part}".encode()

    def save(self, unit, state, offsets: dict) -> int:
        """Send the checkpoint of ``unit`` (plain ``state``); returns the number of parts.
        Delivered once the outbox is flushed."""
        data = seal(self.key, state)
        size = self.chunk_bytes
        chunks = [data[i : i + size] for i in range(0, len(data), size)] or [b""]
        ident = uuid.uuid4().hex
        covered = sorted([t, p, o] for (t, p), o in offsets.items())
        for i, chunk in enumerate(chunks):
            header = {"group": self.group, "unit": unit, "id": ident, "part": i,
                      "parts": len(chunks), "offsets": covered}  # fmt: skip
            self.outbox.send(
                self.topic, self._record_key(unit, i), orjson.dumps(header) + b"\n" + chunk
            )
        return len(chunks)

    def restore(self, units, timeout: float = 60.0) -> dict:
        """``{unit: state}`` of the newest complete checkpoint of each of ``units`` found in
        the topic (units without one are left out). Raises ``CheckpointError`` if the newest
        one of a unit fails authentication."""
        found = self.read(timeout, units)
        out = {}
        for unit in units:
            data = found.get(unit)
            if data is not None:
                where = f"state-topic checkpoint of unit {unit} ({self.topic!r})"
                out[unit] = unseal(self.key, data, where)
        return out

    def read(self, timeout: float = 60.0, units=None) -> dict:
        """``{unit: sealed bytes}``: the newest complete checkpoint per unit of this group
        (of ``units`` only, if given: the others' chunks are not kept)."""
        from kafka import TopicPartition

        consumer = clients.consumer(self.settings)
        try:
            deadline = time.monotonic() + timeout
            while not consumer.partitions_for_topic(self.topic):
                if time.monotonic() > deadline:
                    return {}
                consumer.topics()
                time.sleep(0.05)
            tps = [TopicPartition(self.topic, p)
                   for p in sorted(consumer.partitions_for_topic(self.topic))]  # fmt: skip
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            parts: dict = {}  # (unit, id) -> {part: chunk}
            newest: dict = {}  # unit -> (partition, offset, id) of its newest complete one
            # A record's key is group/unit/part (every chunk of a unit's checkpoints).
            if units is None:
                prefix = f"{self.group}/".encode()
            else:
                prefix = tuple(f"{self.group}/{u}/".encode() for u in units)
            while True:
                for recs in consumer.poll(timeout_ms=200).values():
                    for rec in recs:
                        if rec.key is None or not rec.key.startswith(prefix):
                            continue
                        self._take(rec, parts, newest)
                done = all(
                    consumer.highwater(tp) is not None
                    and consumer.position(tp) >= consumer.highwater(tp)
                    for tp in tps
                )
                if done:
                    break
                if time.monotonic() > deadline:
                    raise CheckpointError(
                        f"state topic {self.topic!r}: not read to its end in time"
                    )
        finally:
            consumer.close()
        return {unit: b"".join(parts[(unit, ident)][i] for i in range(n))
                for unit, (_, ident, n) in newest.items()}  # fmt: skip

    def _take(self, rec, parts: dict, newest: dict) -> None:
        head, sep, chunk = rec.value.partition(b"\n")
        try:
            h = orjson.loads(head) if sep else None
            unit, ident, i, n = h["unit"], h["id"], int(h["part"]), int(h["parts"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            # Not authenticated data: ignored here; a checkpoint made of it fails unsealing.
            log.warning("state topic: unreadable record at %s:%d", rec.partition, rec.offset)
            return
        if h.get("group") != self.group:
            return
        got = parts.setdefault((unit, ident), {})
        got[i] = chunk
        if len(got) == n and all(k in got for k in range(n)):
            # The one covering the most input wins; at equal coverage the later record
            # (a unit's records share a key, hence a partition). Not the last written
            # alone: an instance dropped from the group may still write an older state.
            covered = sum(int(o) for _, _, o in h.get("offsets") or ())
            rank = (covered, rec.partition, rec.offset)
            if unit not in newest or rank >= newest[unit][0]:
                newest[unit] = (rank, ident, n)
