"""The state topic as a changelog (tansu): a unit rebuilt from it has exactly the store and
the state of the snapshot it was rebuilt from, whatever the rolls and the deletes between;
each checkpoint sends what changed, not what waits; older records are deleted once they are
not needed; a read looks at the tail of the topic, not its history."""

from __future__ import annotations

import random

import orjson
import pytest

from streamcal.stream.config import ProcessorConfig
from streamcal.stream.kafka import clients
from streamcal.stream.state import topic as topic_module
from streamcal.stream.state.kv import KVStore
from streamcal.stream.state.topic import StateTopic
from streamcal.stream.state.units import UnitStates
from streamcal.stream.unit import TopicRank
from tests._fakes import Record
from tests._kafka_helpers import CHECKPOINT_KEY, read_topic

UNIT = 2


def _config(bootstrap, topics, **extra):
    return ProcessorConfig.build(
        bootstrap_servers=bootstrap, events_topic=topics["events"], labels_topic=topics["labels"],
        scope="partition", state_topic=topics["events"] + "-state", group_id=topics["group"],
        checkpoint_key=CHECKPOINT_KEY, metrics_file="none", window=50, producer_process=False,
        model="gnb", **extra,
    )  # fmt: skip


def _stream(n, seed, delay=40):
    """Events and labels (labels ``delay`` events later on average, in random order)."""
    rng = random.Random(seed)
    out, waiting = [], []
    for i in range(n):
        x = {f"f{j}": rng.gauss(0, 1) for j in range(5)}
        out.append(("ev", {"id": f"e{i}", "features": x}))
        waiting.append((f"e{i}", int(x["f0"] > 0)))
        while waiting and rng.random() < len(waiting) / delay:
            eid, y = waiting.pop(rng.randrange(len(waiting)))
            out.append(("lab", {"id": eid, "label": y}))
    return out


def _feed(unit, items, start):
    for t, (topic, value) in enumerate(items, start):
        rank = TopicRank.EVENT if topic == "ev" else TopicRank.LABEL
        unit.handle(rank, Record(topic, UNIT, t, 1000 * t, value["id"].encode(),
                                 orjson.dumps(value)))  # fmt: skip


def _holder(config):
    states = UnitStates(config, config.key_bytes())
    outbox = clients.outbox(config)
    states.open_topic(outbox)
    states.adopt([UNIT])
    unit = states.held[UNIT]
    unit.send = lambda *a: None
    return states, outbox, unit


def _everything(unit) -> tuple:
    """What must come back: the waiting entries and finished ids, the counters, and the
    store's data entries (the exact bytes)."""
    data = unit.store.items(b"", b"~")
    return unit.export_waiting(), unit.pending.to_state(), unit.counts, data


# rolls over many checkpoints, or one; with a label horizon (labels attached to waiting
# events, events matured in order: a record is a second)
@pytest.mark.parametrize("refresh, horizon", [(64, None), (256 * 1024, None), (64, "30s")])
def test_a_unit_rebuilt_from_the_changelog_equals_the_one_saved(kafka_broker, unique_topics,
                                                                 monkeypatch, refresh,
                                                                 horizon):  # fmt: skip
    monkeypatch.setattr(topic_module, "_MIN_REFRESH", refresh)
    config = _config(kafka_broker, unique_topics, snapshot_interval=3600, label_horizon=horizon)
    items = _stream(1200, seed=1)
    states, outbox, unit = _holder(config)
    step = 60
    for i in range(0, len(items), step):
        _feed(unit, items[i : i + step], i)
        states.changed.add(UNIT)
        states.save_changed(outbox, final=i + step >= len(items))
    outbox.flush()
    want = _everything(unit)
    assert unit.pending.events > 10 and unit.pending.finished > 500
    if horizon is not None:
        assert unit.pending.matured > 1000 and any(v[0] == ord("A") for _, v in want[3])
    assert states.topic.bytes_written > 0
    states.close()
    outbox.close()

    # Another instance, no local state: the unit comes from the changelog alone.
    again, outbox2, rebuilt = _holder(config)
    assert _everything(rebuilt) == want
    # ... and goes on as the original would have.
    more = _stream(300, seed=2)
    _feed(rebuilt, more, 10_000)
    assert rebuilt.pending.events > 0
    again.close()
    outbox2.close()


