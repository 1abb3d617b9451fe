"""Benchmark the ScoreStore backends side by side: µs per (query a new score, then add it).

Both backends (numba, python) run on the same data in the same run; every cell prints
median / p99 µs per query + add and the python / numba ratio. Regimes at n = 10^4 .. 10^6
held pairs (10^7 for numba with --max-n 1e7); the brute-force refit (two sklearn isotonic
fits on n + 1 points) at 10^4 and 10^5 for scale; a sliding window (query + add + remove
the oldest); the time to bulk-build 10^6 pairs.

    python benchmarks/store.py             # n up to 10^6, both backends (~3 minutes)
    python benchmarks/store.py --quick     # 10^4 and 10^5 only, fewer operations
    python benchmarks/store.py --max-n 1e7 # numba also at 10^7 (python stops at 10^6)

Regimes: ``sigmoid`` (scores = sigmoid of a normal, labels from a smooth true calibration
curve), ``uniform`` (uniform scores, labels Bernoulli(score)), ``flat`` (labels independent
of scores: the worst case, one PAVA block of size Θ(n)).
"""

from __future__ import annotations

import argparse
import collections
import resource
import time

import numpy as np

from streamcal.core import ScoreStore
from streamcal.core.store import backend_class


def make(regime: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    if regime == "sigmoid":
        z = rng.normal(0.0, 1.5, n)
        s = 1.0 / (1.0 + np.exp(-z))
        true = 1.0 / (1.0 + np.exp(-(0.7 * z + 0.3)))  # a smooth miscalibration of s
    elif regime == "uniform":
        s = rng.random(n)
        true = s
    elif regime == "flat":
        s = rng.random(n)
        true = np.full(n, 0.3)
    else:
        raise ValueError(regime)
    return s, (rng.random(n) < true).astype(np.int64)


def time_ops(store: ScoreStore, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    out = np.empty(len(xs))
    clock = time.perf_counter
    query, add = store.query, store.add
    for i, (x, y) in enumerate(zip(xs.tolist(), ys.tolist(), strict=True)):
        t0 = clock()
        query(x)
        add(x, y)
        out[i] = clock() - t0
    return out * 1e6


def time_window_ops(store: ScoreStore, held, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Sliding window: query, add the new pair, remove the oldest."""
    out = np.empty(len(xs))
    clock = time.perf_counter
    query, add, remove = store.query, store.add, store.remove
    for i, (x, y) in enumerate(zip(xs.tolist(), ys.tolist(), strict=True)):
        t0 = clock()
        query(x)
        add(x, y)
        held.append((x, y))
        remove(*held.popleft())
        out[i] = clock() - t0
    return out * 1e6


def brute_force_us(s, y, xs, reps: int) -> float:
    from sklearn.isotonic import IsotonicRegression

    times = []
    for x in xs[:reps].tolist():
        t0 = time.perf_counter()
        ss = np.append(s, x)
        for label in (0, 1):
            IsotonicRegression(out_of_bounds="clip").fit(ss, np.append(y, label)).predict([x])
        times.append(time.perf_counter() - t0)
    return float(np.median(times) * 1e6)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-n", type=float, default=1e6, help="largest store size (default 1e6)")
    ap.add_argument("--python-max-n", type=float, default=1e6, help="largest for python")
    ap.add_argument("--quick", action="store_true", help="n = 1e4, 1e5 and fewer operations")
    ap.add_argument("--ops", type=int, default=3000, help="query+add operations per cell")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    max_n = int(1e5 if args.quick else args.max_n)
    ops = min(args.ops, 1000) if args.quick else args.ops
    sizes = [n for n in (10**4, 10**5, 10**6, 10**7) if n <= max_n]
    backends = []
    for name in ("numba", "python"):
        try:
            backends.append(backend_class(name))
        except ImportError as exc:
            print(f"  ({name} backend unavailable: {exc})")
    rng = np.random.default_rng(args.seed)
    for cls in backends:  # warm up (numba: load the kernels from the on-disk cache)
        time_ops(cls.from_arrays(*make("uniform", 1000, rng)), *make("uniform", 100, rng))

    def runs(cls, n):
        return cls.backend != "python" or n <= args.python_max_n

    cells = {}  # (n, regime, backend) -> (median, p99)
    brute = {}
    for n in sizes:
        for regime in ("sigmoid", "uniform", "flat"):
            s, y = make(regime, n + ops, rng)
            for cls in backends:
                if not runs(cls, n):
                    continue
                store = cls.from_arrays(s[:n], y[:n])
                us = time_ops(store, s[n:], y[n:])
                cells[n, regime, cls.backend] = (np.median(us), np.percentile(us, 99))
                print(
                    f"  n={n:>10,} {regime:<8} {cls.backend:<6} median {np.median(us):8.1f} µs"
                    f"  p99 {np.percentile(us, 99):8.1f} µs",
                    flush=True,
                )
                del store
            if n <= 10**5 and regime == "sigmoid":
                brute[n] = brute_force_us(s[:n], y[:n], s[n:], reps=20 if n > 10**4 else 100)

    windows = {}
    for n in [n for n in sizes if n <= 10**5]:
        for regime in ("sigmoid", "flat"):
            s, y = make(regime, n + ops, rng)
            for cls in backends:
                store = cls.from_arrays(s[:n], y[:n])
                held = collections.deque(zip(s[:n].tolist(), y[:n].tolist(), strict=True))
                us = time_window_ops(store, held, s[n:], y[n:])
                windows[n, regime, cls.backend] = (np.median(us), np.percentile(us, 99))
                del store

    builds = {}
    s, y = make("sigmoid", 10**6, rng)
    for cls in backends:
        t0 = time.perf_counter()
        cls.from_arrays(s, y)
        builds[cls.backend] = time.perf_counter() - t0

    names = [cls.backend for cls in backends]
    print()
    print("µs per query + add, median / p99, exact answers; ratio = python / numba (medians)")
    head = f"{'n':>11} {'regime':<8} | " + " | ".join(f"{b:>17}" for b in names)
    head += f" | {'ratio':>6} | {'brute force':>11}"
    print(head)
    print("-" * len(head))
    for n in sizes:
        for regime in ("sigmoid", "uniform", "flat"):
            row = [cells.get((n, regime, b)) for b in names]
            text = [f"{c[0]:7.1f} / {c[1]:7.1f}" if c else f"{'-':>17}" for c in row]
            ratio = ""
            if len(row) == 2 and all(row):
                ratio = f"{row[1][0] / row[0][0]:5.1f}x"
            bf = f"{brute[n]:9.0f} µs" if regime == "sigmoid" and n in brute else ""
            print(f"{n:>11,} {regime:<8} | " + " | ".join(text) + f" | {ratio:>6} | {bf:>11}")
    print()
    print("sliding window, µs per query + add + remove the oldest (median / p99)")
    for (n, regime, b), (med, p99) in sorted(windows.items()):
        print(f"  window {n:>9,} {regime:<8} {b:<6} {med:7.1f} / {p99:7.1f}")
    print()
    for b, sec in builds.items():
        print(f"bulk build of 10^6 pairs (from_arrays), {b}: {sec:.2f} s")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    print(f"peak process RSS: {peak:.0f} MiB (includes the generated data)")
    print("brute force = two sklearn IsotonicRegression fits on n + 1 points, sigmoid regime")


if __name__ == "__main__":
    main()
