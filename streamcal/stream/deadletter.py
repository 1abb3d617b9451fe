"""Dead-letter records: the rejected message, where it came from, and why.

The value is a JSON object; the original bytes are kept exactly, as text when they are
valid UTF-8 (``value``) and otherwise base64 (``value_base64``). The key is the
original message's key.

>>> import orjson
>>> rec = orjson.loads(dead_letter(b"{oops", b"e1", "streamcal.events", 2, 17, 1700000000000,
...                                "malformed JSON: ..."))
>>> rec["reason"], rec["source"]["offset"], rec["value"], rec["key"]
('malformed JSON: ...', 17, '{oops', 'e1')
"""

from __future__ import annotations

import base64

import orjson

__all__ = ["dead_letter"]


def _text_or_b64(data: bytes | None, name: str) -> dict:
    if data is None:
        return {name: None}
    try:
        return {name: data.decode("utf-8")}
    except UnicodeDecodeError:
        return {f"{name}_base64": base64.b64encode(data).decode("ascii")}


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
    return orjson.dumps(rec)
