"""How `streamcal run` writes its log records on stderr: text for people, or one JSON
object per line for log shippers and tests (``--log-format json``).

A JSON line holds ``ts`` (UTC, ISO 8601 with milliseconds), ``level``, ``logger`` and
``message`` (the text line's words), plus the record's structured extras: what a program
should key on instead of parsing the message. For example, units taken over carry
``{"event": "adopted", "units": [...], "source": {"state_topic": [...], "local": [...],
"new": [...]}}``.

>>> import logging
>>> import orjson
>>> record = logging.makeLogRecord({"name": "streamcal.x", "levelname": "INFO",
...     "msg": "released units %s", "args": ([1, 4],), "created": 0.0,
...     "event": "released", "units": [1, 4]})
>>> line = orjson.loads(JsonFormatter().format(record))
>>> line["ts"], line["level"], line["logger"], line["message"]
('1970-01-01T00:00:00.000Z', 'INFO', 'streamcal.x', 'released units [1, 4]')
>>> line["event"], line["units"]
('released', [1, 4])
>>> orjson.loads(JsonFormatter(process="producer").format(record))["process"]
'producer'
"""

from __future__ import annotations

import logging
import time

import orjson

__all__ = ["FORMATS", "JsonFormatter", "configure", "format_of"]

FORMATS = ("text", "json")

# The attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module docstring); ``process`` names the
    process that logs, when it is not the processor itself (its producer process)."""

    def __init__(self, process: str | None = None):
        super().__init__()
        self.process = process

    def format(self, record: logging.LogRecord) -> str:
        ms = int(record.created * 1000) % 1000
        out = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{ms:03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and key not in out:
                out[key] = value
        if self.process is not None:
            out["process"] = self.process
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        # default=repr: an extra that JSON cannot hold still gets written, as text.
        return orjson.dumps(out, default=repr, option=orjson.OPT_NON_STR_KEYS).decode()


def configure(level, fmt: str = "text", process: str | None = None) -> None:
    """Log to stderr at ``level`` in ``fmt`` (one of FORMATS), as ``logging.basicConfig``
    does: only if the root logger has no handler yet (a caller's own setup wins)."""
    if fmt == "json":
        handler = logging.StreamHandler()
        handler.setFormatter(JsonFormatter(process))
        logging.basicConfig(level=level, handlers=[handler])
    else:
        tag = f" ({process} process)" if process else ""
        logging.basicConfig(level=level, format=f"%(asctime)s %(name)s{tag} %(message)s")


def format_of(logger: logging.Logger | None = None) -> str:
    """The format the root logger (or ``logger``) writes in: "json" if one of its
    handlers has a JsonFormatter, else "text" (passed on to the producer process)."""
    logger = logger or logging.getLogger()
    json_handler = any(isinstance(h.formatter, JsonFormatter) for h in logger.handlers)
    return "json" if json_handler else "text"
