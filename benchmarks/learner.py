"""Benchmark of VennAbersClassifier: per-event cost of each mode, and prequential quality.

Run: ``python benchmarks/learner.py`` (full, several minutes) or ``--quick``.

Tables, all measured side by side in one run:

1. cost: µs per event (``predict_proba_one`` + ``learn_one``) of each mode around
   ``StandardScaler() | LogisticRegression()`` on ``Hyperplane(n_features=20)``, after
   ``--warmup`` labels, against the bare pipeline. The variants run round-robin in blocks
   of 1000 events (one refresh period of the default) on the same events; the median
   block time is reported, robust to bursts of load from other processes.
2. va: events/s of mode "va" at ``--va-window`` (vectorised linear path and, on fewer
   events, the generic object-by-object path).
3. quality: prequential log loss, square loss and (mean p0, frequency of 1s, mean p1) per
   mode x model on Phishing and Bananas in stream order and shuffled, and on a synthetic
   imbalanced stream with known probabilities. "valid" = mean p0 <= frequency <= mean p1
   within 3 standard errors of the mean of y - p0 (resp. p1 - y).
4. va quality: mode "va" (small window, stream prefix) next to the default on that prefix.
5. mondrian: µs per event of the default mode with ``by`` (``--categories`` categories,
   window 1000 each) next to the same classifier without ``by``, on the same events
   (Hyperplane(n_features=20) plus a uniform category feature the model does not see),
   after every category has reached its full window. The model learns in batches of
   ``refresh_every`` per category (one batch per ``categories * 1000`` labels), so the
   mean over whole batch periods is the figure that counts; the median block is shown
   too. Memory per category: the deep size of one category's state (features, scores,
   store), the shared model excluded.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections import deque

import numpy as np
from river import compose, datasets, linear_model, naive_bayes, preprocessing, tree
from river.datasets import synth

from streamcal import VennAbersClassifier


def lr():
    return preprocessing.StandardScaler() | linear_model.LogisticRegression()


MODELS = {"lr": lr, "gnb": naive_bayes.GaussianNB, "ht": tree.HoeffdingTreeClassifier}


def table(title, header, rows):
    print(f"\n### {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for r in rows:
        print("| " + " | ".join(str(c) for c in r) + " |")


# --- 1. cost -------------------------------------------------------------------------


class Bare:
    """The bare pipeline behind the same interface."""

    def __init__(self, model):
        self.model = model

    def predict_proba_one(self, x):
        return self.model.predict_proba_one(x)

    def learn_one(self, x, y):
        self.model.learn_one(x, y)


def side_by_side(variants, warm, measure, rng, block=1000):
    """Warm every variant up, then time them on the same events: {name: [s / event of each
    block]}. Round-robin blocks in a shuffled order: a burst of load from other processes
    hits whichever variant runs at that moment, which the median block is robust to. A
    block is one refresh period of the default (1000 = window), so batch work counts."""
    for name, v in variants.items():
        t = time.perf_counter()
        for x, y in warm:
            v.predict_proba_one(x)
            v.learn_one(x, y)
        print(f"  warm-up {name}: {time.perf_counter() - t:.1f} s", flush=True)
    per_block = {name: [] for name in variants}
    order = list(variants)
    for i in range(0, len(measure), block):
        chunk = measure[i : i + block]
        rng.shuffle(order)
        for name in order:
            v = variants[name]
            t = time.perf_counter()
            for x, y in chunk:
                v.predict_proba_one(x)
                v.learn_one(x, y)
            per_block[name].append((time.perf_counter() - t) / len(chunk))
    return per_block


def cost(args):
    n_feat = 20
    stream = synth.Hyperplane(seed=42, n_features=n_feat)
    warm = list(stream.take(args.warmup))
    measure = list(synth.Hyperplane(seed=43, n_features=n_feat).take(args.events))
    variants = {
        "bare pipeline": Bare(lr()),
        "pretrained (default)": VennAbersClassifier(lr()),
        "sva": VennAbersClassifier(lr(), mode="sva"),
        "sva, refresh_every=100": VennAbersClassifier(lr(), mode="sva", refresh_every=100),
    }
    per_block = side_by_side(variants, warm, measure, random.Random(0))
    median = {name: float(np.median(b)) for name, b in per_block.items()}
    mean = {name: float(np.mean(b)) for name, b in per_block.items()}
    base = median["bare pipeline"]
    rows = [
        (
            name,
            f"{median[name] * 1e6:.1f}",
            f"{mean[name] * 1e6:.1f}",
            f"{median[name] / base:.2f}x",
            f"{1 / median[name]:,.0f}",
        )
        for name in variants
    ]
    table(
        f"Per-event cost, StandardScaler | LogisticRegression, Hyperplane(n_features=20), "
        f"after {args.warmup:,} labels, {len(measure):,} events timed",
        ["variant", "µs / event (median block)", "(mean)", "vs bare", "events / s"],
        rows,
    )


# --- 2. va throughput ----------------------------------------------------------------


def va_speed(args):
    w = args.va_window
    data = list(synth.Hyperplane(seed=42, n_features=20).take(w + args.va_speed_events))
    rows = []
    for name, generic, n in [
        ("va, numpy path for (scaled) LR", False, args.va_speed_events),
        ("va, object by object", True, max(20, args.va_speed_events // 10)),
    ]:
        clf = VennAbersClassifier(lr(), mode="va", window=w)
        if generic:
            clf._state.matrix = None
        for x, y in data[:w]:
            clf.learn_one(x, y)
        t = time.perf_counter()
        for x, y in data[w : w + n]:
            clf.predict_proba_one(x)
            clf.learn_one(x, y)
        s = time.perf_counter() - t
        rows.append((name, w, n, f"{s / n * 1e3:.2f}", f"{n / s:,.0f}"))
    table(
        "Mode va throughput, StandardScaler | LogisticRegression, Hyperplane(n_features=20)",
        ["variant", "window", "events", "ms / event", "events / s"],
        rows,
    )


# --- 3./4. quality -------------------------------------------------------------------


def imbalanced(n, seed=5):
    """x ~ N(0, I_5), P(y = 1 | x) = sigmoid(2 x0 - x1 - 4): about 6 % ones."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 5))
    p = 1 / (1 + np.exp(-(2 * X[:, 0] - X[:, 1] - 4)))
    y = rng.random(n) < p
    return [
        ({f"x{j}": float(v) for j, v in enumerate(row)}, bool(t))
        for row, t in zip(X, y, strict=True)
    ]


