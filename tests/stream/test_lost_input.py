"""Input lost by the broker, without a broker: a position its log no longer holds stops the
merge with a one-line error by default, and with ``on_lost_input="continue"`` is passed
over explicitly (a dead-letter record with the offsets, counted). The two ways brokers
show it are both covered: Kafka's (and noida-db's) OFFSET_OUT_OF_RANGE, and tansu's fetch
past the log's end answered with no records. (Against real brokers:
tests/e2e/test_lost_input.py.)"""

from __future__ import annotations

import pytest
from kafka.errors import LogTruncationError, OffsetOutOfRangeError
from kafka.structs import OffsetAndMetadata

from streamcal.stream.intake import Reject, decode
from streamcal.stream.kafka.kafka_python import Consumer
from streamcal.stream.kafka.ordering import LostInput, OrderedMerge, RejectedRecord
from streamcal.stream.messages import Fields, decode_event
from tests._fakes import TP, Record, release_all

EV, LAB = TP("ev", 0), TP("lab", 0)


class LogConsumer:
    """Reads logs that a broker may have lost: ``logs[tp] = (start, timestamps)``, records
    at offsets ``start``.. (everything readable). A fetch outside a log raises
    OFFSET_OUT_OF_RANGE when ``kafka`` (Apache Kafka, noida-db); else (tansu) a fetch past
    its end gets no records and the log's end as highwater. ``truncated`` ({tp: offset})
    makes the next poll raise the leader-epoch check's ``LogTruncationError``."""

    def __init__(self, logs: dict, kafka: bool = True, truncated: dict | None = None):
        self.logs = {
            tp: (start, [Record(tp.topic, tp.partition, start + i, ts, None, b"{}")
                         for i, ts in enumerate(stamps)])
            for tp, (start, stamps) in logs.items()
        }  # fmt: skip
        self.kafka, self.truncated = kafka, truncated
        self.pos = {tp: start for tp, (start, _) in self.logs.items()}
        self.hw: dict = dict.fromkeys(self.logs)

    def ends(self, tp) -> tuple[int, int]:
        start, recs = self.logs[tp]
        return start, start + len(recs)

    def poll(self, timeout_ms=0, max_records=2000):
        if self.truncated:
            at, self.truncated = self.truncated, None
            raise LogTruncationError({tp: OffsetAndMetadata(o, "", 1) for tp, o in at.items()})
        out = {}
        for tp, (start, recs) in self.logs.items():
            pos, end = self.pos[tp], self.ends(tp)[1]
            if self.kafka and not start <= pos <= end:
                raise OffsetOutOfRangeError({tp: pos})
            self.hw[tp] = end
            if start <= pos < end:
                out[tp] = recs[pos - start : end - start]
                self.pos[tp] = end
        return out

    def highwater(self, tp):
        return self.hw[tp]

    def position(self, tp):
        return self.pos[tp]

    def seek(self, tp, offset):
        self.pos[tp] = offset

    def beginning_offsets(self, tps, timeout_ms=None):
        return {tp: self.ends(tp)[0] for tp in tps}

    def end_offsets(self, tps, timeout_ms=None):
        return {tp: self.ends(tp)[1] for tp in tps}


def merge_at(consumer: LogConsumer, positions: dict, **options) -> OrderedMerge:
    """A merge over both partitions, each at ``positions`` (the processor's offsets),
    reading ``consumer`` through the kafka-python adapter (which turns kafka-python's
    errors into the port's)."""
    for tp, offset in positions.items():
        consumer.seek(tp, offset)
    ranks = {"ev": 0, "lab": 1}
    return OrderedMerge(Consumer(consumer), [EV, LAB], ranks, max_wait=60.0, **options)


@pytest.mark.parametrize("kafka", [True, False], ids=["out-of-range", "empty-fetch"])
def test_a_log_that_ends_below_the_position_stops_the_merge_with_a_clear_error(kafka):
    """A broker restarted without its data: ev/0 was read up to offset 10, its log now
    holds 3 new records."""
    consumer = LogConsumer({EV: (0, [1, 2, 3]), LAB: (0, [5])}, kafka=kafka)
    merge = merge_at(consumer, {EV: 10, LAB: 0})
    with pytest.raises(LostInput) as raised:
        release_all(merge, timeout=5)
    msg = str(raised.value)
    assert "\n" not in msg and "topic 'ev' partition 0" in msg and "offset 10" in msg
    assert "the log holds offsets 0..2" in msg and "--on-lost-input continue" in msg
    assert "lost its data" in msg and "from offset 0" in msg
    assert (raised.value.start, raised.value.end, raised.value.resume) == (0, 3, 0)


