"""The gate of the input: the one place that sees every record before it is ordered
(``streamcal.stream.kafka.ordering`` calls ``gate`` on each poll's records).

A record that would harm the state whatever its value is replaced by a ``RejectedRecord``
(its value a typed ``messages.Rejected`` carrying the reason, which the input stage,
``streamcal.stream.intake``, turns into the record's dead letter without decoding
anything): a record timestamp more than ``max_future`` seconds ahead of the wall clock (it
would move the record-time clock and expire every pending event), a negative record
timestamp (-1 means none: such a record has no place in record time), a key and value
together larger than ``max_bytes``, or a key larger than ``deadletter.KEEP_BYTES`` (keys
are used only in dead letters). A rejected record is released as soon as it is at the head
of its partition, so it never holds up the records around it, whose order is that of a
stream without it.


>>> from streamcal.stream.kafka.port import Record
>>> ok = Record("ev", 0, 5, 1_700_000_000_000, b"k", b"{}")
>>> [type(r).__name__ for r in gate([ok, ok._replace(timestamp=-1)], 86400.0, 1 << 20)]
['Record', 'RejectedRecord']
"""

from __future__ import annotations

import time
from typing import NamedTuple

from streamcal.stream.deadletter import KEEP_BYTES, dead_letter_key
from streamcal.stream.messages import Rejected

__all__ = ["RejectedRecord", "gate"]


class RejectedRecord(NamedTuple):
    """A record replaced by the gate (or an unreadable batch): what a dead letter needs.
    ``offset`` is the last offset it stands for, so that the next offset to read is
    ``offset + 1``."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: Rejected


def gate(recs: list, max_future: float, max_bytes: int) -> list:
    """``recs`` with every record that must not reach the state replaced (see above);
    ``recs`` itself when none is."""
    future_ms = (time.time() + max_future) * 1000.0
    out = recs
    for i, r in enumerate(recs):
        k, v = r.key, r.value
        nk = 0 if k is None else len(k)
        ts = r.timestamp
        if ts < 0 or ts > future_ms or nk > KEEP_BYTES or nk + len(v or b"") > max_bytes:
            if out is recs:
                out = list(recs)
            out[i] = _reject(r, future_ms, max_bytes)
    return out


def _reject(r, future_ms: float, max_bytes: int) -> RejectedRecord:
    nk, nv = len(r.key or b""), len(r.value or b"")
    if r.timestamp < 0:
        reason = (
            f"record timestamp {r.timestamp} (none): events and labels are ordered and "
            "joined in record time"
        )
    elif r.timestamp > future_ms:
        reason = (
            f"record timestamp {r.timestamp} ms is more than max_future_s ahead of the wall "
            "clock (it would advance the record-time clock and expire every pending event)"
        )
    elif nk > KEEP_BYTES:
        reason = f"key too large: {nk} bytes > {KEEP_BYTES}"
    else:
        reason = f"record too large: key and value {nk + nv} bytes > max_message_bytes={max_bytes}"
    key = dead_letter_key(r.key)
    value = Rejected(reason, r.value)
    return RejectedRecord(r.topic, r.partition, r.offset, r.timestamp, key, value)
