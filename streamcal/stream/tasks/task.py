"""What every task shares: the base of the registry's entries (``streamcal.stream.tasks``).

What waits for a label is only what the join needs: the features the model learns from
(none but the score field with ``--model score:FIELD``), the numbers the tracker scores,
the category with ``--by`` and, with ``--protect``, p_protected.

The alarm (``--alarm``, ``--alarm-alpha``; ``docs/alerts.md``) is the classifier's: a
conformal test martingale per category (one without ``--by``), fed by the classifier's own
label and scores in every mode. A task gives the tracker its state: per label the
category's alarm (with ``--by``), and before a metric line or a checkpoint the unit's
(``report``: the largest ln S, the first alarm, its onset; with protection, its gain).
"""

from __future__ import annotations

import struct

import orjson

import streamcal
from streamcal.monitoring import schema
from streamcal.stream.messages import decode_event
from streamcal.stream.models import SCORE_PREFIX, make_model
from streamcal.stream.packing import FeatureCodec

__all__ = ["Task", "pack_category", "pack_time", "unpack_category",
           "unpack_time"]  # fmt: skip

VERSION = streamcal.__version__
# The fixed head of what waits: flags, p0, p1, p, score
NUMBERS4 = struct.Struct("<B4d")
# A flag of a packed prediction's first byte: the event's time (record time, s) follows
# the numbers, for the label delay at the join without a store read; entries packed by
# an older version have no time.
HAS_TIME = 4
DOUBLE = struct.Struct("<d")
LENGTH = struct.Struct("<I")


def pack_time(time: float | None) -> bytes:
    """The event's time (record time, s) as what waits holds it after its numbers (the
    flag ``HAS_TIME`` says it is there); nothing for None."""
    return b"" if time is None else DOUBLE.pack(time)


def unpack_time(data: bytes, at: int, flags: int) -> tuple:
    """(the time ``pack_time`` put at ``at`` of ``data``, or None without ``HAS_TIME`` in
    ``flags``: kept by an older version; the offset after it).

    >>> unpack_time(b"x" + pack_time(2.5), 1, HAS_TIME), unpack_time(b"x", 1, 0)
    ((2.5, 9), (None, 1))
    """
    if not flags & HAS_TIME:
        return None, at
    return DOUBLE.unpack_from(data, at)[0], at + DOUBLE.size


def pack_category(category) -> bytes:
    """A category as what waits holds it: its length, then its JSON."""
    c = orjson.dumps(category)
    return LENGTH.pack(len(c)) + c


def unpack_category(data: bytes, at: int) -> tuple:
    """(the category ``pack_category`` put at ``at`` of ``data``, the offset after it).

    >>> unpack_category(b"xx" + pack_category({"shop": 7}), 2)
    ({'shop': 7}, 16)
    """
    n = LENGTH.unpack_from(data, at)[0]
    return orjson.loads(data[at + 4 : at + 4 + n]), at + 4 + n


def _kept_features(config):
    """What of an event's features waits for its label: with ``score:FIELD`` only that
    field (FieldScore reads nothing else and learns nothing), else all of them."""
    if config.model.startswith(SCORE_PREFIX):
        name = config.model[len(SCORE_PREFIX) :]
        return lambda x: {name: x[name]} if name in x else x
    return None


class Task:
    """The parts every task shares; an entry declares the rest (see the registry's
    docstring). One instance per unit, made from the settings and the unit's codec."""

    name: str
    pending_type: type
    shape = None  # streamcal.monitoring.shapes.Shape
    protects = False  # --protect applies: predictions carry p_protected
    event_decoder = staticmethod(decode_event)
    label_decoder = None

    def __init__(self, config, codec: FeatureCodec | None):
        self.config = config
        self.codec = codec
        self.by = config.by
        # The classifier's protect= (None: neither protection nor the alarm)
        self.protect = config.classifier_settings().protect_params if self.protects else None
        self.protected = self.protects and bool(config.protect)  # p_protected is kept
        self.alarm_alpha = config.alarm_alpha if config.alarm else None  # None: no alarm
        self._kept = _kept_features(config)

    # ------------------------------------------------------------------ the settings
    @classmethod
    def check_settings(cls, config) -> None:
        """``ValueError`` if ``config`` breaks a rule of this task's settings."""
        if config.scheme is not None:
            raise ValueError("scheme needs --task multiclass")

    @staticmethod
    def check_learner(config) -> None:
        """``ValueError`` if ``config`` breaks a rule of the learner's settings (the
        classifier's, with its messages)."""
        config.classifier_settings()

    @staticmethod
    def resolve_scheme(given):
        """The multiclass scheme in effect for ``--scheme`` ``given``: none here."""
        return None

    @staticmethod
    def default_label(text: str):
        """``--label-default`` ``text`` as one of this task's labels."""
        return text

    @classmethod
    def metric_features(cls, config) -> tuple:
        """The schema's optional features whose fields ``config``'s metric lines carry."""
        feature = cls.shape.feature
        return (
            (feature,) * (feature is not None)
            + (schema.PROTECTION,) * bool(config.protect and cls.protects)
            + (schema.ALARM,) * bool(config.alarm)
        )

    @classmethod
    def fingerprint(cls, values: dict) -> dict:
        """The shared settings a checkpoint of this task is bound to (``values``, by name).
        A task without protection is bound to the alarm's settings only: its ``protect``
        is None (not compared)."""
        return values if cls.protects else {**values, "protect": None}

    @staticmethod
    def own_fingerprint(config) -> dict:
        """The settings of this task alone that change what its checkpoint holds or what
        it predicts, by name, as the checkpoint keeps them (plain data; compared with
        ``==`` at a restart, so a value is put in one form: ``--quantiles`` as its levels)."""
        return {}

    # ------------------------------------------------------------------ what it makes
    @classmethod
    def tracker_class(cls):
        return cls.shape.tracker_class

    @staticmethod
    def classifier_class():
        raise NotImplementedError

    def new_classifier(self):
        raise NotImplementedError

    def classifier_from_state(self, state: dict):
        """The classifier of a checkpoint (its settings matched the fingerprint's)."""
        return self.classifier_class().from_state(state)

    def new_model(self):
        """A new scoring model (``--model``)."""
        return make_model(self.config.model)

    # ------------------------------------------------------------------ per record
    def kept(self, x: dict) -> dict:
        """What of the features ``x`` waits for the label."""
        return x if self._kept is None else self._kept(x)

    def interval(self, clf, ev):
        """The classifier's prediction for the event ``ev`` (of its category with ``--by``)."""
        if self.by is None:
            return clf.predict_interval_one(ev.x)
        # the event's category, read at decoding (a feature, or a top-level field)
        return clf.predict_interval_one(ev.x, category=ev.category)

    def learn(self, clf, pred, y) -> None:
        # the protector learns from the p that was given, however late the label; without
        # --by no keyword dict is built (once per label: a fifth of this call's cost)
        if self.by is None:
            if self.protected:
                clf.learn_one(pred.x, y, p=pred.p)
            else:
                clf.learn_one(pred.x, y)
        elif self.protected:
            clf.learn_one(pred.x, y, p=pred.p, category=pred.category)
        else:
            clf.learn_one(pred.x, y, category=pred.category)

    def track_alarm(self, clf, tracker, category) -> None:
        """Give the tracker the alarm of ``category`` after its label (with ``--by``)."""
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
