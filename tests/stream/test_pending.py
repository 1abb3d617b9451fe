"""What waits, on disk: the store's atomic commits, its FIFO sequences, the packed
features, and ``Pending`` against a plain in-memory model of the same rules, with commits
and crashes (the store reopened from its last commit) at random points."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import OrderedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcal.stream.packing import FeatureCodec
from streamcal.stream.pending import (
    ABSENT,
    EVENT,
    EVICTED,
    EXPIRED,
    JOINED,
    LABEL,
    Pending,
    TamperedEntry,
    split,
)
from streamcal.stream.state.fifo import Fifo
from streamcal.stream.state.kv import KVStore
from tests._helpers import examples


# ---------------------------------------------------------------- the store
@given(st.lists(st.tuples(st.sampled_from("pdc"), st.integers(0, 9), st.binary(max_size=4))))
@settings(max_examples=examples(60), deadline=None)
def test_store_reads_its_writes_and_keeps_only_commits(ops):
    """A dict model: reads see uncommitted writes; reopening gives the last commit."""
    path = tempfile.mkdtemp()
    store = KVStore(path)
    live, committed = {}, {}
    for op, k, v in ops:
        key = b"k%d" % k
        if op == "p":
            store.put(key, v)
            live[key] = v
        elif op == "d":
            store.delete(key)
            live.pop(key, None)
        else:
            store.commit({b"~meta": b"%d" % len(committed)})
            committed = dict(live)
        assert all(store.get(b"k%d" % i) == live.get(b"k%d" % i) for i in range(10))
    store.close()
    again = KVStore(path)
    assert {k: again.get(k) for k in committed} == committed
    assert again.items(b"k", b"l") == sorted(committed.items())
    again.close()
    shutil.rmtree(path)


_WRITER = """
import sys
from streamcal.stream.state.kv import KVStore
store = KVStore(sys.argv[1])
i = 0
while True:
    for _ in range(500):
        store.put(b"k%08d" % i, b"v" * 200)
        store.delete(b"k%08d" % (i - 300)) if i >= 300 else None
        i += 1
    store.commit({b"~meta": str(i).encode()})
    if i == 5000:
        print("ready", flush=True)
