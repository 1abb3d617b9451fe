"""Make the README's figures: a synthetic stream through VennAbersClassifier.

The model is river's Gaussian naive Bayes on three noisy copies of one feature: naive
Bayes counts the same evidence three times, so its probabilities are overconfident, the
typical raw-model miscalibration. Each event is predicted before its label is learned
(prequential), and a CalibrationTracker records every label, as the stream processor does.

    python docs/img/make_figures.py [N]   # writes docs/img/reliability.png and loss.png
"""

from __future__ import annotations

import json
import math
import random
import shutil
import sys
import tempfile
from pathlib import Path

from river import naive_bayes

from streamcal import CalibrationTracker, VennAbersClassifier, write_report

HERE = Path(__file__).resolve().parent


def stream(n, seed=0):
    rng = random.Random(seed)
    for _ in range(n):
        z, w = rng.gauss(0, 1), rng.gauss(0, 1)
        x = {f"z{k}": z + rng.gauss(0, 0.3) for k in range(3)}
        x["w"] = w
        yield x, rng.random() < 1 / (1 + math.exp(-(1.2 * z + 0.8 * w)))


def main(n=20_000):
    clf = VennAbersClassifier(naive_bayes.GaussianNB())
    tracker = CalibrationTracker(window=1000, bins=10)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "metrics.jsonl"
        with open(log, "w") as f:
            for i, (x, y) in enumerate(stream(n), 1):
                iv = clf.predict_interval_one(x)
                tracker.update(iv.p0, iv.p1, y, score=iv.score, p=iv.p)
                clf.learn_one(x, y)
                if i % 50 == 0 or i == n:
                    f.write(json.dumps(tracker.snapshot(reliability=i == n)) + "\n")
        out = Path(tmp) / "report"
        write_report(log, out)
        for name in ("reliability.png", "loss.png"):
            shutil.copyfile(out / name, HERE / name)
            print(HERE / name, (HERE / name).stat().st_size, "bytes")
    print(json.dumps({k: round(v, 4) for k, v in tracker.snapshot().items()}, indent=1))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000)
