"""``write_report``: a self-contained HTML page with PNG figures from a metric log.

Figures (PNG files in the output folder, also embedded in the page so it can be mailed):

* ``reliability.png``: reliability diagrams of the calibrated p and of the raw score, with
  95% Wilson intervals on each bin's frequency and the bin counts underneath;
* ``loss.png``: cumulative and rolling log loss and square loss, calibrated vs raw;
* ``width.png``: the Venn-Abers interval width p1 - p0 over time;
* ``band.png``: Corollary 1, mean p0 <= frequency of 1 <= mean p1, over time;
* ``categories.png`` (metric logs with per-category lines, see
  ``CalibrationTracker.category_snapshots``): the same band per category, one row each;
* ``classes.png`` (metric logs or predictions files of a multiclass run, ``--task
  multiclass``): the
  one-vs-rest band of every class, one row each; the other figures are then of the top
  label ("the predicted class is right"): ``reliability.png`` is the top-label
  reliability diagram and ``band.png`` mean top-label p0 <= accuracy <= mean p1;
* ``alarm.png`` (metric logs with the alarm, ``docs/alerts.md``): the log of the alarm's
  conformal test martingale over labels, its alarm level ln(1/alpha), the moment the
  alarm fired and where the change began (its onset); with protection the loss figure
  and tables also show the protected probability.

Several metric logs (the instances of a ``--scope partition`` job), or one log with lines
of several units: the tables and figures are of the units pooled
(``streamcal.monitoring.pooled``), and a table gives each unit's own figures.

matplotlib is imported lazily (the ``report`` extra) and drawn through the Agg canvas
directly: no pyplot, so the caller's backend and global state are left alone.
"""

from __future__ import annotations

import base64
import html
import json
import math
import os
from pathlib import Path

from streamcal.monitoring import schema
from streamcal.monitoring.event_rate import event_rate
from streamcal.monitoring.metric_log import (
    detect_format,
    read_metric_log,
    split_classes,
    split_labelled,
)
from streamcal.monitoring.pooled import latest_by_unit, pooled_log
from streamcal.monitoring.reliability import wilson_interval
from streamcal.monitoring.shapes import log_from_predictions, shape_of_file

__all__ = [
    "SAMPLING_ERROR_SE",
    "write_report",
    "summary",
    "corollary1_verdict",
    "MissingDependencyError",
]

# How far the frequency of 1s may lie outside [mean p0, mean p1], in standard errors of the
# frequency, for Corollary 1 to "hold within sampling error": the one number behind the
# verdict (report, demo summary) and the grey bands of the figures, which the texts quote.
SAMPLING_ERROR_SE = 3

FIGURES = ("reliability.png", "loss.png", "width.png", "band.png")
CATEGORY_FIGURE = "categories.png"
CLASS_FIGURE = "classes.png"
ALARM_FIGURE = "alarm.png"
_CAL, _RAW, _PROT = "#1f5fa8", "#d9731a", "#2a9d4b"
_DASH = (0, (4, 3))  # the protected probability's curves: p's show between the dashes


class MissingDependencyError(ImportError):
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


def has_values(log, key: str = "log_martingale") -> bool:
    """Whether any line of ``log`` has a value of ``key``: ``log_martingale`` for an
    alarm's state, ``protected_log_loss`` for protected probabilities (a predictions
    file may carry those alone)."""
    return any(line.get(key) is not None for line in log)


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


def alarm_moment(log) -> float | None:
    """Where the alarm fired on the labels axis: the ``alarm_at`` of the last line that has
    one (a single unit's log), else the labels of the first line with ``alarm`` 1 (units
    pooled: their label counts are their own), else None.

    >>> alarm_moment([{"labels": 10, "alarm": 0}, {"labels": 20, "alarm": 1, "alarm_at": 17}])
    17.0
    >>> alarm_moment([{"labels": 10, "alarm": 0}, {"labels": 20, "alarm": 1}])
    20.0
    """
    for line in reversed(log):
        if line.get("alarm_at") is not None:
            return float(line["alarm_at"])
    for line in log:
        if line.get("alarm") and line.get("labels") is not None:
            return float(line["labels"])
    return None


