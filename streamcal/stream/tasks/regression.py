"""The regression task (``--task regression``): number labels, a
``ConformalPredictiveRegressor``, ``RegressionTracker``, the alarm, no protection.

A label is a finite JSON number (anything else is dead-lettered with the reason). A
prediction is the median of the event's conformal predictive distribution as ``y_hat``,
its central interval [``lo``, ``hi``] of coverage ``--interval-coverage`` and its
``--quantiles``, with the model's own output as ``model`` (the shape is in
docs/processor.md). An end or a quantile that the residuals held cannot give yet (too few
for that level: the distribution's end is infinite) is null; such predictions are not
tracked (their coverage is certain, their width infinite).

At the join the label's PIT and CRPS are read against its category's residuals as they
are then, before the regressor learns the label (``score_label``): the tracker gets
them with the interval that was predicted.

The model: ``--model logreg`` (the default) is read as scaled linear regression here;
``module:function`` must return a river regressor. The residuals held are the newest
``--window`` (the learner's default 1000), in 10 Mondrian bins of the model's output.

With ``--by`` every value of the field has its residuals (per bin), as the classifiers'
categories have their calibration sets: at most ``--max-categories`` values are kept
(the least recently labelled evicted), and a value holding fewer than ``--min-category``
residuals in the bin of the model's output (none: new, or evicted) is answered from the
pooled residuals, the newest ``--window`` of the unit's stream, unless ``--fallback off``
(``ConformalPredictiveRegressor``). A pooled answer has the marginal guarantee only. The
category waits with the prediction, and the label is scored and learned under it.
"""

from __future__ import annotations

import math
import pickle
import struct
from typing import Any, NamedTuple

from streamcal.learner.modes import MODES
from streamcal.learner.regressor import ConformalPredictiveRegressor
from streamcal.learner.settings import DEFAULT_MAX_CATEGORIES, check_mondrian
from streamcal.monitoring.shapes import REGRESSION
from streamcal.stream.messages import BadInput, Label, _id_and_label, _new_record, _short
from streamcal.stream.models import DEFAULT_MODEL, called_model, find_model
from streamcal.stream.packing import FeatureCodec
from streamcal.stream.tasks.task import (
    HAS_TIME,
    VERSION,
    Task,
    pack_category,
    pack_time,
    unpack_category,
    unpack_time,
)

__all__ = ["PendingRegression", "RegressionTask", "StreamRegressor", "TASK",
           "decode_number_label", "quantile_levels"]  # fmt: skip

_NUMBERS5 = struct.Struct("<B5d")  # flags, model's output, sigma, tau, lo, hi
_HAS_CATEGORY = 1  # a flag of the first byte, as HAS_TIME is


def quantile_levels(text: str) -> tuple[float, ...]:
    """The levels of ``--quantiles`` (comma-separated, each in (0, 1), no repeats), in
    order; ``ValueError`` naming the setting otherwise.

    >>> quantile_levels("0.1, 0.5,0.9")
    (0.1, 0.5, 0.9)
    >>> quantile_levels("0.5,1.5")
    Traceback (most recent call last):
    ...
    ValueError: quantiles must be comma-separated levels in (0, 1) ..., got '0.5,1.5' (--quantiles)
    """
    try:
        levels = tuple(float(part) for part in text.split(","))
    except ValueError:
        levels = ()
    if not levels or not all(0.0 < q < 1.0 for q in levels) or len(set(levels)) < len(levels):
        raise ValueError(
            "quantiles must be comma-separated levels in (0, 1) without repeats, got "
            f"{text!r} (--quantiles)"
        )
    return levels


def _number(y) -> float | None:
    if isinstance(y, bool) or not isinstance(y, int | float):
        return None
    try:
        y = float(y)
    except OverflowError:  # an integer beyond a float
        return None
    return y if math.isfinite(y) else None


def decode_number_label(value: bytes | None, fields) -> Label:
    """Decode a regression label message or raise ``BadInput``: the label is a finite
    JSON number (not a string, not a boolean), as a float.

    >>> from streamcal.stream.messages import Fields
    >>> decode_number_label(b'{"id": "e1", "label": 4}', Fields())
    Label(id='e1', y=4.0)
    >>> decode_number_label(b'{"id": "e1", "label": "4.5"}', Fields())
    Traceback (most recent call last):
    ...
    streamcal.stream.messages.BadInput: label is not a finite number: '4.5'
    """
    eid, y = _id_and_label(value, fields)
    number = _number(y)
    if number is None:
        raise BadInput(f"label is not a finite number: {_short(y)}")
    return _new_record(Label, (eid, number))


