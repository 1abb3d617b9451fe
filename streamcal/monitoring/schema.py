"""The metric schema: every field of a metric line, declared once.

A metric line is one flat JSON object: the ``CalibrationTracker`` statistics of the
stream plus the stream processor's counters (``docs/contracts.md``). Everything that
reads or writes one loops over ``FIELDS``:

* ``CalibrationTracker.snapshot()`` returns the ``tracker`` fields (``SNAPSHOT_KEYS``);
* ``Processor.metric_line()`` puts all fields in schema order;
* ``read_metric_log`` checks a line field by field (kind, required);
* ``PrometheusExporter`` serves counters, gauges and the info field;
* ``write_report`` shows every field that has a ``title``.

Adding a metric is therefore one entry in ``FIELDS`` plus its computation: a statistic
in ``CalibrationTracker.snapshot()``, or a processor count in ``CalibrationUnit.counts``
(picked up by name).

Labels: a field may be broken down by labels (``MetricField.labels``, names declared in
``LABELS``). A line carries its label values as top-level string keys, e.g. ``"unit":
"3"``; a line without them is the whole processor's. The exporter keeps the latest line
of each label set. The processor's lines carry ``unit`` (a partition number, or
``global``) and ``instance``: every field is broken down by them (``UNIT_LABELS``).
``category`` breaks the tracker's per-category statistics down (``CATEGORY_KEYS``; see
``streamcal.monitoring.categories``). ``MetricField.pool`` says how the lines of several
units add up to the whole stream's (``streamcal.monitoring.pooled``, used by ``streamcal
report`` on several metric logs).

Two optional features of a binary stream (``docs/alerts.md``), each with its own fields:

* the alarm (a conformal test martingale against exchangeability): the fields with
  ``only_with=ALARM`` (``ALARM_KEYS``: ``log_martingale``, ``alarm``, ``alarm_at``,
  ``alarm_alpha``, ``alarm_onset``) are in a tracker's snapshot once an alarm's state was
  recorded (``update_protection``);
* protection (a recalibration of p learned online): the fields with
  ``only_with=PROTECTION`` (``PROTECTION_KEYS``: the protected probability's losses and
  ``protection_gain``) are there once the tracker has seen a protected probability or a
  gain.

Protection runs with the alarm; the alarm may run alone (``--no-protect``, the library's
``protect={"recalibrate": False}``, a multiclass classifier's ``alarm_alpha``). Without
either a snapshot is exactly what it was before them.

Multiclass (``--task multiclass``, ``streamcal.monitoring.multiclass_tracker``): the
tracker fields are those of the top label ("the predicted class is right": p the
predicted class's probability, frequency the accuracy), the ``only_with=MULTICLASS``
fields (``MULTICLASS_KEYS``) those of the whole vector, and per-class lines, labelled
``class``, carry each class's one-vs-rest band (``CLASS_KEYS``).

>>> [f.key for f in FIELDS if f.kind == COUNTER and f.source == PROCESSOR]
['events', 'predictions', 'expired', 'evicted', 'labels_lost', 'labels_late',
 'labels_defaulted', 'label_delay_warnings', 'dead_letters', 'rejected_state_records',
 'merge_stalls', 'late_arrivals', 'lost_input', 'skipped_offsets']
>>> field("events_per_s").prometheus_name
'events_per_second'
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "BINS",
    "CATEGORY",
    "ALARM",
    "ALARM_KEYS",
    "CATEGORY_ALARM_KEYS",
    "CATEGORY_KEYS",
    "CATEGORY_PROTECTION_KEYS",
    "COUNTER",
    "FIELDS",
    "GAUGE",
    "HISTOGRAM",
    "INFO",
    "LABELS",
    "PROCESSOR",
    "PROTECTION",
    "PROTECTION_KEYS",
    "CLASS",
    "CLASS_KEYS",
    "MULTICLASS",
    "MULTICLASS_KEYS",
    "REGRESSION",
    "REGRESSION_KEYS",
    "TRACKER",
    "Label",
    "MetricField",
    "SNAPSHOT_KEYS",
    "field",
    "fields",
]

# Kinds. A counter is a cumulative count (int >= 0), a gauge any number; both may be null
# while undefined (no labels yet). Info is a string (the version); bins are reliability
# tables (lists of {"lo", "hi", "count", "mean_pred", "frequency"}); a histogram is
# {"le", "counts", "sum"} (``streamcal.monitoring.histogram``).
COUNTER, GAUGE, INFO, BINS, HISTOGRAM = "counter", "gauge", "info", "bins", "histogram"
KINDS = (COUNTER, GAUGE, INFO, BINS, HISTOGRAM)
# Who computes a field.
TRACKER, PROCESSOR = "tracker", "processor"
# How the lines of several units pool into the whole stream's (``MetricField.pool``):
# summed, the largest, a mean weighted by another field, info values joined, reliability
# bins added, the ECE of the added bins of another field, or none (a per-unit figure
# that means nothing for several units: null in a pooled line).
POOLS = ("sum", "max", "mean:labels", "mean:raw_labels", "mean:protected_labels", "join",
         "bins", "histogram", "ece:reliability", "ece:raw_reliability", "none")  # fmt: skip
# The optional features a field may belong to (``MetricField.only_with``).
PROTECTION = "protection"
ALARM = "alarm"
MULTICLASS = "multiclass"
REGRESSION = "regression"
# The labels of a processor's metric line: which unit of calibration (a partition number,
# or "global") and which instance (--instance-id, default host:pid) it comes from.
UNIT_LABELS = ("unit", "instance")


@dataclass(frozen=True)
class Label:
    """A label that fields may be broken down by; its value is a string key of the line."""

    key: str
    help: str


@dataclass(frozen=True)
class MetricField:
    """One field of the metric line.

    ``key`` is its JSON key; ``kind`` one of ``COUNTER``, ``GAUGE``, ``INFO``, ``BINS``;
    ``help`` one sentence (also the Prometheus help); ``source`` who computes it
    (``TRACKER`` or ``PROCESSOR``); ``title`` its row name in the report (None: not
    shown); ``required``: a metric-log line without it is refused; ``prometheus`` its
    Prometheus name without the prefix (default: ``key``; counters get ``_total``);
    ``labels`` the names of the labels it may be broken down by; ``pool`` how the
    lines of several units add up to the whole stream's (``POOLS``; default: counters
    summed, tracker gauges averaged weighted by labels, other gauges summed, info
    joined, bins added); ``only_with`` the optional feature it belongs to (``PROTECTION``):
    a tracker snapshot carries the field only when that feature is in use; ``per``: the
    field is a mean over the counter ``per`` (e.g. ``labels``), so Prometheus gets it as
    a ``_sum``/``_count`` pair (``streamcal.monitoring.series``): summable over units and
    windowed by ``rate(x_sum[w]) / rate(x_count[w])``.
    """

    key: str
    kind: str
    help: str
    source: str = PROCESSOR
    title: str | None = None
    required: bool = False
    prometheus: str | None = None
    labels: tuple[str, ...] = UNIT_LABELS
    pool: str | None = None
    only_with: str | None = None
    per: str | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"{self.key}: kind must be one of {KINDS}, got {self.kind!r}")
        if self.source not in (TRACKER, PROCESSOR):
            raise ValueError(f"{self.key}: source must be tracker or processor")
        if self.pool is not None and self.pool not in POOLS:
            raise ValueError(f"{self.key}: pool must be one of {POOLS}, got {self.pool!r}")

    @property
    def pooling(self) -> str:
        """How lines of several units pool into one (``pool``, or the kind's default)."""
        if self.pool is not None:
            return self.pool
        if self.kind == GAUGE:
            return "mean:labels" if self.source == TRACKER else "sum"
        return {COUNTER: "sum", INFO: "join", BINS: "bins", HISTOGRAM: "histogram"}[self.kind]

    @property
    def prometheus_name(self) -> str:
        return self.prometheus or self.key

    @property
    def numeric(self) -> bool:
        return self.kind in (COUNTER, GAUGE)


def _t(key, kind, title, help, labels=(), **kw) -> MetricField:
    return MetricField(key, kind, help, source=TRACKER, title=title, required=True,
                       labels=UNIT_LABELS + tuple(labels), **kw)  # fmt: skip


def _t_optional(key, kind, title, help, **kw) -> MetricField:
    return MetricField(key, kind, help, source=TRACKER, title=title, required=False, **kw)


def _t_only_with(feature: str):
    """The maker of a tracker field of ``feature``: optional when reading (metric logs of
    runs without the feature have none of them)."""

    def make(key, kind, title, help, labels=(), **kw) -> MetricField:
        return MetricField(key, kind, help, TRACKER, title, required=False,
                           labels=UNIT_LABELS + tuple(labels), only_with=feature, **kw)  # fmt: skip

    return make


_t_protected, _t_alarm = _t_only_with(PROTECTION), _t_only_with(ALARM)


def _t_multiclass(key, kind, title, help, **kw) -> MetricField:
    # Optional when reading: only the lines of a multiclass run (--task multiclass) have them.
    return MetricField(key, kind, help, TRACKER, title, required=False, only_with=MULTICLASS,
                       **kw)  # fmt: skip


def _t_regression(key, kind, title, help, **kw) -> MetricField:
    # Optional when reading: only the lines of a regression run (--task regression) have them.
    return MetricField(key, kind, help, TRACKER, title, required=False, only_with=REGRESSION,
                       **kw)  # fmt: skip


def _p(key, kind, title, help, **kw) -> MetricField:
    return MetricField(key, kind, help, source=PROCESSOR, title=title, **kw)


CATEGORY = "category"  # the Mondrian label
_C = (CATEGORY,)
CLASS = "class"  # a class of a multiclass run: its one-vs-rest band
_CC = (CATEGORY, CLASS)

# In the order of the metric line. Each field: key, kind, report title, then its help.
FIELDS: tuple[MetricField, ...] = (
    _p("ts", GAUGE, None, prometheus="last_update_timestamp_seconds",
       help="Unix time of the metric-log line.", pool="max"),
    # --- CalibrationTracker ---
    _t("labels", COUNTER, "labelled events",
       "Labels joined to their predictions (tracker updates).", labels=_CC),
    # raw_labels came later than the first metric logs: optional when reading.
    _t_optional("raw_labels", COUNTER, "with a raw score",
       "Labels whose prediction carried a raw model score."),
    _t("log_loss", GAUGE, "log loss",
       "Cumulative log loss of the calibrated probability p.", labels=_C, per="labels"),
    _t("recent_log_loss", GAUGE, "log loss, recent",
       "Log loss of p over the last window of labels."),
    _t("square_loss", GAUGE, "square loss",
       "Cumulative square (Brier) loss of p.", labels=_C, per="labels"),
    _t("recent_square_loss", GAUGE, "square loss, recent",
       "Square loss of p over the last window."),
    _t("raw_log_loss", GAUGE, "raw log loss",
       "Cumulative log loss of the raw model score.", pool="mean:raw_labels",
       per="raw_labels"),
    _t("recent_raw_log_loss", GAUGE, "raw log loss, recent",
       "Log loss of the raw score, last window.", pool="mean:raw_labels"),
    _t("raw_square_loss", GAUGE, "raw square loss",
       "Cumulative square loss of the raw model score.", pool="mean:raw_labels",
       per="raw_labels"),
    _t("recent_raw_square_loss", GAUGE, "raw square loss, recent",
       "Square loss of the raw score, last window.", pool="mean:raw_labels"),
    _t("mean_width", GAUGE, "mean p1 - p0",
       "Mean Venn-Abers interval width p1 - p0.", labels=_C, prometheus="interval_width",
       per="labels"),
    _t("recent_mean_width", GAUGE, "mean p1 - p0, recent",
       "Mean p1 - p0 over the last window."),
    _t("ece", GAUGE, "ECE (binned)",
       "Binned expected calibration error of p.", labels=_C, pool="ece:reliability"),
    _t("raw_ece", GAUGE, "raw ECE (binned)",
       "Binned expected calibration error of the raw score.", pool="ece:raw_reliability"),
    _t("mean_p0", GAUGE, "mean p0",
       "Mean p0 (lower end of the Corollary 1 band).", labels=_CC, prometheus="p0",
       per="labels"),
    _t("frequency", GAUGE, "frequency of 1",
       "Frequency of label 1 (in Prometheus: the labels' sum, i.e. the number of 1s).",
       labels=_CC, prometheus="label", per="labels"),
    _t("mean_p1", GAUGE, "mean p1",
       "Mean p1 (upper end of the Corollary 1 band).", labels=_CC, prometheus="p1",
       per="labels"),
    # Protection (docs/alerts.md): only in the lines of a tracker that was given protected
    # probabilities or protection's gain.
    _t_protected("protected_labels", COUNTER, "with a protected probability",
       "Labels whose prediction carried a protected probability.", labels=_C),
    _t_protected("protected_log_loss", GAUGE, "protected log loss",
       "Cumulative log loss of the protected probability.", labels=_C,
       pool="mean:protected_labels", per="protected_labels"),
    _t_protected("recent_protected_log_loss", GAUGE, "protected log loss, recent",
       "Log loss of the protected probability, last window.", pool="mean:protected_labels"),
    _t_protected("protected_square_loss", GAUGE, "protected square loss",
       "Cumulative square loss of the protected probability.", labels=_C,
       pool="mean:protected_labels", per="protected_labels"),
    _t_protected("recent_protected_square_loss", GAUGE, "protected square loss, recent",
       "Square loss of the protected probability, last window.",
       pool="mean:protected_labels"),
    # The alarm (docs/alerts.md): only in the lines of a tracker that was given an alarm's
    # state. Not summable across units: the pooled line shows the largest (the unit
    # closest to, or furthest past, its alarm level); "any unit alarmed" is the largest.
    _t_alarm("log_martingale", GAUGE, "log S (test martingale)",
       "Natural log of the alarm's conformal test martingale S against exchangeability of "
       "the labelled stream (docs/alerts.md).",
       labels=_C, pool="max"),
    _t_alarm("alarm", GAUGE, "calibration alarm", prometheus="calibration_alarm",
       help="1 once log S has reached ln(1/alpha) (sticky): the stream is no longer "
       "exchangeable, so p's guarantee no longer covers it, at level alpha; else 0.",
       labels=_C, pool="max"),
    # A unit's own label count: meaningless for several units pooled.
    _t_alarm("alarm_at", GAUGE, "alarm at label", prometheus="calibration_alarm_at_labels",
       help="The label count when the alarm fired (on a per-category line the category's "
       "own count; null before).", labels=_C,
       pool="none"),
    _t_alarm("alarm_alpha", GAUGE, "alarm level alpha", prometheus="calibration_alarm_alpha",
       help="The alarm's level alpha: it fires when log S reaches ln(1/alpha).", pool="max"),
    _t_alarm("alarm_onset", GAUGE, "change began at label",
       prometheus="calibration_alarm_onset_labels",
       help="Where the change began, as the alarm reads its martingale back: the label "
       "count at which log S was last at its lowest before the alarm (null before).",
       pool="none"),
    _t_protected("protection_gain", GAUGE, "protection gain (nats)",
       "What protection gained: the cumulative log loss of p minus that of the protected "
       "probability, in nats (the protectors' log S, summed over categories).", pool="sum"),
    # Multiclass (--task multiclass): the fields above are then those of the top label,
    # "the predicted class is right" (p is the predicted class's probability, frequency
    # the accuracy), but for the alarm's (it tests the stream of objects and classes), and
    # these are of the whole vector of class probabilities.
    _t_multiclass("classes", GAUGE, "classes",
       "Classes known to the calibrator (from labels and the model's outputs).", pool="max"),
    _t_multiclass("multiclass_log_loss", GAUGE, "multiclass log loss",
       "Cumulative log loss of the calibrated class probabilities (at the true class).",
       per="labels"),
    _t_multiclass("recent_multiclass_log_loss", GAUGE, "multiclass log loss, recent",
       "Multiclass log loss of the calibrated probabilities, last window."),
    _t_multiclass("multiclass_square_loss", GAUGE, "multiclass Brier score",
       "Cumulative Brier score of the calibrated class probabilities (summed over classes).",
       per="labels"),
    _t_multiclass("recent_multiclass_square_loss", GAUGE, "multiclass Brier score, recent",
       "Brier score of the calibrated class probabilities, last window."),
    _t_multiclass("raw_multiclass_log_loss", GAUGE, "raw multiclass log loss",
       "Cumulative log loss of the model's own class probabilities.", pool="mean:raw_labels",
       per="raw_labels"),
    _t_multiclass("recent_raw_multiclass_log_loss", GAUGE, "raw multiclass log loss, recent",
       "Multiclass log loss of the model's probabilities, last window.",
       pool="mean:raw_labels"),
    _t_multiclass("raw_multiclass_square_loss", GAUGE, "raw multiclass Brier score",
       "Cumulative Brier score of the model's own class probabilities.",
       pool="mean:raw_labels", per="raw_labels"),
    _t_multiclass("recent_raw_multiclass_square_loss", GAUGE, "raw multiclass Brier, recent",
       "Brier score of the model's probabilities, last window.", pool="mean:raw_labels"),
    # Regression (--task regression): the fields above are then those of "the interval
    # covers the label", p its nominal coverage (frequency is the coverage), and these are
    # of the predictive distribution.
    _t_regression("interval_coverage", GAUGE, "interval's nominal coverage",
       "The coverage the predicted intervals [lo, hi] claim (--interval-coverage).",
       pool="max"),
    _t_regression("coverage", GAUGE, "interval coverage",
       "Fraction of labels inside their predicted interval [lo, hi].", per="labels"),
    _t_regression("recent_coverage", GAUGE, "interval coverage, recent",
       "Coverage of the interval over the last window."),
    _t_regression("interval_width", GAUGE, "interval mean width",
       "Mean width hi - lo of the predicted intervals (mean_width is that of the claim's "
       "pair, 0 here).", per="labels", prometheus="regression_interval_width"),
    _t_regression("interval_score", GAUGE, "interval score",
       "Mean interval score of [lo, hi] (Gneiting & Raftery: width plus 2/alpha times "
       "the miss, alpha = 1 - coverage; lower is better).", per="labels"),
    _t_regression("crps", GAUGE, "CRPS",
       "Mean CRPS of the conformal predictive distributions at their labels (lower is "
       "better).", per="labels"),
    _t_regression("recent_crps", GAUGE, "CRPS, recent",
       "Mean CRPS over the last window."),
    _t_regression("pit_histogram", BINS, None,
       "Histogram of the PITs Q(y) of the labels (uniform when calibrated): count per bin "
       "of [0, 1], mean_pred the mean PIT in it."),
    # snapshot(reliability=True) only: what a report needs for its reliability diagrams.
    _t_optional("reliability", BINS, None,
       "Reliability bins of p."),
    _t_optional("raw_reliability", BINS, None,
       "Reliability bins of the raw score (null without scores)."),
    # --- the stream processor ---
    _p("events", COUNTER, "events",
       "Events consumed."),
    _p("predictions", COUNTER, "predictions",
       "Predictions produced."),
    _p("pending", GAUGE, "predictions waiting for a label",
       "Predictions waiting for their label."),
    _p("pending_bytes", GAUGE, "bytes of predictions waiting",
       "Bytes of the predictions waiting for their label, as kept in the state store "
       "(bounded by --pending-max-bytes; the store's own overhead comes on top)."),
    _p("pending_max_bytes", GAUGE, None,
       "The bound on pending_bytes (--pending-max-bytes): beyond it the oldest waiting "
       "predictions are evicted."),
    _p("expired", COUNTER, "expired",
       "Predictions whose label never came before the deadline."),
    _p("evicted", COUNTER, "evicted by a bound",
       "Predictions pushed out by a waiting bound (--pending-max-bytes) before their "
       "label came."),
    _p("labels_lost", COUNTER, "labels lost to a bound",
       "Labels lost to a waiting bound: their event had been pushed out, or they waited "
       "for their event beyond --label-wait-max-bytes."),
    _p("labels_late", COUNTER, "labels after the horizon",
       "Labels that came after their event matured at --label-horizon (dead-lettered, or "
       "learned late with --late-labels learn)."),
    _p("labels_defaulted", COUNTER, "default labels",
       "Events that had no label at --label-horizon and were given --label-default."),
    _p("label_delay_warnings", COUNTER, "outcome-dependent delay warnings",
       "1 once a unit without --label-horizon found its classes' label delays more than 4x "
       "apart (logged as a warning): labels learned in arrival order bias the calibration; "
       "see --label-horizon."),
    _p("label_delay_seconds", HISTOGRAM, None,
       "Delay of the labels joined, in record time: the label's timestamp minus its "
       "event's (events kept by an older streamcal carry no time: not counted)."),
    _p("dead_letters", COUNTER, "dead letters",
       "Messages sent to the dead-letter topic."),
    _p("rejected_state_records", COUNTER, "state records rejected",
       "State records (state topic, local state) skipped when the unit was restored: they "
       "failed authentication (forged, or written with another key)."),
    _p("waiting_labels", GAUGE, "labels waiting for an event",
       "Labels waiting for their event."),
    _p("waiting_label_bytes", GAUGE, "bytes of labels waiting",
       "Bytes of the labels waiting for their event, as kept in the state store "
       "(bounded by --label-wait-max-bytes)."),
    _p("events_per_s", GAUGE, "events / s", "Recent event rate.", prometheus="events_per_second"),
    _p("calibration_size", GAUGE, "calibration set size",
       "Labelled pairs in the calibration set."),
    _p("merge_stalls", COUNTER, "partition-merge stalls",
       "Times the ordered merge of partitions waited on one.", pool="max"),
    _p("late_arrivals", COUNTER, "late arrivals",
       "Records that arrived after a later record of their unit had been released "
       "(the order then differs from a replay's)."),
    _p("lost_input", COUNTER, "input lost by the broker",
       "Times the broker's log no longer held the position of one of the unit's partitions "
       "(a broker that lost its data, an unclean leader election, a deleted topic, "
       "retention), gone on from with --on-lost-input continue."),
    _p("skipped_offsets", COUNTER, "input offsets skipped",
       "Input offsets passed over unread: deleted before they were read (--on-lost-input "
       "continue) or in a batch that could not be read (--skip-unreadable)."),
    # Served as streamcal_build_info{version="..."}, the usual name of a build's version.
    _p("version", INFO, "streamcal version", prometheus="build",
       help="The version field of the metric line (streamcal's version)."),
)  # fmt: skip

# Labels fields may be broken down by (see the module docstring).
LABELS: tuple[Label, ...] = (
    Label(CATEGORY, "A category of a Mondrian calibrator (top k by volume, or '(other)')."),
    Label(CLASS, "A class of a multiclass calibrator (its one-vs-rest Corollary 1 band)."),
    Label("unit", "The unit of calibration: a partition number with --scope partition, "
          "else global."),
    Label("instance", "The streamcal run instance that holds the unit (--instance-id)."),
)  # fmt: skip

# The fields of a per-category line (``CalibrationTracker.category_snapshots()``), in order;
# with protection the ``CATEGORY_PROTECTION_KEYS``, with the alarm the
# ``CATEGORY_ALARM_KEYS`` follow them (in schema order when both).
CATEGORY_KEYS = tuple(f.key for f in FIELDS if CATEGORY in f.labels and not f.only_with)
CATEGORY_PROTECTION_KEYS = tuple(
    f.key for f in FIELDS if CATEGORY in f.labels and f.only_with == PROTECTION
)
CATEGORY_ALARM_KEYS = tuple(f.key for f in FIELDS if CATEGORY in f.labels and f.only_with == ALARM)

# The flat keys of ``CalibrationTracker.snapshot()``, in order; with protection the
# ``PROTECTION_KEYS``, with the alarm the ``ALARM_KEYS`` follow them (in schema order
# when both).
SNAPSHOT_KEYS = tuple(
    f.key for f in FIELDS if f.source == TRACKER and f.kind != BINS and not f.only_with
)
PROTECTION_KEYS = tuple(f.key for f in FIELDS if f.only_with == PROTECTION)
ALARM_KEYS = tuple(f.key for f in FIELDS if f.only_with == ALARM)
MULTICLASS_KEYS = tuple(f.key for f in FIELDS if f.only_with == MULTICLASS)
REGRESSION_KEYS = tuple(f.key for f in FIELDS if f.only_with == REGRESSION)
# The fields of a per-class line (``MulticlassTracker.class_snapshots()``), in order.
CLASS_KEYS = tuple(f.key for f in FIELDS if CLASS in f.labels)


def fields(kind: str | None = None, source: str | None = None) -> tuple[MetricField, ...]:
    """The fields of one kind and/or source, in schema order (read at call time, so a
    field added to ``FIELDS`` shows up everywhere)."""
    return tuple(
        f
        for f in FIELDS
        if (kind is None or f.kind == kind) and (source is None or f.source == source)
    )


def field(key: str) -> MetricField:
    """The field called ``key``; KeyError if there is none."""
    for f in FIELDS:
        if f.key == key:
            return f
    raise KeyError(key)
