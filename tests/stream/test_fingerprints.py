"""Record fingerprints without a broker (streamcal.stream.kafka.fingerprints): a mark tells
its record from any other, survives a checkpoint, and a check against a log that was
replaced is lost input with either policy; retention and a log below the position are
not (the merge tells the latter). Against real brokers: tests/e2e/test_fingerprints.py."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamcal.stream.config import ProcessorConfig
from streamcal.stream.kafka.fingerprints import LogCheck, Mark, crc, mark_of, marks, rows, same
from streamcal.stream.kafka.ordering import LostInput, RejectedRecord
from streamcal.stream.kafka.port import KafkaTimeout, Record, TopicPartition
from streamcal.stream.messages import Rejected
from streamcal.stream.unit import GLOBAL_UNIT, CalibrationUnit, TopicRank

EV = TopicPartition("ev", 0)

records = st.builds(
    Record,
    st.just("ev"),
    st.just(0),
    st.integers(0, 2**40),
    st.integers(-1, 2**42),
    st.none() | st.binary(max_size=12),
    st.none() | st.binary(max_size=12),
)


@given(records, records)
def test_a_mark_is_its_record_s_and_no_other_s(a, b):
    assert same(mark_of(a), a)
    differ = (a.offset, a.timestamp, a.key, a.value) != (b.offset, b.timestamp, b.key, b.value)
    # A CRC-32 collision of two different (key, value) pairs would make them one: with
    # these sizes hypothesis finds none, and the offset and timestamp must match too.
    assert same(mark_of(a), b) is not differ
    assert marks(rows({("ev", 0): a})) == {("ev", 0): mark_of(a)}


def test_crc_keeps_key_and_value_apart():
    assert len({crc(b"ab", b"c"), crc(b"a", b"bc"), crc(None, b"abc"), crc(b"abc", None),
                crc(b"", b"abc")}) == 5  # fmt: skip


def test_a_rejected_record_has_no_mark_and_no_row():
    rej = RejectedRecord("ev", 0, 4, -1, None, Rejected("lost"))
    assert mark_of(rej) is None and rows({("ev", 0): rej}) == []
    assert not same(Mark(4, 1, 2), None)


def test_the_unit_s_state_keeps_the_marks_and_an_older_state_has_none():
    cfg = ProcessorConfig.build(events_topic="ev", labels_topic="lab")
    unit = CalibrationUnit(cfg, send=lambda *a: None)
    unit.handle(TopicRank.EVENT, Record("ev", 0, 7, 1000, b"k", b"not json"))  # a dead letter
    state = unit.to_state()
    assert state["read"] == [("ev", 0, 7, 1000, crc(b"k", b"not json"))]
    again = CalibrationUnit.from_state(state, config=cfg)
    assert again.last_read == {("ev", 0): Mark(7, 1000, crc(b"k", b"not json"))}
    del state["read"]
    assert CalibrationUnit.from_state(state, config=cfg).last_read == {}


class Log:
    """A partition's log as a broker holds it: ``records`` from offset ``start``; ``away``
    makes the next reads time out."""

    def __init__(self, stamps, start: int = 0, value: bytes = b"{}"):
        self.start, self.away = start, False
        self.records = [Record("ev", 0, start + i, ts, b"k", value) for i, ts in enumerate(stamps)]

    def end(self) -> int:
        return self.start + len(self.records)

    def records_at(self, offsets, timeout_ms=5000):
        if self.away:
            raise KafkaTimeout("no answer")
        return {tp: self.records[o - self.start] if self.start <= o < self.end() else None
                for tp, o in offsets.items()}  # fmt: skip

    def beginning_offsets(self, tps, timeout_ms=None):
        return dict.fromkeys(tps, self.start)

    def end_offsets(self, tps, timeout_ms=None):
        return dict.fromkeys(tps, self.end())


class Unit:
    """What the check asks of a unit: ``last_read``, ``offsets``, ``handle``, ``unit``."""

    def __init__(self):
        self.unit, self.last_read, self.offsets, self.handled = GLOBAL_UNIT, {}, {}, []

    def read(self, rec) -> None:
        self.last_read[("ev", 0)] = rec
        self.offsets[("ev", 0)] = rec.offset + 1

    def handle(self, rank, rec) -> bool:
        self.handled.append(rec)
        self.read(rec)
        return False


class States:
    def __init__(self, unit):
        self.held, self.changed = {GLOBAL_UNIT: unit}, set()

    def offset(self, topic, partition):
        return self.held[GLOBAL_UNIT].offsets.get((topic, partition))


class Inputs:
    def __init__(self, log, policy: str):
        self.consumer, self.ranks, self.remerged = log, {"ev": TopicRank.EVENT}, 0
        self.config = ProcessorConfig.build(on_lost_input=policy, checkpoint_interval=1.0)

    def remerge(self, offset_of):
        self.remerged += 1


def _check(log, policy="stop"):
    unit = Unit()
    lost: dict = {}
    inputs = Inputs(log, policy)
    return LogCheck(inputs, States(unit), lost), unit, inputs, lost


def test_the_same_log_is_no_loss_and_a_log_written_anew_stops_naming_where():
    old = Log(range(100, 150))
    check, unit, _, _ = _check(old)
    unit.read(old.records[29])
    check.check()
    assert check.checks == 1
    check.inputs.consumer = Log(range(500, 560))  # refilled past the position
    with pytest.raises(LostInput) as info:
        check.check()
    err = info.value
    assert (err.topic, err.partition, err.position, err.resume) == ("ev", 0, 30, 0)
    assert "not the record read at offset 29" in str(err) and "another record" in str(err)
    assert "--on-lost-input continue" in str(err)


def test_continue_dead_letters_the_loss_and_reads_the_new_log_from_its_start():
    check, unit, inputs, lost = _check(Log(range(5, 50), start=5), "continue")
    unit.read(Record("ev", 0, 20, 19, b"k", b"{}"))  # what the new log holds is different
    check.check()
    (rec,) = unit.handled
    assert rec.__class__ is RejectedRecord and rec.offset == 4  # reading goes on from 5
    reason = rec.value.reason
    assert "input lost: offset 21" in reason and "goes on from offset 5" in reason
    assert lost == {GLOBAL_UNIT: 1} and inputs.remerged == 1
    assert check.states.changed == {GLOBAL_UNIT}
    check.check()  # counted once: the rejected record has no mark
    assert lost == {GLOBAL_UNIT: 1} and check.checks == 1


def test_the_anchor_catches_a_log_replaced_after_records_were_read_from_it():
    """Records read after the broker lost its data come from the new log and match it:
    the check verifies the mark of the check before (read from the old log)."""
    old, new = Log(range(100, 200)), Log(range(700, 800))
    check, unit, _, _ = _check(old)
    unit.read(old.records[40])
    check.check()
    check.inputs.consumer = new
    unit.read(new.records[60])  # SIGCONT: read on, from the new log
    with pytest.raises(LostInput, match="offset 40"):
        check.check()


def test_a_broker_away_keeps_the_anchor_for_the_next_check():
    old = Log(range(100, 200))
    check, unit, _, _ = _check(old)
    unit.read(old.records[10])
    check.check()
    new = Log(range(700, 800))
    new.away = True
    check.inputs.consumer = new
    unit.read(new.records[50])
    check.check()  # no answer: nothing decided
    assert check.checks == 1
    new.away = False
    with pytest.raises(LostInput, match="offset 10"):
        check.check()


def test_retention_and_a_log_below_the_position_are_not_this_check_s_loss():
    check, unit, _, lost = _check(Log(range(100), start=60), "continue")
    unit.read(Record("ev", 0, 40, 40, b"k", b"{}"))
    unit.offsets[("ev", 0)] = 70  # read up to 69: records 40..59 deleted since (retention)
    check.check()
    check.inputs.consumer = Log(range(10))  # ends at 10, below the mark: the merge tells
    check.check()
    assert lost == {} and unit.handled == []


def test_due_once_per_checkpoint_interval():
    check, unit, _, _ = _check(Log(range(10)))
    assert check.due(0.0)
    check.check()
    import time

    now = time.monotonic()
    assert not check.due(now) and check.due(now + 1.0)
