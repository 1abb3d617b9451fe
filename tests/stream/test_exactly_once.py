"""Exactly-once without a broker (issue 30): the transactional outbox against a stand-in
producer, the processor's side of the protocol (what is read again without output, what
offsets a transaction commits), a checkpoint's order (Kafka first, then the stores), and
the merge under read_committed. (Against noida-db: tests/e2e/test_exactly_once.py.)"""

from __future__ import annotations

import functools
import logging
from types import SimpleNamespace

import pytest
from kafka.errors import KafkaTimeoutError, ProducerFencedError

from streamcal.stream.config import ProcessorConfig
from streamcal.stream.exactly_once import ExactlyOnce
from streamcal.stream.kafka import clients, kafka_python, sink
from streamcal.stream.kafka.ordering import OrderedMerge
from streamcal.stream.state.units import SNAPSHOT, UnitStates
from tests._fakes import TP, Record
from tests._helpers import CHECKPOINT_KEY

GROUP = {"group_id": "g", "generation_id": -1, "member_id": "", "group_instance_id": None}


class FakeFuture:
    def __init__(self):
        self.errbacks = []

    def add_errback(self, fn, *args, **kwargs):  # as kafka-python's: fn(*args, exc, **kwargs)
        self.errbacks.append(functools.partial(fn, *args, **kwargs))

    def failure(self, exc):
        for fn in self.errbacks:
            fn(exc)


class FakeProducer:
    """A transactional KafkaProducer's calls, recorded; ``fail`` names a method that
    raises the exception given."""

    made: list = []

    def __init__(self, **settings):
        self.settings = settings
        self.calls: list = []
        self.futures: list = []
        self.fail: dict = {}
        self._transaction_manager = SimpleNamespace(_supports_epoch_bump=lambda: True)
        FakeProducer.made.append(self)

    def _call(self, name, *args):
        self.calls.append((name, *args))
        if name in self.fail:
            raise self.fail.pop(name)

    def init_transactions(self):
        self._call("init")

    def begin_transaction(self):
        self._call("begin")

    def send(self, topic, key=None, value=None, partition=None, timestamp_ms=None):
        self._call("send", topic, value)
        self.futures.append(FakeFuture())
        return self.futures[-1]

    def send_offsets_to_transaction(self, offsets, group):
        self._call("offsets", {(tp.topic, tp.partition): o.offset for tp, o in offsets.items()},
                   group.group_id)  # fmt: skip

    def commit_transaction(self):
        self._call("commit")

    def abort_transaction(self):
        self._call("abort")

    def flush(self, timeout=None):
        self._call("flush")

    def close(self, timeout=None):
        self._call("close")


@pytest.fixture
def producers(monkeypatch):
    FakeProducer.made = []
    # kafka-python's producer, behind the adapter (whose errors are the port's)
    monkeypatch.setattr(kafka_python, "_new_producer", lambda settings: FakeProducer(**settings))
    monkeypatch.setattr(sink.time, "sleep", lambda s: None)
    return FakeProducer.made


def _outbox() -> sink.TransactionalOutbox:
    return sink.TransactionalOutbox({"transactional_id": "streamcal-g-global"})


def test_one_transaction_per_interval_begun_by_its_first_output(producers):
    out = _outbox()
    p = producers[0]
    assert p.calls == [("init",)] and not out.open
    assert p._transaction_manager._supports_epoch_bump() is False  # never bumps itself
    out.send("preds", b"k", b"1")
    out.send("preds", b"k", b"2")
    out.commit({("ev", 0): 7, ("lab", 0): 3}, GROUP)
    offsets = ("offsets", {("ev", 0): 7, ("lab", 0): 3}, "g")
    assert p.calls[1:] == [("begin",), ("send", "preds", b"1"), ("send", "preds", b"2"),
                           offsets, ("commit",)]  # fmt: skip
    assert not out.open
    out.commit({}, GROUP)  # nothing open, no offsets: nothing to do
    out.commit({("ev", 0): 8}, GROUP)  # offsets alone (an interval of labels only)
    assert p.calls[6:] == [("begin",), ("offsets", {("ev", 0): 8}, "g"), ("commit",)]
    out.muted = True
    out.send("preds", b"k", b"3")  # outputs of input read again: committed already
    assert p.calls[-1] == ("commit",) and not out.open


