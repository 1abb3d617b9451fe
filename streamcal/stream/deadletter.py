"""Dead-letter records: the rejected message, where it came from, and why.

The value is a JSON object; the original bytes are kept exactly, as text when they are
valid UTF-8 (``value``) and otherwise base64 (``value_base64``), up to ``KEEP_BYTES``: a
longer key or value is cut there and its full size given (``value_size``), so a dead
letter always fits in a Kafka message however large the record it rejects. The key is
the original message's key. The dead letter of a record batch skipped as unreadable
(``--skip-unreadable``) stands for a range of offsets: ``skipped_offsets`` gives its
first and last (``source.offset`` is the last).

>>> import orjson
>>> rec = orjson.loads(dead_letter(b"{oops", b"e1", "streamcal.events", 2, 17, 1700000000000,
...                                "malformed JSON: ..."))
>>> rec["reason"], rec["source"]["offset"], rec["value"], rec["key"]
('malformed JSON: ...', 17, '{oops', 'e1')
>>> rec = orjson.loads(dead_letter(b"x" * 100_000, None, "t", 0, 5, None, "too large"))
>>> len(rec["value"]), rec["value_size"], rec["key"]
(32768, 100000, None)
>>> from streamcal.stream.messages import Rejected
>>> rec = orjson.loads(dead_letter(Rejected("unreadable record batch", skipped=(3, 9)), None,
...                                "t", 0, 9, None, "unreadable record batch"))
>>> rec["skipped_offsets"], rec["value"], "skipped_offsets" in orjson.loads(dead_letter(
...     b"{oops", None, "t", 0, 5, None, "malformed JSON"))
({'first': 3, 'last': 9}, None, False)
"""

from __future__ import annotations

import base64

import orjson

__all__ = ["dead_letter", "KEEP_BYTES", "dead_letter_key"]

# Bytes of a key or value kept in a dead letter: with JSON escaping (up to 6x for control
# characters) both fit well inside Kafka's default 1 MB message limit.
KEEP_BYTES = 32 * 1024


def _text_or_b64(data, name: str) -> dict:
    data = getattr(data, "original", data)  # a Rejected value: its original bytes
    if data is None:
        return {name: None}
    out = {}
    if len(data) > KEEP_BYTES:
        out[f"{name}_size"] = len(data)
        data = data[:KEEP_BYTES]
    try:
        out[name] = data.decode("utf-8")
    except UnicodeDecodeError:
        out[f"{name}_base64"] = base64.b64encode(data).decode("ascii")
    return out


def dead_letter_key(key: bytes | None) -> bytes | None:
    """The Kafka key of a dead letter: the original key, cut at ``KEEP_BYTES``."""
    return key if key is None or len(key) <= KEEP_BYTES else key[:KEEP_BYTES]


def dead_letter(
    value: bytes | None,
    key: bytes | None,
    topic: str,
    partition: int,
    offset: int,
    timestamp_ms: int | None,
    reason: str,
    version: str = "",
) -> bytes:
    """The dead-letter message value (JSON bytes)."""
    rec = {
        "reason": reason,
        "source": {
            "topic": topic,
            "partition": partition,
            "offset": offset,
            "timestamp_ms": timestamp_ms,
        },
        **_text_or_b64(key, "key"),
        **_text_or_b64(value, "value"),
        "version": version,
    }
    skipped = getattr(value, "skipped", None)  # a Rejected unreadable batch
    if skipped is not None:
        rec["skipped_offsets"] = {"first": skipped[0], "last": skipped[1]}
    return orjson.dumps(rec)
