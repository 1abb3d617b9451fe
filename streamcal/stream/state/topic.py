"""The state topic: every partition unit's state in Kafka as a changelog, so state outlives
the machine and a unit that moves is rebuilt where it lands.

What a checkpoint writes costs what changed, not what is held:

* a **delta** at every checkpoint: the store's changes since the last one (key -> value,
  or None for a delete: ``KVStore.commit``'s return), plus a **refresh** slice: the next
  entries of the store in key order from a cursor, as committed. The slices walk the
  whole store over a few checkpoints (a *roll*; its pace follows the changes, with a
  floor), so that the records of one roll and the deltas after it rebuild the store
  without anything older;
* a **snapshot** (the unit's sealed state: the small rest, with its offsets) at most every
  ``snapshot_interval`` seconds, once a roll has completed.

A writer numbers its records by the unit's checkpoint number under an *epoch* of its own
(a random id, new whenever an instance takes the unit), so that two writers of one unit
(a unit that moved, a zombie) never mix. Rebuilding a unit: take the snapshot that
covers the most input (the authenticated offsets inside it), then, in its epoch, the
newest roll that completed at or before it, and apply that roll's first delta through the
snapshot's, in order, to an empty store. Why that is exact: a key live at the snapshot
was either put after the roll began (a delta has it) or was in the store all through the
roll (its slice has it); every delete after the roll began is in a delta; slices are
applied before their delta's changes.

Records. Every record of a unit goes to one partition of the topic (``partition_of``),
so that its records are in write order. A record's key is
``<group>/<unit>/<epoch>/<kind>/<seq>/<part>`` (one key per record: a compacted topic keeps
them until they are deleted); its value is a JSON header line then a chunk of sealed bytes
(``checkpoint.seal``: HMAC-SHA256 over a plain-data payload), chunks keeping records under
the broker's message limit. The header (unit, epoch, kind, seq, id, part, parts, and for
a delta its roll ``[start, done]``) is only a hint for finding records: nothing read from
it is used before the payload it points to is authenticated and agrees with it.

Old records are deleted with tombstones (null values) once a newer snapshot can be
rebuilt without them, so compaction (Apache Kafka, ``cleanup.policy=compact``; see
docs/deploy.md) keeps the topic at about the store's size plus what changed since.
Why tombstones are not authenticated: a reader never acts on one (a null value carries
nothing and is skipped); only the broker's compaction does, and anyone who can write to
the topic can delete its data anyway. tansu never compacts: there a reader reads the
topic's tail backwards in widening windows until the newest rebuildable plan lies inside
it, so a rebuild reads about what it applies, not the whole history.

With exactly-once the records of a checkpoint are part of its Kafka transaction (sent
before the stores are committed), and the topic is read ``read_committed``: a record of an
aborted transaction is never seen, so no rebuilt state is ahead of the committed offsets.

A record without ``kind`` (one full state per checkpoint: a development version's,
before the first release) is refused, as its state format is, skipped and counted.
"""

from __future__ import annotations

import logging
import time
import uuid
import zlib

import orjson

from streamcal.stream.kafka import clients
from streamcal.stream.kafka.port import TopicExists, TopicPartition
from streamcal.stream.state.checkpoint import seal, unseal
from streamcal.stream.state.errors import CheckpointError

__all__ = ["StateTopic", "Plan"]

log = logging.getLogger(__name__)

_DELTA, _SNAPSHOT, _FULL = "delta", "snapshot", "full"
_DATA_END = b"~"  # store keys below it are data (the snapshot key starts with it)
_MIN_REFRESH = 256 * 1024  # bytes of a roll's slice per checkpoint, at least
_FIRST_WINDOW = 2000  # records of a partition's tail read first (then x4)
_FIRST_ROLL = 30  # checkpoints a new writer's first roll takes, at least its own pace


class _Writer:
    """What a writer keeps of one unit between checkpoints (memory only: a new writer, a
    new epoch, a new roll)."""

    __slots__ = ("epoch", "roll_start", "rolled", "cursor", "last_snapshot", "written",
                 "obsolete")  # fmt: skip

    def __init__(self, obsolete=()):
        self.epoch = uuid.uuid4().hex[:16]
        self.roll_start = None  # the seq the current roll began at
        self.rolled = None  # the start of the newest completed roll
        self.cursor = b""  # the next store key the roll refreshes
        self.last_snapshot = float("-inf")
        self.written: list = []  # (seq, kind, record keys) of this epoch
        self.obsolete: list = list(obsolete)  # keys of older epochs, deleted once we can