def test_a_failed_send_aborts_the_transaction_and_nothing_is_resent(producers):
    out = _outbox()
    p = producers[0]
    out.send("preds", b"k", b"1")
    p.futures[0].errbacks[0](KafkaTimeoutError("broker away"))  # in the I/O thread
    out.send("preds", b"k", b"2")  # dropped: the transaction is doomed
    with pytest.raises(sink.TransactionAborted, match="broker away"):
        out.commit({("ev", 0): 9}, GROUP)
    assert [c[0] for c in p.calls] == ["init", "begin", "send", "abort"]
    out.send("preds", b"k", b"3")  # the next interval: a new transaction
    out.commit({("ev", 0): 10}, GROUP)
    assert p.calls[4:] == [("begin",), ("send", "preds", b"3"), ("offsets", {("ev", 0): 10}, "g"),
                           ("commit",)]  # fmt: skip


def test_sends_failed_by_an_abort_do_not_doom_the_next_transaction(producers):
    """An abort fails the sends still queued (kafka-python: TransactionAbortedError), and
    their errbacks may run after the next transaction began: only the transaction a send
    belonged to is doomed by its failure."""
    from kafka.errors import TransactionAbortedError

    out = _outbox()
    p = producers[0]
    out.send("preds", b"k", b"1")
    out.send("preds", b"k", b"2")
    p.futures[0].failure(KafkaTimeoutError("broker away"))
    with pytest.raises(sink.TransactionAborted, match="broker away"):
        out.commit({("ev", 0): 9}, GROUP)
    out.send("preds", b"k", b"3")  # the next transaction
    p.futures[1].failure(TransactionAbortedError())  # late, from the aborted one
    out.commit({("ev", 0): 10}, GROUP)
    assert p.calls[-2:] == [("offsets", {("ev", 0): 10}, "g"), ("commit",)]
    p.futures[2].failure(KafkaTimeoutError("after its commit"))  # ended: dooms nothing
    out.send("preds", b"k", b"4")
    out.commit({("ev", 0): 11}, GROUP)
    assert p.calls[-1] == ("commit",) and ("abort",) not in p.calls[5:]


def test_a_commit_that_fails_is_aborted_and_one_that_cannot_be_replaces_the_producer(producers):
    out = _outbox()
    out.send("preds", b"k", b"1")
    producers[0].fail = {"commit": KafkaTimeoutError("no answer"), "abort": KafkaTimeoutError()}
    with pytest.raises(sink.TransactionAborted):
        out.commit({("ev", 0): 2}, GROUP)
    # The abort failed too: a new producer, whose init_transactions ends the transaction
    # on the broker whichever way it went (committed, if the commit had begun).
    assert len(producers) == 2 and producers[1].calls == [("init",)]
    assert ("close",) in producers[0].calls and not out.open


def test_a_fenced_producer_stops_without_aborting_or_replacing(producers):
    out = _outbox()
    out.send("preds", b"k", b"1")
    producers[0].fail = {"offsets": ProducerFencedError()}
    with pytest.raises(sink.Fenced, match="streamcal-g-global"):
        out.commit({("ev", 0): 2}, GROUP)
    assert "abort" not in [c[0] for c in producers[0].calls] and len(producers) == 1
    out.send("preds", b"k", b"2")
    producers[0].fail = {"abort": ProducerFencedError()}
    out.close()  # a new producer here would fence the successor: never
    assert len(producers) == 1 and producers[0].calls[-1] == ("close",)


def _units(offsets: dict) -> list:
    return [SimpleNamespace(offsets=offsets)]


class FakeInputs:
    def __init__(self, committed: dict):
        self._committed = committed

    def committed(self, tps):
        return {k: v for k, v in self._committed.items() if TP(*k) in tps}

    def group(self):
        return GROUP


