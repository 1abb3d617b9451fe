"""Benchmark the conformal predictive regressor: cost per event against the bare model,
scale with the residuals held, the libraries with online conformal predictive systems
side by side, and validity / sharpness on exchangeable streams.

    python benchmarks/regression.py              # every part (~8 minutes)
    python benchmarks/regression.py --quick      # smaller n, fewer events (~1 minute)
    python benchmarks/regression.py --part cost  # one part: cost, scale, store, others,
                                                 # validity

Parts:

* ``cost``: µs per event of ``predict_distribution_one`` + one query + ``learn_one``
  against the bare model's ``predict_one`` + ``learn_one`` (StandardScaler | LinearRegression
  on the ``lognormal`` stream, every residual held: ``window=None``); target ratio <= 2.5.
* ``scale``: µs of a query (cdf, quantile, crps) plus a learn with 10^4 and 10^6
  residuals held (a one-pool regressor; the residuals past the first are bulk-loaded,
  as a long stream would have left them); target ratio <= 3.
* ``store``: the ``RankStore`` alone, numba and pure Python, a window's step.
* ``others``: per event against n held, the same queries in crepes 0.9.1 (online
  methods of its ConformalPredictiveSystem: O(n) per event) and online-cp 0.4.0 (ridge
  prediction machine: a full conformal predictive system, Omega(n) per step), if they
  are installed (benchmarks only, not dependencies); skipped with a message otherwise.
* ``validity``: coverage of the 90% / 50% intervals, the PIT's Kolmogorov distance and
  the CRPS against a Gaussian with the running residual sd, after 1,000 labels: the
  defaults (10 bins, window 1000) beside one pool, a longer window and none; then on
  friedman the oracles (``_FriedmanOracles``: the best distribution given the model's
  yhat, 100 draws of it, a perfect model's) and the verdict whether friedman can test
  the sharpness target (<= 0.97x); then the public data sets randhie and fair
  (statsmodels, the ``bench`` extra; skipped without it) shuffled by 5 seeds; then
  river's packaged regression data sets (TrumpApproval, ChickWeights: all that river
  ships offline with more than a few hundred rows) shuffled, after 200 labels (too few
  rows for 1,000: a smoke check), with a window of 100 beside the defaults.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from river import base, dummy, linear_model, preprocessing, stats

from streamcal import ConformalPredictiveRegressor
from streamcal.core.rank_store import RankStore

_spec = importlib.util.spec_from_file_location(
    "_regression_streams", Path(__file__).with_name("_regression_streams.py")
)
S = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(S)


def lr():
    return preprocessing.StandardScaler() | linear_model.LinearRegression()


def _per_event(step, items, repeats: int = 3) -> float:
    """Median over repeats of the mean µs per item of ``step``."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for item in items:
            step(item)
        times.append((time.perf_counter() - t) / len(items) * 1e6)
    return statistics.median(times)


def cost(quick: bool) -> None:
    n = 5000 if quick else 40000  # past the last refit of the bins (32,000 labels)
    data = list(S.stream("lognormal", n + 6000, seed=0))
    warm, timed = data[:n], data[n:]
    bare, model = lr(), ConformalPredictiveRegressor(lr(), window=None)
    default = ConformalPredictiveRegressor(lr())  # window 1000: a remove per learn
    for x, y in warm:
        bare.learn_one(x, y)
        model.learn_one(x, y)
        default.learn_one(x, y)

    def bare_step(xy):
        bare.predict_one(xy[0])
        bare.learn_one(*xy)

    def cps_step(xy):
        model.predict_distribution_one(xy[0])
        model.learn_one(*xy)

    def cps_query_step(xy, model=model):
        model.predict_distribution_one(xy[0]).interval(0.9)
        model.learn_one(*xy)

    # Interleaved in chunks, the median of the chunks' ratios: the machine's load moves
    # all three alike.
    ratios, query_ratios, default_ratios, costs = [], [], [], []
    for k in range(0, len(timed), 500):
        chunk = timed[k : k + 500]
        b = _per_event(bare_step, chunk, 1)
        c = _per_event(cps_step, chunk, 1)
        q = _per_event(cps_query_step, chunk, 1)
        d = _per_event(lambda xy: cps_query_step(xy, default), chunk, 1)
        ratios.append(c / b)
        query_ratios.append(q / b)
        default_ratios.append(d / b)
        costs.append((b, c, q, d))
    b, c, q, d = (statistics.median(v) for v in zip(*costs, strict=True))
    for name, cost_us, ratio in (
        (f"distribution + learn, {n:,} labels held", c, statistics.median(ratios)),
        (f"distribution + interval + learn, {n:,} labels held", q,
         statistics.median(query_ratios)),
        ("the same, the defaults (window 1000)", d, statistics.median(default_ratios)),
    ):  # fmt: skip
        verdict = "PASS" if ratio <= 2.5 else "FAIL"
        print(f"| {name} | bare {b:.1f} µs | CPS {cost_us:.1f} µs | "
              f"ratio {ratio:.2f} (target <= 2.5) | {verdict} |")  # fmt: skip