def _scaled_linear_regression():
    """scaled linear regression"""
    from river import linear_model, preprocessing

    return preprocessing.StandardScaler() | linear_model.LinearRegression()


class StreamRegressor(ConformalPredictiveRegressor):
    """The regressor as a unit holds it: the learner's part of the unit's protocol. It
    never undoes a learn (``learn_one`` raises before changing anything), so it reports
    nothing unlearned; its state is its own pickle (a full pickle, as a classifier's
    river model is: checkpoints are authenticated before they are read)."""

    unlearned = ()
    warn_unlearned = False
    watch_delays = False

    def to_state(self) -> dict:
        return {"pickle": pickle.dumps(self, protocol=5)}

    @classmethod
    def from_state(cls, state: dict) -> StreamRegressor:
        clf = pickle.loads(state["pickle"])
        if not isinstance(clf, cls):
            raise ValueError(f"a regression state holds a {type(clf).__name__}")
        return clf


class PendingRegression(NamedTuple):
    """A regression prediction, kept until its label comes (or it expires)."""

    x: dict
    y_model: float  # the model's output
    sigma: float  # the difficulty the residuals were divided by
    tau: float  # the prediction's tau (ties in its PIT)
    lo: float  # the interval, ends infinite while too few residuals
    hi: float
    category: Any = None  # with --by only
    time: float | None = None  # the event's, record time (s)


def _json_number(v: float) -> float | None:
    return v if math.isfinite(v) else None


