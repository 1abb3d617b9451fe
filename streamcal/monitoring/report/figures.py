"""The report's figures: PNG files drawn with matplotlib from a metric log.

* ``reliability.png``: reliability diagrams of the calibrated p and of the raw score, with
  95% Wilson intervals on each bin's frequency and the bin counts underneath;
* ``loss.png``: cumulative and rolling log loss and square loss, calibrated vs raw (and
  protected, with protection);
* ``width.png``: the Venn-Abers interval width p1 - p0 over time;
* ``band.png``: Corollary 1, mean p0 <= frequency of 1 <= mean p1, over time;
* ``categories.png`` and ``classes.png``: the same band per category or per class, one
  row each;
* ``alarm.png``: the log of the alarm's conformal test martingale over labels, its alarm
  level ln(1/alpha), the moment the alarm fired and where the change began.

matplotlib is imported lazily (the ``report`` extra) and drawn through the Agg canvas
directly: no pyplot, so the caller's backend and global state are left alone.
"""

from __future__ import annotations

import math
from pathlib import Path

from streamcal.errors import DependencyError
from streamcal.monitoring import schema
from streamcal.monitoring.reliability import wilson_interval
from streamcal.monitoring.report.verdicts import (
    SAMPLING_ERROR_SE,
    alarm_moment,
    alarm_onset,
    has_values,
)

__all__ = [
    "ALARM_FIGURE",
    "CATEGORY_FIGURE",
    "CLASS_FIGURE",
    "FIGURES",
    "MissingDependencyError",
    "draw_figures",
    "require_matplotlib",
]

FIGURES = ("reliability.png", "loss.png", "width.png", "band.png")
CATEGORY_FIGURE = "categories.png"
CLASS_FIGURE = "classes.png"
ALARM_FIGURE = "alarm.png"
_CAL, _RAW, _PROT = "#1f5fa8", "#d9731a", "#2a9d4b"
_DASH = (0, (4, 3))  # the protected probability's curves: p's show between the dashes


class MissingDependencyError(DependencyError, ImportError):
    """matplotlib is needed for figures: ``pip install 'streamcal-va[report]'``."""


def _figure(width=7.0, height=4.2):
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MissingDependencyError(
            "streamcal report needs matplotlib; install it with: pip install 'streamcal-va[report]'"
        ) from exc
    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig, path: Path) -> None:
    import io

    from PIL import Image  # matplotlib depends on Pillow

    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    # A 256-colour palette loses nothing visible in line plots and halves the file.
    img = Image.open(buf).convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    img.save(path, format="PNG", optimize=True)


def _series(log, key):
    return [math.nan if line.get(key) is None else float(line[key]) for line in log]


def _reliability_panel(fig, spec, bins, title, colour):
    top, bottom = spec.subgridspec(2, 1, height_ratios=(3, 1), hspace=0.05)
    ax = fig.add_subplot(top)
    axc = fig.add_subplot(bottom, sharex=ax)
    ax.plot([0, 1], [0, 1], color="0.6", lw=1, ls="--", label="perfect calibration")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_title(title, fontsize=10)
    ax.tick_params(labelbottom=False)
    ax.set_ylabel("frequency of 1")
    axc.set_xlabel("predicted probability")
    axc.set_ylabel("count")
    if not bins:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        return
    full = [b for b in bins if b["count"]]
    xs = [b["mean_pred"] for b in full]
    fs = [b["frequency"] for b in full]
    ci = [wilson_interval(round(b["frequency"] * b["count"]), b["count"]) for b in full]
    # clamped: at a frequency of 0 or 1 the interval's end can round a hair inside it
    yerr = [[max(0.0, f - lo) for f, (lo, _) in zip(fs, ci, strict=True)]]
    yerr.append([max(0.0, hi - f) for f, (_, hi) in zip(fs, ci, strict=True)])
    ax.errorbar(
        xs,
        fs,
        yerr=yerr,
        fmt="o-",
        color=colour,
        ms=4,
        lw=1.2,
        capsize=2,
        label="observed (95% Wilson interval)",
    )
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    axc.bar(
        [b["lo"] for b in bins],
        [b["count"] for b in bins],
        width=[b["hi"] - b["lo"] for b in bins],
        align="edge",
        color=colour,
        alpha=0.5,
        edgecolor="white",
    )


def reliability_figure(last: dict, path: Path) -> None:
    fig = _figure(8.0, 4.6)
    gs = fig.add_gridspec(1, 2)
    _reliability_panel(fig, gs[0], bins=last.get("reliability"),
                       title="calibrated p (Venn-Abers)", colour=_CAL)  # fmt: skip
    _reliability_panel(fig, gs[1], bins=last.get("raw_reliability"),
                       title="raw model score", colour=_RAW)  # fmt: skip
    _save(fig, path)


