"""Durations as settings take them: ``30s``, ``15m``, ``2h``, ``7d`` or a number of seconds.

The record-time settings of the join (``--label-horizon``, ``--pending-ttl``,
``--label-wait``) are read with it, from a flag, the environment or a TOML string; a TOML
number is seconds.
"""

from __future__ import annotations

__all__ = ["parse_duration"]

_DURATION_UNITS = {"": 1.0, "s": 1.0, "ms": 1e-3, "m": 60.0, "min": 60.0, "h": 3600.0,
                   "d": 86400.0}  # fmt: skip


def parse_duration(text: str) -> float:
    """Seconds from a duration: a number of seconds, or a number with a unit (ms, s, m or
    min, h, d).

    >>> parse_duration("30s"), parse_duration("1.5h"), parse_duration("7d"), parse_duration("90")
    (30.0, 5400.0, 604800.0, 90.0)
    >>> parse_duration("soon")
    Traceback (most recent call last):
    ...
    ValueError: not a duration: 'soon' (use e.g. 30s, 15m, 2h, 7d or a number of seconds)
    """
    body = text.strip().lower()
    number = body.rstrip("abcdefghijklmnopqrstuvwxyz ")
    factor = _DURATION_UNITS.get(body[len(number) :].strip())
    try:
        if factor is None:
            raise ValueError
        return float(number) * factor
    except ValueError:
        raise ValueError(
            f"not a duration: {text!r} (use e.g. 30s, 15m, 2h, 7d or a number of seconds)"
        ) from None
