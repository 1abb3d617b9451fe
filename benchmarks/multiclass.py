"""Benchmark of VennAbersMultiClassifier: quality and cost of each scheme.

Run: ``python benchmarks/multiclass.py`` (full, several minutes) or ``--quick``.

Tables, all measured in one run:

1. quality: per data set (river's ImageSegments, K = 7; synthetic LED, K = 10, Waveform,
   K = 3, and RandomRBF with 5 classes), shuffled and in stream order, and per model
   (GaussianNB, StandardScaler | SoftmaxRegression, HoeffdingTreeClassifier): the
   prequential log loss (river's ``CrossEntropy``) of the bare model and of each scheme,
   the top-label band (mean p0, accuracy, mean p1; "valid" = both sides hold within 3
   standard errors, which is only promised on the shuffled streams), and µs per event
   (``predict_interval_one``, which also reads every per-class pair, + ``learn_one``)
   against the bare model's (``predict_proba_one`` + ``learn_one``) in the same run.
2. cost at K = 7: ImageSegments (shuffled, repeated) with each model; the bare model and
   each scheme run round-robin in blocks on the same events after a warm-up, median
   block reported (robust to load from other processes). A block is one refresh period
   (``refresh_every``, by default ``2 * window`` labels), so each holds one refresh: its
   cost is the amortised one, whatever the phase.
3. the batch anchor: venn-abers 1.5.4's ``predict_proba_prefitted_va`` refitted for every
   event on the calibration scores seen so far (the prefix), its µs per event next to
   the online one-vs-one and one-vs-rest stores' on the same prefix.
"""

from __future__ import annotations

import argparse
import math
import random
import time

import numpy as np
from river import datasets, linear_model, metrics, naive_bayes, preprocessing, tree
from river.datasets import synth

from streamcal import VennAbersMultiClassifier
from streamcal.core.multiclass import OneVsOne, OneVsRest
from streamcal.learner.settings import DEFAULT_WINDOW, REFRESH_WINDOWS

SCHEMES = ("top-label", "one-vs-rest", "one-vs-one")
PERIOD = REFRESH_WINDOWS["multiclass"] * DEFAULT_WINDOW  # the default refresh period
Z = 3.0


def softmax():
    return preprocessing.StandardScaler() | linear_model.SoftmaxRegression()


MODELS = {"gnb": naive_bayes.GaussianNB, "softmax": softmax, "ht": tree.HoeffdingTreeClassifier}


def data_sets(n: int) -> dict:
    return {
        "segments": list(datasets.ImageSegments()),
        "led": list(synth.LED(seed=1, noise_percentage=0.1).take(n)),
        "waveform": list(synth.Waveform(seed=1).take(n)),
        "rbf5": list(synth.RandomRBF(seed_model=1, seed_sample=1, n_classes=5).take(n)),
    }