def _settled_limits(x, series):
    """y limits of the series after the first 5% of labels (the warm-up can be off-scale)."""
    start = 0.05 * max((v for v in x if v == v), default=0.0)
    ys = [v for s in series for xi, v in zip(x, s, strict=True) if xi >= start and v == v]
    if not ys:
        return None
    lo, hi = min(ys), max(ys)
    pad = 0.05 * (hi - lo) or 0.05 * abs(hi) or 0.05
    return lo - pad, hi + pad


def loss_figure(log, path: Path) -> None:
    fig = _figure(8.0, 3.8)
    x = _series(log, "labels")
    protected = has_values(log, "protected_log_loss")
    for i, (name, key) in enumerate((("log loss", "log_loss"), ("square loss", "square_loss"))):
        ax = fig.add_subplot(1, 2, i + 1)
        lines = [
            ("recent_" + key, _CAL, 0.8, 0.45, "calibrated, rolling"),
            ("recent_raw_" + key, _RAW, 0.8, 0.45, "raw, rolling"),
            (key, _CAL, 1.8, 1.0, "calibrated, cumulative"),
            ("raw_" + key, _RAW, 1.8, 1.0, "raw, cumulative"),
        ]
        if protected:
            # Dashed and thinner, over the calibrated curves: until protection departs from
            # p the two coincide, and a solid protected curve drawn last hid p's.
            lines += [
                ("recent_protected_" + key, _PROT, 0.7, 0.45, "protected, rolling", _DASH),
                ("protected_" + key, _PROT, 1.1, 1.0, "protected, cumulative", _DASH),
            ]
        series = []
        for k, colour, lw, alpha, label, *style in lines:
            series.append(_series(log, k))
            ax.plot(x, series[-1], color=colour, lw=lw, alpha=alpha, label=label,
                    ls=style[0] if style else "-")  # fmt: skip
        limits = _settled_limits(x, series)
        if limits is not None:
            ax.set_ylim(*limits)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("labelled events")
        ax.grid(alpha=0.3)
        if i == 0:
            ax.legend(fontsize=7, frameon=False)
    _save(fig, path)


def width_figure(log, path: Path) -> None:
    fig = _figure(7.0, 3.2)
    ax = fig.add_subplot()
    x = _series(log, "labels")
    recent, cumulative = _series(log, "recent_mean_width"), _series(log, "mean_width")
    ax.plot(x, recent, color=_CAL, lw=0.8, alpha=0.5, label="rolling")
    ax.plot(x, cumulative, color=_CAL, lw=1.8, label="cumulative")
    ax.set_xlabel("labelled events")
    ax.set_ylabel("mean p1 - p0")
    if any(xi > 0 for xi, wi in zip(x, cumulative, strict=True) if wi == wi):
        ax.set_xscale("log")
    # Widths shrink like 1/n: log-log shows that as a line, when there is a range to show.
    ys = [v for v in recent + cumulative if v > 0]
    if ys and max(ys) > 2 * min(ys):
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, frameon=False)
    _save(fig, path)


def alarm_figure(log, path: Path) -> None:
    """log S over labels, the alarm level ln(1/alpha), the moment the alarm fired and
    where the change began."""
    fig = _figure(7.0, 3.4)
    ax = fig.add_subplot()
    x = _series(log, "labels")
    ax.plot(x, _series(log, "log_martingale"), color=_PROT, lw=1.4, label="log S")
    alphas = [line["alarm_alpha"] for line in log if line.get("alarm_alpha")]
    if alphas:
        level = math.log(1.0 / alphas[-1])
        ax.axhline(level, color="crimson", lw=1, ls="--",
                   label=f"alarm level ln(1/alpha), alpha = {alphas[-1]:g}")  # fmt: skip
    at = alarm_moment(log)
    if at is not None:
        ax.axvline(at, color="crimson", lw=1.2, alpha=0.6, label=f"alarm at label {at:g}")
    onset = alarm_onset(log)
    if onset is not None:
        ax.axvline(onset, color="black", lw=1.0, ls=":",
                   label=f"change began near label {onset:g}")  # fmt: skip
    ax.axhline(0, color="black", lw=0.6)
    _finish(fig, ax, path, "log S (natural log)", "upper left")