def _held(n: int, seed: int = 0) -> ConformalPredictiveRegressor:
    """A one-pool regressor on a constant model holding n residuals."""
    model = ConformalPredictiveRegressor(dummy.StatisticRegressor(stats.Mean()), bins=1,
                                         window=None)  # fmt: skip
    rng = np.random.default_rng(seed)
    residuals = rng.standard_normal(n)
    model._residuals._stores[(None, 0)] = RankStore.from_arrays(residuals, seed=seed)
    model._residuals.n = n
    return model


def scale(quick: bool) -> None:
    sizes = (10**4, 10**5) if quick else (10**4, 10**6)
    rng = np.random.default_rng(1)
    events = [({"a": 0.0}, float(v)) for v in rng.standard_normal(5000)]
    cost_at = {}
    for n in sizes:
        model = _held(n)

        def step(xy, model=model):
            d = model.predict_distribution_one(xy[0])
            d.cdf(xy[1])
            d.quantile(0.9)
            d.crps(xy[1])
            model.learn_one(*xy)

        cost_at[n] = _per_event(step, events)
    lo, hi = sizes
    ratio = cost_at[hi] / cost_at[lo]
    verdict = "PASS" if ratio <= 3 else "FAIL"
    print(f"| query + learn | {lo:.0e} held: {cost_at[lo]:.1f} µs | {hi:.0e} held: "
          f"{cost_at[hi]:.1f} µs | ratio {ratio:.2f} (target <= 3) | {verdict} |")  # fmt: skip


def others(quick: bool) -> None:
    sizes = (10**3, 10**4) if quick else (10**3, 10**4, 10**5)
    rng = np.random.default_rng(2)
    try:
        from crepes import ConformalPredictiveSystem
    except ImportError:
        ConformalPredictiveSystem = None
        print("crepes is not installed: skipped (pip install crepes==0.9.1)")
    print("| n held | ours: cdf + learn | ours: quantiles + learn | crepes predict_p_online |"
          " crepes predict_percentiles_online |")  # fmt: skip
    print("|---|---|---|---|---|")
    m = 200
    for n in sizes:
        y_hat = rng.standard_normal(m)
        y = y_hat + rng.standard_normal(m)
        model = _held(n)
        xs = [({"a": 0.0}, float(v - h)) for v, h in zip(y, y_hat, strict=True)]

        def ours_p(xy, model=model):
            model.predict_distribution_one(xy[0]).cdf(xy[1])
            model.learn_one(*xy)

        def ours_q(xy, model=model):
            d = model.predict_distribution_one(xy[0])
            d.quantile(0.05), d.quantile(0.5), d.quantile(0.95)
            model.learn_one(*xy)

        row = [f"{n:.0e}"] + [f"{_per_event(f, xs):.1f} µs" for f in (ours_p, ours_q)]
        if ConformalPredictiveSystem is not None:
            residuals = rng.standard_normal(n)
            for call in ("p", "percentiles"):
                cps = ConformalPredictiveSystem().fit(residuals)
                t = time.perf_counter()
                if call == "p":
                    cps.predict_p_online(y_hat, y, seed=0)
                else:
                    cps.predict_percentiles_online(y_hat, y, lower_percentiles=[5.0],
                                                   higher_percentiles=[50.0, 95.0])  # fmt: skip
                row.append(f"{(time.perf_counter() - t) / m * 1e6:.1f} µs")
        else:
            row += ["-", "-"]
        print("| " + " | ".join(row) + " |")
    _online_cp(quick)


