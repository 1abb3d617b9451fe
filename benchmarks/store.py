"""Benchmark the ScoreStore: microseconds per (query a new score, then add it with its label).

Prints a table of median and p99 per query+add for three regimes at n = 10^4 .. 10^7 held
pairs with the brute-force refit (two sklearn isotonic fits on n + 1 points) at 10^4 and
10^5 measured in the same run and the ratio; a sliding-window table (query + add + remove
the oldest) up to 10^6; the time to bulk-build 10^6 pairs; the store's memory at the
largest n.

    python benchmarks/store.py             # full table (10^7 takes a few minutes)
    python benchmarks/store.py --quick     # 10^4 and 10^5 only, fewer operations
    python benchmarks/store.py --max-n 1000000

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
    ap.add_argument("--max-n", type=float, default=1e7, help="largest store size (default 1e7)")
    ap.add_argument("--quick", action="store_true", help="n = 1e4, 1e5 and fewer operations")
    ap.add_argument("--ops", type=int, default=5000, help="query+add operations per cell")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    max_n = int(1e5 if args.quick else args.max_n)
    ops = min(args.ops, 1000) if args.quick else args.ops
    sizes = [n for n in (10**4, 10**5, 10**6, 10**7) if n <= max_n]
    regimes = ("sigmoid", "uniform", "flat")
    rng = np.random.default_rng(args.seed)

    # warm the numba kernels (compiled once, then loaded from the on-disk cache)
    warm = ScoreStore.from_arrays(*make("uniform", 1000, rng))
    time_ops(warm, *make("uniform", 100, rng))

    rows = {}
    brute = {}
    store_bytes = None
    for n in sizes:
        for regime in regimes:
            s, y = make(regime, n + ops, rng)
            t0 = time.perf_counter()
            store = ScoreStore.from_arrays(s[:n], y[:n])
            build = time.perf_counter() - t0
            us = time_ops(store, s[n:], y[n:])
            rows[n, regime] = (np.median(us), np.percentile(us, 99), build)
            print(
                f"  n={n:>9,} {regime:<8} median {rows[n, regime][0]:8.1f} µs"
                f"  p99 {rows[n, regime][1]:8.1f} µs  (build {build:.2f} s)",
                flush=True,
            )
            if n == max(sizes) and regime == "sigmoid":
                store_bytes = sum(a.nbytes for a in store.__dict__.values() if hasattr(a, "nbytes"))
            if n <= 10**5 and regime == "sigmoid":
                brute[n] = brute_force_us(s[:n], y[:n], s[n:], reps=20 if n > 10**4 else 100)
                print(f"  n={n:>9,} brute force refit {brute[n]:10.1f} µs", flush=True)
            del store

    windows = {}
    for n in [n for n in sizes if n <= 10**6]:
        for regime in ("sigmoid", "flat"):
            s, y = make(regime, n + ops, rng)
            store = ScoreStore.from_arrays(s[:n], y[:n])
            held = collections.deque(zip(s[:n].tolist(), y[:n].tolist(), strict=True))
            us = time_window_ops(store, held, s[n:], y[n:])
            windows[n, regime] = (np.median(us), np.percentile(us, 99))
            print(
                f"  window={n:>9,} {regime:<8} median {windows[n, regime][0]:8.1f} µs"
                f"  p99 {windows[n, regime][1]:8.1f} µs",
                flush=True,
            )
            del store

    s, y = make("sigmoid", 10**6, rng)
    t0 = time.perf_counter()
    ScoreStore.from_arrays(s, y)
    bulk = time.perf_counter() - t0

    print()
    print("µs per query+add (median / p99), exact answers")
    head = f"{'n':>11} | " + " | ".join(f"{r:>17}" for r in regimes)
    head += f" | {'brute force':>11} | {'ratio':>7}"
    print(head)
    print("-" * len(head))
    for n in sizes:
        cells = [f"{rows[n, r][0]:7.1f} / {rows[n, r][1]:7.1f}" for r in regimes]
        bf = f"{brute[n]:11.0f} | {brute[n] / rows[n, 'sigmoid'][0]:6.0f}x" if n in brute else ""
        print(f"{n:>11,} | " + " | ".join(cells) + (f" | {bf}" if bf else ""))
    print()
    print("sliding window, µs per query + add + remove oldest (median / p99)")
    print(f"{'window':>11} | {'sigmoid':>17} | {'flat':>17}")
    for n in sorted({n for n, _ in windows}):
        cells = [f"{windows[n, r][0]:7.1f} / {windows[n, r][1]:7.1f}" for r in ("sigmoid", "flat")]
        print(f"{n:>11,} | " + " | ".join(cells))
    print()
    print(f"bulk build of 10^6 pairs (from_arrays): {bulk:.2f} s")
    print(f"store arrays at n = {max(sizes):,}: {store_bytes / 2**20:.0f} MiB")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    print(f"peak process RSS: {peak:.0f} MiB (includes the generated data)")
    print("brute force = two sklearn IsotonicRegression fits on n + 1 points, sigmoid regime")


if __name__ == "__main__":
    main()
