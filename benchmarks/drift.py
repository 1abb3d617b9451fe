"""Protected calibration on drifting streams: raw score, Venn-Abers p, protected p, and the
authors' library on the same p, side by side in one run.

Each stream is read prequentially by the default ``VennAbersClassifier`` around
``StandardScaler() | LogisticRegression()``, each label right after its prediction; the
columns are then:

* ``raw``: the logistic regression's own P(True) (the score the classifier calibrates);
* ``VA p``: the classifier's Venn-Abers p (merge "log");
* ``protected``: ``streamcal.Protector`` (defaults: burn-in 1,000, alpha 0.01) on VA p;
* ``authors``: ``protected-classification`` 0.1.5 (Vovk, Petej & Gammerman's library,
  Brier-loss variant, its defaults) on the same VA p, ``predict_proba_one`` then
  ``learn_one``; its first answer is empty, p is used there.

Streams (a change at the middle label, 20,000 of 40,000; ``--quick``: 3,000 of 6,000):

* ``label shift``: x | y ~ N(+-0.5, 1) in 5 dimensions; P(y = 1) goes from 0.2 to 0.7;
* ``concept``: river's Agrawal, classification function 0, then 4;
* ``gradual``: the same change through river's ConceptDriftStream, spread over 6,000
  labels (``--quick``: 1,000) centred on the middle; "after the change" counts from there;
* ``unchanging``: Agrawal function 0 throughout; the false alarms are counted over 20
  seeds (``--quick``: 5), and the largest excess of the protected over the VA whole-stream
  log loss (in total nats, bound ln 2) over those seeds is shown;
* ``sp500 (real)``: river's bundled SP500Stocks (1,257 trading days, time-ordered): does
  the equal-weighted portfolio rise the next day? No known change point: whole stream only.
  (river's Elec2 and other real streams download their data; this one ships in the wheel.)

Rows: log loss over the 1,000 and 5,000 labels after the change and over the whole stream
(probabilities clipped to [1e-15, 1 - 1e-15]), labels from the change to the alarm
(negative: before it), and µs per event of the protector (``predict`` + ``learn``, one
call each) against the authors' library on the same sequence. Then the issue's targets,
each PASS or FAIL.

    python benchmarks/drift.py            # several minutes (the authors' library: ~2 ms/event)
    python benchmarks/drift.py --quick
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from river import datasets, linear_model, preprocessing
from river.datasets import synth

from streamcal import Protector, VennAbersClassifier, protect_batch

LN2 = math.log(2)


def lr():
    return preprocessing.StandardScaler() | linear_model.LogisticRegression()


# --- streams -----------------------------------------------------------------------------


def label_shift(n, change, seed):
    rng = np.random.default_rng(seed)
    for i in range(n):
        y = bool(rng.random() < (0.2 if i < change else 0.7))
        x = rng.normal(0.5 if y else -0.5, 1.0, 5)
        yield {f"x{j}": float(v) for j, v in enumerate(x)}, y


def agrawal(n, change, seed, after=4, width=None):
    before = synth.Agrawal(classification_function=0, seed=seed)
    if after is None:
        yield from before.take(n)
        return
    later = synth.Agrawal(classification_function=after, seed=seed + 1000)
    if width is None:  # abrupt
        yield from before.take(change)
        yield from later.take(n - change)
        return
    drift = synth.ConceptDriftStream(before, later, position=change, width=width, seed=seed)
    yield from drift.take(n)


def sp500():
    for x, r in datasets.SP500Stocks():
        yield x, r > 0


def prequential(stream):
    """(raw scores, VA p, labels) of the default classifier, label right after prediction."""
    clf = VennAbersClassifier(lr())
    raw, ps, ys = [], [], []
    for x, y in stream:
        iv = clf.predict_interval_one(x)
        raw.append(iv.score)
        ps.append(iv.p)
        ys.append(bool(y))
        clf.learn_one(x, y)
    return np.array(raw), np.array(ps), np.array(ys)


# --- the authors' library ------------------------------------------------------------------


def authors(ps, ys):
    """protected-classification 0.1.5 on the sequence: (its p's, µs per event)."""
    from protected_classification import ProtectedClassification

    pc = ProtectedClassification()
    out = np.empty(len(ps))
    t = time.perf_counter()
    for i, (p, y) in enumerate(zip(ps.tolist(), ys.tolist(), strict=True)):
        d = {False: 1.0 - p, True: p}
        got = pc.predict_proba_one(d)[0]
        out[i] = float(got[True]) if len(got) else p
        pc.learn_one(d, y)
    return out, (time.perf_counter() - t) / len(ps) * 1e6


def protector_cost(ps, ys):
    """µs per event of Protector.predict + Protector.learn, one Python call each."""
    prot = Protector()
    prot.predict(0.5)  # compile / load the kernels outside the timing
    prot.learn(0.5, 1)
    prot = Protector()
    t = time.perf_counter()
    for p, y in zip(ps.tolist(), ys.tolist(), strict=True):
        prot.predict(p)
        prot.learn(p, y)
    return (time.perf_counter() - t) / len(ps) * 1e6


# --- measures ------------------------------------------------------------------------------


def log_loss(p, y):
    p = np.clip(p, 1e-15, 1 - 1e-15)
    return -np.where(y, np.log(p), np.log1p(-p))


def mean_loss(p, y, lo, hi):
    return float(log_loss(p[lo:hi], y[lo:hi]).mean()) if hi > lo else float("nan")


def fmt(v, digits=3):
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    return f"{v:.{digits}f}" if math.isfinite(v) else "-"


def table(title, header, rows):
    print(f"\n### {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for r in rows:
        print("| " + " | ".join(str(c) for c in r) + " |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="6,000 labels, 5 seeds (CI smoke)")
    ap.add_argument("--seeds", type=int, default=None, help="unchanging seeds (20; quick 5)")
    ap.add_argument("--no-authors", action="store_true", help="skip the authors' library")
    args = ap.parse_args(argv)
    n, change, width = (6_000, 3_000, 1_000) if args.quick else (40_000, 20_000, 6_000)
    seeds = args.seeds or (5 if args.quick else 20)
    t_start = time.perf_counter()

    streams = {
        "label shift": (lambda: label_shift(n, change, 0), change),
        "concept": (lambda: agrawal(n, change, 0), change),
        "gradual": (lambda: agrawal(n, change, 0, width=width), change),
        "unchanging": (lambda: agrawal(n, change, 0, after=None), None),
        "sp500 (real)": (sp500, None),
    }
    results = {}
    for name, (make, at) in streams.items():
        raw, ps, ys = prequential(make())
        prot, log_s = protect_batch(ps, ys)
        prot_state = Protector()
        prot_state.run(ps, ys)
        auth, auth_us = (None, None) if args.no_authors else authors(ps, ys)
        results[name] = dict(raw=raw, ps=ps, ys=ys, prot=prot, auth=auth, auth_us=auth_us,
                             alarm_at=prot_state.alarm_at, at=at, n=len(ys))  # fmt: skip
        print(f"{name}: {len(ys)} labels, alarm at {prot_state.alarm_at}, "
              f"{time.perf_counter() - t_start:.0f}s", flush=True)  # fmt: skip

    columns = ("raw", "ps", "prot", "auth")
    header = ["stream", "measure", "raw score", "VA p", "protected p", "authors' lib"]
    rows = []
    for name, r in results.items():
        y, at, total = r["ys"], r["at"], r["n"]
        spans = [("log loss, whole stream", 0, total)]
        if at is not None:
            spans = [
                ("log loss, 1,000 after change", at, at + 1000),
                ("log loss, 5,000 after change", at, at + 5000),
                *spans,
            ]
        for label, lo, hi in spans:
            vals = [None if r[c] is None else mean_loss(r[c], y, lo, hi) for c in columns]
            rows.append([name, label, *(fmt(v, 4) for v in vals)])
        alarm = r["alarm_at"]
        if alarm is None:
            since = "no alarm"
        else:
            since = str(alarm - at) if at is not None else f"at label {alarm}"
        rows.append([name, "labels from change to alarm", "-", "-", since, "(no alarm)"])

    # False alarms and the price of protection over unchanging seeds.
    false_alarms, excess = 0, []
    for seed in range(seeds):
        if seed == 0:
            ps, ys = results["unchanging"]["ps"], results["unchanging"]["ys"]
        else:
            _, ps, ys = prequential(agrawal(n, change, seed, after=None))
        prot = Protector()
        out, _ = prot.run(ps, ys)
        false_alarms += prot.alarm
        excess.append(float(log_loss(out, ys).sum() - log_loss(ps, ys).sum()))
    rows.append(["unchanging", f"false alarms over {seeds} seeds", "-", "-",
                 str(false_alarms), "(no alarm)"])  # fmt: skip
    rows.append(["unchanging", f"max excess loss, total nats ({seeds} seeds)", "-", "0",
                 fmt(max(excess), 3), "-"])  # fmt: skip

    ref = results["unchanging"]
    prot_us = protector_cost(ref["ps"], ref["ys"])
    auth_us = ref["auth_us"]
    rows.append(["unchanging", "µs per event (predict + learn)", "-", "-", fmt(prot_us, 2),
                 fmt(auth_us, 0) if auth_us else "-"])  # fmt: skip
    table(f"Protected calibration, {n:,} labels, change at {change:,}", header, rows)

    # The targets.
    checks = []
    for name in ("label shift", "concept"):
        r = results[name]
        at = r["at"]
        a = mean_loss(r["prot"], r["ys"], at, at + 1000)
        b = mean_loss(r["ps"], r["ys"], at, at + 1000)
        checks.append((f"{name}: protected 1,000-label loss <= 0.85 x VA p", a <= 0.85 * b,
                       f"{a:.4f} vs {0.85 * b:.4f}"))  # fmt: skip
        alarm = r["alarm_at"]
        ok = alarm is not None and 0 < alarm - at <= 300
        checks.append((f"{name}: alarm within 300 labels after the change, not before", ok,
                       "no alarm" if alarm is None else f"{alarm - at:+d}"))  # fmt: skip
    checks.append((f"unchanging: <= 1 false alarm in {seeds} seeds", false_alarms <= 1,
                   str(false_alarms)))  # fmt: skip
    checks.append(("unchanging: whole-stream protected loss within ln 2 nats of VA p",
                   max(excess) <= LN2, f"max {max(excess):.3f} nats"))  # fmt: skip
    checks.append(("protector <= 5 µs per event", prot_us <= 5, f"{prot_us:.2f} µs"))
    table("Targets", ["target", "result", "value"],
          [[t, "PASS" if ok else "FAIL", v] for t, ok, v in checks])  # fmt: skip
    print(f"\n{time.perf_counter() - t_start:.0f} s in all")
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