def _online_cp(quick: bool) -> None:
    try:
        from online_cp import RidgePredictionMachine
    except ImportError:
        print("online-cp is not installed: skipped (pip install online-cp==0.4.0)")
        return
    print("\n| n held | ours (river LinearRegression): distribution + crps + learn | "
          "online-cp RidgePredictionMachine: predict_cpd + crps + learn_one |")  # fmt: skip
    print("|---|---|---|")
    rng = np.random.default_rng(3)
    for n in (500, 2000) if quick else (500, 5000):
        X = rng.standard_normal((n + 100, 4))
        y = X @ np.array([1.0, -2.0, 0.5, 0.0]) + rng.standard_normal(n + 100)
        model = ConformalPredictiveRegressor(lr(), bins=1, window=None)
        items = [(dict(enumerate(r.tolist())), r, float(v)) for r, v in zip(X, y, strict=True)]
        for x, _, v in items[:n]:
            model.learn_one(x, v)

        def ours(item, model=model):
            x, _, v = item
            model.predict_distribution_one(x).crps(v)
            model.learn_one(x, v)

        ocp = RidgePredictionMachine(a=1.0)
        ocp.learn_initial_training_set(X[:n], y[:n])

        def theirs(item, ocp=ocp):
            _, row, v = item
            cpd = ocp.predict_cpd(row)
            if hasattr(cpd, "crps"):
                cpd.crps(v)
            ocp.learn_one(row, v)

        timed = items[n:]
        us = [f"{_per_event(f, timed):.1f} µs" for f in (ours, theirs)]
        print(f"| {n} | {us[0]} | {us[1]} |")


# (bins, window) of the validity part: the defaults first
_VALIDITY_ARMS = ((10, 1000), (1, 1000), (10, 3000), (10, None))


def _validity_row(name, bins, window, data, burn) -> None:
    model = ConformalPredictiveRegressor(lr(), bins=bins, window=window)
    r = S.score(model, lr(), data, burn=burn)
    print(f"| {name} | {bins} | {window} | {r['events']} | {r['cover90']:.3f} | "
          f"{r['cover50']:.3f} | {r['ks']:.4f} | {r['ratio']:.3f} |")  # fmt: skip


def _sample_crps(sample: np.ndarray, y: float, fair: bool = True) -> float:
    """CRPS at y, E|X - y| - E|X - X'| / 2, from a sample of X: ``fair``, the unbiased
    estimate of the law's (Ferro 2014: the pairs j != k); else the sample's own, the
    empirical distribution's (as ``PredictiveDistribution.crps``)."""
    s = np.sort(sample)
    k = len(s)
    pairs = float(np.dot(s, 2 * np.arange(1, k + 1) - k - 1))  # sum over j < k of s_k - s_j
    return float(np.mean(np.abs(s - y))) - pairs / (k * (k - 1) if fair else k * k)


def _exp_crps(f: float, s: float, y: float) -> float:
    """CRPS at y of f + s (E - 1), E ~ Exp(1): friedman's true law around f(x)."""
    z = (y - f) / s + 1
    return s * (z + 2 * math.exp(-z) - 1.5 if z >= 0 else 0.5 - z)


