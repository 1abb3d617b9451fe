"""The typed input stage: the records the merge releases, as runs of one unit's records,
each record decoded into a typed message or a ``Reject`` (why it is a dead letter).

A poll's records leave the ordered merge (``streamcal.stream.kafka.ordering``) in merge
order; the processor hands them over in runs of consecutive records of one unit, and the
unit decodes a run at once (``decode``) before it processes it record by record. Decoding
touches no state, so decoding a record before the records ahead of it are processed
changes nothing they do; what each record does, and in which order, is what one-by-one
processing does.

A record the input's gate replaced (its value a ``messages.Rejected``: a timestamp far in
the future, an unreadable batch, lost input) is not decoded: its reason is its ``Reject``.

>>> from streamcal.stream.kafka.port import Record
>>> from streamcal.stream.messages import Fields, Rejected, decode_event, decode_label
>>> ev = Record("ev", 0, 7, 1_700_000_000_000, b"e1", b'{"id": "e1", "features": {"x": 1}}')
>>> decode(ev, decode_event, Fields())
Event(id='e1', x={'x': 1}, ts=None)
>>> decode(ev._replace(value=b"[1]"), decode_event, Fields())
Reject(reason='message is not a JSON object but list')
>>> decode(ev._replace(value=Rejected("record timestamp -1 (none)")), decode_label, Fields())
Reject(reason='record timestamp -1 (none)')
>>> [(unit, len(run)) for unit, run in runs([(0, ev), (1, ev), (0, ev._replace(partition=2))],
...                                          by_partition=True)]
[(0, 2), (2, 1)]
"""

from __future__ import annotations

from typing import NamedTuple

from streamcal.stream.messages import BadInput, Rejected

__all__ = ["Reject", "decode", "runs"]


class Reject(NamedTuple):
    """A record that cannot be processed: ``reason`` is its dead letter's reason."""

    reason: str


def decode(rec, decoder, fields):
    """``rec``'s message decoded by ``decoder`` (``messages.decode_event`` or a task's
    decoder), or its ``Reject``."""
    value = rec.value
    if value.__class__ is Rejected:
        return Reject(value.reason)
    try:
        return decoder(value, fields)
    except BadInput as exc:
        return Reject(str(exc))


def runs(items: list, by_partition: bool) -> list:
    """``items`` (``(rank, record)`` in merge order) cut into ``(unit, run)`` pairs of
    consecutive records of one unit: one unit (None, ``--scope global``), or with
    ``by_partition`` the unit of a record's partition number."""
    if not by_partition:
        return [(None, items)]
    out: list = []
    last = None
    for item in items:
        unit = item[1].partition
        if unit != last or not out:
            out.append((unit, []))
            last = unit
        out[-1][1].append(item)
    return out
