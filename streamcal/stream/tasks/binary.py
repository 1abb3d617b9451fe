"""The binary task (``--task binary``, the default): labels 0/1, ``VennAbersClassifier``,
``CalibrationTracker``, protection and the alarm.

A prediction is the Venn-Abers pair (p0, p1), its merged p and p_square, the model's
score and the calibration size; with ``--by`` the category, with ``--protect`` the
protected probability p_protected (``docs/alerts.md``). Binary protection runs with the
alarm; ``--no-protect`` keeps the alarm alone (the library's
``protect={"recalibrate": False}``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from streamcal.core.merge import SCALAR_MERGES
from streamcal.monitoring.shapes import BINARY
from streamcal.monitoring.tracker import prediction_in_range
from streamcal.stream.messages import decode_label
from streamcal.stream.tasks.task import (
    DOUBLE,
    HAS_TIME,
    NUMBERS4,
    VERSION,
    Task,
    pack_category,
    pack_time,
    unpack_category,
    unpack_time,
)

__all__ = ["BinaryTask", "PendingPrediction", "TASK"]

_merge_square = SCALAR_MERGES["square"]
_HAS_PP, _HAS_CATEGORY = 1, 2


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


class BinaryTask(Task):
    """Binary labels, ``VennAbersClassifier``, ``CalibrationTracker``, protection, the alarm."""

    name = "binary"
    pending_type = PendingPrediction
    shape = BINARY
    protects = True
    label_decoder = staticmethod(decode_label)

    @staticmethod
    def default_label(text: str) -> bool:
        """``--label-default`` as a binary label.

        >>> BinaryTask.default_label(" True "), BinaryTask.default_label("0")
        (True, False)
        """
        from streamcal.core.validate import binary_label

        try:
            return binary_label(text.strip().lower()) == 1
        except ValueError:
            raise ValueError(
                f"label_default (--label-default) must be a binary label (0, 1, true or "
                f"false) with --task binary, got {text!r}"
            ) from None

    # ------------------------------------------------------------------ what it makes
    @staticmethod
    def classifier_class():
        from streamcal.learner import VennAbersClassifier

        return VennAbersClassifier

    def new_classifier(self):
        # protect has "lookup" off: the join passes every label's p back
        settings = self.config.classifier_settings().as_dict()
        return self.classifier_class()(self.new_model(), **settings)

    # ------------------------------------------------------------------ per record
    def predict(self, clf, ev) -> tuple[dict, PendingPrediction]:
        """The prediction message and what waits for the label (raises if the model cannot
        score the event)."""
        # the interval's numbers as one tuple: no interval object per event
        if self.by is None:
            numbers = clf.predict_numbers_one(ev.x)
        else:
            numbers = clf.predict_numbers_one(ev.x, category=ev.category)
        if numbers is None:  # the classifier is multiclass: its interval says what it has
            iv = self.interval(clf, ev)
            numbers = (iv.p0, iv.p1, iv.p, iv.score, iv.p_protected if self.protected else None,
                       clf.calibration_size)  # fmt: skip
        p0, p1, p, score, p_protected, size = numbers
        out = {
            "id": ev.id,
            "p0": p0,
            "p1": p1,
            "p": p,
            "p_square": _merge_square(p0, p1),
            "score": score,
            "calibration_size": size,
            "version": VERSION,
        }
        category = None
        if self.by is not None:
            category = out["category"] = ev.category
        if self.protected:
            out["p_protected"] = p_protected
        else:
            p_protected = None
        return out, PendingPrediction(self.kept(ev.x), p0, p1, p, score, category, p_protected)

    def pack(self, pred: PendingPrediction, time: float | None = None) -> bytes:
        """``pred`` as bytes, with the event's ``time`` (record time, s) if given."""
        pp, category = pred.p_protected, pred.category
        flags = (_HAS_PP if pp is not None else 0) | (_HAS_CATEGORY if category is not None else 0)
        out = NUMBERS4.pack(flags | (HAS_TIME if time is not None else 0), pred.p0, pred.p1,
                            pred.p, pred.score)  # fmt: skip
        out += pack_time(time)
        if pp is not None:
            out += DOUBLE.pack(pp)
        if category is not None:
            out += pack_category(category)
        return out + self.codec.pack(pred.x)

    def unpack(self, data: bytes) -> PendingPrediction:
        flags, p0, p1, p, score = NUMBERS4.unpack_from(data)
        time, at = unpack_time(data, NUMBERS4.size, flags)
        pp = None
        if flags & _HAS_PP:
            pp = DOUBLE.unpack_from(data, at)[0]
            at += 8
        category, at = unpack_category(data, at) if flags & _HAS_CATEGORY else (None, at)
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

    def track(self, clf, tracker, pred: PendingPrediction, y) -> None:
        # p_protected None: off, or an event predicted before protection was turned on
        p0, p1, p, score, pp = pred.p0, pred.p1, pred.p, pred.score, pred.p_protected
        if self.by is None:  # no keyword dict per label, and no category's alarm to give
            tracker.update(p0, p1, y, score=score, p=p, p_protected=pp)
            return
        tracker.update(p0, p1, y, score=score, p=p, p_protected=pp, category=pred.category)
        self.track_alarm(clf, tracker, pred.category)


TASK = BinaryTask
