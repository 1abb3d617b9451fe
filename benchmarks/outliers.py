"""What one finite outlier does to a running scaler, and what protects the model.

A single event with x0 = 1e6 (or 1e12) and its label leaves the default model's output
finite, so the learning guard (``streamcal.learner.guard``) lets it be learned; but
``StandardScaler``'s running variance keeps it for the rest of the stream, after which the
scaled x0 is near 0 and the model ignores a feature it needs. Side by side, the default
``VennAbersClassifier`` around three pipelines on a stationary logistic stream (4 Gaussian
features, 5,000 events, the outlier at event 200); the log loss over the events after the
outlier, mean over seeds. docs/processor.md quotes this table.

    python benchmarks/outliers.py [--seeds 3] [--events 5000]
"""

from __future__ import annotations

import argparse
import math
import random

from river import compose, linear_model, metrics, preprocessing

from streamcal import VennAbersClassifier

AT = 200  # the outlier's event


def stream(seed: int, n: int, big: float):
    rng = random.Random(seed)
    for t in range(n):
        x = {f"x{i}": rng.gauss(0, 1) for i in range(4)}
        z = 1.5 * x["x0"] - x["x1"] + 0.5 * x["x2"]
        y = rng.random() < 1 / (1 + math.exp(-z))
        if t == AT and big:
            x["x0"] = big
        yield x, y


def clip(x: dict) -> dict:
    """Each feature bounded to [-10, 10]: the plausible range of these features."""
    return {k: max(-10.0, min(10.0, v)) for k, v in x.items()}


PIPELINES = {
    "StandardScaler | LogisticRegression": lambda: (
        preprocessing.StandardScaler() | linear_model.LogisticRegression()
    ),
    "AdaptiveStandardScaler | LogisticRegression": lambda: (
        preprocessing.AdaptiveStandardScaler() | linear_model.LogisticRegression()
    ),
    "clip | StandardScaler | LogisticRegression": lambda: (
        compose.FuncTransformer(clip)
        | preprocessing.StandardScaler()
        | linear_model.LogisticRegression()
    ),
}


def log_loss_after(make, seed: int, n: int, big: float) -> float:
    clf, loss = VennAbersClassifier(make()), metrics.LogLoss()
    for t, (x, y) in enumerate(stream(seed, n, big)):
        p = clf.predict_proba_one(x)
        if t > AT:
            loss.update(y, p)
        clf.learn_one(x, y)
    return loss.get()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--events", type=int, default=5000)
    args = ap.parse_args(argv)
    sizes = (0.0, 1e6, 1e12)
    print(f"{'pipeline':45s}" + "".join(f"{'x0 = ' + (f'{b:g}' if b else 'none'):>14s}"
                                         for b in sizes))  # fmt: skip
    for name, make in PIPELINES.items():
        row = [
            sum(log_loss_after(make, s, args.events, big) for s in range(args.seeds)) / args.seeds
            for big in sizes
        ]
        print(f"{name:45s}" + "".join(f"{v:14.3f}" for v in row))


if __name__ == "__main__":
    main()
