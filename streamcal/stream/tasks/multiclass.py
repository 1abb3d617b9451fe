"""The multiclass task (``--task multiclass``): class labels, ``VennAbersMultiClassifier``,
``MulticlassTracker``, the alarm, no protection (per class it is not built).

A label is a class name (``decode_class_label``); a prediction is the predicted class, its
top-label pair and p, a probability per class, the model's own probabilities and the
scheme's pairs (the shape is in docs/processor.md). Before any class is known (no label
joined yet) the prediction has ``label`` null, (p0, p1) = (0, 1), p 0 and no
probabilities; such predictions are not tracked (their loss would measure the cold start
only), and the model still learns their labels (and its alarm too).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import orjson

from streamcal.monitoring.shapes import MULTICLASS
from streamcal.stream.messages import decode_class_label
from streamcal.stream.models import BINARY_ONLY, SCORE_PREFIX
from streamcal.stream.packing import FeatureCodec
from streamcal.stream.tasks.task import (
    HAS_TIME,
    LENGTH,
    NUMBERS4,
    VERSION,
    Task,
    pack_time,
    unpack_time,
)

__all__ = ["MulticlassTask", "PendingMulticlass", "TASK"]


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


class MulticlassTask(Task):
    """Class labels, ``VennAbersMultiClassifier``, ``MulticlassTracker``, the alarm, no
    protection."""

    name = "multiclass"
    pending_type = PendingMulticlass
    shape = MULTICLASS
    label_decoder = staticmethod(decode_class_label)

    def __init__(self, config, codec: FeatureCodec | None):
        super().__init__(config, codec)
        self.scheme = self.resolve_scheme(config.scheme)

    # ------------------------------------------------------------------ the settings
    @classmethod
    def check_settings(cls, config) -> None:
        """The multiclass rules (``--scheme``, ``--mode``, ``--fallback``, ``--model``)."""
        from streamcal.core.multiclass import scheme_class
        from streamcal.learner.settings import check_multiclass

        if config.scheme is not None:
            scheme_class(config.scheme)  # ValueError naming the schemes
        check_multiclass(config.mode, config.fallback, config.min_category)
        if config.model in BINARY_ONLY or config.model.startswith(SCORE_PREFIX):
            raise ValueError(
                f"model {config.model!r} is binary only; with --task multiclass use "
                "gnb, hoeffding, softmax or module:function"
            )

    @staticmethod
    def resolve_scheme(given):
        """The scheme of ``--scheme`` ``given``, the learner's default if not given.

        >>> MulticlassTask.resolve_scheme(None), MulticlassTask.resolve_scheme("top-label")
        ('one-vs-rest', 'top-label')
        """
        from streamcal.learner.multiclassifier import DEFAULT_SCHEME

        return given or DEFAULT_SCHEME

    # ------------------------------------------------------------------ what it makes
    @staticmethod
    def classifier_class():
        from streamcal.learner import VennAbersMultiClassifier

        return VennAbersMultiClassifier

    def new_classifier(self):
        s = self.config.classifier_settings()
        return self.classifier_class()(
            self.new_model(), scheme=self.scheme, merge=s.merge, window=s.window,
            refresh_every=s.refresh_every, by=s.by, max_categories=s.max_categories,
            alarm_alpha=self.alarm_alpha,
        )  # fmt: skip

    # ------------------------------------------------------------------ per record
    def predict(self, clf, ev) -> tuple[dict, PendingMulticlass]:
        pred = self.interval(clf, ev)
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
        out["version"] = VERSION
        category = None
        if self.by is not None:
            category = out["category"] = ev.category
        x = self.kept(ev.x)
        return out, PendingMulticlass(x, label, p0, p1, p, proba, scores, intervals, category)

    def pack(self, pred: PendingMulticlass, time: float | None = None) -> bytes:
        rest = orjson.dumps([pred.label, pred.proba, pred.scores, pred.intervals, pred.category])
        flags = HAS_TIME if time is not None else 0
        head = NUMBERS4.pack(flags, pred.p0, pred.p1, pred.p, 0.0) + LENGTH.pack(len(rest))
        return head + pack_time(time) + rest + self.codec.pack(pred.x)

    def unpack(self, data: bytes) -> PendingMulticlass:
        flags, p0, p1, p, _ = NUMBERS4.unpack_from(data)
        n = LENGTH.unpack_from(data, NUMBERS4.size)[0]
        time, at = unpack_time(data, NUMBERS4.size + LENGTH.size, flags)
        label, proba, scores, intervals, category = orjson.loads(data[at : at + n])
        if intervals is not None:
            intervals = {c: tuple(pair) for c, pair in intervals.items()}
        x = self.codec.unpack(data, at + n)[0]
        return PendingMulticlass(x, label, p0, p1, p, proba, scores, intervals, category, time)

    def refuse(self, clf, pred: PendingMulticlass, y, eid: str) -> str | None:
        limit = self.config.max_classes
        if clf.admits(y, limit):
            return None
        return (
            f"label {y!r} of {eid!r} would be class number {len(clf.classes) + 1}, "
            f"beyond max_classes={limit}"
        )

    def track(self, clf, tracker, pred: PendingMulticlass, y) -> None:
        if pred.label is None:  # predictions before any class are not tracked
            return
        kw = {"category": pred.category} if self.by is not None else {}
        tracker.update(
            pred.label, pred.p0, pred.p1, pred.p, pred.proba, y,
            scores=pred.scores, intervals=pred.intervals, **kw,
        )  # fmt: skip
        self.track_alarm(clf, tracker, pred.category)


TASK = MulticlassTask