"""


def test_a_kill_9_leaves_exactly_one_commit(tmp_path):
    """A writer killed with SIGKILL mid-interval: the store holds what one commit wrote,
    the entries matching its meta record (never data ahead of it)."""
    path = tmp_path / "store"
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"ready"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    store = KVStore(path)
    n = int(store.get(b"~meta"))
    keys = [k for k, _ in store.items(b"k", b"l")]
    assert n >= 5000 and keys == [b"k%08d" % i for i in range(n - 300, n)]
    store.close()


def test_a_reopened_store_has_the_shared_cache(tmp_path):
    """A store opened again (a restart) reads through the process's shared block cache, as
    a new one does, not through the options saved in its directory (an 8 MiB cache of its
    own, which made each get at 10^7 entries re-read index blocks: 85 µs instead of 13)."""
    from streamcal.stream.state.kv import memory

    store = KVStore(tmp_path / "store")
    store.put(b"a", b"1")
    store.commit()
    store.close()
    again = KVStore(tmp_path / "store")
    capacity = again._db.property_value("rocksdb.block-cache-capacity")
    assert again.get(b"a") == b"1" and int(capacity) == memory()
    again.close()


def test_a_store_that_cannot_be_opened_names_its_directory(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(OSError, match=str(blocker / "store")):
        KVStore(blocker / "store")


# ---------------------------------------------------------------- FIFO
@given(st.lists(st.tuples(st.sampled_from("prfc"), st.integers(0, 50))))
@settings(max_examples=examples(80), deadline=None)
def test_fifo_first_is_the_oldest_entry_left(ops):
    """Pushes, removals anywhere, pops from the front and commits: ``first`` is always the
    oldest entry left, also across commits (iterator) and with many holes."""
    store = KVStore()
    q = Fifo(store, b"q")
    model: OrderedDict = OrderedDict()
    for op, n in ops:
        if op == "p":
            for _ in range(n % 12 + 1):
                seq = q.push(b"v%d" % q.tail)
                model[seq] = b"v%d" % seq
        elif op == "r" and model:
            seq = list(model)[n % len(model)]
            q.remove(seq)
            del model[seq]
        elif op == "f" and model:
            seq, value = q.first()
            assert (seq, value) == next(iter(model.items()))
            q.remove(seq)
            del model[seq]
        elif op == "c":
            store.commit()
        assert q.first() == (next(iter(model.items())) if model else None)
    store.close()


# ---------------------------------------------------------------- packed features
feature_values = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-(2**60), 2**60),
)


@given(st.lists(st.dictionaries(st.text(min_size=1, max_size=8), feature_values, max_size=6),
                min_size=1, max_size=8))  # fmt: skip
@settings(max_examples=examples(100), deadline=None)
def test_features_round_trip_exactly(dicts):
    """Names, order, values and types (an int stays an int) come back, also from a codec
    made again from the store (the names lists are persisted)."""
    store = KVStore()
    codec = FeatureCodec(store, max_schemas=3)  # some dicts go the JSON way
    packed = [codec.pack(x) for x in dicts]
    store.commit()
    for c in (codec, FeatureCodec(store, max_schemas=3)):
        for x, data in zip(dicts, packed, strict=True):
            y, end = c.unpack(data, 0)
            assert end == len(data)
            assert list(y.items()) == list(x.items())
            assert [type(v) for v in y.values()] == [type(v) for v in x.values()]
    store.close()


def test_twenty_numbers_take_eight_bytes_each():
    codec = FeatureCodec(KVStore())
    x = {f"f{i}": i / 7 for i in range(20)}
    assert len(codec.pack(x)) == 5 + 8 * 20
    assert len(codec.pack({**x, "f3": 3})) == 5 + 8 * 20 + 3  # an int: a 3-byte mask


# ---------------------------------------------------------------- Pending
class Model:
    """The rules of ``Pending`` in plain Python: dicts in insertion order."""

    def __init__(self, ttl, label_ttl, max_bytes, max_events, window):
        self.ttl, self.label_ttl, self.max_bytes = ttl, label_ttl, max_bytes
        self.max_events, self.window = max_events, window
        self.events: OrderedDict = OrderedDict()  # id -> (deadline, payload)
        self.labels: OrderedDict = OrderedDict()
        self.finished: OrderedDict = OrderedDict()  # id -> kind

    def kind(self, eid):
        if eid in self.events:
            return EVENT
        if eid in self.labels:
            return LABEL
        return self.finished.get(eid, ABSENT)

    def bytes(self, room):
        return sum(len(k) + len(v) for k, (_, v) in room.items())

    def finish(self, eid, kind):
        self.finished[eid] = kind
        if len(self.finished) > self.window:
            self.finished.popitem(last=False)

    def wait_event(self, eid, payload, now):
        self.events[eid] = (now + self.ttl, payload)
        out = []
        while self.bytes(self.events) > self.max_bytes or len(self.events) > self.max_events:
            k, _ = self.events.popitem(last=False)
            self.finish(k, EVICTED)
            out.append(k)
        return out

    def wait_label(self, eid, payload, now):
        self.labels[eid] = (now + self.label_ttl, payload)
        out = []
        while self.bytes(self.labels) > self.max_bytes:
            k, (_, v) = self.labels.popitem(last=False)
            out.append((k, v))
        return out

    def expire(self, now):
        events, labels = [], []
        while self.events and next(iter(self.events.values()))[0] < now:
            k, _ = self.events.popitem(last=False)
            self.finish(k, EXPIRED)
            events.append(k)
        while self.labels and next(iter(self.labels.values()))[0] < now:
            k, (_, v) = self.labels.popitem(last=False)
            labels.append((k, v))
        return events, labels


ops_strategy = st.lists(
    st.tuples(st.sampled_from("ELJTXCR"), st.integers(0, 15), st.integers(1, 30)),
    max_size=80,
)


@given(ops_strategy, st.integers(20, 200), st.integers(1, 8), st.integers(1, 10),
       st.booleans())  # fmt: skip
@settings(max_examples=examples(60), deadline=None)
def test_pending_matches_a_plain_model_through_commits_and_crashes(ops, max_bytes, max_events,
                                                                   window, keyed):
    """Events and labels waiting, joined, expired and evicted by bounds, commits, and
    crashes (uncommitted writes dropped, the store and the counters reopened from the last
    commit): every answer equals the model's, which is rolled back the same way."""
    import copy

    key = b"k" * 32 if keyed else None
    path = tempfile.mkdtemp()
    store = KVStore(path)
    settings_ = dict(ttl=10.0, label_ttl=4.0, max_bytes=max_bytes, max_events=max_events,
                     label_max_bytes=max_bytes, dedupe_window=window, key=key)  # fmt: skip
    room = Pending(store, **settings_)
    model = Model(10.0, 4.0, max_bytes, max_events, window)
    saved = (room.to_state(), copy.deepcopy(model))
    now = 0.0
    for op, n, size in ops:
        eid = f"id{n}"
        payload = (b"%d:" % n) * (size % 5 + 1)
        kind = model.kind(eid)
        got = room.lookup(eid)
        assert got[0] == kind
        if op == "E" and kind == ABSENT:
            assert room.wait_event(eid, payload, now) == model.wait_event(eid, payload, now)
        elif op == "L" and kind == ABSENT:
            assert room.wait_label(eid, payload, now) == model.wait_label(eid, payload, now)
        elif op == "J" and kind == EVENT:
            assert got[1] == model.events[eid][1]
            room.take_event(eid, got[2], got[1])
            del model.events[eid]
            model.finish(eid, JOINED)
        elif op == "J" and kind == LABEL:
            assert got[1] == model.labels[eid][1]
            room.take_label(eid, got[2], got[1])
            del model.labels[eid]
        elif op == "T":
            now += size / 3
            assert room.expire(now) == model.expire(now)
        elif op == "C":
            store.commit()
            saved = (room.to_state(), copy.deepcopy(model))
        elif op == "R":  # a crash: the last commit comes back
            store.close()
            store = KVStore(path)
            room = Pending(store, **settings_, state=saved[0])
            model = copy.deepcopy(saved[1])
        assert (room.events, room.labels) == (len(model.events), len(model.labels))
        assert room.event_bytes == model.bytes(model.events)
        assert room.label_bytes == model.bytes(model.labels)
        assert room.finished == len(model.finished)
    assert [(e, p) for e, _, p in room.waiting(EVENT)] == [(k, v) for k, (_, v) in
                                                           model.events.items()]  # fmt: skip
    assert room.finished_ids() == list(model.finished.items())
    store.close()
    shutil.rmtree(path)