def streams(args):
    out = {}
    for name, ds in [("Phishing", datasets.Phishing), ("Bananas", datasets.Bananas)]:
        data = list(ds())
        out[(name, "stream")] = data
        shuffled = data[:]
        random.Random(0).shuffle(shuffled)
        out[(name, "shuffled")] = shuffled
    out[("Synthetic 6% ones", "iid")] = imbalanced(args.synthetic)
    return out


def prequential(clf, data, raw=False):
    p0s, p1s, ps, ys = [], [], [], []
    for x, y in data:
        if raw:
            p = clf.predict_proba_one(x).get(True, 0.5) if clf.predict_proba_one(x) else 0.5
            p0 = p1 = p
        else:
            iv = clf.predict_interval_one(x)
            p0, p1, p = iv.p0, iv.p1, iv.p
        p0s.append(p0)
        p1s.append(p1)
        ps.append(p)
        ys.append(float(y))
        clf.learn_one(x, y)
    return np.array(p0s), np.array(p1s), np.array(ps), np.array(ys)


def summary(p0, p1, p, y, raw=False):
    pc = np.clip(p, 1e-15, 1 - 1e-15)
    log = float(-np.mean(y * np.log(pc) + (1 - y) * np.log(1 - pc)))
    sq = float(np.mean((y - p) ** 2))
    if raw:
        return [f"{log:.4f}", f"{sq:.4f}", "", f"{y.mean():.4f}", "", ""]
    d0, d1 = y - p0, p1 - y
    se0 = 3 * d0.std(ddof=1) / math.sqrt(len(y))
    se1 = 3 * d1.std(ddof=1) / math.sqrt(len(y))
    ok = d0.mean() >= -se0 and d1.mean() >= -se1
    return [
        f"{log:.4f}",
        f"{sq:.4f}",
        f"{p0.mean():.4f}",
        f"{y.mean():.4f}",
        f"{p1.mean():.4f}",
        "yes" if ok else "**NO**",
    ]


QUALITY_MODES = {
    "bare model": None,
    "pretrained": {},
    "sva": {"mode": "sva"},
    "sva, refresh 100": {"mode": "sva", "refresh_every": 100},
    "sva, no window": {"mode": "sva", "window": None},
}


def quality(args):
    rows = []
    for (name, order), data in streams(args).items():
        for model in MODELS:
            for mode, kw in QUALITY_MODES.items():
                t = time.perf_counter()
                if kw is None:
                    res = summary(*prequential(MODELS[model](), data, raw=True), raw=True)
                else:
                    clf = VennAbersClassifier(MODELS[model](), **kw)
                    res = summary(*prequential(clf, data))
                rows.append([name, order, model, mode, *res])
                print(
                    f"  {name} {order} {model} {mode}: {time.perf_counter() - t:.1f} s", flush=True
                )
    table(
        "Prequential quality (window 1000 unless said, log merge; 'valid': mean p0 <= freq "
        "<= mean p1 within 3 s.e.)",
        ["data", "order", "model", "mode", "log loss", "square loss", "mean p0", "freq",
         "mean p1", "valid"],
        rows,
    )  # fmt: skip


