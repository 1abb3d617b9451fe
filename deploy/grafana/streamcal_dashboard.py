"""The Grafana dashboard of streamcal, generated with grafanalib.

    python deploy/grafana/streamcal_dashboard.py > deploy/grafana/streamcal.json

The output is Classic JSON with the datasource as an ``__inputs`` entry
(``DS_PROMETHEUS``), so that it imports into any Grafana and asks which Prometheus to use.
Variables: ``DS_PROMETHEUS`` (the datasource, for provisioned copies), ``job``, ``unit``
(a partition, or ``global``), ``category`` (with ``--by``; "All" means the unit as a
whole: its series without a category label) and ``window``, the stated window of every
windowed mean (losses, the Corollary 1 band, ECE, width).
tests/monitoring/test_dashboard.py checks that the shipped JSON is this script's output,
and tests/e2e/test_prometheus_live.py runs every query on a live Prometheus.
"""

from __future__ import annotations

import json
import sys

from grafanalib._gen import DashboardEncoder
from grafanalib.core import (
    Dashboard,
    DataSourceInput,
    GridPos,
    Stat,
    Target,
    Template,
    Templating,
    TimeSeries,
)

DS = "${DS_PROMETHEUS}"
UNIT = 'job=~"$job", unit=~"$unit"'
# A unit's own series, or one category's: never a class's (multiclass per-class lines).
OWN = UNIT + ', category=~"$category", class=""'


def mean(name: str, sel: str = OWN, by: str = "unit") -> str:
    """The mean of a ``_sum``/``_count`` pair over the window, summed over instances."""
    return (
        f"sum by ({by}) (rate({name}_sum{{{sel}}}[$window]))\n"
        f"  / sum by ({by}) (rate({name}_count{{{sel}}}[$window]))"
    )


def ece(bins: str) -> str:
    """The binned ECE over the window, from the per-bin sums of predictions and labels."""
    return (
        f"sum by (unit) (abs(increase({bins}_prediction_sum{{{UNIT}}}[$window])\n"
        f"  - increase({bins}_label_sum{{{UNIT}}}[$window])))\n"
        f"  / sum by (unit) (increase({bins}_prediction_count{{{UNIT}}}[$window]))"
    )


def delay(q: float) -> str:
    """The ``q`` quantile of the label delay over the window, from its histogram."""
    return (f"histogram_quantile({q}, sum by (unit, le) "
            f"(rate(streamcal_label_delay_seconds_bucket{{{UNIT}}}[$window])))")  # fmt: skip


def series(title, targets, pos, unit="", description=None, **kw) -> TimeSeries:
    return TimeSeries(
        title=title, dataSource=DS, gridPos=GridPos(*pos), unit=unit, description=description,
        targets=[Target(expr=e, legendFormat=legend, refId=chr(65 + i), datasource=DS)
                 for i, (e, legend) in enumerate(targets)],
        **kw,
    )  # fmt: skip


