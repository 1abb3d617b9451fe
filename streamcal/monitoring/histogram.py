"""A histogram of durations with fixed buckets, as a metric line carries it and as
Prometheus reads it (``<name>_bucket{le=...}``, ``_sum``, ``_count``).

In a metric line a histogram is ``{"le": [upper bounds], "counts": [per bucket, the last
one above every bound], "sum": total}``: counts per bucket (not cumulative), so that the
lines of several units add up bucket by bucket (``add``), and the count is their sum.
The label delay (``label_delay_seconds``) uses ``DELAY_BOUNDS``: from a second to 90
days, about three buckets per factor of ten.

>>> h = Histogram(DELAY_BOUNDS)
>>> for delay in (0.5, 90.0, 2 * 86400.0):
...     h.observe(delay)
>>> line = h.to_line()
>>> line["sum"], sum(line["counts"]), cumulative(line)[-1]
(172890.5, 3, ('+Inf', 3))
>>> add([line, line])["counts"] == [2 * c for c in line["counts"]]
True
"""

from __future__ import annotations

import bisect
import math

__all__ = ["DELAY_BOUNDS", "Histogram", "add", "check", "cumulative"]

_MIN, _HOUR, _DAY = 60.0, 3600.0, 86400.0
DELAY_BOUNDS = (1.0, 10.0, _MIN, 5 * _MIN, 15 * _MIN, _HOUR, 3 * _HOUR, 6 * _HOUR,
                12 * _HOUR, _DAY, 2 * _DAY, 3 * _DAY, 7 * _DAY, 14 * _DAY, 30 * _DAY,
                60 * _DAY, 90 * _DAY)  # fmt: skip


class Histogram:
    """Counts of observations by bucket (``bounds``: increasing upper bounds, a bucket
    above them all) and their sum; ``state`` is ``to_line()``'s output, to go on from."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds=DELAY_BOUNDS, state: dict | None = None):
        self.bounds = tuple(float(b) for b in bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0
        if state is not None and tuple(state["le"]) == self.bounds:  # else: other buckets
            self.counts = list(state["counts"])
            self.sum = float(state["sum"])

    def observe(self, value: float) -> None:
        """Count ``value`` (a negative one, a clock gone back, counts as 0)."""
        value = max(0.0, value)
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def to_line(self) -> dict:
        return {"le": list(self.bounds), "counts": list(self.counts), "sum": self.sum}


def cumulative(line: dict) -> list[tuple[str, int]]:
    """Prometheus' buckets of a histogram line: (upper bound as text, observations at or
    below it), the last one ``+Inf``."""
    out, n = [], 0
    for bound, c in zip([*line["le"], math.inf], line["counts"], strict=True):
        n += c
        out.append(("+Inf" if bound == math.inf else f"{bound:.15g}", n))
    return out


def add(lines: list[dict]) -> dict | None:
    """The histogram of several lines' (bucket by bucket; None if none has one; lines
    with other buckets than the first's are left out)."""
    lines = [h for h in lines if h is not None]
    if not lines:
        return None
    le = list(lines[0]["le"])
    same = [h for h in lines if list(h["le"]) == le]
    return {"le": le, "counts": [sum(c) for c in zip(*(h["counts"] for h in same), strict=True)],
            "sum": sum(h["sum"] for h in same)}  # fmt: skip


def check(where: str, key: str, line) -> None:
    """ValueError naming ``where`` and ``key`` unless ``line`` is null or a histogram."""
    if line is None:
        return
    ok = (isinstance(line, dict) and isinstance(line.get("le"), list)
          and isinstance(line.get("counts"), list)
          and len(line["counts"]) == len(line["le"]) + 1
          and all(isinstance(c, int) and c >= 0 for c in line["counts"])
          and all(isinstance(b, (int, float)) for b in line["le"])
          and list(line["le"]) == sorted(line["le"])
          and isinstance(line.get("sum"), (int, float))
          and not isinstance(line["sum"], bool))  # fmt: skip
    if not ok:
        raise ValueError(f"{where}: {key} must be a histogram ({{'le', 'counts', 'sum'}}) "
                         f"or null, got {line!r}")  # fmt: skip
