"""The report's figures of a regression run (``--task regression``): PNG files drawn from
its metric log, in place of the binary ones (whose claim, "the interval covers", has one
probability: its reliability diagram is one dot and its band has no width).

* ``coverage.png``: the interval's coverage over time, cumulative and over the last
  window, against its nominal coverage and the band of ``SAMPLING_ERROR_SE`` standard
  errors around it;
* ``crps.png``: the mean CRPS over time, cumulative and recent, and the interval's mean
  width and interval score;
* ``pit.png``: the PIT histogram of the labels (flat when the distributions are
  calibrated) and, from it, the calibration of each quantile: the share of labels
  below the predicted q-quantile against q.
"""

from __future__ import annotations

import math
from pathlib import Path

from streamcal.monitoring.report.figures import (
    _CAL,
    _RAW,
    _figure,
    _finish,
    _save,
    _series,
    _settled_limits,
)
from streamcal.monitoring.report.verdicts import SAMPLING_ERROR_SE

__all__ = ["COVERAGE_FIGURE", "CRPS_FIGURE", "PIT_FIGURE", "REGRESSION_FIGURES",
           "coverage_figure", "crps_figure", "pit_figure", "quantile_calibration"]  # fmt: skip

COVERAGE_FIGURE = "coverage.png"
CRPS_FIGURE = "crps.png"
PIT_FIGURE = "pit.png"
REGRESSION_FIGURES = (COVERAGE_FIGURE, CRPS_FIGURE, PIT_FIGURE)


def _log_x(ax, x, ys) -> None:
    if any(xi > 0 for xi, yi in zip(x, ys, strict=True) if yi == yi):
        ax.set_xscale("log")


def coverage_figure(log, path: Path) -> None:
    """Coverage, cumulative and recent, against the nominal coverage and its band."""
    fig = _figure(7.0, 3.8)
    ax = fig.add_subplot()
    x = _series(log, "labels")
    nominal = _series(log, "interval_coverage")
    k = SAMPLING_ERROR_SE
    se = [k * math.sqrt(c * (1 - c) / n) if n > 0 and c == c else math.nan
          for c, n in zip(nominal, x, strict=True)]  # fmt: skip
    ax.fill_between(x, [c - s for c, s in zip(nominal, se, strict=True)],
                    [c + s for c, s in zip(nominal, se, strict=True)], color="black",
                    alpha=0.12, lw=0, label=f"nominal ±{k} SE (cumulative)")  # fmt: skip
    ax.plot(x, nominal, color="black", lw=1.0, ls="--", label="nominal coverage")
    recent = _series(log, "recent_coverage")
    cumulative = _series(log, "coverage")
    ax.plot(x, recent, color=_CAL, lw=0.8, alpha=0.5, label="coverage, recent window")
    ax.plot(x, cumulative, color=_CAL, lw=1.8, label="coverage, cumulative")
    _log_x(ax, x, cumulative)
    _finish(fig, ax, path, "share of labels in [lo, hi]", "lower right")


def crps_figure(log, path: Path) -> None:
    """Mean CRPS (cumulative and recent); the interval's mean width and score."""
    fig = _figure(8.0, 3.8)
    x = _series(log, "labels")
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    crps = [_series(log, "recent_crps"), _series(log, "crps")]
    left.plot(x, crps[0], color=_CAL, lw=0.8, alpha=0.5, label="recent window")
    left.plot(x, crps[1], color=_CAL, lw=1.8, label="cumulative")
    left.set_title("CRPS of the predictive distributions", fontsize=10)
    interval = [_series(log, "interval_score"), _series(log, "interval_width")]
    right.plot(x, interval[0], color=_RAW, lw=1.8, label="interval score")
    right.plot(x, interval[1], color=_CAL, lw=1.8, label="mean width")
    right.set_title("the interval [lo, hi], cumulative", fontsize=10)
    for ax, series in ((left, crps), (right, interval)):
        ax.set_xlabel("labelled events")
        limits = _settled_limits(x, series)  # from 0; the warm-up can be off-scale
        if limits is not None:
            ax.set_ylim(0, limits[1])
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, frameon=False)
    _save(fig, path)


def quantile_calibration(bins) -> list[tuple[float, float, int]]:
    """(q, the share of labels whose PIT is at most q, labels) at each inner edge q of
    the PIT histogram ``bins``: the share of labels below the predicted q-quantile, q
    when calibrated.

    >>> quantile_calibration([{"lo": 0.0, "hi": 0.5, "count": 3},
    ...                       {"lo": 0.5, "hi": 1.0, "count": 1}])
    [(0.5, 0.75, 4)]
    """
    n = sum(b["count"] for b in bins)
    out, below = [], 0
    for b in bins[:-1]:
        below += b["count"]
        out.append((b["hi"], below / n if n else math.nan, n))
    return out


def pit_figure(last: dict, path: Path) -> None:
    """The PIT histogram against the uniform, and the calibration of each quantile."""
    fig = _figure(8.0, 3.8)
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    bins = last.get("pit_histogram")
    k = SAMPLING_ERROR_SE
    for ax in (left, right):
        ax.set_xlim(0, 1)
        ax.set_xlabel("PIT Q(y)" if ax is left else "quantile level q")
        ax.grid(alpha=0.3)
    left.set_title("PIT histogram", fontsize=10)
    left.set_ylabel("share of labels")
    right.set_title("calibration of each quantile", fontsize=10)
    right.set_ylabel("share of labels below the q-quantile")
    n = sum(b["count"] for b in bins) if bins else 0
    if not n:
        for ax in (left, right):
            ax.text(0.5, 0.5, "no labels", ha="center", va="center", transform=ax.transAxes)
        _save(fig, path)
        return
    width = [b["hi"] - b["lo"] for b in bins]
    left.bar([b["lo"] for b in bins], [b["count"] / n for b in bins], width=width,
             align="edge", color=_CAL, alpha=0.6, edgecolor="white",
             label=f"{n} labels")  # fmt: skip
    w = width[0]  # equal bins: the uniform's share, and its band
    se = k * math.sqrt(w * (1 - w) / n)
    left.axhspan(w - se, w + se, color="black", alpha=0.15, lw=0, zorder=3,
                 label=f"uniform ±{k} SE")  # over the bars: their tops must show in it
    left.axhline(w, color="black", lw=1.0, ls="--")
    left.set_ylim(bottom=0)
    qs = quantile_calibration(bins)
    grid = [i / 100 for i in range(101)]
    right.fill_between(grid, [q - k * math.sqrt(q * (1 - q) / n) for q in grid],
                       [q + k * math.sqrt(q * (1 - q) / n) for q in grid], color="black",
                       alpha=0.12, lw=0, label=f"calibrated ±{k} SE")  # fmt: skip
    right.plot([0, 1], [0, 1], color="black", lw=1.0, ls="--")
    right.plot([q for q, _, _ in qs], [f for _, f, _ in qs], "o-", color=_CAL, ms=4,
               label="observed")  # fmt: skip
    right.set_ylim(0, 1)
    for ax in (left, right):
        ax.legend(fontsize=8, frameon=False, loc="upper left")
    _save(fig, path)


def draw_regression_figures(log, last: dict, out: Path) -> tuple[str, ...]:
    """Draw ``REGRESSION_FIGURES`` of ``log`` (``last``: its last line) into ``out``."""
    coverage_figure(log, out / COVERAGE_FIGURE)
    crps_figure(log, out / CRPS_FIGURE)
    pit_figure(last, out / PIT_FIGURE)
    return REGRESSION_FIGURES