def panels() -> list:
    rate = "[$__rate_interval]"
    return [
        Stat(title="calibration alarm", dataSource=DS, gridPos=GridPos(4, 6, 0, 0),
             description="1 once the unit's stream stopped being exchangeable (sticky).",
             reduceCalc="lastNotNull", thresholds=[{"color": "green", "value": None},
                                                   {"color": "red", "value": 1}],
             targets=[Target(expr=f"max by (unit) (streamcal_calibration_alarm{{{OWN}}})",
                             legendFormat="{{unit}}", refId="A", datasource=DS)]),
        series("events / s and labels / s", [
            (f"sum by (unit) (rate(streamcal_events_total{{{UNIT}}}{rate}))", "events {{unit}}"),
            (f"sum by (unit) (rate(streamcal_labels_total{{{OWN}}}{rate}))", "labels {{unit}}"),
        ], (4, 18, 6, 0), unit="ops"),
        series("log loss over the window", [
            (mean("streamcal_raw_log_loss"), "raw {{unit}}"),
            (mean("streamcal_log_loss"), "calibrated p {{unit}}"),
            (mean("streamcal_protected_log_loss"), "protected {{unit}}"),
        ], (8, 12, 0, 4), description="Mean log loss of the labels in the window: the raw "
           "model score, the Venn-Abers p, and p_protected."),
        series("Corollary 1 band over the window", [
            (mean("streamcal_p0"), "mean p0 {{unit}}"),
            (mean("streamcal_label"), "frequency of 1 {{unit}}"),
            (mean("streamcal_p1"), "mean p1 {{unit}}"),
        ], (8, 12, 12, 4), description="Under exchangeability the frequency of 1 lies "
           "between mean p0 and mean p1, up to sampling error."),
        series("ECE over the window", [
            (ece("streamcal_reliability"), "p {{unit}}"),
            (ece("streamcal_raw_reliability"), "raw {{unit}}"),
        ], (8, 8, 0, 12), description="Binned expected calibration error of the labels in "
           "the window."),
        series("interval width p1 - p0 over the window", [
            (mean("streamcal_interval_width"), "{{unit}}"),
        ], (8, 8, 8, 12)),
        series("log S against the alarm level", [
            (f"max by (unit) (streamcal_log_martingale{{{OWN}}})", "log S {{unit}}"),
            (f"max by (unit) (streamcal_calibration_alarm_threshold{{{UNIT}}})",
             "ln(1/alpha) {{unit}}"),
        ], (8, 8, 16, 12), description="The alarm fires when log S reaches ln(1/alpha)."),
        series("predictions waiting for a label", [
            (f"sum by (unit) (streamcal_pending{{{UNIT}}})", "predictions {{unit}}"),
            (f"sum by (unit) (streamcal_waiting_labels{{{UNIT}}})", "labels {{unit}}"),
        ], (8, 8, 0, 20)),
        series("bytes waiting", [
            (f"sum by (unit) (streamcal_pending_bytes{{{UNIT}}})", "predictions {{unit}}"),
            (f"sum by (unit) (streamcal_pending_max_bytes{{{UNIT}}})", "bound {{unit}}"),
        ], (8, 8, 8, 20), unit="bytes"),
        series("dead letters / s and consumer lag", [
            (f"sum by (unit) (rate(streamcal_dead_letters_total{{{UNIT}}}{rate}))",
             "dead letters {{unit}}"),
            ('sum by (consumergroup) (kafka_consumergroup_lag{consumergroup=~"streamcal.*"})',
             "lag {{consumergroup}}"),
        ], (8, 8, 16, 20), description="Lag comes from a Kafka exporter "
           "(kafka_consumergroup_lag), not from streamcal."),
        series("label delay over the window (record time)", [
            (delay(q), f"{label} {{{{unit}}}}") for q, label in ((0.5, "median"), (0.9, "90%"))
        ], (8, 24, 0, 28), unit="s", description="From an event to its label, in record "
           "time: what --pending-ttl and --pending-max-bytes must hold (docs/deploy.md)."),
    ]  # fmt: skip


def templating() -> Templating:
    def of(name, query, **kw):
        return Template(name=name, query=query, dataSource=DS, includeAll=True, multi=True,
                        default="$__all", **kw)  # fmt: skip

    return Templating([
        # The datasource as a variable too: a provisioned dashboard (no import dialog to
        # fill the input) resolves ${DS_PROMETHEUS} to the default Prometheus through it.
        Template(name="DS_PROMETHEUS", query="prometheus", type="datasource",
                 label="datasource", default="default"),
        of("job", "label_values(streamcal_events_total, job)", allValue=".*"),
        of("unit", 'label_values(streamcal_events_total{job=~"$job"}, unit)', allValue=".*"),
        # "All" is the unit as a whole: the series without a category label.
        of("category", 'label_values(streamcal_labels_total{job=~"$job", unit=~"$unit"}, '
           "category)", allValue="", label="category (All: the whole unit)"),
        Template(name="window", query="5m,15m,1h,6h,1d", default="1h", type="custom",
                 label="window"),
    ])  # fmt: skip


def dashboard() -> Dashboard:
    return Dashboard(
        title="streamcal", uid="streamcal", tags=["streamcal"], timezone="browser",
        description="Calibration, the exchangeability alarm and the stream processor.",
        inputs=[DataSourceInput(name="DS_PROMETHEUS", label="Prometheus",
                                pluginId="prometheus", pluginName="Prometheus")],
        panels=panels(), templating=templating(), refresh="30s", schemaVersion=36,
    ).auto_panel_ids()  # fmt: skip


def render() -> str:
    return json.dumps(dashboard().to_json_data(), cls=DashboardEncoder, indent=2,
                      sort_keys=True) + "\n"  # fmt: skip


if __name__ == "__main__":
    sys.stdout.write(render())