def alarm_onset(log) -> float | None:
    """Where the change began on the labels axis, as the alarm read it back: the
    ``alarm_onset`` of the last line that has one (None for units pooled: their label
    counts are their own).

    >>> alarm_onset([{"labels": 10}, {"labels": 20, "alarm_onset": 12}])
    12.0
    """
    for line in reversed(log):
        if line.get("alarm_onset") is not None:
            return float(line["alarm_onset"])
    return None


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
    ax.set_xlabel("labelled events")
    ax.set_ylabel("log S (natural log)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, frameon=False, loc="upper left")
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


def corollary1_verdict(last: dict) -> str:
    """Where the frequency of 1s lies relative to [mean p0, mean p1], in standard errors of
    the frequency: outside by at most ``SAMPLING_ERROR_SE`` (3) it holds within sampling
    error, beyond that it is violated.

    >>> corollary1_verdict({"labels": 100, "mean_p0": 0.3, "frequency": 0.35, "mean_p1": 0.4})
    'holds: mean p0 <= frequency <= mean p1'
    >>> corollary1_verdict({"labels": 100, "mean_p0": 0.3, "frequency": 0.45, "mean_p1": 0.4})
    'holds within sampling error (at most 3 SE): frequency is 1.0 SE above mean p1'
    >>> corollary1_verdict({"labels": 10000, "mean_p0": 0.3, "frequency": 0.45, "mean_p1": 0.4})
    'violated: frequency is 10.0 SE above mean p1'
    """
    n, p0, f, p1 = (last.get(k) for k in ("labels", "mean_p0", "frequency", "mean_p1"))
    if not n or p0 is None or f is None or p1 is None:
        return "no labels yet"
    if p0 <= f <= p1:
        return "holds: mean p0 <= frequency <= mean p1"
    se = math.sqrt(max(f * (1 - f), 1.0 / n) / n)
    k, side = ((p0 - f) / se, "below mean p0") if f < p0 else ((f - p1) / se, "above mean p1")
    limit = SAMPLING_ERROR_SE
    head = f"holds within sampling error (at most {limit} SE)" if k <= limit else "violated"
    return f"{head}: frequency is {k:.1f} SE {side}"


def alarm_verdict(last: dict) -> str | None:
    """What the alarm says (None without the alarm).

    >>> alarm_verdict({"alarm": 1, "alarm_at": 695, "alarm_alpha": 0.01, "log_martingale": 9.0})
    'fired at label 695: the stream is not exchangeable (false-alarm probability at most 0.01)'
    >>> alarm_verdict({"alarm": 1, "alarm_at": 695, "alarm_onset": 650, "log_martingale": 9.0})
    'fired at label 695: the stream is not exchangeable; the change began near label 650'
    >>> alarm_verdict({"alarm": 0, "alarm_alpha": 0.01, "log_martingale": 1.5})
    'not fired: log S = 1.5, alarm level ln(1/alpha) = 4.61'
    """
    if last.get("log_martingale") is None and last.get("alarm") is None:
        return None
    alpha = last.get("alarm_alpha")
    if last.get("alarm"):
        at = last.get("alarm_at")
        where = f"at label {at}" if at is not None else "in some unit"
        bound = f" (false-alarm probability at most {alpha:g})" if alpha else ""
        onset = last.get("alarm_onset")
        began = f"; the change began near label {onset}" if onset is not None else ""
        return f"fired {where}: the stream is not exchangeable{bound}{began}"
    level = f", alarm level ln(1/alpha) = {math.log(1 / alpha):.3g}" if alpha else ""
    return f"not fired: log S = {last['log_martingale']:.3g}{level}"


# The statistics of the tracker, laid out as tables; every other field of the schema
# that has a title goes into the summary table.
_LOSS_COLUMNS = ("calibrated", "calibrated, recent", "raw", "raw, recent")
_LOSS_ROWS = (
    ("log_loss", "recent_log_loss", "raw_log_loss", "recent_raw_log_loss"),
    ("protected_log_loss", "recent_protected_log_loss", None, None),
    ("square_loss", "recent_square_loss", "raw_square_loss", "recent_raw_square_loss"),
    ("protected_square_loss", "recent_protected_square_loss", None, None),
    ("ece", None, "raw_ece", None),
    ("mean_width", "recent_mean_width", None, None),
)
_BAND = ("mean_p0", "frequency", "mean_p1")


def _summary_fields():
    tables = {k for row in _LOSS_ROWS for k in row if k} | set(_BAND)
    return [f for f in schema.FIELDS if f.title and f.key not in tables]


def summary(last: dict, categories: list[dict] = ()) -> dict:
    """The numbers the page shows, by metric-log key (from the last line), plus the verdict;
    with per-category lines, ``categories``: each one's numbers and verdict."""
    out = {
        f.key: last[f.key]
        for f in schema.FIELDS
        # A feature's fields (protection, the alarm) only where it was used: else the
        # summary is as it was before them.
        if f.title and f.key in last and (last[f.key] is not None or not f.only_with)
    }
    out["corollary1"] = corollary1_verdict(last)
    if alarm_verdict(last) is not None:
        out["calibration_alarm"] = alarm_verdict(last)
    if categories:
        out["categories"] = [{**r, "corollary1": corollary1_verdict(r)} for r in categories]
    return out


def _cell(last, key):
    if key is None:
        return "<td></td>"
    v = last.get(key)
    if v is None:
        return f'<td data-key="{key}" data-value="null">–</td>'
    if isinstance(v, int) or not isinstance(v, float):
        text = html.escape(str(v))
    else:
        text = f"{v:.6g}"
    return f'<td data-key="{key}" data-value="{html.escape(repr(v))}">{text}</td>'


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:60rem;
margin:2rem auto;padding:0 1rem;color:#222;line-height:1.45}
table{border-collapse:collapse;margin:0.5rem 0 1.5rem}
td,th{border:1px solid #ccc;padding:0.25rem 0.6rem;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
img{max-width:100%;height:auto}.note{color:#555;font-size:0.92rem}
"""

_READING = {
    "reliability.png": (
        "Reliability diagrams. Each dot is one bin of predictions: its mean predicted "
        "probability (x) against how often the label was 1 (y); the bars under it count the "
        "predictions per bin. A well calibrated forecaster stays on the dashed diagonal: a bar "
        "of the 95% interval that misses the diagonal is a bin where the forecast is off by "
        "more than chance explains. Left: Venn-Abers p; right: the raw model score."
    ),
    "loss.png": (
        "Loss over time (lower is better), thick lines cumulative, thin lines over the last "
        "window of labels; the y axis fits the curves after the first 5% of labels. "
        "Calibration should bring the blue (calibrated) curves at or below the orange (raw) "
        "ones; a rising thin curve is a recent change in the stream."
    ),
    "width.png": (
        "Width of the Venn-Abers interval p1 - p0 (log axes): how unsure the calibration "
        "still is of itself. It shrinks roughly like 1/n as the calibration set grows; a wide "
        "or growing interval means too few labels, or scores the calibration set has not seen."
    ),
    CATEGORY_FIGURE: (
        "Corollary 1 per category (the top categories by volume, then all others together; "
        f"labels in brackets): the frequency of 1s (black, ±{SAMPLING_ERROR_SE} standard errors) "
        "should meet the "
        "blue bar [mean p0, mean p1] in every row. A Mondrian calibrator promises it per "
        "category; a pooled one only on average, and a row whose dot lies clear of its bar is "
        "a segment where 0.9 does not mean 90%."
    ),
    CLASS_FIGURE: (
        "Corollary 1 per class (one-vs-rest; predictions with a pair for the class in "
        f"brackets): how often the label was the class (black, ±{SAMPLING_ERROR_SE} standard "
        "errors) should "
        "meet the blue bar [mean p0, mean p1] of that class in every row."
    ),
    ALARM_FIGURE: (
        "The alarm's conformal test martingale S (natural log; docs/alerts.md): it bets "
        "against exchangeability of the labelled stream, the assumption p's guarantee rests "
        "on, and grows when the class prior or the fit of the model's scores to the labels "
        "changes. The alarm fires when log S reaches the dashed line ln(1/alpha); on an "
        "exchangeable stream that happens with probability at most alpha, ever (Ville's "
        "inequality), whatever the model and however often the chart is looked at. The red "
        "vertical line is the alarm, the dotted one where the change began (where log S was "
        "last at its lowest before it); from there on, prefer the protected probability "
        "(green in the loss figure, with protection) to p. With several units the curve is "
        "the largest unit's log S."
    ),
    "band.png": (
        "Corollary 1 of Vovk & Petej (2014), log time axis: on an exchangeable stream the "
        "frequency of 1s (black) lies between mean p0 and mean p1 (blue band), up to sampling "
        "error. The lower panel subtracts the frequency: the blue band should touch the grey "
        f"±{SAMPLING_ERROR_SE} standard-error band around 0 (the report's verdict allows "
        f"{SAMPLING_ERROR_SE}). Leaving it for long means the stream is not "
        "exchangeable (drift) or something upstream is broken."
    ),
}


# A multiclass run's binary figures are of the top label.
_TOP_LABEL = (
    "Multiclass: of the top label, 'the predicted class is right' (p: the predicted "
    "class's probability; frequency of 1: the accuracy). "
)


def _category_table(rows: list[dict], name: str = schema.CATEGORY) -> str:
    keys = schema.CATEGORY_KEYS if name == schema.CATEGORY else schema.CLASS_KEYS
    head = "".join(f"<th>{html.escape(schema.field(k).title)}</th>" for k in keys)
    body = "".join(
        f"<tr><td>{html.escape(str(r[name]))}</td>"
        + "".join(_cell(r, k) for k in keys)
        + f"<td>{html.escape(corollary1_verdict(r))}</td></tr>"
        for r in rows
    )
    return f"<table><tr><th>{name}</th>{head}<th>Corollary 1</th></tr>{body}</table>"


# The per-unit table: one row per unit, from its newest line.
_UNIT_COLUMNS = ("events", "labels", "dead_letters", "log_loss", "ece", "mean_p0", "frequency",
                 "mean_p1")  # fmt: skip


def _unit_key(unit: str):
    return (0, int(unit), "") if unit.isdigit() else (1, 0, unit)


# With protection and the alarm, each unit's own: the alarm is per unit.
_UNIT_PROTECTION_COLUMNS = ("protected_log_loss",)
_UNIT_ALARM_COLUMNS = ("log_martingale", "alarm", "alarm_at")


def _units_html(units: dict, total: dict) -> str:
    if len(units) < 2:
        return ""
    columns = _UNIT_COLUMNS
    if has_values(units.values(), "protected_log_loss"):
        columns += _UNIT_PROTECTION_COLUMNS
    if has_values(units.values()):
        columns += _UNIT_ALARM_COLUMNS
    head = "".join(f"<th>{html.escape(schema.field(k).title)}</th>" for k in columns)
    rows = ""
    for unit in sorted(units, key=_unit_key):
        line = units[unit]
        rows += (
            f'<tr data-unit="{html.escape(unit)}"><td>{html.escape(unit)}</td>'
            f"<td>{html.escape(str(line.get('instance') or ''))}</td>"
            + "".join(_cell(line, k) for k in columns)
            + f"<td>{html.escape(corollary1_verdict(line))}</td></tr>"
        )
    rows += (
        '<tr data-unit="total"><th>total</th><th></th>'
        + "".join(_cell(total, k) for k in columns)
        + f"<td>{html.escape(corollary1_verdict(total))}</td></tr>"
    )
    return (
        '<h2>Units</h2>\n<p class="note">Each unit of calibration (a partition, with '
        "<code>--scope partition</code>) is a Venn predictor on its own; its newest line, "
        "from whichever instance held it last. The total pools them (the tables above).</p>"
        f"<table><tr><th>unit</th><th>instance</th>{head}<th>Corollary 1</th></tr>"
        f"{rows}</table>\n"
    )


def _html(log, last, source, kind, title, out: Path, units=None, categories=(),
          classes=()) -> str:  # fmt: skip
    rows = "".join(
        f"<tr><td>{html.escape(f.title)}</td>{_cell(last, f.key)}</tr>"
        for f in _summary_fields()
        if last.get(f.key) is not None or f.key == "labels"
    )
    loss_rows = "".join(
        f"<tr><td>{html.escape(schema.field(keys[0]).title)}</td>"
        + "".join(_cell(last, k) for k in keys)
        + "</tr>"
        for keys in _LOSS_ROWS
        # Protected rows only with protection: else the table is as it was before them.
        if not schema.field(keys[0]).only_with or last.get(keys[0]) is not None
    )
    band = "".join(
        f"<tr><td>{html.escape(schema.field(k).title)}</td>{_cell(last, k)}</tr>" for k in _BAND
    ) + (
        f'<tr><td>Corollary 1</td><td data-key="corollary1">'
        f"{html.escape(corollary1_verdict(last))}</td></tr>"
    )
    if alarm_verdict(last) is not None:
        band += (
            '<tr><td>calibration alarm</td><td data-key="calibration_alarm">'
            f"{html.escape(alarm_verdict(last))}</td></tr>"
        )
    loss_head = "".join(f"<th>{c}</th>" for c in _LOSS_COLUMNS)
    figures = ""
    extra = ((CATEGORY_FIGURE,) if categories else ()) + (
        (ALARM_FIGURE,) if has_values(log) else ()
    ) + ((CLASS_FIGURE,) if classes else ())
    multiclass = last.get("classes") is not None
    for name in FIGURES + extra:
        data = base64.b64encode((out / name).read_bytes()).decode("ascii")
        reading = _READING[name]
        if multiclass and name in ("reliability.png", "band.png"):
            reading = _TOP_LABEL + reading
        figures += (
            f'<figure><img src="data:image/png;base64,{data}" alt="{name}">'
            f'<figcaption class="note">{html.escape(reading)} '
            f'(<a href="{name}">{name}</a>)</figcaption></figure>\n'
        )
    if not last.get("reliability"):
        figures = (
            '<p class="note">This metric log carries no reliability bins (the processor writes '
            "them with <code>snapshot(reliability=True)</code>), so the reliability diagrams are "
            "empty.</p>\n" + figures
        )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title><style>{_CSS}</style></head>
<body>
<h1>{html.escape(title)}</h1>
<p class="note">Input: <code>{html.escape(source)}</code>, {kind}.</p>
<h2>Summary</h2>
<table>{rows}</table>
<table><tr><th></th>{loss_head}</tr>{loss_rows}</table>
<table>{band}</table>
{"<h2>Per category</h2>" + _category_table(categories) if categories else ""}
{"<h2>Per class</h2>" + _category_table(classes, schema.CLASS) if classes else ""}
{_units_html(units or {}, last)}<h2>Figures</h2>
{figures}
</body></html>
"""


def write_report(
    input_path,
    out_dir,
    *,
    window: int = 1000,
    bins: int = 10,
    title: str | None = None,
    progress: bool = False,
    input_format: str = "auto",
    top_k: int = 10,
    labels=None,
) -> Path:
    """Write ``report.html`` and its PNG figures into ``out_dir``; return the HTML's path.

    ``input_path`` is a metric log or a predictions file joined with labels (see
    ``streamcal.monitoring.metric_log``; ``input_format`` = ``"auto"``, ``"metrics"`` or
    ``"predictions"``), or a list of metric logs (e.g. one per instance of a ``--scope
    partition`` job): the report is then of all their units pooled, with a table per
    unit, as for one log with lines of several units. A predictions file of a multiclass
    run (``streamcal.monitoring.multiclass_predictions``) gives the figures and tables of
    a multiclass metric log. ``labels``: a labels file (the labels topic's messages)
    joined to the predictions file by id (``streamcal.monitoring.labels_file``).
    ``window``, ``bins`` and ``top_k`` (categories charted one by one) apply to
    predictions files (a metric log carries its own). Raises ``ValueError`` naming the
    bad line, and ``MissingDependencyError`` without matplotlib; on either, nothing is
    written.
    """
    paths = list(input_path) if isinstance(input_path, list | tuple) else [input_path]
    if len(paths) > 1:  # an instance killed before its first line leaves an empty log
        paths = [p for p in paths if os.path.getsize(p) > 0] or paths[:1]
    if not paths:
        raise ValueError("no input given")
    if input_format == "auto":
        formats = {detect_format(p) for p in paths}
        input_format = formats.pop() if len(formats) == 1 else "mixed"
    units = None
    if len(paths) > 1 and input_format != "metrics":
        raise ValueError("several inputs must all be metric logs (not predictions files)")
    if labels is not None and input_format != "predictions":
        raise ValueError("a labels file goes with a predictions file, not a metric log")
    if input_format == "metrics":
        lines = [line for p in paths for line in read_metric_log(p, progress=progress)]
        if not lines:
            raise ValueError(f"{os.fspath(paths[0])}: no metric lines")
        lines, by_class = split_classes(lines)
        lines, by_category = split_labelled(lines)
        if not lines:
            raise ValueError(f"{os.fspath(paths[0])}: no metric-log line for the whole stream")
        units = latest_by_unit(lines)
        if len(units) > 1:
            log = pooled_log(lines)  # its last line pools every unit's newest
            kind = (
                f"{len(paths)} metric log(s), {len(lines)} lines of {len(units)} units; the "
                "tables show the units' newest lines pooled"
            )
        else:
            log = lines
            kind = f"a metric log of {len(lines)} lines; the tables show its last line"
    elif input_format == "predictions":
        shape = shape_of_file(paths[0])
        log = log_from_predictions(paths[0], shape, window=window, bins=bins, progress=progress,
                                   top_k=top_k, labels=labels)  # fmt: skip
        log, by_class = split_classes(log)
        log, by_category = split_labelled(log)
        n = log[-1]["labels"]
        kind = (
            f"{n} labelled {shape.predictions}"
            + ("" if labels is None else f" (labels from {os.fspath(labels)})")
            + f", tracked with window={window}, bins={bins}"
        )
    else:
        raise ValueError(
            f'input_format must be "auto", "metrics" or "predictions", got {input_format!r}'
        )
    _figure()  # fail on a missing matplotlib before creating anything
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    categories = list(by_category.values())
    # The run's rate, not the last line's: a processor's line at stop reads 0 events/s.
    last = {**log[-1], "events_per_s": event_rate(log)} if "events_per_s" in log[-1] else log[-1]
    reliability_figure(last, out / "reliability.png")
    loss_figure(log, out / "loss.png")
    width_figure(log, out / "width.png")
    band_figure(log, out / "band.png")
    if categories:
        category_band_figure(categories, out / CATEGORY_FIGURE)
    classes = list(by_class.values())
    if classes:
        category_band_figure(classes, out / CLASS_FIGURE, name=schema.CLASS)
    if has_values(log):
        alarm_figure(log, out / ALARM_FIGURE)
    source = ", ".join(os.fspath(p) for p in paths)
    page = out / "report.html"
    page.write_text(
        _html(log, last, source=source, kind=kind,
              title=title or "streamcal calibration report", out=out, units=units,
              categories=categories, classes=classes),
        encoding="utf-8",
    )  # fmt: skip
    doc = summary(last, categories)
    if classes:
        doc["per_class"] = [{**r, "corollary1": corollary1_verdict(r)} for r in classes]
    if units is not None and len(units) > 1:
        doc["units"] = {u: summary(units[u]) for u in sorted(units, key=_unit_key)}
    (out / "summary.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return page
