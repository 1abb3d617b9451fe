"""How metric-log lines become Prometheus series, following Prometheus' conventions.

``line_families(lines, prefix, const_labels, floors)`` turns the latest line of each label
set into metric families, from the metric schema (``streamcal.monitoring.schema``):

* a counter is ``<prefix>_<name>_total``;
* a mean over a counter (a field with ``per``: the losses, the interval width, p0, p1,
  the labels) is a summary without quantiles, ``<name>_sum`` and ``<name>_count``: they
  add up over units and instances, and ``rate(x_sum[w]) / rate(x_count[w])`` is the mean
  over the window ``w``;
* the reliability bins are two such summaries per bin (label ``bin``, its lower edge):
  the predictions and the labels that fell in it, so that the binned ECE over a window
  is ``sum(abs(increase(..._prediction_sum[w]) - increase(..._label_sum[w]))) /
  sum(increase(..._prediction_count[w]))``;
* a histogram (the label delay) is a Prometheus histogram: ``<name>_bucket{le=...}``
  (cumulative), ``<name>_sum`` and ``<name>_count``, so that
  ``histogram_quantile(0.9, sum by (le) (rate(x_bucket[w])))`` is a quantile over a window;
* the alarm's level becomes a gauge ``calibration_alarm_threshold`` (ln(1/alpha), the
  scale of ``log_martingale``) and the times it fired a counter (it is sticky: 0 or 1);
* other gauges stay gauges; the version is the info metric ``<prefix>_build_info``.

The line's ``instance`` is not a label: Prometheus sets ``instance`` on every target
(and a second one would be renamed ``exported_instance``). The unit, the category and
the class are labels.

A sum is the line's mean times its count, so float rounding could make it fall by a
hair between two lines when the terms added are near 0; ``floors`` (kept by the caller
across scrapes) holds each sum's last value so that a sum never goes down while its
count does not, which ``rate()`` would read as a counter reset.

>>> fams = line_families({(): {"labels": 4, "log_loss": 0.5, "events": 9}}, "x", {}, {})
>>> [(s.name, s.value) for f in fams for s in f.samples]  # doctest: +NORMALIZE_WHITESPACE
[('x_labels_total', 4.0), ('x_log_loss_count', 4.0), ('x_log_loss_sum', 2.0),
 ('x_events_total', 9.0)]
"""

from __future__ import annotations

import math

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    SummaryMetricFamily,
)

from streamcal.monitoring import schema
from streamcal.monitoring.histogram import cumulative

__all__ = ["EXPORTED_LABELS", "line_families"]

# The labels exported: ``instance`` is Prometheus' own (see the module docstring).
EXPORTED_LABELS = tuple(label.key for label in schema.LABELS if label.key != "instance")

_FAMILIES = {
    schema.COUNTER: CounterMetricFamily,
    schema.GAUGE: GaugeMetricFamily,
    schema.INFO: InfoMetricFamily,
}

# Series derived from one field: (field key, kind, name, help, value of the field's value).
_DERIVED = (
    ("alarm", schema.COUNTER, "calibration_alarms",
     "Times the calibration alarm fired (it is sticky: 0 or 1 until the state is reset).",
     lambda v: v),
    ("alarm_alpha", schema.GAUGE, "calibration_alarm_threshold",
     "The alarm's level on the scale of log_martingale: ln(1/alpha); it fires when "
     "log_martingale reaches it.", lambda v: -math.log(v)),
)  # fmt: skip


def _rows(lines, key: str, keys: tuple) -> list:
    """(line, value) of the lines that have a value for ``key`` and whose labels are all
    among ``keys`` (a labelled line feeds only the fields broken down by its labels)."""
    rows = []
    for line in lines:
        value = line.get(key)
        used = {k for k in EXPORTED_LABELS if line.get(k) is not None}
        if value is not None and used <= set(keys):
            rows.append((line, value))  # undefined (no labels yet): absent, not 0
    return rows


def _names(rows, keys) -> list:
    # Only the labels some line carries: unlabelled lines make unlabelled series.
    return [
        k for k in keys if k in EXPORTED_LABELS and any(ln.get(k) is not None for ln, _ in rows)
    ]


