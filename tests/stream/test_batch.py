"""A batch through the loop (issue 36 item 4): a unit that takes its records in runs
(``CalibrationUnit.handle_batch``: decoded together, the store read ahead in one
``multi_get``) does exactly what one-by-one ``handle`` does, whatever the cuts: the same
outputs in the same order (predictions bit for bit, dead letters), the same metric lines
due at the same records, the same counts and waiting entries, across checkpoints."""

from __future__ import annotations

import random

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcal.stream.config import ProcessorConfig
from streamcal.stream.messages import Rejected
from streamcal.stream.state.kv import KVStore
from streamcal.stream.unit import CalibrationUnit
from tests._fakes import Record
from tests._helpers import CHECKPOINT_KEY


def stream(n: int, seed: int) -> list:
    """``(rank, record)`` in merge order: events and their labels, some labels before
    their events, duplicates, malformed JSON, a gate's reject and a tombstone."""
    rng = random.Random(seed)
    out, t = [], 0
    for i in range(n):
        a, b = rng.gauss(0, 1), rng.gauss(0, 1)
        ev = orjson.dumps({"id": f"e{i}", "features": {"a": a, "b": b, "c": "xyz"[i % 3]}})
        lab = orjson.dumps({"id": f"e{i}", "label": a + 0.5 * rng.gauss(0, 1) > 0})
        pair = [(0, ev), (1, lab)] if rng.random() < 0.8 else [(1, lab), (0, ev)]
        if rng.random() < 0.05:
            pair.append(pair[0])  # a duplicate
        if rng.random() < 0.05:
            pair.insert(1, (rng.randrange(2), b'{"id": '))  # malformed
        if rng.random() < 0.03:
            pair.insert(1, (rng.randrange(2), Rejected("record timestamp -1 (none)", ev)))
        if rng.random() < 0.02:
            pair.insert(1, (1, None))  # a tombstone
        for rank, value in pair:
            t += rng.randrange(0, 300)
            out.append((rank, Record(("ev", "lab")[rank], 0, len(out), t, b"k", value)))
    return out


def config(**extra) -> ProcessorConfig:
    return ProcessorConfig.build(events_topic="ev", labels_topic="lab", metrics_file="none",
                                 window=30, metrics_every=7, pending_ttl=4.0, label_wait=2.0,
                                 **extra)  # fmt: skip


def run(items: list, cuts: list[int] | None, cfg, path=None) -> tuple:
    """What a unit did with ``items``: one by one (``cuts`` None) or in runs cut at
    ``cuts``; a checkpoint of the store halfway (its reads then come from disk)."""
    store = KVStore(path)
    unit = CalibrationUnit(cfg, store=store, key=b"k" * 32)
    sent, due = [], []
    unit.send = lambda topic, key, value: sent.append((topic, key, value))
    half = len(items) // 2
    if cuts is None:
        for i, (rank, rec) in enumerate(items):
            if unit.handle(rank, rec):
                due.append((i, dict(unit.counts)))
            if i + 1 == half:
                store.commit()
    else:
        bounds = sorted({0, half, len(items), *cuts})
        for lo, hi in zip(bounds, bounds[1:], strict=False):
            unit.handle_batch(items[lo:hi], due=lambda u, hi=hi: due.append(
                (_index(u, items), dict(u.counts))))  # fmt: skip
            if hi == half:
                store.commit()
    waiting = unit.export_waiting()
    unit.close()
    return sent, due, unit.counts, unit.offsets, waiting


def _index(unit, items) -> int:
    """The index in ``items`` of the record the unit has just handled."""
    (topic, partition), offset = max(unit.offsets.items(), key=lambda kv: kv[1])
    return offset - 1


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 10_000), st.lists(st.integers(0, 400), max_size=30))
def test_runs_do_what_one_by_one_does(seed, cuts):
    items = stream(150, seed)
    cfg = config()
    want = run(items, None, cfg)
    got = run(items, cuts, cfg)
    assert got[0] == want[0]  # every output, bit for bit, in order
    assert [orjson.loads(v)["id"] for t, _, v in got[0] if t == cfg.predictions_topic]
    assert want[1] and got[1:] == want[1:]  # metric lines due at the same records


def test_runs_read_the_store_ahead_with_a_state_directory(tmp_path):
    items = stream(200, 3)
    cfg = config(state_dir=str(tmp_path / "s"), checkpoint_key=CHECKPOINT_KEY)
    want = run(items, None, cfg, tmp_path / "a")
    got = run(items, list(range(0, len(items), 64)), cfg, tmp_path / "b")
    assert got == want
    assert sum(t == cfg.dead_letter_topic for t, _, _ in got[0]) > 0


def test_prefetch_reads_committed_values_and_yields_to_writes():
    store = KVStore()
    store.put(b"a", b"1")
    store.put(b"b", b"2")
    store.commit()
    store.put(b"b", b"3")  # written since the commit: the write is what a get sees
    store.prefetch([b"a", b"b", b"c"])
    assert [store.get(k) for k in (b"a", b"b", b"c")] == [b"1", b"3", None]
    store.delete(b"a")
    store.put(b"c", b"4")
    assert [store.get(k) for k in (b"a", b"c")] == [None, b"4"]
    store.commit()  # the committed values change: what was read ahead is dropped
    assert [store.get(k) for k in (b"a", b"b", b"c")] == [None, b"3", b"4"]
