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
* a regression run's (``--task regression``; ``regression_figures``), in place of the
  four above: ``coverage.png`` (the interval's coverage over time against its nominal
  coverage), ``crps.png`` (the CRPS over time, the interval's width and score) and
  ``pit.png`` (the PIT histogram and the calibration of each quantile); its verdict is
  the coverage's, not Corollary 1's;
* ``alarm.png`` (metric logs with the alarm, ``docs/alerts.md``): the log of the alarm's
  conformal test martingale over labels, its alarm level ln(1/alpha), the moment the
  alarm fired and where the change began (its onset); with protection the loss figure
  and tables also show the protected probability.

Several metric logs (the instances of a ``--scope partition`` job), or one log with lines
of several units: the tables and figures are of the units pooled
(``streamcal.monitoring.pooled``), and a table gives each unit's own figures.

matplotlib is imported lazily (the ``report`` extra) and drawn through the Agg canvas
directly: no pyplot, so the caller's backend and global state are left alone.

One module per concern: ``inputs`` reads the logs, ``verdicts`` concludes, ``figures``
draws, ``page`` lays out the HTML; ``write_report`` puts them together.
"""

from __future__ import annotations

import json
from pathlib import Path

from streamcal.monitoring.report.figures import (
    ALARM_FIGURE,
    CATEGORY_FIGURE,
    CLASS_FIGURE,
    FIGURES,
    MissingDependencyError,
    alarm_figure,
    band_figure,
    category_band_figure,
    draw_figures,
    loss_figure,
    reliability_figure,
    require_matplotlib,
    width_figure,
)
from streamcal.monitoring.report.inputs import ReportInput, read_input
from streamcal.monitoring.report.page import page, unit_key
from streamcal.monitoring.report.regression_figures import (
    REGRESSION_FIGURES,
    draw_regression_figures,
)
from streamcal.monitoring.report.verdicts import (
    SAMPLING_ERROR_SE,
    alarm_moment,
    alarm_onset,
    alarm_verdict,
    corollary1_verdict,
    coverage_verdict,
    has_values,
    is_regression,
    summary,
)

__all__ = [
    "SAMPLING_ERROR_SE",
    "write_report",
    "summary",
    "corollary1_verdict",
    "MissingDependencyError",
    # the figures and verdicts, as the demo and the tests read them from here
    "ALARM_FIGURE",
    "CATEGORY_FIGURE",
    "CLASS_FIGURE",
    "FIGURES",
    "REGRESSION_FIGURES",
    "alarm_figure",
    "alarm_moment",
    "alarm_onset",
    "alarm_verdict",
    "band_figure",
    "category_band_figure",
    "coverage_verdict",
    "has_values",
    "loss_figure",
    "reliability_figure",
    "width_figure",
]


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
    report = read_input(input_path, input_format, window=window, bins=bins, progress=progress,
                        top_k=top_k, labels=labels)  # fmt: skip
    require_matplotlib()  # fail on a missing matplotlib before creating anything
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    last = report.last
    main = draw_regression_figures if is_regression(last) else None
    names = draw_figures(report.log, last, out, report.categories, report.classes, main)
    html = page(last, source=report.source, kind=report.kind,
                title=title or "streamcal calibration report", out=out, figures=names,
                units=report.units, categories=report.categories,
                classes=report.classes)  # fmt: skip
    path = out / "report.html"
    path.write_text(html, encoding="utf-8")
    (out / "summary.json").write_text(json.dumps(_summary(report, last), indent=1) + "\n",
                                      encoding="utf-8")  # fmt: skip
    return path


def _summary(report: ReportInput, last: dict) -> dict:
    """``summary.json``: the summary of ``last``, with each class's and each unit's."""
    doc = summary(last, report.categories)
    if report.classes:
        doc["per_class"] = [{**r, "corollary1": corollary1_verdict(r)} for r in report.classes]
    units = report.units
    if units is not None and len(units) > 1:
        doc["units"] = {u: summary(units[u]) for u in sorted(units, key=unit_key)}
    return doc