class _Maker:
    def __init__(self, prefix, const_labels, floors):
        self.prefix = prefix
        self.const_names = list(const_labels)
        self.const_values = [str(v) for v in const_labels.values()]
        self.floors = floors

    def family(self, kind, name, help, names):
        return _FAMILIES[kind](f"{self.prefix}_{name}", help, labels=self.const_names + names)

    def values(self, line, names, extra=()) -> list:
        return self.const_values + [str(line.get(k) or "") for k in names] + list(extra)

    def summary(self, name, help, names, extra_names=()):
        return SummaryMetricFamily(f"{self.prefix}_{name}", help,
                                   labels=self.const_names + names + list(extra_names))  # fmt: skip

    def add_summary(self, fam, values, count, total) -> None:
        key = (fam.name, tuple(values))
        last = self.floors.get(key)
        if last is not None and count >= last[0]:
            total = max(total, last[1])
        self.floors[key] = (count, total)
        fam.add_metric(values, count_value=count, sum_value=total)


def line_families(lines: dict, prefix: str, const_labels: dict, floors: dict):
    """The metric families of ``lines`` (label values -> the latest line of that label
    set); see the module docstring."""
    make = _Maker(prefix, const_labels, floors)
    lines = list(lines.values())
    derived = {key: rest for key, *rest in _DERIVED}
    for f in schema.FIELDS:
        rows = _rows(lines, f.key, f.labels)
        if f.kind == schema.BINS:
            yield from _bins(make, f, rows)
            continue
        if f.kind == schema.HISTOGRAM:
            yield from _histogram(make, f, rows)
            continue
        if f.per is not None:
            rows = [(ln, v) for ln, v in rows if isinstance(ln.get(f.per), int)]
        if not rows:
            continue
        names = _names(rows, f.labels)
        if f.per is not None:
            fam = make.summary(f.prometheus_name, f.help, names)
            for line, value in rows:
                n = line[f.per]
                make.add_summary(fam, make.values(line, names), float(n), float(value) * n)
            yield fam
            continue
        fam = make.family(f.kind, f.prometheus_name, f.help, names)
        for line, value in rows:
            if f.kind == schema.INFO:
                fam.add_metric(make.values(line, names), {f.key: str(value)})
            else:
                fam.add_metric(make.values(line, names), float(value))
        yield fam
        if f.key in derived:
            kind, name, help, of = derived[f.key]
            fam = make.family(kind, name, help, names)
            for line, value in rows:
                fam.add_metric(make.values(line, names), float(of(value)))
            yield fam


def _bins(make: _Maker, f, rows):
    """The reliability bins of ``f`` as two summaries per bin: its predictions and its
    labels (the sum of the labels is the number of 1s)."""
    rows = [(ln, v) for ln, v in rows if isinstance(v, list)]
    if not rows:
        return
    names = _names(rows, f.labels)
    of = f.help.split(" (")[0].rstrip(".").lower()  # "reliability bins of p"
    preds = make.summary(f"{f.prometheus_name}_prediction",
                         f"Predictions in each of the {of}: their count and sum.", names, ["bin"])
    labels = make.summary(f"{f.prometheus_name}_label",
                          f"Labels of the predictions in each of the {of}: their count and "
                          "sum (the number of 1s).", names, ["bin"])  # fmt: skip
    for line, table in rows:
        for b in table:
            n = float(b["count"])
            values = make.values(line, names, [f"{b['lo']:.6g}"])
            make.add_summary(preds, values, n, (b["mean_pred"] or 0.0) * n)
            make.add_summary(labels, values, n, float(round((b["frequency"] or 0.0) * n)))
    yield preds
    yield labels


def _histogram(make: _Maker, f, rows):
    """A histogram field (``streamcal.monitoring.histogram``) as a Prometheus histogram."""
    rows = [(ln, v) for ln, v in rows if isinstance(v, dict)]
    if not rows:
        return
    names = _names(rows, f.labels)
    fam = HistogramMetricFamily(f"{make.prefix}_{f.prometheus_name}", f.help,
                                labels=make.const_names + names)  # fmt: skip
    for line, value in rows:
        fam.add_metric(make.values(line, names), cumulative(value), sum_value=value["sum"])
    yield fam
