"""The regression tracker: how well predictive distributions and their intervals did.

A regression prediction (``streamcal.ConformalPredictiveRegressor``, ``--task
regression``) is a predictive distribution with a central interval [lo, hi] claiming
coverage c. Per label the tracker takes the interval, the label's PIT Q(y) and its CRPS,
both computed against the distribution when the label came (before anything learned it):

* "the interval covers the label" is a binary stream: a ``CalibrationTracker`` takes it
  with p0 = p1 = p = c, so the usual fields (labels, frequency: the coverage, ECE, the
  alarm's) are those of the interval's claim;
* the ``REGRESSION_KEYS``: the nominal coverage, the coverage cumulative and over the
  last window, the interval's mean width, the mean interval score (Gneiting & Raftery 2007: width +
  (2 / alpha) * the distance to the interval when missed, alpha = 1 - c), the mean CRPS
  (cumulative and recent) and the PIT histogram (uniform when calibrated).
"""

from __future__ import annotations

import math
from collections import deque

from streamcal.learner.settings import DEFAULT_MAX_CATEGORIES
from streamcal.monitoring.schema import REGRESSION_KEYS
from streamcal.monitoring.tracker import CalibrationTracker

__all__ = ["RegressionTracker", "interval_score"]


def interval_score(lo: float, hi: float, y: float, coverage: float) -> float:
    """The interval score of [lo, hi] at ``y`` for the nominal ``coverage``.

    >>> interval_score(1.0, 3.0, 2.0, 0.9), interval_score(1.0, 3.0, 4.0, 0.9)
    (2.0, 22.0)
    """
    alpha = 1.0 - coverage
    return (hi - lo) + (2.0 / alpha) * (max(lo - y, 0.0) + max(y - hi, 0.0))


