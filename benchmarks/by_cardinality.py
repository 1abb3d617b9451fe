"""Mondrian calibration on a high-cardinality key (issue 35): ``by=`` against no ``by``.

A stationary stream (river's ``synth.Agrawal``) gets a random id feature of ``--ids``
values, which the model never sees (``compose.Discard``). The same learner is run with
``by="user_id"`` and without ``by``, prequentially (predict, then learn), and printed side
by side: log loss, evictions, the churn warning, and the pickled size of the ``by``
learner at checkpoints (it must stop growing once ``max_categories`` categories are held).

    python benchmarks/by_cardinality.py                      # 50,000 ids, 200,000 events
    python benchmarks/by_cardinality.py --ids 2000 --events 50000
"""

from __future__ import annotations

import argparse
import math
import pickle
import random
import time
import warnings

from river import compose, linear_model, preprocessing
from river.datasets import synth

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--ids", type=int, default=50_000, help="values of the random id key")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-categories", type=int, default=None, help="default: the learner's")
    args = ap.parse_args()
    marks = {args.events // 4, args.events // 2, args.events}
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