def test_checkpoint_bytes_follow_the_changes_not_what_waits(kafka_broker, unique_topics):
    """With 3,000 waiting, a checkpoint after 10 new events sends a few KB (the delta, the
    roll's minimum slice), not the store."""
    config = _config(kafka_broker, unique_topics, snapshot_interval=3600, pending_ttl=1e9)
    states, outbox, unit = _holder(config)
    items = [("ev", {"id": f"e{i}", "features": {f"f{j}": float(i + j) for j in range(20)}})
             for i in range(3000)]  # fmt: skip
    _feed(unit, items, 0)
    states.changed.add(UNIT)
    states.save_changed(outbox)
    big = states.topic.bytes_written  # the first checkpoint: all of it (one roll)
    sizes = []
    for k in range(3):
        before = states.topic.bytes_written
        extra = [("ev", {"id": f"x{k}-{i}", "features": {"f0": 1.0}}) for i in range(10)]
        _feed(unit, extra, 5000 + 10 * k)
        states.changed.add(UNIT)
        states.save_changed(outbox)
        sizes.append(states.topic.bytes_written - before)
    assert unit.pending.events == 3030
    assert big > 3000 * 180  # the whole store went once
    # each checkpoint: the 10 changes plus a refresh slice of at most the floor
    assert all(s < topic_module._MIN_REFRESH * 1.2 + 20_000 for s in sizes), sizes
    states.close()
    outbox.close()


def test_old_records_are_deleted_once_not_needed(kafka_broker, unique_topics, monkeypatch):
    """After a newer rebuildable snapshot, every earlier record of the unit gets a
    tombstone but those the snapshot needs (its roll and the deltas after it)."""
    monkeypatch.setattr(topic_module, "_MIN_REFRESH", 64)
    config = _config(kafka_broker, unique_topics, snapshot_interval=0.001)
    items = _stream(600, seed=3)
    states, outbox, unit = _holder(config)
    for i in range(0, len(items), 50):
        _feed(unit, items[i : i + 50], i)
        states.changed.add(UNIT)
        states.save_changed(outbox)
    outbox.flush()
    recs = read_topic(kafka_broker, config.state_topic)
    deleted = {r.key for r in recs if r.value is None}
    live = [r for r in recs if r.value is not None and r.key not in deleted]
    assert deleted and len(live) < len(recs) - len(deleted)
    # What is left rebuilds the unit: a compacted topic would keep exactly these.
    kept = {r.key for r in live}
    plans = StateTopic.of(config, config.key_bytes(), None).restore([UNIT])[UNIT]
    plan = plans[0]
    needed = {plan.topic._record_key(UNIT, plan.state["changelog_epoch"], "delta", seq, k)
              for seq, _, parts in plan.deltas for k in range(len(parts))}  # fmt: skip
    assert needed <= kept
    states.close()
    outbox.close()


def test_a_read_looks_at_the_tail_not_the_history(kafka_broker, unique_topics, monkeypatch):
    """Many snapshots later (tansu keeps every record), finding the newest plan reads a
    window at the end of the topic, not its beginning."""
    monkeypatch.setattr(topic_module, "_FIRST_WINDOW", 20)
    config = _config(kafka_broker, unique_topics, snapshot_interval=0.001)
    states, outbox, unit = _holder(config)
    items = _stream(3000, seed=4)
    for i in range(0, len(items), 25):
        _feed(unit, items[i : i + 25], i)
        states.changed.add(UNIT)
        states.save_changed(outbox)
    outbox.flush()
    total = len(read_topic(kafka_broker, config.state_topic))
    seen = []
    real_scan = StateTopic._scan

    def counting_scan(self, consumer, tp, start, end, units, deadline):
        seen.append(end - start)
        return real_scan(self, consumer, tp, start, end, units, deadline)

    monkeypatch.setattr(StateTopic, "_scan", counting_scan)
    reader = StateTopic.of(config, config.key_bytes(), None)
    plans = reader.restore([UNIT])[UNIT]
    assert plans and plans[0].state["checkpoints"] == unit.checkpoints
    assert total > 300 and max(seen) < total / 4, (seen, total)
    states.close()
    outbox.close()


def test_a_store_is_replaced_only_once_its_rebuild_succeeded(tmp_path):
    """A rebuild that fails (a forged record under a needed key) leaves the local store."""
    from streamcal.stream.state.errors import CheckpointError
    from streamcal.stream.state.units import _rebuilt

    store = KVStore(tmp_path / "store")
    store.put(b"ia", b"local")
    store.commit()

    class Failing:
        def rebuild(self, fresh):
            fresh.put(b"ib", b"half")
            raise CheckpointError("forged")

    with pytest.raises(CheckpointError):
        _rebuilt(store, Failing())
    store.close()
    again = KVStore(tmp_path / "store")
    assert again.get(b"ia") == b"local" and again.get(b"ib") is None
    assert not (tmp_path / "store.rebuild").exists()
    again.close()