def _finite(name: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number, got {v!r}")
    return float(v)


class RegressionTracker:
    """Interval, CRPS and PIT statistics of a stream of regression predictions (see the
    module docstring). ``window``, ``bins`` (of the PIT histogram too), ``top_k`` and
    ``max_categories`` are ``CalibrationTracker``'s.

    >>> t = RegressionTracker(window=2, bins=2)
    >>> t.update(1.0, 3.0, 2.0, 0.9, pit=0.4, crps=0.5)
    >>> t.update(1.0, 3.0, 4.0, 0.9, pit=0.99, crps=1.5)
    >>> s = t.snapshot()
    >>> s["labels"], s["coverage"], s["interval_width"], s["crps"], s["interval_score"]
    (2, 0.5, 2.0, 1.0, 12.0)
    >>> [b["count"] for b in s["pit_histogram"]]
    [1, 1]
    """

    def __init__(self, window: int = 1000, bins: int = 10, top_k: int = 10,
                 max_categories: int = DEFAULT_MAX_CATEGORIES):  # fmt: skip
        self.top = CalibrationTracker(window, bins, top_k, max_categories)
        self.window = window
        self.bins = bins
        self.coverage: float | None = None  # the nominal coverage, once a label came
        self._sums = [0.0, 0.0, 0.0, 0.0]  # covered, width, interval score, crps
        self._recent: deque = deque()  # (covered, crps) of the last window
        self._recent_sums = [0.0, 0.0]
        self._pit = [[0, 0.0] for _ in range(bins)]  # per bin: count, sum of PITs

    @property
    def labels(self) -> int:
        """The labelled predictions tracked."""
        return self.top.labels

    def update(self, lo, hi, y, coverage, *, pit, crps, category=None) -> None:
        """Add one labelled prediction: its interval [lo, hi] of nominal ``coverage``,
        the label ``y``, its PIT and CRPS. ``ValueError`` (state unchanged) on bad input."""
        lo, hi, y = _finite("lo", lo), _finite("hi", hi), _finite("y", y)
        crps = _finite("crps", crps)
        if not lo <= hi:
            raise ValueError(f"need lo <= hi, got lo={lo!r}, hi={hi!r}")
        if not 0.0 <= _finite("pit", pit) <= 1.0:
            raise ValueError(f"pit must be in [0, 1], got {pit!r}")
        if not 0.0 < _finite("coverage", coverage) < 1.0:
            raise ValueError(f"coverage must be in (0, 1), got {coverage!r}")
        covered = lo <= y <= hi
        self.top.update(coverage, coverage, covered, p=coverage, category=category)
        self.coverage = coverage
        s = self._sums
        s[0] += covered
        s[1] += hi - lo
        s[2] += interval_score(lo, hi, y, coverage)
        s[3] += crps
        if len(self._recent) == self.window:
            old = self._recent.popleft()
            self._recent_sums[0] -= old[0]
            self._recent_sums[1] -= old[1]
        self._recent.append((float(covered), crps))
        self._recent_sums[0] += covered
        self._recent_sums[1] += crps
        b = self._pit[min(int(pit * self.bins), self.bins - 1)]
        b[0] += 1
        b[1] += pit

    def update_protection(self, log_martingale, alarm, alarm_at=None, alpha=0.01, category=None,
                          alarm_onset=None) -> None:  # fmt: skip
        """Record the alarm's state (``CalibrationTracker.update_protection``; no
        protection here). The alarm tests the residuals' exchangeability."""
        self.top.update_protection(log_martingale, alarm, alarm_at, alpha, category=category,
                                   alarm_onset=alarm_onset)  # fmt: skip

    def pit_histogram(self) -> list[dict] | None:
        """The PIT histogram as bins (``lo``, ``hi``, ``count``, ``mean_pred``: the mean
        PIT in it, ``frequency``: its share of the labels), None before a label."""
        n = self.labels
        if not n:
            return None
        width = 1.0 / self.bins
        return [{"lo": i * width, "hi": (i + 1) * width, "count": c,
                 "mean_pred": total / c if c else None, "frequency": c / n}
                for i, (c, total) in enumerate(self._pit)]  # fmt: skip

    def snapshot(self, reliability: bool = False) -> dict:
        """The interval claim's ``CalibrationTracker.snapshot`` then the
        ``REGRESSION_KEYS`` (null before a label)."""
        out = self.top.snapshot(reliability=reliability)
        n, m = self.labels, len(self._recent)
        s, r = self._sums, self._recent_sums
        values = {
            "interval_coverage": self.coverage,
            "coverage": s[0] / n if n else None,
            "recent_coverage": r[0] / m if m else None,
            "interval_width": s[1] / n if n else None,
            "interval_score": s[2] / n if n else None,
            "crps": s[3] / n if n else None,
            "recent_crps": r[1] / m if m else None,
            "pit_histogram": self.pit_histogram(),
        }
        out.update((k, values[k]) for k in REGRESSION_KEYS)
        return out

    def category_snapshots(self) -> list[dict]:
        """The interval claim's per-category lines."""
        return self.top.category_snapshots()

    def class_snapshots(self) -> list[dict]:
        """None here: no classes."""
        return []

    def to_state(self) -> dict:
        """The tracker as plain data; ``from_state`` rebuilds it."""
        return {
            "top": self.top.to_state(),
            "coverage": self.coverage,
            "sums": list(self._sums),
            "recent": [list(t) for t in self._recent],
            "recent_sums": list(self._recent_sums),
            "pit": [list(b) for b in self._pit],
        }

    @classmethod
    def from_state(cls, state: dict) -> RegressionTracker:
        """The tracker ``to_state`` described.

        >>> t = RegressionTracker()
        >>> t.update(0.0, 1.0, 0.5, 0.8, pit=0.5, crps=0.2)
        >>> RegressionTracker.from_state(t.to_state()).snapshot() == t.snapshot()
        True
        """
        top = CalibrationTracker.from_state(state["top"])
        self = cls(top.window, len(state["pit"]))
        self.top = top
        self.coverage = state["coverage"]
        self._sums = list(state["sums"])
        self._recent = deque(tuple(t) for t in state["recent"])
        self._recent_sums = list(state["recent_sums"])
        self._pit = [list(b) for b in state["pit"]]
        return self

    def __repr__(self):
        return f"RegressionTracker(window={self.window}, labels={self.labels})"
