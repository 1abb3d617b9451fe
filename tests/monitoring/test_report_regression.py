"""`streamcal report` of a regression run's metric log: the coverage, CRPS and PIT figures
in place of the binary ones, the numbers of the last line, the coverage's verdict, and
the per-unit table of a ``--scope partition`` job."""

from __future__ import annotations

import html
import json
import random
import re

import pytest

from streamcal import ConformalPredictiveRegressor
from streamcal.cli import main
from streamcal.monitoring import write_report
from streamcal.monitoring.regression_tracker import RegressionTracker
from streamcal.monitoring.report import FIGURES, REGRESSION_FIGURES
from streamcal.monitoring.report.regression_figures import quantile_calibration
from tests.monitoring.test_report import check_png, html_values

pytest.importorskip("matplotlib")


def regression_log(path, n=2000, every=100, seed=0, narrow=1.0, unit=None):
    """The lines a regression run writes: a ``RegressionTracker`` fed by a conformal
    predictive regressor on y = 2 x + noise, each label scored before it is learned.
    ``narrow`` < 1 shrinks every interval about its median (claims more than it covers)."""
    rng = random.Random(seed)
    model = ConformalPredictiveRegressor(_Linear(), bins=1)
    tracker = RegressionTracker(window=300)
    lines = []
    for i in range(n):
        x = {"a": rng.uniform(-1, 1)}
        y = 2 * x["a"] + rng.gauss(0, 0.5)
        dist = model.predict_distribution_one(x)
        lo, hi = dist.interval(0.9)
        if lo == lo and abs(lo) != float("inf") and abs(hi) != float("inf"):
            m = dist.median
            lo, hi = m - narrow * (m - lo), m + narrow * (hi - m)
            tracker.update(lo, hi, y, 0.9, pit=dist.cdf(y), crps=dist.crps(y))
        model.learn_one(x, y)
        if (i + 1) % every == 0:
            line = {**tracker.snapshot(), "events": i + 1, "dead_letters": 0}
            lines.append(line if unit is None else {**line, "unit": unit})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return lines


def verdict_shown(page: str) -> str:
    return html.unescape(re.search(r'data-key="coverage_verdict">([^<]*)<', page).group(1))


class _Linear:
    """y = 2 x, already learned: its residuals are exchangeable, as the guarantee needs."""

    def predict_one(self, x):
        return 2 * x["a"]

    def learn_one(self, x, y):
        pass


def test_a_regression_log_gives_coverage_crps_and_pit_figures(tmp_path):
    lines = regression_log(tmp_path / "m.jsonl")
    page = write_report(tmp_path / "m.jsonl", tmp_path / "out").read_text()
    for name in REGRESSION_FIGURES:
        check_png(tmp_path / "out" / name)
    for name in FIGURES:  # the binary claim's figures say nothing here: not drawn
        assert not (tmp_path / "out" / name).exists()
    assert page.count("data:image/png;base64,") == len(REGRESSION_FIGURES)
    last = lines[-1]
    shown = html_values(page)
    for key in ("labels", "interval_coverage", "coverage", "recent_coverage", "crps",
                "recent_crps", "interval_width", "interval_score"):  # fmt: skip
        assert shown[key] == pytest.approx(last[key], rel=1e-12), key
    assert "log_loss" not in shown and "mean_p0" not in shown  # the claim's binary tables
    assert verdict_shown(page).startswith("holds")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["coverage"] == last["coverage"] and summary["crps"] == last["crps"]
    assert summary["coverage_verdict"] == verdict_shown(page)
    assert "corollary1" not in summary
    # the calibration of each quantile is the PIT histogram's cumulative share
    bins = last["pit_histogram"]
    counts = [b["count"] for b in bins]
    n = sum(counts)
    assert n == last["labels"]
    for j, (q, share, total) in enumerate(quantile_calibration(bins)):
        assert q == pytest.approx((j + 1) / len(bins)) and total == n
        assert share == sum(counts[: j + 1]) / n
        assert abs(share - q) < 3 * (q * (1 - q) / n) ** 0.5 + 1 / n  # calibrated


def test_intervals_narrower_than_claimed_are_a_violation(tmp_path):
    regression_log(tmp_path / "m.jsonl", narrow=0.6)
    write_report(tmp_path / "m.jsonl", tmp_path / "out")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["coverage"] < 0.8
    assert summary["coverage_verdict"].startswith("violated: coverage")
    assert "below nominal 0.9" in summary["coverage_verdict"]


def test_units_of_a_partitioned_regression_job(tmp_path, capsys):
    logs = [tmp_path / f"m{u}.jsonl" for u in (0, 1)]
    per_unit = [regression_log(path, seed=u, unit=str(u)) for u, path in enumerate(logs)]
    out = tmp_path / "out"
    assert main(["report", *map(str, logs), "--out", str(out), "--no-progress"]) == 0
    page = (out / "report.html").read_text()
    for name in REGRESSION_FIGURES:
        check_png(out / name)
    assert "<th>coverage verdict</th>" in page and "Corollary 1" not in page
    labels = sum(lines[-1]["labels"] for lines in per_unit)
    assert html_values(page)["labels"] == labels
    summary = json.loads((out / "summary.json").read_text())
    covered = sum(lines[-1]["coverage"] * lines[-1]["labels"] for lines in per_unit)
    assert summary["coverage"] == pytest.approx(covered / labels)
    assert set(summary["units"]) == {"0", "1"}
