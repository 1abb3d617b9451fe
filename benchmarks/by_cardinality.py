"""Mondrian calibration on a high-cardinality key (issue 35): ``by=`` against no ``by``.

A stationary stream (river's ``synth.Agrawal``) gets a random id feature of ``--ids``
values, which the model never sees (``compose.Discard``). The same learner is run with
``by="user_id"`` and without ``by``, prequentially (predict, then learn), and printed side
by side: log loss, evictions, the churn warning, and the pickled size of the ``by``
learner at checkpoints (it must stop growing once ``max_categories`` categories are held).

    python benchmarks/by_cardinality.py                      # 50,000 ids, 200,000 events
    python benchmarks/by_cardinality.py --ids 2000 --events 50000

``--task regression`` (issue 40): the same with ``ConformalPredictiveRegressor`` on the
``friedman`` stream (``benchmarks/_regression_streams.py``), each id adding an offset of
its own to the label (sd 2, about the noise's scale) that the model cannot see; the ids are
drawn Zipf-like (a few frequent ids that can answer on their own, a long tail that
cannot). Both arms run in one loop, event by event: coverage of the 90% interval (of the
answers from a key's own residuals and of the pooled ones apart), mean CRPS and width,
and the pickled size of the ``by`` regressor as the ids seen grow.

    python benchmarks/by_cardinality.py --task regression    # 50,000 ids, 200,000 events
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import pickle
import random
import time
import warnings
from pathlib import Path

from river import compose, linear_model, preprocessing
from river.datasets import synth

from streamcal import ConformalPredictiveRegressor
from streamcal.learner import CategoryChurnWarning, VennAbersClassifier


def pipeline():
    return (
        compose.Discard("user_id")
        | preprocessing.StandardScaler()
        | linear_model.LogisticRegression()
    )


def run(events: int, ids: int, seed: int, by, checkpoints, **settings) -> dict:
    """Prequential log loss of one learner; pickled sizes (MB) at ``checkpoints``."""
    clf = VennAbersClassifier(pipeline(), by=by, **settings)
    rng = random.Random(seed)
    loss, sizes, churn = 0.0, {}, []
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CategoryChurnWarning)
        for i, (x, y) in enumerate(synth.Agrawal(seed=seed).take(events), 1):
            x = {**x, "user_id": f"u{rng.randrange(ids)}"}
            p = min(max(clf.predict_proba_one(x)[True], 1e-15), 1 - 1e-15)
            loss -= math.log(p if y else 1 - p)
            clf.learn_one(x, y)
            if i in checkpoints:
                sizes[i] = len(pickle.dumps(clf)) / 1e6
    churn = [str(w.message) for w in caught if issubclass(w.category, CategoryChurnWarning)]
    return {
        "log_loss": loss / events,
        "evictions": clf.evictions,
        "sizes": sizes,
        "warnings": churn,
        "seconds": time.perf_counter() - start,
    }


OFFSET_SD = 2.0  # an id's own offset of the label: about the noise's scale


def _streams():
    spec = importlib.util.spec_from_file_location(
        "_regression_streams", Path(__file__).with_name("_regression_streams.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _regression_arm(by, max_categories):
    model = preprocessing.StandardScaler() | linear_model.LinearRegression()
    kw = {} if max_categories is None else {"max_categories": max_categories}
    return ConformalPredictiveRegressor(model, by=by, **kw) if by else (
        ConformalPredictiveRegressor(model))


def run_regression(events: int, ids: int, seed: int, checkpoints, max_categories) -> dict:
    """Both regressors (``by="user_id"`` and none) prequentially, in one loop: per arm the
    90% coverage (``by``: of own and pooled answers apart), mean CRPS and width over the
    bounded intervals, seconds; the ``by`` one's pickled sizes (MB) at ``checkpoints``."""
    arms = {"by": _regression_arm("user_id", max_categories), "none": _regression_arm(None, 0)}
    figures = {a: {"covered": 0, "n": 0, "crps": 0.0, "width": 0.0, "seconds": 0.0,
                   "unbounded": 0} for a in arms}  # fmt: skip
    own = {"covered": 0, "n": 0, "crps": 0.0, "covered_none": 0, "n_none": 0, "crps_none": 0.0}
    rng, offsets, seen, sizes = random.Random(seed), {}, set(), {}
    weights = [1 / (k + 1) ** 1.1 for k in range(ids)]  # Zipf-like: a head and a long tail
    users = rng.choices(range(ids), weights=weights, k=events)
    stream = _streams().stream("friedman", events, seed=seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CategoryChurnWarning)
        for i, ((x, y), u) in enumerate(zip(stream, users, strict=True), 1):
            if u not in offsets:
                offsets[u] = random.Random(f"{seed}-{u}").gauss(0.0, OFFSET_SD)
            y, key = y + offsets[u], f"u{u}"
            seen.add(u)
            for name, model in arms.items():
                f = figures[name]
                start = time.perf_counter()
                kw = {"category": key} if name == "by" else {}
                dist = model.predict_distribution_one(x, **kw)
                lo, hi = dist.interval(0.9)
                crps = dist.crps(y) if dist.n else math.inf
                if name == "by":  # a key's own residuals answer, not the pooled ones
                    mine = not model._residuals.answers_pooled(key, dist.y_hat)
                model.learn_one(x, y, **kw)
                f["seconds"] += time.perf_counter() - start
                if not (math.isfinite(lo) and math.isfinite(hi)):
                    f["unbounded"] += 1
                    continue
                f["n"] += 1
                f["covered"] += lo <= y <= hi
                f["crps"] += crps
                f["width"] += hi - lo
                if mine:  # the same events in both arms: by's own answers against none
                    own["n" if name == "by" else "n_none"] += 1
                    own["covered" if name == "by" else "covered_none"] += lo <= y <= hi
                    own["crps" if name == "by" else "crps_none"] += crps
            if i in checkpoints:
                by = arms["by"]
                sizes[i] = (len(seen), len(pickle.dumps(by)) / 1e6, by.calibration_size)
    by = arms["by"]
    return {
        "figures": figures,
        "own": own,
        "sizes": sizes,
        "evictions": by.evictions,
        "kept": len(by.categories),
        "window": by.window,
        "warnings": [str(w.message) for w in caught
                     if issubclass(w.category, CategoryChurnWarning)],  # fmt: skip
        "none_pickle": len(pickle.dumps(arms["none"])) / 1e6,
    }


