"""Benchmark of VennAbersClassifier: per-event cost of each mode, and prequential quality.

Run: ``python benchmarks/learner.py`` (full, several minutes) or ``--quick``.
``--baseline-tree DIR`` (e.g. ``git archive <commit> | tar -x -C DIR``) adds to the cost
table the same variants of the streamcal in DIR, loaded into the same process and timed
in the same shuffled blocks: a change's cost measured side by side. ``--pickled`` pickles
every variant's model once after its warm-up, as the processor's checkpoints do (see
``_pickle_once``: on CPython 3.11 that alone makes river's model ~6% slower).

Tables, all measured side by side in one run:

1. cost: µs per event (``predict_proba_one`` + ``learn_one``) of each mode around
   ``StandardScaler() | LogisticRegression()`` on ``Hyperplane(n_features=20)``, after
   ``--warmup`` labels, against the bare pipeline; the default mode (and with
   ``protect=True``) also on the pure-Python store, the one a plain ``pip install``
   without the ``[fast]`` extra runs (each variant's store chosen by
   ``STREAMCAL_STORE_BACKEND``, set while it runs). The variants run round-robin in blocks
   of 1000 events (one refresh period of the default) on the same events; the median
   block time is reported, robust to bursts of load from other processes. The python-store
   variants still run the protector's and the alarm's kernels compiled when numba imports:
   the plain install is measured in a process without numba,
   ``PYTHONPATH=.ci/without-numba python benchmarks/learner.py --only cost`` (every
   variant then runs uncompiled). ``--protection``: only the bare pipeline and the
   default mode with and without ``protect=True``; after the table, protect=True's
   per-block time ratio to the same classifier without it. ``--cpu``: blocks timed by this
   process's CPU time (``time.process_time``), which other processes' load on a shared
   machine disturbs far less than the wall clock.
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
6. mini-batches: µs per row of ``predict_proba_many`` against a loop of
   ``predict_proba_one``, and of ``learn_many`` against a loop of ``learn_one`` (each
   after its prediction, as a loop would), on the same batches of ``--batch`` rows of
   Hyperplane(n_features=20), per model: ``StandardScaler | LogisticRegression`` (one
   batched scoring), ``FieldScore`` (the column itself) and ``GaussianNB`` (scored row by
   row: the store pass alone). Both variants start from one state (a copy); the pair runs
   in a shuffled order per batch, ``--repeats`` times; medians and ranges of the ratios.
7. accuracy: ``predict_one`` of ``VennAbersClassifier`` (the front door: multiclass
   streams go to the multiclass machinery; ``VennAbersMultiClassifier`` for integer
   classes, whose first labels 0 and 1 would make the front door binary) against the
   bare model's, counted from label 1,001 on, on shuffled multiclass data sets (river's
   ImageSegments; scikit-learn's digits, the UCI/KEEL optdigits test part; synthetic
   LED, Waveform and RandomRBF), with
   GaussianNB and a Hoeffding tree; and the default mode's lag: accuracy by stretch of
   the stream (labels 1-250, 251-500, 501-1000, then on) on binary and multiclass data.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import math
import os
import random
import sys
import time
from collections import deque

import numpy as np
from river import compose, datasets, linear_model, naive_bayes, preprocessing, tree
from river.datasets import synth

from streamcal import FieldScore, VennAbersClassifier, VennAbersMultiClassifier


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


class OnBackend:
    """A classifier whose score stores are all made by one backend: the environment
    variable the stores read is set while it runs (the variants run one at a time)."""

    def __init__(self, backend, make):
        self.backend = backend
        with self:
            self.clf = make()

    def __enter__(self):
        import os

        self._old = os.environ.get("STREAMCAL_STORE_BACKEND")
        os.environ["STREAMCAL_STORE_BACKEND"] = self.backend

    def __exit__(self, *exc):
        import os

        if self._old is None:
            os.environ.pop("STREAMCAL_STORE_BACKEND", None)
        else:
            os.environ["STREAMCAL_STORE_BACKEND"] = self._old

    def predict_proba_one(self, x):  # run inside the block's ``with`` (side_by_side)
        return self.clf.predict_proba_one(x)

    def learn_one(self, x, y):
        self.clf.learn_one(x, y)


class Bare:
    """The bare pipeline behind the same interface (``unpickled``: left out of
    ``--pickled``, to show what pickling alone does to the model's speed)."""

    def __init__(self, model, unpickled: bool = False):
        self.model = model
        self.unpickled = unpickled

    def predict_proba_one(self, x):
        return self.model.predict_proba_one(x)

    def learn_one(self, x, y):
        self.model.learn_one(x, y)


def side_by_side(variants, warm, measure, rng, block=1000, pickled=False, clock=time.perf_counter):
    """Warm every variant up, then time them on the same events: {name: [s / event of each
    block]}. Round-robin blocks in a shuffled order: a burst of load from other processes
    hits whichever variant runs at that moment, which the median block is robust to. A
    block is one refresh period of the default (1000 = window), so batch work counts.
    ``pickled``: each variant's model is pickled once after its warm-up (``_pickle_once``).
    ``clock``: ``time.process_time`` counts this process's CPU time only (``--cpu``)."""
    for name, v in variants.items():
        t = time.perf_counter()
        with v if isinstance(v, OnBackend | InTree) else contextlib.nullcontext():
            for x, y in warm:
                v.predict_proba_one(x)
                v.learn_one(x, y)
            if pickled:
                _pickle_once(v)
        print(f"  warm-up {name}: {time.perf_counter() - t:.1f} s", flush=True)
    per_block = {name: [] for name in variants}
    order = list(variants)
    for i in range(0, len(measure), block):
        chunk = measure[i : i + block]
        rng.shuffle(order)
        for name in order:
            v = variants[name]
            with v if isinstance(v, OnBackend | InTree) else contextlib.nullcontext():
                t = clock()
                for x, y in chunk:
                    v.predict_proba_one(x)
                    v.learn_one(x, y)
                per_block[name].append((clock() - t) / len(chunk))
    return per_block


def _pickle_once(variant) -> None:
    """Pickle the variant's model once, as a checkpoint (``to_state``) does. On CPython
    3.11 pickling an object turns its attributes into a real ``__dict__``, after which
    river's attribute lookups cost ~6% more for good: a model that is ever saved pays
    that whatever else runs, and the guard of issue 29 pickles the model too."""
    import pickle

    inner = getattr(variant, "inner", variant)
    inner = getattr(inner, "clf", inner)
    if isinstance(inner, Bare):
        if not inner.unpickled:
            pickle.dumps(inner.model)
    else:
        inner.to_state()


def _take_streamcal_modules() -> dict:
    """Remove the streamcal modules from ``sys.modules``; return them."""
    names = [k for k in sys.modules if k == "streamcal" or k.startswith("streamcal.")]
    return {k: sys.modules.pop(k) for k in names}


class InTree:
    """A variant of the streamcal in another directory (``--baseline-tree``), run in this
    process: while it runs (``with``), ``sys.modules`` holds that tree's streamcal modules,
    so that what it imports at call time (the store backend, ...) is its own too."""

    def __init__(self, tree: str, make):
        self.tree = os.path.abspath(tree)
        self.modules: dict = {}
        sys.path.insert(0, self.tree)
        try:
            with self:
                old = importlib.import_module("streamcal")
                if not os.path.abspath(old.__file__).startswith(self.tree):
                    raise SystemExit(f"--baseline-tree {tree}: no streamcal package there")
                self.inner = make(importlib.import_module("streamcal").VennAbersClassifier)
        finally:
            sys.path.remove(self.tree)

    def __enter__(self):
        self._ours = _take_streamcal_modules()
        sys.modules.update(self.modules)
        self._dont_write = sys.dont_write_bytecode
        sys.dont_write_bytecode = True  # leave the other tree as it is
        if isinstance(getattr(self, "inner", None), OnBackend):
            self.inner.__enter__()

    def __exit__(self, *exc):
        if isinstance(getattr(self, "inner", None), OnBackend):
            self.inner.__exit__(*exc)
        sys.dont_write_bytecode = self._dont_write
        self.modules = _take_streamcal_modules()
        sys.modules.update(self._ours)

    def predict_proba_one(self, x):  # run inside the block's ``with`` (side_by_side)
        return self.inner.predict_proba_one(x)

    def learn_one(self, x, y):
        self.inner.learn_one(x, y)


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
        "pretrained, protect=True": VennAbersClassifier(lr(), protect=True),
        "pretrained, python store (plain install)": OnBackend(
            "python", lambda: VennAbersClassifier(lr())
        ),
        "pretrained, protect=True, python store": OnBackend(
            "python", lambda: VennAbersClassifier(lr(), protect=True)
        ),
    }
    if args.protection:  # protection's cost alone: each protected variant beside its plain one
        variants = {k: v for k, v in variants.items() if k in PROTECTION_PAIRS
                    or k in PROTECTION_PAIRS.values() or k == "bare pipeline"}  # fmt: skip
    if args.pickled:  # what pickling alone does: the bare pipeline never pickled
        variants = {"bare pipeline, never pickled": Bare(lr(), unpickled=True), **variants}
    if args.baseline_tree:
        ours = list(variants.items())
        variants = {k: v for k, v in ours if isinstance(v, Bare)}
        for name, v in ours:
            if isinstance(v, Bare):
                continue
            variants[name] = v
            variants[f"{name} (baseline)"] = InTree(args.baseline_tree, _twin(v))
    clock = time.process_time if args.cpu else time.perf_counter
    per_block = side_by_side(variants, warm, measure, random.Random(0), pickled=args.pickled,
                             clock=clock)  # fmt: skip
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
        f"after {args.warmup:,} labels, {len(measure):,} events timed"
        + (", each model pickled once after its warm-up" if args.pickled else "")
        + (", CPU time of this process" if args.cpu else ""),
        ["variant", "µs / event (median block)", "(mean)", "vs bare", "events / s"],
        rows,
    )
    _protection_ratios(per_block)
    if args.pickled:
        never = np.array(per_block["bare pipeline, never pickled"])
        r = np.array(per_block["bare pipeline"]) / never
        print(f"\nthe bare pipeline pickled once against never pickled: {np.median(r):.3f}x per "
              f"block (median; range {r.min():.3f}-{r.max():.3f})")  # fmt: skip
    if args.baseline_tree:
        pairs = [n for n in variants if f"{n} (baseline)" in variants]
        rows = []
        for name in pairs:
            ratios = np.array(per_block[name]) / np.array(per_block[f"{name} (baseline)"])
            diff = (median[name] - median[f"{name} (baseline)"]) * 1e6
            rows.append((name, f"{np.median(ratios):.3f}",
                         f"{ratios.min():.3f}-{ratios.max():.3f}", f"{diff:+.2f}"))  # fmt: skip
        table(
            f"This checkout against {args.baseline_tree}: per-block time ratio (same events, "
            "same shuffled round)",
            ["variant", "ratio (median block)", "range", "µs / event (median difference)"],
            rows,
        )


