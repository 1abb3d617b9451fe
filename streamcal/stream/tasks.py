"""What a task supplies to the unit's one flow: binary (``--task binary``) and multiclass.

A unit of calibration (``streamcal.stream.unit``) runs the same steps for every task:
decode, predict, send, wait, join, learn, track. A task supplies only its parts: the
classifier and the tracker it makes, how a label is decoded, how an event is predicted
(the prediction message and what must wait for the label), how that waits as bytes
(``pack`` / ``unpack``, exactly restored), a reason to refuse a label before learning,
and how the label is learned and tracked.

What waits for a label is only what the join needs: the features the model learns from
(none but the score field with ``--model score:FIELD``), the numbers the tracker scores,
the category with ``--by`` and, binary with ``--protect``, p_protected.

The alarm (``--alarm``, ``--alarm-alpha``; ``docs/alerts.md``) is the classifier's: a
conformal test martingale per category (one without ``--by``), fed by the classifier's own
label and scores in every mode. A task gives the tracker its state: per label the
category's alarm (with ``--by``), and before a metric line or a checkpoint the unit's
(``report``: the largest ln S, the first alarm, its onset). Binary protection (the
protected p, ``--protect``) runs with it; ``--no-protect`` keeps the alarm alone (the
library's ``protect={"recalibrate": False}``).

Multiclass (``VennAbersMultiClassifier``): a label is a class name (``decode_class_label``);
a prediction is the predicted class, its top-label pair and p, a probability per class, the
model's own probabilities and the scheme's pairs (the shape is in docs/processor.md). The
alarm (``alarm_alpha``), but no protection (per class it is not built). Before any class is
known (no label joined yet) the prediction has ``label`` null, (p0, p1) = (0, 1), p 0 and
no probabilities; such predictions are not tracked (their loss would measure the cold
start only), and the model still learns their labels (and its alarm too).
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

import orjson

import streamcal
from streamcal.core.merge import SCALAR_MERGES
from streamcal.monitoring.tracker import prediction_in_range
from streamcal.stream.messages import decode_class_label, decode_event, decode_label
from streamcal.stream.models import SCORE_PREFIX, make_model
from streamcal.stream.packing import FeatureCodec

__all__ = ["BinaryTask", "MulticlassTask", "PendingMulticlass", "PendingPrediction", "task_of"]

_merge_square = SCALAR_MERGES["square"]
_VERSION = streamcal.__version__


class PendingPrediction(NamedTuple):
    """A binary prediction, kept until its label comes (or it expires)."""

    x: dict
    p0: float
    p1: float
    p: float
    score: float
    category: Any = None  # with --by only
    p_protected: float | None = None  # with --protect only
    time: float | None = None  # the event's, record time (s): None if kept by an older one


class PendingMulticlass(NamedTuple):
    """A multiclass prediction, kept until its label comes (or it expires)."""

    x: dict
    label: Any  # the predicted class, None before any class was known
    p0: float
    p1: float
    p: float
    proba: dict  # class -> probability
    scores: dict  # class -> the model's probability
    intervals: dict | None  # one-vs-rest: class -> (p0, p1); else None
    category: Any = None  # with --by only
    time: float | None = None  # the event's, record time (s): None if kept by an older one


def _kept_features(config):
    """What of an event's features waits for its label: with ``score:FIELD`` only that
    field (FieldScore reads nothing else and learns nothing), else all of them."""
    if config.model.startswith(SCORE_PREFIX):
        name = config.model[len(SCORE_PREFIX) :]
        return lambda x: {name: x[name]} if name in x else x
    return None


_NUMBERS4 = struct.Struct("<B4d")  # flags, p0, p1, p, score
_DOUBLE = struct.Struct("<d")
_LENGTH = struct.Struct("<I")
# Flags of a packed prediction; _HAS_TIME: the event's time follows (for the label delay
# at the join without reading it from the store), absent in entries of older versions.
_HAS_PP, _HAS_CATEGORY, _HAS_TIME = 1, 2, 4


class BinaryTask:
    """Binary labels, ``VennAbersClassifier``, ``CalibrationTracker``, protection, the alarm."""

    name = "binary"
    event_decoder = staticmethod(decode_event)
    label_decoder = staticmethod(decode_label)

    def __init__(self, config, codec: FeatureCodec | None):
        self.config = config
        self.codec = codec
        self.by = config.by
        # The classifier's protect= (None: neither protection nor the alarm)
        self.protect = config.classifier_settings().protect_params
        self.protected = bool(config.protect)  # predictions carry p_protected
        self.alarm_alpha = config.alarm_alpha if config.alarm else None  # None: no alarm
        self._kept = _kept_features(config)

    # ------------------------------------------------------------------ what it makes
    @staticmethod
    def classifier_class():
        from streamcal.learner import VennAbersClassifier

        return VennAbersClassifier

    @staticmethod
    def tracker_class():
        from streamcal.monitoring.tracker import CalibrationTracker

        return CalibrationTracker

    def new_classifier(self):
        # protect has "lookup" off: the join passes every label's p back
        return self.classifier_class()(
            make_model(self.config.model), **self.config.classifier_settings().as_dict()
        )

    def classifier_from_state(self, state: dict, clf, labels: int = 0):
        """The classifier of a checkpoint; ``clf`` is a new one with today's settings,
        ``labels`` the unit's label count in the checkpoint."""
        if self.protect is not None:
            # The protect in effect (the fingerprint matched its flags): "lookup" off
            # also for a state written with it on. A state from before protection has
            # no protectors: they start fresh, and so does an alarm it lacks.
            protection = state.get("protection")
            if protection is None or protection.get("alarm") is None:
                protection = _fresh_alarm(clf.to_state()["protection"], protection, labels)
            state = {**state, "protect": clf.protect, "protection": protection}
        return self.classifier_class().from_state(state)

    @staticmethod
    def fingerprint(values: dict) -> dict:
        return values

    # ------------------------------------------------------------------ per record
    def predict(self, clf, ev) -> tuple[dict, PendingPrediction]:
        """The prediction message and what waits for the label (raises if the model cannot
        score the event)."""
        if self.by is None:
            iv = clf.predict_interval_one(ev.x)
        else:  # the event's category, read at decoding (a feature, or a top-level field)
            iv = clf.predict_interval_one(ev.x, category=ev.category)
        p0, p1, p, score = iv.p0, iv.p1, iv.p, iv.score
        out = {
            "id": ev.id,
            "p0": p0,
            "p1": p1,
            "p": p,
            "p_square": _merge_square(p0, p1),
            "score": score,
            "calibration_size": clf.calibration_size,
            "version": _VERSION,
        }
        category = p_protected = None
        if self.by is not None:
            category = out["category"] = ev.category
        if self.protected:
            p_protected = out["p_protected"] = iv.p_protected
        x = ev.x if self._kept is None else self._kept(ev.x)
        return out, PendingPrediction(x, p0, p1, p, score, category, p_protected)

    def pack(self, pred: PendingPrediction, time: float | None = None) -> bytes:
        """``pred`` as bytes, with the event's ``time`` (record time, s) if given."""
        pp, category = pred.p_protected, pred.category
        flags = (_HAS_PP if pp is not None else 0) | (_HAS_CATEGORY if category is not None else 0)
        out = _NUMBERS4.pack(flags | (_HAS_TIME if time is not None else 0), pred.p0, pred.p1,
                             pred.p, pred.score)  # fmt: skip
        if time is not None:
            out += _DOUBLE.pack(time)
        if pp is not None:
            out += _DOUBLE.pack(pp)
        if category is not None:
            c = orjson.dumps(category)
            out += _LENGTH.pack(len(c)) + c
        return out + self.codec.pack(pred.x)

    def unpack(self, data: bytes) -> PendingPrediction:
        flags, p0, p1, p, score = _NUMBERS4.unpack_from(data)
        at = _NUMBERS4.size
        pp = category = time = None
        if flags & _HAS_TIME:
            time = _DOUBLE.unpack_from(data, at)[0]
            at += 8
        if flags & _HAS_PP:
            pp = _DOUBLE.unpack_from(data, at)[0]
            at += 8
        if flags & _HAS_CATEGORY:
            n = _LENGTH.unpack_from(data, at)[0]
            category = orjson.loads(data[at + 4 : at + 4 + n])
            at += 4 + n
        x = self.codec.unpack(data, at)[0]
        return PendingPrediction(x, p0, p1, p, score, category, pp, time)

    def refuse(self, clf, pred: PendingPrediction, y, eid: str) -> str | None:
        """Why the label of ``pred`` cannot be joined (checked before anything learns)."""
        p0, p1, p, score, pp = pred.p0, pred.p1, pred.p, pred.score, pred.p_protected
        if prediction_in_range(p0, p1, p, score, pp):
            return None
        extra = "" if pp is None else f", p_protected={pp!r}"
        return (
            f"tracker rejected the prediction of {eid!r}: "
            f"p0={p0!r}, p1={p1!r}, p={p!r}, score={score!r}{extra}"
        )

    def learn(self, clf, pred: PendingPrediction, y) -> None:
        kw = {"category": pred.category} if self.by is not None else {}
        if not self.protected:
            clf.learn_one(pred.x, y, **kw)
        else:  # the protector learns from the p that was given, however late the label
            clf.learn_one(pred.x, y, p=pred.p, **kw)

    def track(self, clf, tracker, pred: PendingPrediction, y) -> None:
        kw = {"category": pred.category} if self.by is not None else {}
        p0, p1, p, score, pp = pred.p0, pred.p1, pred.p, pred.score, pred.p_protected
        if pp is None:  # off, or an event predicted before protection was turned on
            tracker.update(p0, p1, y, score=score, p=p, **kw)
        else:
            tracker.update(p0, p1, y, score=score, p=p, p_protected=pp, **kw)
        self._track_alarm(clf, tracker, pred.category)

    def _track_alarm(self, clf, tracker, category) -> None:
        if self.by is not None and self.alarm_alpha is not None and category is not None:
            # Per label: the tracker's "(other)" row keeps the largest log S reported so
            # far (a null category has no row, as in CalibrationTracker.update).
            alarm = clf.alarms.get(category)
            if alarm is not None:
                tracker.update_protection(
                    alarm.log_martingale, alarm.alarm, alarm.alarm_at,
                    alpha=self.alarm_alpha, category=category,
                )  # fmt: skip

    def report(self, clf, tracker, labels: int) -> None:
        """Give the tracker the unit's alarm state (with ``--by`` the largest log S and the
        first alarm over the categories; the unit's label counts) and, with protection,
        what it gained, before it is read. Done when read rather than per label: the
        tracker keeps only the latest report, a function of the classifier's state, so
        reading it late gives the same value."""
        if self.alarm_alpha is None or not labels:
            return
        gain = {"protection_gain": clf.protection_gain} if self.protected else {}
        tracker.update_protection(
            clf.log_martingale, clf.alarm, clf.alarm_at, alpha=self.alarm_alpha,
            alarm_onset=clf.alarm_onset, **gain,
        )  # fmt: skip


