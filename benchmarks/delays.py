"""Outcome-dependent label delays and implicit negatives, with and without a label horizon
(issue 35): log loss, Corollary 1 and the alarm.

Every run reads a stream in arrival order through river's ``stream.simulate_qa`` (the
engine of ``evaluate.progressive_val_score(..., delay=...)``: the answer of event i comes
just before question i + d), with ``StandardScaler() | LogisticRegression()``:

* ``bare``: the river model alone;
* ``VA``: ``VennAbersClassifier(model, protect=True)`` (default mode; its Venn-Abers p and
  its conformal alarm at alpha 0.01 come from the same run: protection leaves p alone);
* ``VA+H``: the same with ``label_horizon=H`` (and ``label_default=False`` where the
  negatives never come).

Delays: ``outcome`` (``40 if y else H``: a positive comes in 40 events, a negative at the
horizon), ``fixed`` (H for every label), ``missing`` (positives in 40, negatives never).
Streams of 12,000 events (``--quick``: 3,000), H = 3,000 (``--quick``: 500):

* ``agrawal``: river's ``synth.Agrawal`` function 0 (stationary);
* ``logistic``: P(y = 1 | x) = sigmoid(w x), x ~ N(0, I_4), w = (2, -1, 1, 0.5) (stationary);
* ``turn``: the boundary sigmoid(8 u x) turned by 90 degrees at the middle event (the class
  prior kept): the alarm should fire, after the turn.

Columns: log loss over all events (probabilities clipped to [1e-15, 1 - 1e-15]; for VA the
Venn-Abers p), Corollary 1 (mean p0 <= frequency of 1 <= mean p1 over all events, the
one-sided check at 3 standard errors of the frequency), and on how many seeds the alarm
fired (on ``turn``: after the turn / before it). Then the issue's "done when" lines, each
PASS or FAIL (not tuned: a FAIL is reported as it is).

    python benchmarks/delays.py            # 10 seeds, ~15 minutes on a quiet machine
    python benchmarks/delays.py --quick    # 3 seeds, 3,000 events
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from river import stream

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _drift_streams import agrawal0, logit_shift, lr, turn  # noqa: E402

from streamcal import OutcomeDependentDelayWarning, VennAbersClassifier  # noqa: E402

EPS = 1e-15
POSITIVE_DELAY = 40  # the "40 if y else H"
ALPHA = 0.01


def _logistic(n, seed):
    return logit_shift(n, n, seed)  # no shift: stationary


def _turned(n, seed):
    return turn(90)(n, n // 2, seed)


STREAMS = {"agrawal": agrawal0, "logistic": _logistic, "turn": _turned}


def delays(kind: str, H: int, n: int):
    """river's delay for ``kind`` (``missing``: the negatives after the end, never learned)."""
    if kind == "fixed":
        return H
    later = H if kind == "outcome" else n + 1
    return lambda x, y: POSITIVE_DELAY if y else later


class Run:
    """One classifier on one stream and seed: its log loss per event; for VA also the mean
    p0, mean p1 and frequency of 1, the label count at the alarm (None: it did not fire),
    the late labels and whether OutcomeDependentDelayWarning was given."""

    def __init__(self, loss: float, n: int):
        self.loss, self.n = loss, n
        self.p0 = self.p1 = self.freq = math.nan
        self.alarm_at: int | None = None
        self.late = 0
        self.warned = False

    @property
    def corollary(self) -> bool:
        """mean p0 <= freq <= mean p1, one-sided at 3 standard errors of the frequency."""
        se = 3 * math.sqrt(max(self.freq * (1 - self.freq), 1e-12) / self.n)
        return self.p0 <= self.freq + se and self.freq - se <= self.p1


def run(make_stream, seed: int, n: int, kind: str, H: int, model: str) -> Run:
    """``model``: "bare", "va" or "va+h" (with the default False when labels are missing)."""
    if model == "bare":
        clf = lr()
    else:
        horizon = {"label_horizon": H} if model == "va+h" else {}
        if model == "va+h" and kind == "missing":
            horizon["label_default"] = False
        clf = VennAbersClassifier(lr(), protect={"alpha": ALPHA}, **horizon)
    data = list(make_stream(n, seed))
    preds: dict[int, tuple] = {}
    loss, s0, s1, ones = 0.0, 0.0, 0.0, 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", OutcomeDependentDelayWarning)
        for i, x, y in stream.simulate_qa(data, None, delays(kind, H, n)):
            if y is None:
                if model == "bare":
                    preds[i] = (clf.predict_proba_one(x).get(True, 0.5), 0.0, 0.0)
                else:
                    iv = clf.predict_interval_one(x)
                    preds[i] = (iv.p, iv.p0, iv.p1)
                continue
            p, p0, p1 = preds.pop(i)
            p = min(max(p, EPS), 1 - EPS)
            loss -= math.log(p if y else 1 - p)
            s0, s1, ones = s0 + p0, s1 + p1, ones + bool(y)
            if kind == "missing" and not y:
                continue  # never comes
            clf.learn_one(x, y)
    out = Run(loss / n, n)
    if model != "bare":
        out.p0, out.p1, out.freq = s0 / n, s1 / n, ones / n
        out.alarm_at, out.late = clf.alarm_at, clf.late_labels
        out.warned = any(issubclass(w.category, OutcomeDependentDelayWarning) for w in caught)
    return out


