"""Cost of CalibrationTracker per label (it runs once per label in the stream processor).

Compares, in one run, the tracker with a straightforward all-river design (river's
``metrics.LogLoss`` / ``metrics.MSE`` each wrapped in ``utils.Rolling``), which is what
the tracker would be without sharing one window and computing each loss term once.

    python benchmarks/bench_tracker.py [N]
"""

from __future__ import annotations

import sys
import time

import numpy as np
from river import metrics, stats, utils

from streamcal.monitoring import CalibrationTracker


class AllRiver:
    """The same statistics (minus reliability bins) with one river object per statistic."""

    def __init__(self, window=1000):
        self.m = [metrics.LogLoss(), metrics.MSE(), stats.Mean(), stats.Mean(), stats.Mean()]
        self.r = [
            utils.Rolling(metrics.LogLoss, window_size=window),
            utils.Rolling(metrics.MSE, window_size=window),
            utils.Rolling(stats.Mean, window_size=window),
        ]
        self.raw = [metrics.LogLoss(), metrics.MSE()]
        self.rraw = [
            utils.Rolling(metrics.LogLoss, window_size=window),
            utils.Rolling(metrics.MSE, window_size=window),
        ]

    def update(self, p0, p1, y, score=None):
        p = p1 / (1 - p0 + p1)
        self.m[0].update(y, p)
        self.m[1].update(y, p)
        self.m[2].update(p1 - p0)
        self.m[3].update(p0)
        self.m[4].update(p1)
        self.r[0].update(y, p)
        self.r[1].update(y, p)
        self.r[2].update(p1 - p0)
        if score is not None:
            for m in self.raw + self.rraw:
                m.update(y, score)


def per_call_us(fn, rows, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(rows)
        best = min(best, time.perf_counter() - t0)
    return best / len(rows) * 1e6


def main(n=200_000):
    rng = np.random.default_rng(0)
    s = rng.random(n)
    p0 = np.clip(s - 0.05, 0, 1)
    p1 = np.clip(s + 0.05, 0, 1)
    y = (rng.random(n) < s).astype(int)
    rows = list(zip(p0.tolist(), p1.tolist(), y.tolist(), s.tolist(), strict=True))

    def tracker(score):
        def run(rows):
            t = CalibrationTracker(window=1000)
            up = t.update
            if score:
                for a, b, c, d in rows:
                    up(a, b, c, score=d)
            else:
                for a, b, c, _ in rows:
                    up(a, b, c)

        return run

    def allriver(score):
        def run(rows):
            t = AllRiver(window=1000)
            up = t.update
            for a, b, c, d in rows:
                up(a, b, c, score=d if score else None)

        return run

    results = []
    for score in (False, True):
        ours = per_call_us(tracker(score), rows)
        ref = per_call_us(allriver(score), rows)
        results.append((f"update, score={'yes' if score else 'no'}", ours, ref))
    t = CalibrationTracker()
    tracker(True)(rows[:5000])
    for a, b, c, d in rows[:5000]:
        t.update(a, b, c, score=d)
    for flag in (False, True):
        k = 2000
        t0 = time.perf_counter()
        for _ in range(k):
            t.snapshot(reliability=flag)
        results.append(
            (f"snapshot(reliability={flag})", (time.perf_counter() - t0) / k * 1e6, None)
        )

    print(f"CalibrationTracker, {n} labels, window 1000, 10 bins (best of 3)")
    print(f"{'operation':32s} {'tracker µs':>11s} {'all-river µs':>13s} {'ratio':>7s}")
    for name, ours, ref in results:
        tail = f"{ref:13.2f} {ref / ours:6.1f}x" if ref is not None else f"{'':13s} {'':7s}"
        print(f"{name:32s} {ours:11.2f} {tail}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000)