class RegressionTask(Task):
    """Number labels, ``ConformalPredictiveRegressor``, ``RegressionTracker``, the alarm,
    no protection."""

    name = "regression"
    pending_type = PendingRegression
    shape = REGRESSION
    label_decoder = staticmethod(decode_number_label)

    def __init__(self, config, codec: FeatureCodec | None):
        super().__init__(config, codec)
        self.coverage = config.interval_coverage
        self.levels = quantile_levels(config.quantiles)
        self.level_names = [f"{q:g}" for q in self.levels]
        self._scored = None  # (pit, crps) of the label being joined, read before learning

    # ------------------------------------------------------------------ the settings
    @classmethod
    def check_settings(cls, config) -> None:
        """The regression rules: no ``--scheme``, a model that is the default or
        ``module:function``."""
        super().check_settings(config)
        if config.model != DEFAULT_MODEL and (":" not in config.model
                                              or config.model.startswith("score:")):  # fmt: skip
            raise ValueError(
                f"model {config.model!r} is a classifier; with --task regression use the "
                "default (scaled linear regression) or module:function returning a river "
                "regressor"
            )

    @staticmethod
    def check_learner(config) -> None:
        """The regressor's rules: no ``--mode`` (a classifier's), and ``--fallback`` and
        ``--min-category`` need ``--by`` only (``StreamRegressor``'s own check).

        >>> from streamcal.stream.config import ProcessorConfig
        >>> RegressionTask.check_learner(ProcessorConfig(task="regression", mode="sva"))
        ... # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: --mode is the classifiers' (pretrained, sva, va): the regressor has no ...
        """
        if config.mode is not None:
            raise ValueError(
                f"--mode is the classifiers' ({', '.join(MODES)}): the regressor has no mode; "
                f"leave --mode out with --task regression (got --mode {config.mode})"
            )
        most = config.max_categories
        check_mondrian(config.by, config.min_category, config.fallback,
                       DEFAULT_MAX_CATEGORIES if most is None else most,
                       offered=config.by is not None, needs="by")  # fmt: skip
        config.classifier_settings()  # the rest: --window, --merge, the alarm's level

    @staticmethod
    def default_label(text: str) -> float:
        """``--label-default`` as a number.

        >>> RegressionTask.default_label(" 2.5 ")
        2.5
        """
        try:
            y = float(text)
        except ValueError:
            y = math.nan
        if not math.isfinite(y):
            raise ValueError(f"label_default (--label-default) must be a finite number with "
                             f"--task regression, got {text!r}")  # fmt: skip
        return y

    @staticmethod
    def own_fingerprint(config) -> dict:
        """``--interval-coverage`` (what waits holds its interval, the tracker its claim) and
        ``--quantiles`` (by their levels: "0.1, 0.9" is "0.1,0.9"). The residuals' window
        and ``--by`` (with ``--min-category``, ``--fallback``, ``--max-categories``) are the
        classifiers' settings, bound as theirs; the bins are fixed.

        >>> from streamcal.stream.config import ProcessorConfig
        >>> RegressionTask.own_fingerprint(ProcessorConfig.build(task="regression",
        ...     interval_coverage=0.8, quantiles="0.1, 0.9"))
        {'interval_coverage': 0.8, 'quantiles': [0.1, 0.9]}
        """
        return {"interval_coverage": config.interval_coverage,
                "quantiles": list(quantile_levels(config.quantiles))}  # fmt: skip

    # ------------------------------------------------------------------ what it makes
    @staticmethod
    def classifier_class():
        return StreamRegressor

    def new_model(self):
        spec = self.config.model
        make = _scaled_linear_regression if spec == DEFAULT_MODEL else find_model(spec)
        model = called_model(spec, make, "predict_one", "regressor")
        from river import base

        if isinstance(model, base.Classifier):  # predict_one gives classes, not numbers
            raise ValueError(f"model {spec!r} returned a classifier, not a regressor: {model!r}")
        return model

    def new_classifier(self):
        s = self.config.classifier_settings()
        return StreamRegressor(self.new_model(), window=s.window, alarm_alpha=self.alarm_alpha,
                               by=s.by, min_category=s.min_category, fallback=s.fallback,
                               max_categories=s.max_categories)  # fmt: skip

    # ------------------------------------------------------------------ per record
    def predict(self, clf, ev) -> tuple[dict, PendingRegression]:
        if self.by is None:
            dist = clf.predict_distribution_one(ev.x)
        else:  # the event's category, read at decoding (a feature, or a top-level field)
            dist = clf.predict_distribution_one(ev.x, category=ev.category)
        lo, hi = dist.interval(self.coverage)
        quantiles = {name: _json_number(dist.quantile(q))
                     for name, q in zip(self.level_names, self.levels, strict=True)}  # fmt: skip
        out = {"id": ev.id, "y_hat": dist.median, "lo": _json_number(lo),
               "hi": _json_number(hi), "quantiles": quantiles, "model": dist.y_hat,
               "calibration_size": clf.calibration_size, "version": VERSION}  # fmt: skip
        category = None
        if self.by is not None:
            category = out["category"] = ev.category
        pred = PendingRegression(self.kept(ev.x), dist.y_hat, dist.sigma, dist.tau, lo, hi,
                                 category)  # fmt: skip
        return out, pred

    def pack(self, pred: PendingRegression, time: float | None = None) -> bytes:
        """``pred`` as bytes, with the event's ``time`` (record time, s) if given."""
        flags = (_HAS_CATEGORY if pred.category is not None else 0) | (
            HAS_TIME if time is not None else 0
        )
        out = _NUMBERS5.pack(flags, pred.y_model, pred.sigma, pred.tau, pred.lo, pred.hi)
        out += pack_time(time)
        if pred.category is not None:
            out += pack_category(pred.category)
        return out + self.codec.pack(pred.x)

    def unpack(self, data: bytes) -> PendingRegression:
        flags, y_model, sigma, tau, lo, hi = _NUMBERS5.unpack_from(data)
        time, at = unpack_time(data, _NUMBERS5.size, flags)
        category, at = unpack_category(data, at) if flags & _HAS_CATEGORY else (None, at)
        x = self.codec.unpack(data, at)[0]
        return PendingRegression(x, y_model, sigma, tau, lo, hi, category, time)

    def refuse(self, clf, pred: PendingRegression, y, eid: str) -> str | None:
        return None  # the decoder took numbers only; the learner checks the features

    def learn(self, clf, pred: PendingRegression, y) -> None:
        # The label is scored before it is learned: its own residual must not count.
        self._scored = clf.score_label(pred.y_model, pred.sigma, y, pred.tau, pred.category)
        super().learn(clf, pred, y)

    def track(self, clf, tracker, pred: PendingRegression, y) -> None:
        pit, crps = self._scored
        if not (math.isfinite(pred.lo) and math.isfinite(pred.hi) and math.isfinite(crps)):
            return  # too few residuals when predicted: nothing was claimed
        kw = {"category": pred.category} if self.by is not None else {}
        tracker.update(pred.lo, pred.hi, y, self.coverage, pit=pit, crps=crps, **kw)
        self.track_alarm(clf, tracker, pred.category)


TASK = RegressionTask