def _finish(fig, ax, path: Path, ylabel: str, loc: str) -> None:
    """Label the one panel ``ax`` of ``fig`` over labels, grid it, give it its legend
    (at ``loc``) and save the figure."""
    ax.set_xlabel("labelled events")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, frameon=False, loc=loc)
    _save(fig, path)


def band_figure(log, path: Path) -> None:
    fig = _figure(7.0, 5.0)
    top, bottom = fig.add_gridspec(2, 1, height_ratios=(1, 1)).subplots(sharex=True)
    x = _series(log, "labels")
    p0, p1, f = _series(log, "mean_p0"), _series(log, "mean_p1"), _series(log, "frequency")
    k = SAMPLING_ERROR_SE
    se = [
        k * math.sqrt(fi * (1 - fi) / n) if n > 0 else math.nan for fi, n in zip(f, x, strict=True)
    ]
    top.fill_between(x, p0, p1, color=_CAL, alpha=0.3, lw=0, label="[mean p0, mean p1]")
    top.plot(x, f, color="black", lw=1.2, label="frequency of 1")
    top.set_ylabel("probability")
    # The band is often narrower than a line: show it again relative to the frequency.
    bottom.fill_between(
        x, [-s for s in se], se, color="black", alpha=0.15, lw=0, label=f"±{k} SE of the frequency"
    )
    bottom.fill_between(
        x,
        [a - b for a, b in zip(p0, f, strict=True)],
        [a - b for a, b in zip(p1, f, strict=True)],
        color=_CAL,
        alpha=0.5,
        lw=0,
        label="[mean p0, mean p1] - frequency",
    )
    bottom.axhline(0, color="black", lw=0.8)
    bottom.set_ylabel("minus frequency")
    bottom.set_xlabel("labelled events")
    for ax in (top, bottom):
        if any(xi > 0 for xi, fi in zip(x, f, strict=True) if fi == fi):
            ax.set_xscale("log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, frameon=False, loc="upper right")
    _save(fig, path)


def category_band_figure(rows: list[dict], path: Path, name: str = schema.CATEGORY) -> None:
    """One row per category (or per class: ``name="class"``): [mean p0, mean p1] as a
    bar, the frequency with ±``SAMPLING_ERROR_SE`` standard errors."""
    fig = _figure(7.0, 1.2 + 0.32 * len(rows))
    ax = fig.add_subplot()
    ys = list(range(len(rows)))[::-1]  # the first row on top
    for y, r in zip(ys, rows, strict=True):
        p0, f, p1, n = r.get("mean_p0"), r.get("frequency"), r.get("mean_p1"), r.get("labels")
        if None in (p0, f, p1) or not n:
            continue
        ax.plot([p0, p1], [y, y], color=_CAL, lw=7, alpha=0.45, solid_capstyle="butt",
                label="[mean p0, mean p1]" if y == ys[0] else None)  # fmt: skip
        se = math.sqrt(f * (1 - f) / n)
        k = SAMPLING_ERROR_SE
        ax.errorbar(f, y, xerr=k * se, fmt="o", color="black", ms=4, capsize=3,
                    label=f"frequency of 1, ±{k} SE" if y == ys[0] else None)  # fmt: skip
    ax.set_yticks(ys, [f"{r[name]} ({r.get('labels') or 0})" for r in rows], fontsize=8)
    ax.set_xlabel("probability")
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, frameon=False, loc="lower right")
    _save(fig, path)



def require_matplotlib() -> None:
    """Raise ``MissingDependencyError`` without matplotlib (before anything is written)."""
    _figure()


def _binary_figures(log, last: dict, out: Path) -> tuple[str, ...]:
    reliability_figure(last, out / "reliability.png")
    loss_figure(log, out / "loss.png")
    width_figure(log, out / "width.png")
    band_figure(log, out / "band.png")
    return FIGURES


def draw_figures(log, last: dict, out: Path, categories=(), classes=(),
                 main=None) -> tuple[str, ...]:  # fmt: skip
    """Draw every figure of ``log`` (``last``: its last line, as the tables show it) into
    ``out`` and return their names: the run's own, ``main(log, last, out)`` (``FIGURES``
    by default; a regression run's are ``regression_figures``'), then the ones it has
    data for."""
    extra = (_binary_figures if main is None else main)(log, last, out)
    if categories:
        category_band_figure(categories, out / CATEGORY_FIGURE)
        extra += (CATEGORY_FIGURE,)
    if has_values(log):
        alarm_figure(log, out / ALARM_FIGURE)
        extra += (ALARM_FIGURE,)
    if classes:
        category_band_figure(classes, out / CLASS_FIGURE, name=schema.CLASS)
        extra += (CLASS_FIGURE,)
    return extra