def test_a_changed_entry_fails_authentication():
    store = KVStore()
    room = Pending(store, ttl=10, label_ttl=10, max_bytes=10**6, key=b"k" * 32)
    room.wait_event("a", b"payload", 0.0)
    value = store.get(b"ia")
    store.put(b"ia", value[:-1] + bytes([value[-1] ^ 1]))
    with pytest.raises(TamperedEntry, match="failed authentication"):
        room.lookup("a")
    store.put(b"ib", value)  # a valid entry moved to another id
    with pytest.raises(TamperedEntry):
        room.lookup("b")
    store.close()


class HorizonModel:
    """The horizon's rules of ``Pending`` in plain Python: events in order, each with its
    deadline (maturity), payload, attached label and whether it matured."""

    def __init__(self, horizon, keep, max_bytes):
        self.horizon, self.keep, self.max_bytes = horizon, keep, max_bytes
        self.events: OrderedDict = OrderedDict()  # id -> [deadline, payload, label, matured]
        self.finished: dict = {}

    def size(self, eid, e):
        stored = len(e[1]) + (0 if e[2] is None else 4 + len(e[2]))
        return len(eid) + stored

    def bytes(self):
        return sum(self.size(k, e) for k, e in self.events.items())

    def evict(self):
        """The ids pushed out, and the ``(id, label)`` of those with a label attached."""
        out, lost = [], []
        while self.bytes() > self.max_bytes:
            k, e = self.events.popitem(last=False)
            self.finished[k] = EVICTED
            out.append(k)
            lost += [(k, e[2])] if e[2] is not None else []
        return out, lost