def table(title, header, rows):
    print(f"\n### {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for r in rows:
        print("| " + " | ".join(str(c) for c in r) + " |")


def run(clf, stream) -> dict:
    """Prequential pass: log loss, top-label band, seconds per event."""
    loss = metrics.CrossEntropy()
    p0s, p1s, hits = [], [], []
    band = hasattr(clf, "predict_interval_one")
    t = time.perf_counter()
    for x, y in stream:
        if band:
            pred = clf.predict_interval_one(x)
            loss.update(y, {} if pred is None else pred.proba)
            if pred is not None:
                p0s.append(pred.p0)
                p1s.append(pred.p1)
                hits.append(float(pred.label == y))
        else:
            loss.update(y, clf.predict_proba_one(x))
        clf.learn_one(x, y)
    elapsed = time.perf_counter() - t
    out = {"loss": loss.get(), "s": elapsed / len(stream)}
    if band:
        out["band"] = band_of(np.array(p0s), np.array(hits), np.array(p1s))
    return out


def band_of(p0, hit, p1) -> tuple:
    ok = True
    for d in (hit - p0, p1 - hit):
        ok &= d.mean() >= -Z * d.std(ddof=1) / math.sqrt(len(d))
    return p0.mean(), hit.mean(), p1.mean(), ok


def quality(args):
    rows = []
    for name, data in data_sets(args.events).items():
        for order in ("shuffled", "stream"):
            stream = list(data[: args.events])
            if order == "shuffled":
                random.Random(0).shuffle(stream)
            for model in MODELS:
                bare = run(MODELS[model](), stream)
                for scheme in SCHEMES:
                    clf = VennAbersMultiClassifier(MODELS[model](), scheme=scheme)
                    r = run(clf, stream)
                    lo, acc, hi, ok = r["band"]
                    rows.append(
                        (
                            name,
                            order,
                            model,
                            scheme,
                            f"{bare['loss']:.3f}",
                            f"{r['loss']:.3f}",
                            f"{r['loss'] / bare['loss']:.2f}",
                            f"{lo:.3f} / {acc:.3f} / {hi:.3f}",
                            "yes" if ok else "NO",
                            f"{r['s'] * 1e6:.0f} ({r['s'] / bare['s']:.1f}x)",
                        )
                    )
                print(f"  done {name} {order} {model}", flush=True)
    table(
        f"Prequential quality, {args.events:,} events per stream (ImageSegments: "
        f"{min(args.events, 2310):,}), default settings (window {DEFAULT_WINDOW:,}, refresh "
        f"every {PERIOD:,} labels)",
        [
            "data",
            "order",
            "model",
            "scheme",
            "log loss bare",
            "calibrated",
            "ratio",
            "mean p0 / accuracy / mean p1",
            "valid",
            "µs / event (vs bare)",
        ],
        rows,
    )


class Bare:
    def __init__(self, model):
        self.model = model

    def predict_proba_one(self, x):
        return self.model.predict_proba_one(x)

    def learn_one(self, x, y):
        self.model.learn_one(x, y)


def cost(args):
    data = list(datasets.ImageSegments())
    rng = random.Random(1)
    stream = []
    while len(stream) < args.warmup + args.cost_events:
        chunk = data[:]
        rng.shuffle(chunk)
        stream += chunk
    warm, measure = stream[: args.warmup], stream[args.warmup : args.warmup + args.cost_events]
    rows = []
    for model in MODELS:
        variants = {"bare model": Bare(MODELS[model]())}
        for scheme in SCHEMES:
            variants[scheme] = VennAbersMultiClassifier(MODELS[model](), scheme=scheme)
        for v in variants.values():
            for x, y in warm:
                v.predict_proba_one(x)
                v.learn_one(x, y)
        per_block = {name: [] for name in variants}
        order = list(variants)
        for i in range(0, len(measure), args.block):
            chunk = measure[i : i + args.block]
            rng.shuffle(order)
            for name in order:
                v = variants[name]
                t = time.perf_counter()
                for x, y in chunk:
                    v.predict_proba_one(x)
                    v.learn_one(x, y)
                per_block[name].append((time.perf_counter() - t) / len(chunk))
        base = float(np.median(per_block["bare model"]))
        for name, blocks in per_block.items():
            med = float(np.median(blocks))
            rows.append((model, name, f"{med * 1e6:.0f}", f"{med / base:.2f}x"))
    period = " (one refresh period)"
    table(
        f"Cost per event at K = 7 (ImageSegments, shuffled), after {args.warmup:,} labels, "
        f"{args.cost_events:,} events timed in blocks of {args.block:,}"
        f"{period if args.block == PERIOD else ''}; "
        "default settings",
        ["model", "variant", "µs / event (median block)", "vs bare"],
        rows,
    )


def anchor(args):
    import warnings

    from venn_abers.venn_abers import predict_proba_prefitted_va

    warnings.filterwarnings("ignore", category=RuntimeWarning, module="venn_abers")

    data = list(datasets.ImageSegments())
    random.Random(2).shuffle(data)
    model = naive_bayes.GaussianNB()
    for x, y in data[:500]:  # a fixed, pre-trained model: only calibration is timed
        model.learn_one(x, y)
    rest = data[500 : 500 + args.prefix + 1]
    labels = sorted({y for _, y in data})
    S = np.array([[model.predict_proba_one(x).get(c, 0.0) for c in labels] for x, _ in rest])
    y = np.array([labels.index(v) for _, v in rest])
    start = 20  # venn-abers needs every class in the calibration set
    while len(np.unique(y[:start])) < len(labels):
        start += 1
    rows = []
    for scheme, cls, tpe in (
        ("one-vs-one", OneVsOne, "one_vs_one"),
        ("one-vs-rest", OneVsRest, "one_vs_rest"),
    ):
        t = time.perf_counter()
        for n in range(start, len(S)):
            predict_proba_prefitted_va(S[:n], y[:n], S[n : n + 1], va_tpe=tpe)
        batch = (time.perf_counter() - t) / (len(S) - start)
        online = cls.from_arrays(S[:start], y[:start], n_classes=len(labels))
        t = time.perf_counter()
        for n in range(start, len(S)):
            online.proba(S[n])
            online.add(S[n], y[n])
        inc = (time.perf_counter() - t) / (len(S) - start)
        rows.append((scheme, f"{batch * 1e6:,.0f}", f"{inc * 1e6:,.0f}", f"{batch / inc:,.0f}x"))
    table(
        f"Batch anchor: venn-abers 1.5.4 refitted per event on a prefix of {args.prefix} "
        f"calibration scores (ImageSegments, K = 7, GaussianNB) vs the online stores",
        ["scheme", "venn-abers µs / event", "streamcal µs / event", "ratio"],
        rows,
    )


PARTS = {"quality": quality, "cost": cost, "anchor": anchor}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a smoke run: small sizes")
    ap.add_argument("--events", type=int, default=5000)
    # past the warm-up's doublings (the model catches up at 1024, 2048 labels, ...)
    ap.add_argument("--warmup", type=int, default=4000)
    ap.add_argument("--cost-events", type=int, default=12000)
    ap.add_argument("--block", type=int, default=PERIOD)
    ap.add_argument("--prefix", type=int, default=400)
    ap.add_argument("--only", choices=PARTS, action="append", help="run only these tables")
    args = ap.parse_args(argv)
    if args.quick:
        args.events, args.warmup, args.cost_events, args.block, args.prefix = 400, 200, 400, 200, 60
    for name in args.only or PARTS:
        PARTS[name](args)


if __name__ == "__main__":
    main()
