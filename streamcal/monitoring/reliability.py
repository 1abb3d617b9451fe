"""Reliability bins: how often the label was 1 among predictions that fell in each bin.

Equal-width bins on [0, 1]. Each bin keeps its count, the sum of its predictions and the
number of ones, so everything else (mean prediction, observed frequency, the expected
calibration error, binomial confidence intervals) is derived exactly from integers and one
float sum per bin.
"""

from __future__ import annotations

import math

__all__ = ["ReliabilityBins", "expected_calibration_error", "wilson_interval"]


class ReliabilityBins:
    """Counts of predictions and of ones in ``bins`` equal-width bins of [0, 1].

    A prediction ``q`` falls in bin ``min(floor(q * bins), bins - 1)``, so 1.0 is in the
    last bin. The caller checks that ``q`` is in [0, 1].

    >>> rb = ReliabilityBins(bins=2)
    >>> for q, y in [(0.1, 0), (0.3, 1), (0.8, 1), (1.0, 1)]:
    ...     rb.update(q, y)
    >>> [(b["count"], b["mean_pred"], b["frequency"]) for b in rb.table()]
    [(2, 0.2, 0.5), (2, 0.9, 1.0)]
    >>> round(rb.ece(), 10)
    0.2
    """

    __slots__ = ("bins", "counts", "ones", "sums")

    def __init__(self, bins: int = 10):
        if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
            raise ValueError(f"bins must be a positive integer, got {bins!r}")
        self.bins = bins
        self.counts = [0] * bins
        self.ones = [0] * bins
        self.sums = [0.0] * bins

    def update(self, q: float, y: int) -> None:
        i = int(q * self.bins)
        if i >= self.bins:
            i = self.bins - 1
        self.counts[i] += 1
        self.ones[i] += y
        self.sums[i] += q

    @property
    def n(self) -> int:
        return sum(self.counts)

    def table(self) -> list[dict]:
        """One dict per bin: ``lo``, ``hi``, ``count``, ``mean_pred``, ``frequency``.

        ``mean_pred`` and ``frequency`` are None for an empty bin. JSON-ready.
        """
        out = []
        for i in range(self.bins):
            c = self.counts[i]
            out.append(
                {
                    "lo": i / self.bins,
                    "hi": (i + 1) / self.bins,
                    "count": c,
                    "mean_pred": self.sums[i] / c if c else None,
                    "frequency": self.ones[i] / c if c else None,
                }
            )
        return out

    def ece(self) -> float | None:
        """Binned expected calibration error; None before the first update."""
        return expected_calibration_error(self.table())

    # Copies both ways: a state (a checkpoint's, ``CalibrationTracker.to_state``) must not
    # share its lists with a live object, or two trackers made from one state count twice.
    def __getstate__(self):
        return (self.bins, list(self.counts), list(self.ones), list(self.sums))

    def __setstate__(self, state):
        bins, counts, ones, sums = state
        self.bins, self.counts, self.ones, self.sums = bins, list(counts), list(ones), list(sums)

    def __eq__(self, other):
        return isinstance(other, ReliabilityBins) and self.__getstate__() == other.__getstate__()


def expected_calibration_error(table: list[dict]) -> float | None:
    """Sum over bins of (count / n) * |mean prediction - frequency|; None when n = 0.

    The usual binned estimate: it is biased upwards when bins hold few predictions
    (sampling noise in each bin's frequency adds to it), so compare ECEs at equal n.

    >>> expected_calibration_error([
    ...     {"count": 3, "mean_pred": 0.2, "frequency": 0.0},
    ...     {"count": 1, "mean_pred": 0.9, "frequency": 1.0},
    ...     {"count": 0, "mean_pred": None, "frequency": None}])
    0.175
    """
    n = sum(b["count"] for b in table)
    if n == 0:
        return None
    return sum(b["count"] * abs(b["mean_pred"] - b["frequency"]) for b in table if b["count"]) / n


def wilson_interval(ones: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (95% for z = 1.96).

    Well behaved at 0 and n ones, unlike the normal approximation.

    >>> lo, hi = wilson_interval(5, 10)
    >>> round(lo, 4), round(hi, 4)
    (0.2366, 0.7634)
    >>> wilson_interval(0, 0)
    (0.0, 1.0)
    """
    if n <= 0:
        return 0.0, 1.0
    f = ones / n
    z2 = z * z
    centre = (f + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(f * (1 - f) / n + z2 / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)