@given(st.lists(st.tuples(st.sampled_from("EATCR"), st.integers(0, 12), st.integers(1, 30)),
                max_size=80), st.integers(60, 400), st.sampled_from([0.0, 5.0]))  # fmt: skip
@settings(max_examples=examples(60), deadline=None)
def test_pending_with_a_horizon_matures_in_event_order_through_crashes(ops, max_bytes, keep):
    """Events wait for their horizon, labels are attached, ``mature`` hands them over in
    event order (the caller joins the labelled, expires or keeps the others), bounds push
    the oldest out with its label, commits and crashes: every answer equals the model's."""
    import copy

    path = tempfile.mkdtemp()
    store = KVStore(path)
    settings_ = dict(ttl=10.0, label_ttl=4.0, max_bytes=max_bytes, dedupe_window=100,
                     key=b"k" * 32, horizon=3.0, keep=keep)  # fmt: skip
    room = Pending(store, **settings_)
    model = HorizonModel(3.0, keep, max_bytes)
    saved = (room.to_state(), copy.deepcopy(model))
    now = 0.0
    for op, n, size in ops:
        eid = f"id{n}"
        e = model.events.get(eid)
        if op == "E" and e is None and eid not in model.finished:
            model.events[eid] = [now + 3.0, b"p%d" % n * (size % 4 + 1), None, False]
            out, lost = model.evict()
            assert room.wait_event(eid, model.events[eid][1], now) == out
            assert room.lost_labels() == lost
        elif op == "A" and e is not None and e[2] is None and not e[3]:
            kind, payload, seq = room.lookup(eid)
            assert (kind, payload) == (EVENT, e[1])
            e[2] = b"label %d" % size
            out, lost = model.evict()
            assert room.attach(eid, seq, payload, e[2]) == out
            assert room.lost_labels() == lost
        elif op == "T":
            now += size / 4
            want = [(k, ev[1], ev[2]) for k, ev in model.events.items()
                    if ev[0] < now and not ev[3]]  # fmt: skip
            got = room.mature(now)
            assert [(k, *split(kind, stored)) for k, _, kind, stored in got] == want
            for k, seq, _, stored in got:
                ev = model.events[k]
                if ev[2] is not None or not keep:
                    room.take_event(k, seq, stored, JOINED if ev[2] is not None else EXPIRED)
                    model.finished[k] = JOINED if ev[2] is not None else EXPIRED
                    del model.events[k]
                else:
                    ev[3] = True
            expired = [k for k, ev in model.events.items() if ev[0] + keep < now]
            for k in expired:
                del model.events[k]
                model.finished[k] = EXPIRED
            assert room.expire(now) == (expired, [])
        elif op == "C":
            store.commit()
            saved = (room.to_state(), copy.deepcopy(model))
        elif op == "R":
            store.close()
            store = KVStore(path)
            room = Pending(store, **settings_, state=saved[0])
            model = copy.deepcopy(saved[1])
        assert room.events == len(model.events) and room.event_bytes == model.bytes()
        for k in model.finished:
            assert room.lookup(k)[0] == model.finished[k]
    store.close()
    shutil.rmtree(path)