# The runs of the table: (delay kind, model) per stream
STATIONARY_RUNS = [
    ("outcome", "bare"), ("outcome", "va"), ("outcome", "va+h"), ("fixed", "va"),
    ("missing", "bare"), ("missing", "va"), ("missing", "va+h"),
]  # fmt: skip
DRIFT_RUNS = [("outcome", "va"), ("outcome", "va+h"), ("fixed", "va")]


def measure(n: int, H: int, seeds: list[int], streams=STREAMS) -> dict:
    """{(stream, kind, model): [Run per seed]}."""
    results = {}
    for name, make in streams.items():
        for kind, model in DRIFT_RUNS if name == "turn" else STATIONARY_RUNS:
            results[name, kind, model] = [run(make, s, n, kind, H, model) for s in seeds]
    return results


def _mean(values) -> float:
    return float(np.mean(list(values)))


def table(results: dict, n: int) -> str:
    """The markdown table: one row per (stream, delays, model)."""
    lines = [
        "| stream | delays | model | log loss (mean over seeds) | Corollary 1 holds | "
        "mean p0 / freq / mean p1 | alarms | late labels | warned |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (name, kind, model), runs in results.items():
        k = len(runs)
        if model == "bare":
            lines.append(f"| {name} | {kind} | {model} | {_mean(r.loss for r in runs):.4f} "
                         "| | | | | |")  # fmt: skip
            continue
        fired = [r.alarm_at for r in runs if r.alarm_at is not None]
        if name == "turn":
            after = sum(a > n // 2 for a in fired)
            alarms = f"{after}/{k} after the turn, {len(fired) - after} before"
        else:
            alarms = f"{len(fired)}/{k}"
        holds = sum(r.corollary for r in runs)
        lines.append(
            f"| {name} | {kind} | {model} | {_mean(r.loss for r in runs):.4f} | {holds}/{k} | "
            f"{_mean(r.p0 for r in runs):.3f} / {_mean(r.freq for r in runs):.3f} / "
            f"{_mean(r.p1 for r in runs):.3f} | {alarms} | {_mean(r.late for r in runs):.0f} "
            f"| {sum(r.warned for r in runs)}/{k} |"
        )
    return "\n".join(lines)


def targets(results: dict, n: int) -> list[tuple[str, bool, str]]:
    """The issue's library "done when" lines: (line, met, the numbers)."""
    out = []
    for name in ("agrawal", "logistic"):
        hz = results[name, "outcome", "va+h"]
        bare = results[name, "outcome", "bare"]
        fixed = results[name, "fixed", "va"]
        worst_bare = max(h.loss - b.loss for h, b in zip(hz, bare, strict=True))
        out.append((f"{name}: VA+H log loss <= bare's (outcome delays), every seed",
                    worst_bare <= 0, f"largest VA+H - bare {worst_bare:+.4f}"))  # fmt: skip
        ratio = max(h.loss / f.loss for h, f in zip(hz, fixed, strict=True))
        out.append((f"{name}: VA+H <= 1.03x VA with a fixed delay of H, every seed",
                    ratio <= 1.03, f"largest ratio {ratio:.4f}"))  # fmt: skip
        fired = sum(r.alarm_at is not None for r in hz)
        out.append((f"{name}: VA+H alarms on at most 1 of {len(hz)} seeds", fired <= 1,
                    f"{fired}/{len(hz)} (VA without H: "
                    f"{sum(r.alarm_at is not None for r in results[name, 'outcome', 'va'])})"))
        missing = results[name, "missing", "va+h"]
        ratio = max(m.loss / h.loss for m, h in zip(missing, hz, strict=True))
        out.append((f"{name}: label_default=False, negatives never come: <= 1.03x negatives "
                    "at H", ratio <= 1.03, f"largest ratio {ratio:.4f}"))  # fmt: skip
    turned = results["turn", "outcome", "va+h"]
    after = sum(r.alarm_at is not None and r.alarm_at > n // 2 for r in turned)
    before = sum(r.alarm_at is not None and r.alarm_at <= n // 2 for r in turned)
    need = math.ceil(0.8 * len(turned))
    out.append((f"turn: VA+H catches the turn on >= {need} of {len(turned)} seeds, never before",
                after >= need and before == 0, f"{after} after, {before} before"))  # fmt: skip
    return out


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="3,000 events, H 500, 3 seeds")
    ap.add_argument("--n", type=int, help="events per stream (default 12,000)")
    ap.add_argument("--horizon", type=int, help="H (default 3,000)")
    ap.add_argument("--seeds", type=int, help="seeds 0..k-1 (default 10)")
    args = ap.parse_args(argv)
    quick = (3000, 500, 3) if args.quick else (12_000, 3000, 10)
    args.n = args.n or quick[0]
    args.horizon = args.horizon or quick[1]
    args.seeds = args.seeds or quick[2]
    return args


def main(argv=None) -> int:
    args = parse(argv)
    t = time.perf_counter()
    results = measure(args.n, args.horizon, list(range(args.seeds)))
    print(f"{args.n} events, H = {args.horizon}, seeds 0-{args.seeds - 1}, positives after "
          f"{POSITIVE_DELAY}, alarm alpha {ALPHA} ({time.perf_counter() - t:.0f} s)\n")  # fmt: skip
    print(table(results, args.n))
    print("\n| target | met | numbers |\n|---|---|---|")
    for line, met, numbers in targets(results, args.n):
        print(f"| {line} | {'PASS' if met else 'FAIL'} | {numbers} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