class MulticlassTask(BinaryTask):
    """Class labels, ``VennAbersMultiClassifier``, ``MulticlassTracker``, the alarm, no
    protection."""

    name = "multiclass"
    label_decoder = staticmethod(decode_class_label)

    def __init__(self, config, codec: FeatureCodec | None):
        super().__init__(config, codec)
        self.protect = None  # per class it is not built
        self.protected = False
        self.scheme = config.multiclass_scheme()

    @staticmethod
    def classifier_class():
        from streamcal.learner import VennAbersMultiClassifier

        return VennAbersMultiClassifier

    @staticmethod
    def tracker_class():
        from streamcal.monitoring.multiclass_tracker import MulticlassTracker

        return MulticlassTracker

    def new_classifier(self):
        s = self.config.classifier_settings()
        return self.classifier_class()(
            make_model(self.config.model), scheme=self.scheme, merge=s.merge, window=s.window,
            refresh_every=s.refresh_every, by=s.by, max_categories=s.max_categories,
            alarm_alpha=self.alarm_alpha,
        )  # fmt: skip

    def classifier_from_state(self, state: dict, clf, labels: int = 0):
        """As ``BinaryTask``'s: a state without an alarm (from before it) gets a fresh one
        if it is on, counting labels from ``labels``."""
        if clf.alarm_alpha is not None and state.get("alarm") is None:
            fresh = _fresh_alarm({"alarm": clf.to_state()["alarm"]}, None, labels)
            state = {**state, "alarm_alpha": clf.alarm_alpha, "alarm": fresh["alarm"]}
        return self.classifier_class().from_state(state)

    @staticmethod
    def fingerprint(values: dict) -> dict:
        # No protection here: bound to the alarm's settings only (--protect is as a state
        # from before protection: either).
        return {**values, "protect": None}

    def predict(self, clf, ev) -> tuple[dict, PendingMulticlass]:
        if self.by is None:
            pred = clf.predict_interval_one(ev.x)
        else:
            pred = clf.predict_interval_one(ev.x, category=ev.category)
        intervals = pairs = None
        if pred is None:  # no class known yet
            label, p0, p1, p, proba, scores = None, 0.0, 1.0, 0.0, {}, {}
        else:
            label, p0, p1, p = pred.label, pred.p0, pred.p1, pred.p
            proba, scores = pred.proba, pred.scores
            if self.scheme == "one-vs-rest":
                intervals = pred.intervals
            elif self.scheme == "one-vs-one":
                pairs = pred.intervals
        out = {"id": ev.id, "label": label, "p0": p0, "p1": p1, "p": p,
               "probabilities": proba, "scores": scores}  # fmt: skip
        if intervals is not None:
            out["intervals"] = {c: list(pair) for c, pair in intervals.items()}
        if pairs is not None:
            out["pairs"] = [[a, b, q0, q1] for (a, b), (q0, q1) in pairs.items()]
        out["scheme"] = self.scheme
        out["calibration_size"] = clf.calibration_size
        out["version"] = _VERSION
        category = None
        if self.by is not None:
            category = out["category"] = ev.category
        x = ev.x if self._kept is None else self._kept(ev.x)
        return out, PendingMulticlass(x, label, p0, p1, p, proba, scores, intervals, category)

    def pack(self, pred: PendingMulticlass, time: float | None = None) -> bytes:
        rest = orjson.dumps([pred.label, pred.proba, pred.scores, pred.intervals, pred.category])
        flags = _HAS_TIME if time is not None else 0
        head = _NUMBERS4.pack(flags, pred.p0, pred.p1, pred.p, 0.0) + _LENGTH.pack(len(rest))
        if time is not None:
            head += _DOUBLE.pack(time)
        return head + rest + self.codec.pack(pred.x)

    def unpack(self, data: bytes) -> PendingMulticlass:
        flags, p0, p1, p, _ = _NUMBERS4.unpack_from(data)
        at = _NUMBERS4.size + 4
        n = _LENGTH.unpack_from(data, _NUMBERS4.size)[0]
        time = None
        if flags & _HAS_TIME:
            time = _DOUBLE.unpack_from(data, at)[0]
            at += 8
        label, proba, scores, intervals, category = orjson.loads(data[at : at + n])
        if intervals is not None:
            intervals = {c: tuple(pair) for c, pair in intervals.items()}
        x = self.codec.unpack(data, at + n)[0]
        return PendingMulticlass(x, label, p0, p1, p, proba, scores, intervals, category, time)

    def refuse(self, clf, pred: PendingMulticlass, y, eid: str) -> str | None:
        classes = clf._classes  # the classifier's own (``classes`` is a copy)
        if y not in classes._index and len(classes) >= self.config.max_classes:
            return (
                f"label {y!r} of {eid!r} would be class number {len(classes) + 1}, "
                f"beyond max_classes={self.config.max_classes}"
            )
        return None

    def learn(self, clf, pred: PendingMulticlass, y) -> None:
        kw = {"category": pred.category} if self.by is not None else {}
        clf.learn_one(pred.x, y, **kw)

    def track(self, clf, tracker, pred: PendingMulticlass, y) -> None:
        if pred.label is None:  # predictions before any class are not tracked
            return
        kw = {"category": pred.category} if self.by is not None else {}
        tracker.update(
            pred.label, pred.p0, pred.p1, pred.p, pred.proba, y,
            scores=pred.scores, intervals=pred.intervals, **kw,
        )  # fmt: skip
        self._track_alarm(clf, tracker, pred.category)


def _fresh_alarm(fresh: dict, old: dict | None, labels: int) -> dict:
    """The protection state ``old`` (None: there was none) with the alarm of ``fresh`` (a
    new classifier's protection state, today's settings), which starts now: at the
    unit's label count ``labels``, so that its ``alarm_at`` and ``alarm_onset`` are on the
    axis of the unit's metric lines. A multiclass classifier passes ``{"alarm": ...}``."""
    alarm = {**fresh["alarm"], "n": labels}
    return {**(fresh if old is None else old), "alarm": alarm}


def task_of(config) -> type[BinaryTask]:
    """The task class of ``config`` (``--task``)."""
    return MulticlassTask if config.task == "multiclass" else BinaryTask