def test_input_below_the_committed_offsets_is_read_again_without_output(caplog):
    """Local offsets (ev/0 at 10, lab/0 at 4, ev/1 never read) against the group's (12,
    4, 3): records ev/0 10-11 and ev/1 0-2 are handled muted, then everything goes out;
    meanwhile a transaction commits the committed offset of a partition still below it."""
    out = SimpleNamespace(muted=False, committed=[])
    out.commit = lambda offsets, group: out.committed.append(offsets)
    eos = ExactlyOnce(FakeInputs({("ev", 0): 12, ("lab", 0): 4, ("ev", 1): 3}), out)
    with caplog.at_level(logging.WARNING, "streamcal.stream.exactly_once"):
        eos.resume({TP("ev", 0): 10, TP("lab", 0): 4, TP("ev", 1): None})
    assert eos.ahead == {("ev", 0): 12, ("ev", 1): 3}
    assert "ev[0] 10..11" in caplog.text and "ev[1] 0..2" in caplog.text

    muted = []
    order = [("ev", 0, 10), ("ev", 1, 0), ("lab", 0, 4), ("ev", 0, 11), ("ev", 1, 1)]
    for topic, p, o in order:
        assert eos.replaying
        eos.mute(Record(topic, p, o, 0, None, b""))
        muted.append(out.muted)
    assert muted == [True, True, False, True, True]
    eos.commit(_units({("ev", 0): 12, ("lab", 0): 5, ("ev", 1): 2}))
    assert out.committed[-1] == {("ev", 0): 12, ("lab", 0): 5, ("ev", 1): 3}  # never back
    assert not out.muted  # a commit's own records (state topic) are never muted
    eos.mute(Record("ev", 1, 2, 0, None, b""))
    assert out.muted and not eos.ahead and eos.replaying  # the last muted one, then:
    eos.mute(Record("ev", 0, 12, 0, None, b""))
    assert not out.muted and not eos.replaying and eos.muted_records == 5


def test_a_local_state_ahead_of_the_group_resumes_from_itself(caplog):
    eos = ExactlyOnce(FakeInputs({("ev", 0): 3}), SimpleNamespace(muted=False))
    with caplog.at_level(logging.WARNING, "streamcal.stream.exactly_once"):
        eos.resume({TP("ev", 0): 5, TP("lab", 0): 2})  # lab/0: nothing committed
    assert eos.ahead == {} and "ev[0] 5 > 3" in caplog.text and "lab[0] 2 > None" in caplog.text


def _states(tmp_path) -> UnitStates:
    config = ProcessorConfig.build(events_topic="ev", labels_topic="lab", mode="sva",
                                   state_dir=str(tmp_path), checkpoint_key=CHECKPOINT_KEY,
                                   metrics_file="none")  # fmt: skip
    states = UnitStates(config, config.key_bytes())
    states.restore_global()
    return states


def test_a_checkpoint_commits_kafka_first_and_the_store_only_if_kafka_committed(tmp_path):
    states = _states(tmp_path)
    unit = states.held[None]
    unit.store.put(b"k", b"v")
    unit.offsets[("ev", 0)] = 5
    states.changed.add(None)

    def refused(units):
        assert unit.store.get(SNAPSHOT) is None  # not before Kafka's commit
        raise sink.TransactionAborted("transaction aborted: no")

    with pytest.raises(sink.TransactionAborted):
        states.save_changed(transaction=refused)
    assert unit.store.changes() == {b"k": b"v"} and unit.store.commits == 0
    seen = []
    states.save_changed(transaction=lambda units: seen.append([u.offsets for u in units]))
    assert seen == [[{("ev", 0): 5}]] and unit.store.commits == 1 and not states.changed
    assert unit.store.get(SNAPSHOT) is not None and unit.store.changes() == {}
    states.close()