def test_a_tampered_local_state_is_skipped_for_the_state_topic(kafka_broker, unique_topics,
                                                                tmp_path):  # fmt: skip
    """With a state topic, a local snapshot that fails authentication is passed over (and
    counted): the unit comes from the topic's authenticated snapshot, never from it."""
    from streamcal.stream.state.units import SNAPSHOT

    config = _config(kafka_broker, unique_topics, state_dir=str(tmp_path / "state"))
    states, outbox, unit = _holder(config)
    _feed(unit, _stream(300, seed=5), 0)
    states.changed.add(UNIT)
    states.save_changed(outbox, final=True)
    outbox.flush()
    want = _everything(unit)
    states.close()
    outbox.close()
    store = KVStore(tmp_path / "state" / f"unit-{UNIT}" / "store")
    data = bytearray(store.get(SNAPSHOT))
    data[-5] ^= 1
    store.commit({SNAPSHOT: bytes(data)})
    store.close()

    again, outbox2, restored = _holder(config)
    assert _everything(restored)[:2] == want[:2]  # the waiting entries and counters
    assert restored.counts["rejected_state_records"] == 1
    again.close()
    outbox2.close()


def test_a_state_topic_record_of_a_development_version_is_refused(kafka_broker, unique_topics):
    """A full checkpoint record of a development version before the first release (state
    format 5, the header without ``kind``) is skipped and counted, never taken: the unit
    starts afresh."""
    import hashlib
    import hmac
    import pickle

    from streamcal.stream.state.checkpoint import MAGIC
    from tests._kafka_helpers import produce

    config = _config(kafka_broker, unique_topics)
    state = {"unit": UNIT, "offsets": [["ev", UNIT, 300]], "counts": {"events": 300}}
    payload = pickle.dumps({"version": 5, "state": state}, protocol=5)
    sealed = MAGIC + hmac.new(config.key_bytes(), MAGIC + payload, hashlib.sha256).digest()
    sealed += payload
    header = {"group": config.group_id, "unit": UNIT, "id": "old", "part": 0, "parts": 1,
              "offsets": state["offsets"]}  # fmt: skip
    value = orjson.dumps(header) + b"\n" + sealed
    states = UnitStates(config, config.key_bytes())
    outbox = clients.outbox(config)
    states.open_topic(outbox)  # creates the topic: the record goes where the unit's are
    produce(kafka_broker, [(config.state_topic, f"{config.group_id}/{UNIT}/0", value, None)],
            partition=states.topic.partition_of(UNIT))  # fmt: skip
    states.adopt([UNIT])
    unit = states.held[UNIT]
    assert unit.counts["events"] == 0 and unit.offsets == {}
    assert unit.counts["rejected_state_records"] == 1
    states.close()
    outbox.close()


def test_a_new_writer_s_first_roll_takes_about_thirty_checkpoints(kafka_broker, unique_topics,
                                                                  monkeypatch):  # fmt: skip
    """A unit that just came to an instance has no snapshot of its own until a roll over
    its whole store is done: however small the changes, that takes about 30 checkpoints."""
    monkeypatch.setattr(topic_module, "_MIN_REFRESH", 64)
    config = _config(kafka_broker, unique_topics, snapshot_interval=0.001, pending_ttl=1e9)
    states, outbox, unit = _holder(config)
    items = [("ev", {"id": f"e{i}", "features": {f"f{j}": float(i + j) for j in range(20)}})
             for i in range(3000)]  # fmt: skip
    _feed(unit, items, 0)
    states.changed.add(UNIT)
    states.save_changed(outbox)  # the first roll takes the store at once: it is new
    states.topic.forget(UNIT)  # as if the unit had just moved here: a new writer
    writer = None
    for k in range(60):
        _feed(unit, [("ev", {"id": f"x{k}", "features": {"f0": 1.0}})], 5000 + k)
        states.changed.add(UNIT)
        states.save_changed(outbox)
        writer = states.topic._writers[UNIT]
        if writer.rolled is not None:
            break
    assert writer.rolled is not None and 20 <= k <= 32, k
    states.close()
    outbox.close()


def test_a_unit_with_many_writes_waiting_is_checkpointed_before_its_interval(monkeypatch):
    from streamcal.stream.state import units as units_module

    monkeypatch.setattr(units_module, "COMMIT_WRITES", 100)
    config = ProcessorConfig.build(metrics_file="none", model="gnb")
    states = UnitStates(config, None)
    states.restore_global()
    unit = states.held[None]
    unit.send = lambda *a: None
    states.changed.add(None)
    _feed(unit, _stream(20, seed=7), 0)
    assert not states.full()
    _feed(unit, _stream(200, seed=8), 100)
    assert unit.store.pending_writes >= 100 and states.full()
    states.save_changed()
    assert unit.store.pending_writes == 0 and not states.full()
    states.close()