def print_regression(r: dict, args) -> None:
    f, own = r["figures"], r["own"]
    print(f"friedman + id offsets seed {args.seed}, {args.events:,} events, {args.ids:,} ids "
          f"(Zipf 1.1), max_categories {args.max_categories or 'default'}")  # fmt: skip
    print(f"{'':28}{'by=user_id':>14}{'no by':>14}")
    for label, fn in (
        ("90% coverage", lambda a: a["covered"] / a["n"]),
        ("mean CRPS", lambda a: a["crps"] / a["n"]),
        ("mean width", lambda a: a["width"] / a["n"]),
        ("unbounded intervals", lambda a: a["unbounded"]),
        ("seconds", lambda a: a["seconds"]),
    ):
        a, b = fn(f["by"]), fn(f["none"])
        print(f"{label:28}{a:>14.4f}{b:>14.4f}" if isinstance(a, float) else
              f"{label:28}{a:>14,}{b:>14,}")  # fmt: skip
    ratio = (f["by"]["crps"] / f["by"]["n"]) / (f["none"]["crps"] / f["none"]["n"])
    print(f"{'CRPS ratio by / no by':28}{ratio:>14.4f}")
    n, n_none = max(own["n"], 1), max(own["n_none"], 1)
    print(f"events answered by own residuals: {own['n']:,} (the rest pooled)")
    for label, key in (("  their 90% coverage", "covered"), ("  their mean CRPS", "crps")):
        print(f"{label:28}{own[key] / n:>14.4f}{own[key + '_none'] / n_none:>14.4f}")
    pooled_n = f["by"]["n"] - own["n"]
    pooled_cov = (f["by"]["covered"] - own["covered"]) / max(pooled_n, 1)
    print(f"{'  pooled answers: coverage':28}{pooled_cov:>14.4f}")
    print(f"{'evictions / keys kept':28}{r['evictions']:>14,}{r['kept']:>14,}")
    # the ceiling: every key kept holding a full window (the pooled window aside)
    print(f"pickle of by=user_id as the ids grow (residuals held; at most "
          f"{r['kept']:,} keys x {r['window']:,}):")  # fmt: skip
    for n, (ids_seen, mb, held) in sorted(r["sizes"].items()):
        print(f"{f'  at {n:,} ({ids_seen:,} ids)':28}{mb:>11.3f} MB{held:>14,}")
    print(f"{'pickle without by':28}{r['none_pickle']:>14.3f} MB")
    print(f"churn warnings: {len(r['warnings'])}")
    for text in r["warnings"]:
        print(f"  {text}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--ids", type=int, default=50_000, help="values of the random id key")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-categories", type=int, default=None, help="default: the learner's")
    ap.add_argument("--task", choices=("binary", "regression"), default="binary")
    args = ap.parse_args()
    marks = {args.events // 4, args.events // 2, args.events}
    if args.task == "regression":
        print_regression(run_regression(args.events, args.ids, args.seed, marks,
                                        args.max_categories), args)  # fmt: skip
        return
    extra = {} if args.max_categories is None else {"max_categories": args.max_categories}
    with_by = run(args.events, args.ids, args.seed, "user_id", marks, **extra)
    without = run(args.events, args.ids, args.seed, None, set())
    print(f"Agrawal seed {args.seed}, {args.events:,} events, {args.ids:,} ids {extra or ''}")
    print(f"{'':24}{'by=user_id':>14}{'no by':>14}")
    print(f"{'log loss':24}{with_by['log_loss']:>14.4f}{without['log_loss']:>14.4f}")
    print(f"{'ratio by / no by':24}{with_by['log_loss'] / without['log_loss']:>14.4f}")
    print(f"{'evictions':24}{with_by['evictions']:>14,}{'':>14}")
    print(f"{'seconds':24}{with_by['seconds']:>14.1f}{without['seconds']:>14.1f}")
    for n, mb in sorted(with_by["sizes"].items()):
        print(f"{f'pickle at {n:,} (MB)':24}{mb:>14.3f}")
    print(f"churn warnings: {len(with_by['warnings'])}")
    for text in with_by["warnings"]:
        print(f"  {text}")


if __name__ == "__main__":
    main()
