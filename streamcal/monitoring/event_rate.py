"""The event rate of a run, read from its metric log.

Each metric line's ``events_per_s`` is the rate since the unit's previous line, so the
line a processor writes when it stops (after ``--max-idle-s`` without input, or a drain)
says 0: no event came since. A report that showed the last line's rate as "events / s"
read 0 for every run that ended that way. ``event_rate`` is the rate while events came:
from the first line to the last one whose event count grew.

>>> lines = [{"ts": 10.0, "events": 100, "events_per_s": 50.0},
...          {"ts": 12.0, "events": 300, "events_per_s": 100.0},
...          {"ts": 15.0, "events": 300, "events_per_s": 0.0}]  # the line at stop
>>> event_rate(lines)
100.0
>>> event_rate(lines[:1]), event_rate([{"labels": 3}])  # one line: its own; none: None
(50.0, None)
"""

from __future__ import annotations

__all__ = ["event_rate"]


def event_rate(log) -> float | None:
    """Events per second over ``log`` (metric lines in time order) while events came;
    the last line's own ``events_per_s`` where the lines cannot tell (one line, no
    times, no growth)."""
    if not log:
        return None
    points = [(ln["ts"], ln["events"]) for ln in log
              if ln.get("ts") is not None and ln.get("events") is not None]  # fmt: skip
    grew = [(t, e) for (t, e), (_, before) in zip(points[1:], points, strict=False) if e > before]
    if grew:
        (t0, e0), (t1, e1) = points[0], grew[-1]
        if t1 > t0:
            return (e1 - e0) / (t1 - t0)
    return log[-1].get("events_per_s")