@pytest.mark.parametrize("kafka", [True, False], ids=["out-of-range", "empty-fetch"])
def test_continue_reads_what_the_log_holds_after_a_dead_letter_record_and_counts_it(kafka):
    consumer = LogConsumer({EV: (0, [1, 2, 3]), LAB: (0, [5])}, kafka=kafka)
    lost, skipped = {}, {}
    merge = merge_at(consumer, {EV: 10, LAB: 0}, on_lost_input="continue", lost=lost,
                     skipped=skipped)  # fmt: skip
    out = [r for _, r in release_all(merge, timeout=5)]
    gone = out[0]
    assert type(gone) is RejectedRecord and (gone.topic, gone.partition) == ("ev", 0)
    assert gone.offset == -1  # the unit's offset moves to 0, where reading goes on
    assert "offset 10" in gone.value.reason and "goes on from offset 0" in gone.value.reason
    assert gone.value.skipped is None  # nothing unread was passed over
    # so the processor dead-letters it, with that reason (a typed reject, not decoded)
    assert decode(gone, decode_event, Fields()) == Reject(gone.value.reason)
    assert [(r.topic, r.offset) for r in out[1:]] == [("ev", 0), ("ev", 1), ("ev", 2),
                                                      ("lab", 0)]  # fmt: skip
    assert lost == {None: 1} and skipped == {None: 0}


def test_records_deleted_before_they_were_read_are_counted_as_skipped():
    """Retention (or a recreated topic) deleted offsets 2..4 of ev/0 before they were
    read: stop says so; continue skips them, one dead-letter record names the range."""
    logs = {EV: (5, [6, 7, 8]), LAB: (0, [5])}
    with pytest.raises(LostInput, match=r"offsets 2\.\.4 were deleted before they were read"):
        release_all(merge_at(LogConsumer(logs), {EV: 2, LAB: 0}), timeout=5)
    lost, skipped = {}, {}
    merge = merge_at(LogConsumer(logs), {EV: 2, LAB: 0}, on_lost_input="continue", lost=lost,
                     skipped=skipped, unit_of=lambda tp: tp.partition)  # fmt: skip
    out = [r for _, r in release_all(merge, timeout=5)]
    assert (out[0].offset, out[0].value.skipped) == (4, (2, 4))
    assert [r.offset for r in out[1:] if r.topic == "ev"] == [5, 6, 7]
    assert lost == {0: 1} and skipped == {0: 3}


def test_a_partition_never_read_starts_where_its_log_starts():
    """Nothing of ev/0 was read (the processor seeks it to 0): a log that starts at 5 is
    no loss."""
    consumer = LogConsumer({EV: (5, [6, 7]), LAB: (0, [5])})
    lost: dict = {}
    merge = merge_at(consumer, {EV: 0, LAB: 0}, fresh=[EV], lost=lost)
    out = [r for _, r in release_all(merge, timeout=5)]
    assert [(r.topic, r.offset) for r in out] == [("lab", 0), ("ev", 5), ("ev", 6)]
    assert lost == {}


def test_a_truncated_log_goes_on_from_the_point_of_truncation():
    """The leader-epoch check (an unclean leader election) says ev/0 diverged at offset 1:
    its records from there are new ones."""
    logs = {EV: (0, [1, 2, 3]), LAB: (0, [5])}
    with pytest.raises(LostInput, match="truncated at offset 1"):
        release_all(merge_at(LogConsumer(logs, truncated={EV: 1}), {EV: 3, LAB: 0}), timeout=5)
    merge = merge_at(LogConsumer(logs, truncated={EV: 1}), {EV: 3, LAB: 0},
                     on_lost_input="continue")  # fmt: skip
    out = [r for _, r in release_all(merge, timeout=5)]
    assert out[0].offset == 0 and "truncated at offset 1" in out[0].value.reason
    assert [r.offset for r in out[1:] if r.topic == "ev"] == [1, 2]


def test_an_out_of_range_answer_is_not_undone_by_the_highwater_of_a_log_that_is_gone():
    """A topic deleted and recreated: the highwater kept from the old log (10) is not the
    new log's end (0)."""
    consumer = LogConsumer({EV: (0, []), LAB: (0, [5])})
    merge = merge_at(consumer, {EV: 10, LAB: 0})
    consumer.hw[EV] = 10
    with pytest.raises(LostInput, match="the log holds no record"):
        release_all(merge, timeout=5)


def test_a_log_that_holds_the_position_is_no_loss():
    """A highwater below the position that the broker's answer does not confirm (a stale
    one) is not taken for a loss."""
    consumer = LogConsumer({EV: (0, [1, 2, 3]), LAB: (0, [5])}, kafka=False)
    merge = merge_at(consumer, {EV: 3, LAB: 0})
    consumer.hw[EV] = 1  # stale
    assert merge._look_for_lost_input() == {} and merge.lost == {}


def test_the_message_shown_in_docs_processor_md_is_the_processors():
    from pathlib import Path

    from streamcal.stream.kafka.ordering import _loss

    resume, _, what = _loss(5000, 0, 312, None)
    msg = LostInput("streamcal.events", 2, 5000, 0, 312, resume, what)
    doc = (Path(__file__).resolve().parents[2] / "docs" / "processor.md").read_text()
    assert f"streamcal run: error: {msg}\n" in doc
