"""The rank store's priorities: this checkout against another git ref, side by side.

The treap's priorities came from a ``random.Random`` (a Mersenne Twister, 3.7 kB of
state in every pickled store) drawn in Python; they now come from splitmix64 (one 64-bit
word) drawn inside the insert kernel. Each arm runs in its own interpreter (the ref's
``streamcal`` from ``git archive`` first on the path), the arms interleaved ``--repeat``
times; printed per arm: the median and range of µs per ``add`` (into a store of 10^4
normal values) and per window step (``add`` and ``remove``), both backends, and the
pickled bytes of an empty store, of 1,000 stores of 20 values, and of a
``ConformalPredictiveRegressor`` with ``by`` after 30,000 events over 1,000 keys.

    python benchmarks/rank_store_priorities.py                 # against main
    python benchmarks/rank_store_priorities.py --before HEAD~1 --repeat 7
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# run in each arm's interpreter: only the public API, the same for both arms
ARM = r"""
import json, pickle, random, sys, time
import numpy as np
from river import linear_model, preprocessing
import streamcal
from streamcal import ConformalPredictiveRegressor
from streamcal.core.rank_store import RankStore

out = {"file": streamcal.__file__}
rng = np.random.default_rng(4)
for backend in ("numba", "python"):
    n = 20000 if backend == "numba" else 5000
    base, fresh = rng.standard_normal(10**4), rng.standard_normal(n).tolist()
    st = RankStore.from_arrays(base, backend=backend)
    st.add(0.5); st.remove(0.5)  # compiled and warm
    t = time.perf_counter()
    for v in fresh:
        st.add(v)
    out[f"add_{backend}"] = (time.perf_counter() - t) / n * 1e6
    t = time.perf_counter()
    for v in fresh:
        st.add(-v)
        st.remove(v)
    out[f"step_{backend}"] = (time.perf_counter() - t) / n * 1e6
out["empty"] = len(pickle.dumps(RankStore(backend="numba", seed=3), protocol=5))
stores = {k: RankStore.from_arrays(rng.standard_normal(20), seed=k) for k in range(1000)}
out["stores_1000x20"] = len(pickle.dumps(stores, protocol=5))
model = ConformalPredictiveRegressor(preprocessing.StandardScaler()
                                     | linear_model.LinearRegression(), by="key")
r = random.Random(5)
for i in range(30000):
    x = {"a": r.random(), "b": r.random()}
    model.learn_one(x, 3 * x["a"] - x["b"] + r.gauss(0, 0.3), category=f"k{i % 1000}")
out["regressor_by_1000"] = len(pickle.dumps(model, protocol=5))
json.dump(out, sys.stdout)
"""

FIGURES = [("add_numba", "µs per add, numba"), ("step_numba", "µs per add + remove, numba"),
           ("add_python", "µs per add, python"), ("step_python", "µs per add + remove, python"),
           ("empty", "bytes, an empty store"), ("stores_1000x20", "bytes, 1,000 stores of 20"),
           ("regressor_by_1000", "bytes, regressor by= 1,000 keys, 30k events")]  # fmt: skip


def run_arm(root: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(root))
    # cwd is the arm's root: python -c puts it first on the path
    done = subprocess.run([sys.executable, "-c", ARM], env=env, cwd=root, check=True,
                          capture_output=True, text=True)  # fmt: skip
    out = json.loads(done.stdout)
    if not out.pop("file").startswith(str(root)):
        raise RuntimeError(f"the arm at {root} imported another streamcal")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="main", help="the git ref to compare with")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.before, "streamcal"],
                                 check=True, capture_output=True).stdout  # fmt: skip
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        arms = {args.before: Path(tmp), "this checkout": ROOT}
        for root in arms.values():
            run_arm(root)  # numba compiles and caches each arm's kernels: not timed
        runs: dict = {a: [] for a in arms}
        for _ in range(args.repeat):
            for name, root in arms.items():
                runs[name].append(run_arm(root))
    print(f"load average {os.getloadavg()[0]:.1f} (2 cores); {args.repeat} interleaved runs")
    before, after = arms
    print(f"| | {before} | this checkout | ratio |")
    print("|---|---|---|---|")
    for key, label in FIGURES:
        cells, medians = [], []
        for name in arms:
            values = [r[key] for r in runs[name]]
            medians.append(statistics.median(values))
            cells.append(f"{medians[-1]:,.2f} ({min(values):,.2f}–{max(values):,.2f})"
                         if key.startswith(("add", "step")) else f"{medians[-1]:,.0f}")  # fmt: skip
        print(f"| {label} | {cells[0]} | {cells[1]} | {medians[1] / medians[0]:.3f}× |")


if __name__ == "__main__":
    main()