class Plan:
    """How a unit is rebuilt from the topic: ``state`` (its authenticated snapshot) and
    ``rebuild(store)``, which applies the needed records to an empty store."""

    def __init__(self, topic, unit, state: dict, sealed: bytes, deltas=()):
        self.topic, self.unit = topic, unit
        self.state = state
        self.sealed = sealed
        self.deltas = list(deltas)  # (seq, id, [(partition, offset) per part]) in order

    def rebuild(self, store) -> None:
        """Apply the plan's deltas to ``store`` (empty) and commit them with the snapshot."""
        if self.deltas:
            self.topic._apply(self, store)


class StateTopic:
    """Write units' changelogs through ``outbox`` (the processor's producer) and rebuild
    units from them with a consumer of its own."""

    def __init__(self, client_settings: dict, topic: str, group: str, key: bytes, outbox,
                 chunk_bytes: int = 512 * 1024, snapshot_interval: float = 30.0,
                 read_committed: bool = False):  # fmt: skip
        self.settings = client_settings
        self.read_committed = read_committed  # exactly-once: never read aborted records
        self._reading = {"isolation_level": "read_committed"} if read_committed else {}
        self.topic, self.group, self.key = topic, group, key
        self.outbox = outbox
        self.chunk_bytes = max(1024, int(chunk_bytes))
        self.snapshot_interval = snapshot_interval
        self.partitions = 1
        self._writers: dict = {}  # unit -> _Writer
        self._known: dict = {}  # unit -> record keys found by the last read (tombstoned later)
        self.bytes_written = 0  # value bytes sent, for the benchmarks and the logs
        self.rejected = 0  # records skipped: they failed authentication
        self.rejected_by_unit: dict = {}  # unit -> such records, until the unit takes them

    @classmethod
    def of(cls, config, key: bytes, outbox) -> StateTopic:
        """The state topic of a ``ProcessorConfig`` (``--state-topic`` of its group, read
        and written with its client), its records authenticated with ``key``."""
        return cls(clients.settings(config), config.state_topic, config.group_id, key, outbox,
                   chunk_bytes=config.state_chunk_bytes,
                   snapshot_interval=config.snapshot_interval,
                   read_committed=config.exactly_once)  # fmt: skip

    def create(self, partitions: int = 1) -> None:
        """Create the topic unless it exists (on Apache Kafka, better created beforehand
        with cleanup.policy=compact: see docs/deploy.md); learn its partitions."""
        admin = clients.admin(self.settings)
        try:
            if self.topic not in admin.list_topics():
                admin.create_topic(self.topic, partitions, 1)
        except TopicExists:
            pass
        finally:
            admin.close()
        consumer = clients.consumer(self.settings)
        try:
            deadline = time.monotonic() + 30
            while not consumer.partitions_for_topic(self.topic):
                if time.monotonic() > deadline:
                    raise CheckpointError(f"state topic {self.topic!r}: no partitions found")
                consumer.topics()
                time.sleep(0.05)
            self.partitions = len(consumer.partitions_for_topic(self.topic))
        finally:
            consumer.close()

    def partition_of(self, unit) -> int:
        """The partition holding every record of ``unit`` (in write order)."""
        return zlib.crc32(f"{self.group}/{unit}".encode()) % self.partitions

    def _record_key(self, unit, epoch, kind, seq, part) -> bytes:
        return f"{self.group}/{unit}/{epoch}/{kind}/{seq}/{part}".encode()

    # ------------------------------------------------------------------ writing
    def forget(self, unit) -> None:
        """Stop writing ``unit`` (released): another writer, another epoch, takes it."""
        self._writers.pop(unit, None)

    def save(self, unit, state: dict, changes: dict, store, snapshot: bool = False,
             held: int = 0) -> None:  # fmt: skip
        """Send the records of ``unit``'s checkpoint ``state["checkpoints"]``: the delta of
        ``changes`` with the roll's next slice of ``store`` (as committed, before or after
        ``changes`` are: the slice is applied before them), and the
        snapshot ``state`` when due (or ``snapshot``: the writer's last checkpoint), once
        a roll has completed. ``held``: about how many bytes the store holds. Delivered
        once the outbox is flushed."""
        w = self._writers.get(unit)
        if w is None:
            w = self._writers[unit] = _Writer(self._known.pop(unit, ()))
        seq = state["checkpoints"]
        if w.roll_start is None:
            w.roll_start, w.cursor = seq, b""
        budget = max(_MIN_REFRESH, sum(len(k) + len(v or b"") for k, v in changes.items()))
        if w.rolled is None:
            # A new writer (a unit that just moved here) has no snapshot of its own until
            # its first roll is done: that one goes in about _FIRST_ROLL checkpoints.
            budget = max(budget, held // _FIRST_ROLL)
        refresh, w.cursor = _slice(store, w.cursor, budget)
        start, done = w.roll_start, w.cursor is None
        payload = {"unit": unit, "epoch": w.epoch, "seq": seq, "roll_start": start,
                   "roll_done": done, "refresh": refresh, "changes": changes}  # fmt: skip
        keys = self._send(unit, w.epoch, _DELTA, seq, payload, {"roll": [start, done]})
        w.written.append((seq, _DELTA, keys))
        if done:
            w.rolled, w.roll_start = start, None
        now = time.monotonic()
        due = snapshot or now - w.last_snapshot >= self.snapshot_interval
        if w.rolled is not None and due:
            w.last_snapshot = now
            covered = sorted([t, p, o] for t, p, o in state["offsets"])
            full = {**state, "changelog_epoch": w.epoch}
            keys = self._send(unit, w.epoch, _SNAPSHOT, seq, full, {"offsets": covered})
            w.written.append((seq, _SNAPSHOT, keys))
            self._delete_before(unit, w)

    def _send(self, unit, epoch, kind, seq, payload, extra: dict) -> list:
        data = seal(self.key, payload)
        size = self.chunk_bytes
        chunks = [data[i : i + size] for i in range(0, len(data), size)] or [b""]
        ident = uuid.uuid4().hex
        partition = self.partition_of(unit)
        keys = []
        for i, chunk in enumerate(chunks):
            header = {"group": self.group, "unit": unit, "epoch": epoch, "kind": kind,
                      "seq": seq, "id": ident, "part": i, "parts": len(chunks),
                      **extra}  # fmt: skip
            key = self._record_key(unit, epoch, kind, seq, i)
            value = orjson.dumps(header) + b"\n" + chunk
            self.outbox.send(self.topic, key, value, partition)
            self.bytes_written += len(value)
            keys.append(key)
        return keys

    def _delete_before(self, unit, w: _Writer) -> None:
        """Tombstones for what the newest snapshot no longer needs: this epoch's records
        before its newest completed roll, older snapshots, and older epochs' records."""
        partition = self.partition_of(unit)
        keep, last = [], w.written[-1]
        for seq, kind, keys in w.written:
            if (kind == _DELTA and seq >= w.rolled) or (seq, kind, keys) is last:
                keep.append((seq, kind, keys))
                continue
            for key in keys:
                self.outbox.send(self.topic, key, None, partition)
        w.written = keep
        for key in w.obsolete:
            self.outbox.send(self.topic, key, None, partition)
        w.obsolete = []

    # ------------------------------------------------------------------ reading
    def restore(self, units, timeout: float = 60.0) -> dict:
        """``{unit: [Plan, ...]}``: for each of ``units`` with a snapshot in the topic, the
        plans of its authenticated snapshots that can be rebuilt, the one covering the
        most input first. Records that fail authentication are skipped (and logged)."""
        found = self._read_plans(list(units), timeout)
        return {u: plans for u, plans in found.items() if plans}

    def _read_plans(self, units: list, timeout: float) -> dict:
        if not units:
            return {}
        consumer = clients.consumer(self.settings, **self._reading)
        try:
            deadline = time.monotonic() + timeout
            while not consumer.partitions_for_topic(self.topic):
                if time.monotonic() > deadline:
                    return {}
                consumer.topics()
                time.sleep(0.05)
            self.partitions = len(consumer.partitions_for_topic(self.topic))
            by_partition: dict = {}
            for u in units:
                by_partition.setdefault(self.partition_of(u), []).append(u)
            plans = {}
            for p, its_units in sorted(by_partition.items()):
                tp = TopicPartition(self.topic, p)
                plans.update(self._plans_in(consumer, tp, its_units, deadline))
            return plans
        finally:
            consumer.close()

    def _plans_in(self, consumer, tp, units: list, deadline: float) -> dict:
        """The plans of ``units`` from partition ``tp``: read its tail, widening the window
        until each unit's best snapshot in it can be rebuilt from records inside it (or the
        window is the whole log)."""
        begin, end = _bounds(consumer, tp, deadline, self.read_committed)
        window = _FIRST_WINDOW
        while True:
            start = max(begin, end - window)
            index = self._scan(consumer, tp, start, end, units, deadline)
            found = {u: self._plans(u, index.get(u, {})) for u in units}
            if start <= begin or all(best for _, best in found.values()):
                break
            window *= 4
        for u in units:
            # Deleted once the new writer has a rebuildable snapshot (``_delete_before``).
            self._known[u] = list(index.get(u, {}).get("keys", ()))
        return {u: plans for u, (plans, _) in found.items()}

    def _scan(self, consumer, tp, start: int, end: int, units, deadline: float) -> dict:
        """Headers of ``units``' records in ``[start, end)`` of ``tp`` (snapshot and full
        chunks kept, delta chunks only located): ``{unit: {...}}``."""
        consumer.seek(tp, start)
        prefixes = {f"{self.group}/{u}/".encode(): u for u in units}
        index: dict = {}
        while consumer.position(tp) < end:
            if time.monotonic() > deadline:
                raise CheckpointError(f"state topic {self.topic!r}: not read to its end in time")
            for recs in consumer.poll(timeout_ms=200).values():
                for rec in recs:
                    if rec.offset >= end or rec.key is None or rec.value is None:
                        continue
                    unit = _unit_of(rec.key, prefixes)
                    if unit is None:
                        continue
                    self._take(rec, index.setdefault(unit, {"keys": [], "groups": {}}))
        return index

    def _take(self, rec, found: dict) -> None:
        head, sep, chunk = rec.value.partition(b"\n")
        try:
            h = orjson.loads(head) if sep else None
            ident, i, n = h["id"], int(h["part"]), int(h["parts"])
            kind = h.get("kind", _FULL)
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            # Not authenticated data: skipped; a plan made of it fails unsealing.
            log.warning("state topic: unreadable record at %s:%d", rec.partition, rec.offset)
            return
        if h.get("group") != self.group:
            return
        found["keys"].append(rec.key)
        # The first record of an id (and of a part) wins: a writer's ids and epochs are
        # random, so a record written later under them is a re-send or a forgery.
        group = found["groups"].setdefault(
            ident, {"header": h, "kind": kind, "parts": {}, "n": n, "first": rec.offset}
        )
        group["parts"].setdefault(i, chunk if kind != _DELTA else (rec.partition, rec.offset))
        group["last"] = rec.offset

    def _plans(self, unit, found: dict) -> tuple[list, bool]:
        """The plans of ``unit`` from what ``_scan`` found, best first, and whether the best
        snapshot read has one (else a better one lacked records: the read widens)."""
        groups = [g for g in found.get("groups", {}).values()
                  if all(k in g["parts"] for k in range(g["n"]))]  # fmt: skip
        deltas: dict = {}  # (epoch, seq) -> the first complete delta group
        for g in groups:
            if g["kind"] == _DELTA:
                h = g["header"]
                deltas.setdefault((h.get("epoch"), h.get("seq")), g)
        candidates = []
        for g in groups:
            if g["kind"] not in (_SNAPSHOT, _FULL):
                continue
            data = b"".join(g["parts"][k] for k in range(g["n"]))
            where = f"state-topic checkpoint of unit {unit} ({self.topic!r})"
            try:
                state = unseal(self.key, data, where)
            except CheckpointError as exc:
                self.rejected += 1
                self.rejected_by_unit[unit] = self.rejected_by_unit.get(unit, 0) + 1
                log.warning("state topic: skipping the record at %s:%d: %s",
                            self.topic, g["first"], exc,
                            extra={"event": "rejected_state", "unit": unit})  # fmt: skip
                continue
            if state.get("unit") != unit:
                continue
            candidates.append((_covered(state), g["last"], g, state, data))
        candidates.sort(key=lambda c: c[:2], reverse=True)
        plans, best = [], True
        for *_, state, data in candidates:
            chain = _chain(deltas, state.get("changelog_epoch"), state.get("checkpoints"))
            if chain is not None:
                located = [(t, d["header"]["id"], [d["parts"][k] for k in range(d["n"])])
                           for t, d in chain]  # fmt: skip
                plans.append(Plan(self, unit, state, data, located))
            elif not plans:
                best = False  # the best snapshot lacks records: read further back
        return plans, best

    def _apply(self, plan: Plan, store) -> None:
        """Read the plan's delta records (in write order, one partition) and apply them."""
        wanted = {}  # offset -> (delta index, part)
        for i, (_, _, parts) in enumerate(plan.deltas):
            for k, (_, offset) in enumerate(parts):
                wanted[offset] = (i, k)
        tp = TopicPartition(self.topic, plan.deltas[0][2][0][0])
        consumer = clients.consumer(self.settings, **self._reading)
        try:
            consumer.assign([tp])
            consumer.seek(tp, min(wanted))
            last = max(wanted)
            chunks: dict = {}
            applied = 0
            deadline = time.monotonic() + 300
            while applied < len(plan.deltas):
                if time.monotonic() > deadline:
                    raise CheckpointError(f"state topic {self.topic!r}: rebuild timed out")
                for recs in consumer.poll(timeout_ms=200).values():
                    for rec in recs:
                        if rec.offset > last or rec.offset not in wanted:
                            continue
                        i, k = wanted[rec.offset]
                        chunks.setdefault(i, {})[k] = rec.value.partition(b"\n")[2]
                        while applied in chunks and len(chunks[applied]) == len(
                            plan.deltas[applied][2]
                        ):
                            parts = chunks.pop(applied)
                            self._apply_delta(plan, applied, b"".join(
                                parts[k] for k in range(len(parts))), store)  # fmt: skip
                            applied += 1
        finally:
            consumer.close()

    def _apply_delta(self, plan: Plan, i: int, data: bytes, store) -> None:
        seq = plan.deltas[i][0]
        where = f"state-topic delta {seq} of unit {plan.unit} ({self.topic!r})"
        delta = unseal(self.key, data, where)
        if (delta.get("unit"), delta.get("epoch"), delta.get("seq")) != (
            plan.unit, plan.state.get("changelog_epoch"), seq,
        ):  # fmt: skip
            raise CheckpointError(f"{where} does not belong to the plan; refusing it")
        for k, v in delta["refresh"]:
            store.put(k, v)
        for k, v in delta["changes"].items():
            if v is None:
                store.delete(k)
            else:
                store.put(k, v)
        if len(store.changes()) > 200_000:  # keep the overlay small on long rebuilds
            store.commit()


def _bounds(consumer, tp, deadline: float, read_committed: bool = False) -> tuple[int, int]:
    """The first and the next offset of ``tp``. The end is the highwater a fetch reports
    (tansu answers ListOffsets with the base of the last batch + 1, short of its end); for
    a ``read_committed`` consumer, the last stable offset (its position stops there while
    a writer's transaction is open), which ListOffsets answers."""
    consumer.assign([tp])
    begin = consumer.beginning_offsets([tp]).get(tp, 0)
    approx = consumer.last_position(tp)
    if approx <= begin or read_committed:
        return begin, max(begin, approx)
    consumer.seek(tp, approx - 1)
    while consumer.highwater(tp) is None:
        if time.monotonic() > deadline:
            raise CheckpointError(f"state topic {tp.topic!r}: no answer from the broker in time")
        consumer.poll(timeout_ms=200)
    return begin, max(approx, consumer.highwater(tp))


def _chain(deltas: dict, epoch, seq):
    """The deltas ``[(seq, group)]`` of ``epoch`` from the start of the newest roll that
    completed at or before ``seq`` through ``seq``, all present; else None."""
    if epoch is None or seq is None or (epoch, seq) not in deltas:
        return None
    s = seq
    while (epoch, s) in deltas:
        start, done = deltas[(epoch, s)]["header"].get("roll") or (None, False)
        if done and start is not None:
            if all((epoch, t) in deltas for t in range(start, seq + 1)):
                return [(t, deltas[(epoch, t)]) for t in range(start, seq + 1)]
            return None
        s -= 1
    return None


def _slice(store, cursor: bytes, budget: int) -> tuple[list, bytes | None]:
    """The committed data entries of ``store`` from ``cursor`` (key order) up to about
    ``budget`` bytes, and the cursor after them (None once the end is reached)."""
    out, size = [], 0
    for k, v in store.committed_items(cursor, _DATA_END):
        if size >= budget:
            return out, k
        out.append((k, v))
        size += len(k) + len(v)
    return out, None


def _unit_of(key: bytes, prefixes: dict):
    for prefix, unit in prefixes.items():
        if key.startswith(prefix):
            return unit
    return None


def _covered(state: dict) -> int:
    """How much input a unit's state covers: the sum of its next offsets."""
    return sum(int(o) for _, _, o in state["offsets"])