# protected variant -> its plain twin (``--protection``, and the ratios after the table)
PROTECTION_PAIRS = {
    "pretrained, protect=True": "pretrained (default)",
    "pretrained, protect=True, python store": "pretrained, python store (plain install)",
}


def _protection_ratios(per_block) -> None:
    """protect=True against the same classifier without it: per-block time ratios (same
    events, same shuffled round), the figure issue 21 bounds at 1.25x."""
    for prot, plain in PROTECTION_PAIRS.items():
        if prot in per_block and plain in per_block:
            r = np.array(per_block[prot]) / np.array(per_block[plain])
            print(f"\n{prot} against {plain}: {np.median(r):.3f}x per block (median; "
                  f"range {r.min():.3f}-{r.max():.3f})")  # fmt: skip


def _twin(variant):
    """The maker of ``variant``'s baseline twin, given the baseline's classifier class."""
    if isinstance(variant, OnBackend):
        return lambda old: OnBackend(
            variant.backend, lambda: old(lr(), **_settings_of(variant.clf))
        )
    return lambda old: old(lr(), **_settings_of(variant))


def _settings_of(clf) -> dict:
    """The constructor settings of a classifier (to build its baseline twin)."""
    return {k: getattr(clf, k) for k in ("mode", "window", "refresh_every", "protect")}


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
    if args.baseline_tree:
        va_against_baseline(args, data)