def va_quality(args):
    rows = []
    n, w = args.va_events, args.va_quality_window
    for (name, order), data in streams(args).items():
        prefix = data[:n]
        for model in MODELS:
            for mode, kw in [("pretrained", {}), (f"va, window {w}", {"mode": "va", "window": w})]:
                clf = VennAbersClassifier(MODELS[model](), **kw)
                rows.append([name, order, model, mode, *summary(*prequential(clf, prefix))])
            print(f"  va {name} {order} {model}", flush=True)
    table(
        f"Mode va on the first {n} events (pretrained on the same prefix for comparison)",
        ["data", "order", "model", "mode", "log loss", "square loss", "mean p0", "freq",
         "mean p1", "valid"],
        rows,
    )  # fmt: skip


# --- 5. mondrian ----------------------------------------------------------------------


def deep_size(obj, skip=(), seen=None) -> int:
    """Bytes held by ``obj`` and everything it references, except the objects in ``skip``."""
    seen = {id(s) for s in skip} if seen is None else seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        return sys.getsizeof(obj) if obj.base is None else 0
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        size += sum(deep_size(k, (), seen) + deep_size(v, (), seen) for k, v in obj.items())
    elif isinstance(obj, list | tuple | deque | set):
        size += sum(deep_size(v, (), seen) for v in obj)
    elif hasattr(obj, "__dict__"):
        size += deep_size(vars(obj), (), seen)
    return size


def mondrian(args):
    k, window = args.categories, 1000
    rng = random.Random(1)

    def with_category(seed, n):
        return [
            ({**x, "category": rng.randrange(k)}, y)
            for x, y in synth.Hyperplane(seed=seed, n_features=20).take(n)
        ]

    def model():
        return compose.Discard("category") | lr()

    warm = with_category(42, args.mondrian_warmup or 3 * k * window)
    measure = with_category(43, args.mondrian_events or 2 * k * window)
    variants = {
        "without by": VennAbersClassifier(model(), window=window),
        f"by, {k} categories": VennAbersClassifier(model(), window=window, by="category"),
    }
    per_block = side_by_side(variants, warm, measure, rng)
    mean = {name: float(np.mean(b)) for name, b in per_block.items()}
    median = {name: float(np.median(b)) for name, b in per_block.items()}
    plain, by = variants.values()
    sizes = [deep_size(st, skip=(by.model, by._state)) for st in by._state.categories.values()]
    memory = {
        "without by": deep_size(plain._state, skip=(plain.model,)),
        f"by, {k} categories": float(np.mean(sizes)),
    }
    base = mean["without by"]
    rows = [
        (
            name,
            f"{mean[name] * 1e6:.1f}",
            f"{median[name] * 1e6:.1f}",
            f"{mean[name] / base:.2f}x",
            f"{variants[name].calibration_size:,}",
            f"{memory[name] / 1e6:.2f}",
        )
        for name in variants
    ]
    table(
        f"Mondrian: default mode, window {window} per category, "
        f"StandardScaler | LogisticRegression, Hyperplane(n_features=20), "
        f"after {len(warm):,} labels, {len(measure):,} events timed",
        ["variant", "µs / event (mean)", "(median block)", "vs without by",
         "calibration pairs", "MB per calibration set"],
        rows,
    )  # fmt: skip


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, about a minute")
    ap.add_argument("--warmup", type=int, help="labels seen before timing (default 100000)")
    ap.add_argument("--events", type=int, help="events timed per variant (default 20000)")
    ap.add_argument("--va-window", type=int, default=1000)
    ap.add_argument("--va-speed-events", type=int, help="events timed for va (default 2000)")
    ap.add_argument("--va-events", type=int, help="prefix for the va quality table (400)")
    ap.add_argument("--va-quality-window", type=int, default=50)
    ap.add_argument("--synthetic", type=int, help="length of the synthetic stream (20000)")
    ap.add_argument("--categories", type=int, help="categories for mondrian (default 100)")
    ap.add_argument("--mondrian-warmup", type=int, help="default 3 * categories * 1000")
    ap.add_argument("--mondrian-events", type=int, help="default 2 * categories * 1000")
    ap.add_argument(
        "--only", choices=["cost", "va", "quality", "va-quality", "mondrian"], action="append"
    )
    args = ap.parse_args(argv)
    quick = args.quick
    args.warmup = args.warmup or (10_000 if quick else 100_000)
    args.events = args.events or (2_000 if quick else 20_000)
    args.va_speed_events = args.va_speed_events or (300 if quick else 2_000)
    args.va_events = args.va_events or (150 if quick else 400)
    args.synthetic = args.synthetic or (3_000 if quick else 20_000)
    args.categories = args.categories or (10 if quick else 100)
    if quick:
        args.va_quality_window = min(args.va_quality_window, 20)
    parts = {
        "cost": cost,
        "va": va_speed,
        "quality": quality,
        "va-quality": va_quality,
        "mondrian": mondrian,
    }
    for name in args.only or parts:
        parts[name](args)


if __name__ == "__main__":
    main()
