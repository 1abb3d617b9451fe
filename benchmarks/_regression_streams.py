"""Regression streams for the conformal predictive regressor, and its prequential scoring.

Exchangeable (i.i.d., or a public data set shuffled), heteroscedastic:

* ``friedman``: Friedman #1 (5 informative features of 10 uniform ones) with skewed
  noise (a centred exponential, as delivery times have) of sd 0.2 + f / 6 growing with
  the mean f: a linear model underfits it, and its errors grow with the prediction,
  which bins of yhat follow;
* ``spread``: a linear mean, Laplace noise of sd exp(0.7 x2) driven by a feature the
  mean ignores, which bins of yhat cannot see (a difficulty estimate can);
* ``lognormal``: y = exp(linear + noise), as amounts and durations are: the error of a
  linear model grows with its prediction and is skewed;
* ``trump``, ``chicks``: river's packaged TrumpApproval and ChickWeights, shuffled
  (1,001 and 578 rows: small, for the doctests and the quick smoke runs);
* ``randhie``, ``fair``: public survey data that statsmodels ships in its wheel (the
  ``bench`` extra), shuffled: the RAND Health Insurance Experiment's outpatient visits
  per year (20,190 rows, 9 features; a count, 31% zeros, up to 77) and the Fair (1978)
  affairs survey's time spent in affairs (6,366 rows, 8 features; 68% zeros, up to 58).
  Both are heteroscedastic as counts and amounts are: the spread grows with the mean.

``score`` runs a regressor prequentially (distribution, then learn) and returns the
interval coverages, the PIT's Kolmogorov distance and the mean CRPS over the events
after ``burn`` labels, with the Gaussian baseline (the bare prediction, the running
residual sd) alongside.
"""

from __future__ import annotations

import math
import random

import numpy as np

STREAMS = ("friedman", "spread", "lognormal")
PUBLIC = ("randhie", "fair")  # real data, shuffled (statsmodels: the bench extra)


def friedman_law(x: dict) -> tuple[float, float]:
    """(f, s) of friedman's object x: its label is f + s (E - 1), E ~ Exp(1)."""
    f = (10 * math.sin(math.pi * x["x0"] * x["x1"]) + 20 * (x["x2"] - 0.5) ** 2
         + 10 * x["x3"] + 5 * x["x4"])  # fmt: skip
    return f, 0.2 + f / 6


def _public(name: str) -> list[tuple[dict, float]]:
    try:
        from statsmodels import datasets
    except ImportError as e:
        hint = "pip install -e '.[bench]'"
        raise ImportError(f"the {name!r} stream needs statsmodels: {hint}") from e
    data = getattr(datasets, name).load_pandas()
    rows = data.exog.astype(float).to_dict(orient="records")
    return list(zip(rows, data.endog.astype(float).tolist(), strict=True))


def stream(name: str, n: int, seed: int = 0):
    """n (x, y) pairs of the named stream, exchangeable."""
    rng = random.Random(seed)
    if name == "friedman":
        for _ in range(n):
            x = {f"x{i}": rng.random() for i in range(10)}
            f, s = friedman_law(x)
            yield x, f + s * (rng.expovariate(1.0) - 1.0)
    elif name == "spread":
        for _ in range(n):
            x = {f"x{i}": rng.gauss(0.0, 1.0) for i in range(3)}
            noise = rng.expovariate(1.0) * rng.choice((-1.0, 1.0)) / math.sqrt(2)  # Laplace
            yield x, 3 * x["x0"] - 2 * x["x1"] + math.exp(0.7 * x["x2"]) * noise
    elif name == "lognormal":
        for _ in range(n):
            x = {f"x{i}": rng.gauss(0.0, 1.0) for i in range(4)}
            mu = 1.0 + 0.5 * x["x0"] - 0.3 * x["x1"] + 0.4 * x["x2"]
            yield x, math.exp(mu + 0.5 * rng.gauss(0.0, 1.0))
    elif name in ("trump", "chicks", *PUBLIC):
        if name in PUBLIC:
            rows = _public(name)
        else:
            from river import datasets

            data = datasets.TrumpApproval() if name == "trump" else datasets.ChickWeights()
            rows = [(dict(x), float(y)) for x, y in data]
        rng.shuffle(rows)
        yield from rows[:n]
    else:
        raise ValueError(f"unknown stream {name!r}")


def gaussian_crps(mu: float, sd: float, y: float) -> float:
    """CRPS of N(mu, sd^2) at y (Gneiting & Raftery 2007, eq. 21)."""
    z = (y - mu) / sd
    pdf = math.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    cdf = 0.5 * (1 + math.erf(z / math.sqrt(2)))
    return sd * (z * (2 * cdf - 1) + 2 * pdf - 1 / math.sqrt(math.pi))


def score(model, bare, data, burn: int = 1000, oracles=None) -> dict:
    """Prequential scores of ``model`` (a ConformalPredictiveRegressor) after ``burn``
    labels; ``bare`` (a clone of its regressor) gives the Gaussian baseline. ``oracles``:
    a function of (x, the bare prediction, y), called before either learns y, returning
    {name: CRPS of another predictive distribution}; each name's mean over the Gaussian's
    comes back as ``"oracle " + name``."""
    cover90, cover50, pits, crps, base = [], [], [], [], []
    other: dict[str, list[float]] = {}
    m = s2 = 0.0
    for i, (x, y) in enumerate(data):
        dist = model.predict_distribution_one(x)
        y_bare = bare.predict_one(x)
        if i >= burn:
            lo, hi = dist.interval(0.9)
            cover90.append(lo <= y <= hi)
            lo, hi = dist.interval(0.5)
            cover50.append(lo <= y <= hi)
            pits.append(dist.cdf(y))
            crps.append(dist.crps(y))
            base.append(gaussian_crps(y_bare, math.sqrt(s2 / i), y))
            for name, v in (oracles(x, y_bare, y) if oracles else {}).items():
                other.setdefault(name, []).append(v)
        r = y - y_bare
        s2 += r * r  # the running residual sd a user would write: sqrt(mean r^2)
        m += r
        model.learn_one(x, y)
        bare.learn_one(x, y)
    u = np.sort(np.array(pits))
    k = len(u)
    ks = max(np.max(np.arange(1, k + 1) / k - u), np.max(u - np.arange(k) / k))
    return {"events": k, "cover90": float(np.mean(cover90)), "cover50": float(np.mean(cover50)),
            "ks": float(ks), "crps": float(np.mean(crps)), "gauss": float(np.mean(base)),
            "ratio": float(np.mean(crps) / np.mean(base)),
            **{f"oracle {n}": float(np.mean(v) / np.mean(base))
               for n, v in other.items()}}  # fmt: skip