class _FriedmanOracles:
    """The best predictive distributions on friedman, for ``S.score``'s ``oracles``:

    * ``given yhat``: the law of y given the bare model's prediction, i.e. yhat plus the
      residuals that the model as it is now (refreshed every ``every`` events) makes on
      the ``k`` objects nearest in yhat of a fresh reference sample of ``size``;
    * ``draws``: the empirical distribution of ``draws`` residuals drawn from that law
      (the defaults' bin holds 100: window 1000 over 10 bins): the best that a
      distribution of so many residuals can expect, (1 + 1/draws) times the law's CRPS;
    * ``gaussian given yhat``: a Gaussian with that law's mean and sd (the right centre
      and spread, a Gaussian's shape);
    * ``given x``: the true law of y given x, f(x) + s(x) (E - 1): a perfect model's.
    """

    def __init__(self, bare, seed: int, size: int = 100000, k: int = 250, every: int = 50,
                 draws: int = 100):  # fmt: skip
        import pandas as pd

        self.bare, self.k, self.every, self.draws, self.calls = bare, k, every, draws, 0
        self.rng = np.random.default_rng(seed)
        ref = list(S.stream("friedman", size, seed=10**6 + seed))
        self.x = pd.DataFrame([x for x, _ in ref])
        self.y = np.array([y for _, y in ref])

    def _law(self) -> tuple[np.ndarray, np.ndarray]:
        """(yhat, residual) of the reference sample by the model now, sorted by yhat."""
        y_hat = self.bare.predict_many(self.x).to_numpy()  # = predict_one's, row by row
        order = np.argsort(y_hat)
        return y_hat[order], (self.y - y_hat)[order]

    def __call__(self, x: dict, y_hat: float, y: float) -> dict[str, float]:
        if self.calls % self.every == 0:
            self.law = self._law()
        self.calls += 1
        at = int(np.searchsorted(self.law[0], y_hat))
        lo = min(max(at - self.k // 2, 0), len(self.y) - self.k)
        near = self.law[1][lo : lo + self.k]
        drawn = self.rng.choice(near, self.draws, replace=False)
        return {"given yhat": _sample_crps(y_hat + near, y),
                "draws": _sample_crps(y_hat + drawn, y, fair=False),
                "gaussian given yhat": S.gaussian_crps(y_hat + float(np.mean(near)),
                                                       float(np.std(near)), y),
                "given x": _exp_crps(*S.friedman_law(x), y)}  # fmt: skip


class _Frozen(base.Regressor):
    """A trained model that learns no more: its residuals are exchangeable."""

    def __init__(self, model):
        self.model = model

    def predict_one(self, x):
        return self.model.predict_one(x)

    def predict_many(self, X):
        return self.model.predict_many(X)

    def learn_one(self, x, y):
        pass


_TARGET = 0.97


def _oracle_rows(seeds, n: int, frozen: bool) -> tuple[list[float], list[float]]:
    """Print a row per seed; return the ratios of the law given yhat and of its draws."""
    best, drawn = [], []
    for seed in seeds:
        if frozen:  # trained on 1,000 other labels, then fixed
            model = lr()
            for x, y in S.stream("friedman", 1000, seed=2 * 10**6 + seed):
                model.learn_one(x, y)
            arms, bare = ((10, 1000), (10, None)), _Frozen(model)
        else:
            arms, bare = ((10, 1000),), lr()
        cps = []
        for i, (bins, window) in enumerate(arms):
            model = ConformalPredictiveRegressor(bare if frozen else lr(), bins=bins,
                                                 window=window)  # fmt: skip
            scored = bare if frozen else lr()  # the bare model of the Gaussian and oracles
            # the same in each arm (so is the bare model): computed in the first only
            oracles = _FriedmanOracles(scored, seed, every=10**9 if frozen else 50)
            r = S.score(model, scored, S.stream("friedman", n, seed=seed),
                        oracles=oracles if i == 0 else None)  # fmt: skip
            cps.append(f"{r['ratio']:.3f}")
            if i == 0:
                o = r
        best.append(o["oracle given yhat"])
        drawn.append(o["oracle draws"])
        names = ("given yhat", "draws", "gaussian given yhat", "given x")
        print(f"| {'frozen' if frozen else 'learning'} | {seed} | " + " | ".join(cps)
              + " | -" * (2 - len(cps)) + " | "
              + " | ".join(f"{o['oracle ' + m]:.3f}" for m in names) + " |")  # fmt: skip
    return best, drawn


def oracle(quick: bool) -> None:
    """On friedman: how sharp could any distribution around this model's prediction be?"""
    n, seeds = (5000, (1,)) if quick else (11000, (1, 2, 3))
    print("CRPS / the running Gaussian, after 1,000 labels; oracles: _FriedmanOracles\n")
    print("| model | seed | CPS (defaults) | CPS (10 bins, no window) | oracle given yhat | "
          "oracle: 100 draws of it | oracle: Gaussian given yhat | oracle given x |\n"
          "|---|---|---|---|---|---|---|---|")  # fmt: skip
    best, drawn = _oracle_rows(seeds, n, frozen=False)
    _oracle_rows(seeds, n, frozen=True)
    span = lambda v: f"{min(v):.3f}-{max(v):.3f}"  # noqa: E731
    if min(best) > _TARGET:
        print(f"\nverdict: friedman cannot meet <= {_TARGET}x: the best distribution given "
              f"yhat is {span(best)}x the running Gaussian; a control stream for validity, "
              "not for sharpness")  # fmt: skip
    elif min(drawn) > _TARGET:
        print(f"\nverdict: on friedman only the exact law given yhat meets <= {_TARGET}x "
              f"({span(best)}x the running Gaussian); 100 residuals drawn from it, what a bin "
              f"of the defaults holds, give {span(drawn)}x: the defaults cannot; a control "
              "stream for validity, not for sharpness")  # fmt: skip
    else:
        print(f"\nverdict: friedman can meet <= {_TARGET}x: the law given yhat is "
              f"{span(best)}x the running Gaussian, 100 draws of it {span(drawn)}x")  # fmt: skip


def _spread(values) -> str:
    """median [min-max] of a few seeds' figures."""
    return f"{statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}]"


def public(quick: bool) -> None:
    """statsmodels' randhie and fair, shuffled by several seeds, after 1,000 labels."""
    try:
        import statsmodels  # noqa: F401
    except ImportError:
        print("statsmodels is not installed: skipped (pip install -e '.[bench]')")
        return
    seeds = range(1, 3) if quick else range(1, 6)
    print(f"seeds {seeds.start}-{seeds.stop - 1}: median [min-max]\n")
    print("| data | bins | window | events | 90% cover | 50% cover | PIT KS | CRPS / Gaussian |")
    print("|---|---|---|---|---|---|---|---|")
    for name in S.PUBLIC:
        for bins, window in _VALIDITY_ARMS:
            rs = [S.score(ConformalPredictiveRegressor(lr(), bins=bins, window=window), lr(),
                          S.stream(name, 10**6, seed=seed)) for seed in seeds]  # fmt: skip
            cells = [_spread([r[c] for r in rs]) for c in ("cover90", "cover50", "ks", "ratio")]
            print(f"| {name} | {bins} | {window} | {rs[0]['events']} | " + " | ".join(cells) + " |")


def validity(quick: bool) -> None:
    n = 5000 if quick else 11000
    head = ("| stream | bins | window | events | 90% cover | 50% cover | PIT KS | "
            "CRPS / Gaussian |\n|---|---|---|---|---|---|---|---|")  # fmt: skip
    print(head)
    for name in S.STREAMS:
        for bins, window in _VALIDITY_ARMS:
            _validity_row(name, bins, window, S.stream(name, n, seed=1), 1000)
    print("\n### friedman's oracle\n")
    oracle(quick)
    print("\n### public data, shuffled (statsmodels)\n")
    public(quick)
    # river's offline regression data: shuffled, after 200 labels (they are small). The
    # sampling error of a 90% coverage over k events is 0.3 / sqrt(k); the KS distance of
    # k uniform draws exceeds 1.36 / sqrt(k) with probability 0.05.
    print("\nriver's packaged data sets, shuffled, after 200 labels:\n\n" + head)
    for name in ("trump", "chicks"):
        # their model learns through every row: a short window shows what that costs
        for bins, window in (*_VALIDITY_ARMS[:2], (1, 100)):
            _validity_row(name, bins, window, S.stream(name, 10**6, seed=1), 200)


def store(quick: bool) -> None:
    """The RankStore alone, both backends, on normal values: µs per (crps of one value,
    select of one rank, add one value, remove the oldest): a window's step."""
    print("| backend | n held | µs per crps + select + add + remove |")
    print("|---|---|---|")
    rng = np.random.default_rng(4)
    for backend in ("numba", "python"):
        try:
            RankStore(backend=backend)
        except ImportError:
            print(f"| {backend} | - | not installed |")
            continue
        top = 10**5 if quick or backend == "python" else 10**6
        for n in (10**4, top):
            values = rng.standard_normal(n + 5000)
            st = RankStore.from_arrays(values[:n], backend=backend)
            window = list(values[:n].tolist())
            fresh = values[n:].tolist()

            def step(i, st=st, window=window, fresh=fresh, n=n):
                v = fresh[i]
                st.crps(v)
                st.select(n // 3)
                st.add(v)
                st.remove(window[i])

            print(f"| {backend} | {n:.0e} | {_per_event(step, range(len(fresh)), 1):.1f} |")


PARTS = {"cost": cost, "scale": scale, "store": store, "others": others, "validity": validity}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--part", choices=sorted(PARTS), action="append")
    args = ap.parse_args(argv)
    for name in args.part or PARTS:
        print(f"\n## {name}\n", flush=True)
        PARTS[name](args.quick)
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