def _va(cls, window: int, generic: bool):
    clf = cls(lr(), mode="va", window=window)
    if generic:
        clf._state.matrix = None
    return clf


def va_against_baseline(args, data):
    """Mode va of this checkout and of ``--baseline-tree``, side by side in shuffled
    blocks (each path its own pair), after both have learned the first ``window``."""
    w = args.va_window
    rows = []
    for name, generic, n in [
        ("va, numpy path for (scaled) LR", False, args.va_speed_events),
        ("va, object by object", True, max(20, args.va_speed_events // 10)),
    ]:
        variants = {
            name: _va(VennAbersClassifier, w, generic),
            f"{name} (baseline)": InTree(args.baseline_tree, lambda cls, g=generic: _va(cls, w, g)),
        }
        for v in variants.values():
            with v if isinstance(v, InTree) else contextlib.nullcontext():
                for x, y in data[:w]:
                    v.learn_one(x, y)
        timed = data[w : w + n]
        blocks = side_by_side(variants, [], timed, random.Random(1), block=max(5, n // 10))
        ours, theirs = np.array(blocks[name]), np.array(blocks[f"{name} (baseline)"])
        ratios = ours / theirs
        spread = f"{ratios.min():.3f}-{ratios.max():.3f}"
        rows.append((name, f"{np.median(ours) * 1e3:.2f}", f"{np.median(theirs) * 1e3:.2f}",
                     f"{np.median(ratios):.3f}", spread))  # fmt: skip
    table(
        f"Mode va against {args.baseline_tree} (window {w}; per-block ratio, same events)",
        ["variant", "ms / event", "baseline ms / event", "ratio (median block)", "range"],
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


# --- 6. mini-batches -------------------------------------------------------------------


def with_score(rows, rng):
    """Hyperplane rows plus a field "score" (a noisy probability) for FieldScore."""
    return [({**x, "score": min(1.0, max(0.0, 0.5 + rng.gauss(0, 0.2)))}, y) for x, y in rows]


BATCH_MODELS = {
    "StandardScaler | LogisticRegression": lr,
    "FieldScore": lambda: FieldScore("score"),
    "GaussianNB": naive_bayes.GaussianNB,
}


def minibatch(args):
    import copy

    import pandas as pd

    rng = random.Random(3)
    n, size = args.batch_events, args.batch
    warm = with_score(list(synth.Hyperplane(seed=42, n_features=20).take(args.warmup // 4)), rng)
    data = with_score(list(synth.Hyperplane(seed=44, n_features=20).take(n)), rng)
    batches = [data[i : i + size] for i in range(0, n, size)]
    frames = [(pd.DataFrame([x for x, _ in b]), pd.Series([y for _, y in b])) for b in batches]
    rows = []
    for name, make in BATCH_MODELS.items():
        ratios = {"predict": [], "learn": [], "both": []}
        times = {"one": [], "many": [], "one_learn": [], "many_learn": []}
        for _ in range(args.repeats):
            base = VennAbersClassifier(make())
            for x, y in warm:
                base.learn_one(x, y)
            one, many = base, copy.deepcopy(base)
            tp = {"one": 0.0, "many": 0.0}
            tl = {"one": 0.0, "many": 0.0}
            for b, (X, y) in zip(batches, frames, strict=True):
                for who in rng.sample(["one", "many"], 2):
                    if who == "one":
                        t = time.perf_counter()
                        for x, _ in b:
                            one.predict_proba_one(x)
                        t2 = time.perf_counter()
                        for x, yi in b:
                            one.learn_one(x, yi)
                        t3 = time.perf_counter()
                    else:
                        t = time.perf_counter()
                        many.predict_proba_many(X)
                        t2 = time.perf_counter()
                        many.learn_many(X, y)
                        t3 = time.perf_counter()
                    tp[who] += t2 - t
                    tl[who] += t3 - t2
            ratios["predict"].append(tp["one"] / tp["many"])
            ratios["learn"].append(tl["one"] / tl["many"])
            ratios["both"].append((tp["one"] + tl["one"]) / (tp["many"] + tl["many"]))
            times["one"].append(tp["one"] / n)
            times["many"].append(tp["many"] / n)
            times["one_learn"].append(tl["one"] / n)
            times["many_learn"].append(tl["many"] / n)
            print(f"  {name}: predict {ratios['predict'][-1]:.2f}x, learn "
                  f"{ratios['learn'][-1]:.2f}x", flush=True)  # fmt: skip

        def med(v, scale=1e6):
            return f"{np.median(v) * scale:.1f}"

        def ratio(v):
            return f"{np.median(v):.2f}x ({min(v):.2f}-{max(v):.2f})"

        rows.append((name, med(times["one"]), med(times["many"]), ratio(ratios["predict"]),
                     med(times["one_learn"]), med(times["many_learn"]), ratio(ratios["learn"]),
                     ratio(ratios["both"])))  # fmt: skip
    table(
        f"Mini-batches of {size} rows, default mode, Hyperplane(n_features=20), {n:,} rows "
        f"after {len(warm):,} labels, {args.repeats} runs (median, range)",
        ["model", "µs/row predict_proba_one", "predict_proba_many", "speed-up",
         "µs/row learn_one", "learn_many", "speed-up", "both"],
        rows,
    )  # fmt: skip


# --- 7. accuracy --------------------------------------------------------------------


def digits():
    from sklearn.datasets import load_digits

    d = load_digits()
    return [
        ({f"p{j}": float(v) for j, v in enumerate(row)}, int(t))
        for row, t in zip(d.data, d.target, strict=True)
    ]


def multiclass_sets(n):
    return {
        "ImageSegments (river)": lambda: list(datasets.ImageSegments()),
        "digits (UCI optdigits)": digits,
        "LED": lambda: list(synth.LED(seed=1, noise_percentage=0.1).take(n)),
        "Waveform": lambda: list(synth.Waveform(seed=1).take(n)),
        "RandomRBF, 5 classes": lambda: list(
            synth.RandomRBF(seed_model=1, seed_sample=1, n_classes=5).take(n)
        ),
    }


def hits(clf, data, cuts):
    """Prequential predict_one hits per stretch of labels: {(lo, hi): (hits, count)}."""
    out = {c: [0, 0] for c in cuts}
    for i, (x, y) in enumerate(data, start=1):
        ok = clf.predict_one(x) == y
        for lo, hi in cuts:
            if lo <= i <= hi:
                out[(lo, hi)][0] += ok
                out[(lo, hi)][1] += 1
        clf.learn_one(x, y)
    return {c: (h, k) for c, (h, k) in out.items()}


def accuracy(args):
    models = {"GaussianNB": naive_bayes.GaussianNB, "Hoeffding tree": tree.HoeffdingTreeClassifier}
    rows = []
    late = (1001, 10**9)
    for name, load in multiclass_sets(args.accuracy_events).items():
        data = load()
        random.Random(0).shuffle(data)
        for mname, model in models.items():
            bare = hits(model(), data, [late])[late]
            if isinstance(data[0][1], str):
                wrapped_clf = VennAbersClassifier(model())  # the front door
            else:  # integer classes: 0 and 1 first would make the front door binary
                wrapped_clf = VennAbersMultiClassifier(model())
            wrapped = hits(wrapped_clf, data, [late])[late]
            a, b = bare[0] / bare[1], wrapped[0] / wrapped[1]
            rows.append((name, mname, f"{bare[1]:,}", f"{a:.3f}", f"{b:.3f}", f"{b / a:.3f}"))
            print(f"  {name} {mname}: {b / a:.3f}", flush=True)
    table(
        "predict_one accuracy from label 1,001 on, shuffled multiclass data sets: "
        "VennAbersClassifier (string classes; VennAbersMultiClassifier for integer classes, "
        "the same machinery) with default settings against the bare model",
        ["data", "model", "labels counted", "bare", "VennAbersClassifier", "ratio"],
        rows,
    )
    cuts = [(1, 250), (251, 500), (501, 1000), (1001, 10**9)]
    lag = {
        "Phishing (binary)": lambda: list(datasets.Phishing()),
        "Bananas (binary)": lambda: list(datasets.Bananas()),
        "ImageSegments": lambda: list(datasets.ImageSegments()),
    }
    rows = []
    for name, load in lag.items():
        data = load()
        random.Random(0).shuffle(data)
        model = lr if "binary" in name else naive_bayes.GaussianNB
        bare = hits(model(), data, cuts)
        wrapped = hits(VennAbersClassifier(model()), data, cuts)
        cells = []
        for c in cuts:
            a, b = bare[c][0] / bare[c][1], wrapped[c][0] / wrapped[c][1]
            cells.append(f"{a:.3f} / {b:.3f}")
        rows.append((name, "LR" if "binary" in name else "GaussianNB", *cells))
    table(
        "The default mode's lag: predict_one accuracy of the bare model / VennAbersClassifier "
        "(window 1000) by stretch of labels, shuffled",
        ["data", "model", "1-250", "251-500", "501-1000", "1001-end"],
        rows,
    )


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
    ap.add_argument("--batch", type=int, default=500, help="rows per mini-batch (500)")
    ap.add_argument("--batch-events", type=int, help="rows timed per model (default 20000)")
    ap.add_argument("--repeats", type=int, help="runs of the mini-batch pairs (default 5)")
    ap.add_argument("--accuracy-events", type=int, help="synthetic stream length (5000)")
    ap.add_argument(
        "--pickled",
        action="store_true",
        help="cost: pickle each variant's model once after its warm-up, as a checkpoint does",
    )
    ap.add_argument(
        "--cpu",
        action="store_true",
        help="cost: time blocks by this process's CPU time (robust to other processes' load)",
    )
    ap.add_argument(
        "--protection",
        action="store_true",
        help="cost: only the bare pipeline and the default mode with and without protect=True",
    )
    ap.add_argument(
        "--baseline-tree",
        metavar="DIR",
        help="cost: also time the streamcal in DIR (an older checkout), side by side",
    )
    ap.add_argument(
        "--only",
        choices=["cost", "va", "quality", "va-quality", "mondrian", "minibatch", "accuracy"],
        action="append",
    )
    args = ap.parse_args(argv)
    quick = args.quick
    args.warmup = args.warmup or (10_000 if quick else 100_000)
    args.events = args.events or (2_000 if quick else 20_000)
    args.va_speed_events = args.va_speed_events or (300 if quick else 2_000)
    args.va_events = args.va_events or (150 if quick else 400)
    args.synthetic = args.synthetic or (3_000 if quick else 20_000)
    args.categories = args.categories or (10 if quick else 100)
    args.batch_events = args.batch_events or (2_000 if quick else 20_000)
    args.repeats = args.repeats or (1 if quick else 5)
    args.accuracy_events = args.accuracy_events or (1_500 if quick else 5_000)
    if quick:
        args.va_quality_window = min(args.va_quality_window, 20)
    parts = {
        "cost": cost,
        "va": va_speed,
        "quality": quality,
        "va-quality": va_quality,
        "mondrian": mondrian,
        "minibatch": minibatch,
        "accuracy": accuracy,
    }
    for name in args.only or parts:
        parts[name](args)


if __name__ == "__main__":
    main()