class ReadCommitted:
    """What a read_committed consumer sees: lab/0 holds an open upstream transaction from
    offset 1 (its highwater 3, its last stable offset 1), so only its record 0 is read;
    ev/0's three records come after it in the merge order."""

    def __init__(self):
        self.ev, self.lab = TP("ev", 0), TP("lab", 0)
        self.data = {self.ev: [Record("ev", 0, i, 10 + i, None, b"") for i in range(3)],
                     self.lab: [Record("lab", 0, 0, 5, None, b"")]}  # fmt: skip
        self.pos = dict.fromkeys(self.data, 0)
        self.stable: dict = {}  # filled by fetches, as kafka_python.last_stable_offsets does

    def poll(self, timeout_ms=0, max_records=2000):
        out = {tp: recs[self.pos[tp] :] for tp, recs in self.data.items() if recs[self.pos[tp] :]}
        self.pos = {tp: len(recs) for tp, recs in self.data.items()}
        self.stable.update({self.ev: 3, self.lab: 1})
        return out

    def highwater(self, tp):
        return {self.ev: 3, self.lab: 3}[tp] if self.stable else None

    def position(self, tp):
        return self.pos[tp]

    def end_offsets(self, tps, timeout_ms=None):  # ListOffsets, read_committed
        return {tp: len(self.data[tp]) for tp in tps}


@pytest.mark.parametrize("committed", [True, False])
def test_a_partition_held_by_an_open_upstream_transaction_holds_nothing_back(committed):
    """With the last stable offsets the partition reads as caught up; with the highwater
    (read_uncommitted's end) it would wait max_wait, a stall, and never catch up."""
    c = ReadCommitted()
    merge = OrderedMerge(c, [c.ev, c.lab], {"ev": 0, "lab": 1}, max_wait=0.3,
                         stable=c.stable if committed else None)  # fmt: skip
    got = [merge.next(1.0) for _ in range(4)]
    assert [r[1].timestamp for r in got] == [5, 10, 11, 12]
    assert (merge.stalls, merge.caught_up()) == ((0, True) if committed else (1, False))


def test_last_stable_offsets_come_from_the_fetch_responses():
    parsed = []
    fetcher = SimpleNamespace(_parse_fetched_data=lambda fetch: parsed.append(fetch) or "recs")
    stable = kafka_python.last_stable_offsets(SimpleNamespace(_fetcher=fetcher))

    def fetch(tp, lso, error=0):
        data = SimpleNamespace(last_stable_offset=lso, error_code=error)
        return SimpleNamespace(topic_partition=tp, partition_data=data)

    assert fetcher._parse_fetched_data(fetch(TP("ev", 0), 7)) == "recs"
    fetcher._parse_fetched_data(fetch(TP("ev", 1), -1))  # an old broker's: none
    fetcher._parse_fetched_data(fetch(TP("ev", 0), 9, error=1))  # an error: not taken
    assert stable == {TP("ev", 0): 7} and len(parsed) == 3
    # other internals: None, so that the merge takes the highwater (an empty dict would
    # leave every partition's end unknown: never caught up)
    assert kafka_python.last_stable_offsets(SimpleNamespace()) is None


def test_the_guarantee_is_checked_and_names_its_producer():
    with pytest.raises(ValueError, match="processing_guarantee must be one of"):
        ProcessorConfig.build(processing_guarantee="exactly_once")
    config = ProcessorConfig.build(processing_guarantee="exactly-once", group_id="fraud")
    assert config.exactly_once and clients.transactional_id(config) == "streamcal-fraud-global"
    assert not ProcessorConfig.build().exactly_once


def test_a_producer_that_cannot_begin_a_transaction_is_replaced(producers):
    out = _outbox()
    producers[0].fail = {"begin": KafkaTimeoutError("coordinator away")}
    out.send("preds", b"k", b"1")
    with pytest.raises(sink.TransactionAborted, match="coordinator away"):
        out.commit({("ev", 0): 1}, GROUP)
    assert len(producers) == 2 and producers[1].calls == [("init",)]
    out.send("preds", b"k", b"2")
    out.commit({("ev", 0): 1}, GROUP)
    assert [c[0] for c in producers[1].calls] == ["init", "begin", "send", "offsets", "commit"]
