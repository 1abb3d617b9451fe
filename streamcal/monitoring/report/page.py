"""The report's HTML page: the summary tables, the per-category, per-class and per-unit
tables, and the figures embedded (so the page can be mailed) with how to read each."""

from __future__ import annotations

import base64
import html
from pathlib import Path

from streamcal.monitoring import schema
from streamcal.monitoring.report.figures import (
    ALARM_FIGURE,
    CATEGORY_FIGURE,
    CLASS_FIGURE,
)
from streamcal.monitoring.report.regression_figures import (
    COVERAGE_FIGURE,
    CRPS_FIGURE,
    PIT_FIGURE,
)
from streamcal.monitoring.report.verdicts import (
    SAMPLING_ERROR_SE,
    alarm_verdict,
    corollary1_verdict,
    coverage_verdict,
    has_values,
    is_regression,
)

__all__ = ["page", "unit_key"]

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
        "the largest unit's log S. For a regression run it bets on the residuals of frozen "
        "copies of the model: the assumption the intervals' coverage rests on."
    ),
    COVERAGE_FIGURE: (
        "Regression: the share of labels inside their predicted interval [lo, hi], "
        "cumulative (thick) and over the last window (thin), log time axis, against the "
        "coverage the intervals claim (dashed) and the grey band of "
        f"±{SAMPLING_ERROR_SE} standard errors of a cumulative coverage around it. On an "
        "exchangeable stream a conformal interval covers with at least its probability "
        "(a little more: its ends are ranks of the residuals held, rounded outwards); a "
        "curve below the band means the intervals are too narrow: drift, or a model that "
        "changed faster than the window of residuals."
    ),
    CRPS_FIGURE: (
        "Left: the mean CRPS of the predictive distributions at their labels (lower is "
        "better; in the label's units), cumulative and over the last window: it falls as "
        "the model learns, a rising thin curve is a recent change. Right: the interval's "
        "mean width and its interval score (width plus 2/alpha times each miss, alpha = 1 "
        "- nominal coverage: it punishes intervals that are narrow by missing)."
    ),
    PIT_FIGURE: (
        "Left: the PIT Q(y) of each label (where it fell in its predictive distribution) "
        "as a histogram: flat, within the grey band of "
        f"±{SAMPLING_ERROR_SE} standard errors, when the distributions are calibrated; a "
        "U shape means too narrow, a hump too wide, a slope a biased centre. Right, from "
        "the same PITs: the share of labels below the predicted q-quantile at each q, on "
        "the diagonal when every quantile is calibrated."
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


def unit_key(unit: str):
    """The sort key of a unit's name: numbers in numeric order, then the others."""
    return (0, int(unit), "") if unit.isdigit() else (1, 0, unit)


_UNIT_REGRESSION_COLUMNS = ("events", "labels", "dead_letters", "interval_coverage",
                             "coverage", "crps", "interval_width")  # fmt: skip
# With protection and the alarm, each unit's own: the alarm is per unit.
_UNIT_PROTECTION_COLUMNS = ("protected_log_loss",)
_UNIT_ALARM_COLUMNS = ("log_martingale", "alarm", "alarm_at")


def _units_html(units: dict, total: dict) -> str:
    if len(units) < 2:
        return ""
    regression = is_regression(total)
    columns = _UNIT_REGRESSION_COLUMNS if regression else _UNIT_COLUMNS
    verdict, verdict_name = ((coverage_verdict, "coverage verdict") if regression
                             else (corollary1_verdict, "Corollary 1"))  # fmt: skip
    if has_values(units.values(), "protected_log_loss"):
        columns += _UNIT_PROTECTION_COLUMNS
    if has_values(units.values()):
        columns += _UNIT_ALARM_COLUMNS
    head = "".join(f"<th>{html.escape(schema.field(k).title)}</th>" for k in columns)
    rows = ""
    for unit in sorted(units, key=unit_key):
        line = units[unit]
        rows += (
            f'<tr data-unit="{html.escape(unit)}"><td>{html.escape(unit)}</td>'
            f"<td>{html.escape(str(line.get('instance') or ''))}</td>"
            + "".join(_cell(line, k) for k in columns)
            + f"<td>{html.escape(verdict(line))}</td></tr>"
        )
    rows += (
        '<tr data-unit="total"><th>total</th><th></th>'
        + "".join(_cell(total, k) for k in columns)
        + f"<td>{html.escape(verdict(total))}</td></tr>"
    )
    return (
        '<h2>Units</h2>\n<p class="note">Each unit of calibration (a partition, with '
        "<code>--scope partition</code>) is a Venn predictor on its own; its newest line, "
        "from whichever instance held it last. The total pools them (the tables above).</p>"
        f"<table><tr><th>unit</th><th>instance</th>{head}<th>{verdict_name}</th></tr>"
        f"{rows}</table>\n"
    )


# A regression run's summary: the claim "the interval covers" has one probability, so its
# losses and Corollary 1 band (the binary tables) are left out; its coverage is here.
_COVERAGE = ("interval_coverage", "coverage", "recent_coverage")
_NOT_REGRESSION = (*_COVERAGE, "raw_labels")  # no raw score either


def _regression_tables(last: dict, rows: str) -> str:
    """A regression run's summary: its fields (``rows``), then the coverage with its
    verdict."""
    verdicts = (f'<tr><td>coverage verdict</td><td data-key="coverage_verdict">'
                f"{html.escape(coverage_verdict(last))}</td></tr>")  # fmt: skip
    if alarm_verdict(last) is not None:
        verdicts += ('<tr><td>calibration alarm</td><td data-key="calibration_alarm">'
                     f"{html.escape(alarm_verdict(last))}</td></tr>")  # fmt: skip
    band = "".join(
        f"<tr><td>{html.escape(schema.field(k).title)}</td>{_cell(last, k)}</tr>" for k in _COVERAGE
    )
    return f"<table>{rows}</table>\n<table>{band}{verdicts}</table>"


def _summary_tables(last: dict) -> str:
    """The three summary tables of the last line: its fields, the losses, the band with
    the verdicts (a regression run's: ``_regression_tables``)."""
    if is_regression(last):
        rows = "".join(
            f"<tr><td>{html.escape(f.title)}</td>{_cell(last, f.key)}</tr>"
            for f in _summary_fields()
            if f.key not in _NOT_REGRESSION
            and (last.get(f.key) is not None or f.key == "labels")
        )
        return _regression_tables(last, rows)
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
    return (
        f"<table>{rows}</table>\n"
        f"<table><tr><th></th>{loss_head}</tr>{loss_rows}</table>\n"
        f"<table>{band}</table>"
    )


def _figures_html(last: dict, out: Path, names) -> str:
    """The figures ``names`` (PNG files in ``out``) embedded, each with how to read it."""
    figures = ""
    multiclass = last.get("classes") is not None
    for name in names:
        data = base64.b64encode((out / name).read_bytes()).decode("ascii")
        reading = _READING[name]
        if multiclass and name in ("reliability.png", "band.png"):
            reading = _TOP_LABEL + reading
        figures += (
            f'<figure><img src="data:image/png;base64,{data}" alt="{name}">'
            f'<figcaption class="note">{html.escape(reading)} '
            f'(<a href="{name}">{name}</a>)</figcaption></figure>\n'
        )
    if not last.get("reliability") and "reliability.png" in names:
        figures = (
            '<p class="note">This metric log carries no reliability bins (the processor writes '
            "them with <code>snapshot(reliability=True)</code>), so the reliability diagrams are "
            "empty.</p>\n" + figures
        )
    return figures


def page(last: dict, source: str, kind: str, title: str, out: Path, figures=(), units=None,
         categories=(), classes=()) -> str:  # fmt: skip
    """The HTML page of a report whose last (or pooled) line is ``last``, of the input
    ``source`` (``kind``: what it was); its ``figures`` (names) are drawn in ``out``."""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title><style>{_CSS}</style></head>
<body>
<h1>{html.escape(title)}</h1>
<p class="note">Input: <code>{html.escape(source)}</code>, {kind}.</p>
<h2>Summary</h2>
{_summary_tables(last)}
{"<h2>Per category</h2>" + _category_table(categories) if categories else ""}
{"<h2>Per class</h2>" + _category_table(classes, schema.CLASS) if classes else ""}
{_units_html(units or {}, last)}<h2>Figures</h2>
{_figures_html(last, out, tuple(figures))}
</body></html>
"""
