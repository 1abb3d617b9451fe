"""A unit of multiclass calibration (``--task multiclass``).

The same joins as ``CalibrationUnit`` (the waiting rooms, duplicates, expiry, dead
letters, offsets, the state's layout: inherited), with a ``VennAbersMultiClassifier``
and a ``MulticlassTracker`` (the unit's hooks). What differs:

* a label is a class name (``decode_class_label``: a string, or an integer used as its
  decimal string); a label that would be a class beyond ``max_classes`` is a dead letter;
* a prediction is the predicted class, its top-label pair (p0, p1) and p, a probability
  per class, the model's own probabilities and the scheme's pairs (the shape is in
  docs/processor.md);
* no protection (per class it is not built): ``--protect`` does nothing here, and the
  metric lines have no protection fields.

Before any class is known (no label joined yet, a model that returns nothing) the
prediction has ``label`` null, (p0, p1) = (0, 1), p 0 and no probabilities: there is
nothing to predict. Such predictions are not tracked (their loss would measure the cold
start only); the model still learns their labels.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import orjson

from streamcal.stream.messages import decode_class_label
from streamcal.stream.models import make_model
from streamcal.stream.unit import CalibrationUnit

__all__ = ["MulticlassUnit", "PendingMulticlass"]


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


class MulticlassUnit(CalibrationUnit):
    """The state of one multiclass unit and its join/learn logic (see the module)."""

    label_decoder = staticmethod(decode_class_label)

    _PROTECTABLE = False  # per class it is not built
    _PENDING = PendingMulticlass

    @staticmethod
    def _classifier_class():
        from streamcal.learner import VennAbersMultiClassifier

        return VennAbersMultiClassifier

    @staticmethod
    def _tracker_class():
        from streamcal.monitoring.multiclass_tracker import MulticlassTracker

        return MulticlassTracker

    def _new_classifier(self, config, settings):
        self.scheme = config.multiclass_scheme()
        return self._classifier_class()(
            make_model(config.model),
            scheme=self.scheme,
            merge=settings.merge,
            window=settings.window,
            refresh_every=settings.refresh_every,
            by=settings.by,
            max_categories=settings.max_categories,
        )

    @staticmethod
    def _fingerprint(config) -> dict:
        fingerprint = CalibrationUnit._fingerprint(config)
        # No protection here: bound to neither setting (as a state from before protection).
        fingerprint.update(protect=None, alarm_alpha=None)
        return fingerprint

    def _pending_to_state(self, pending) -> tuple:
        return tuple(pending)

    def class_snapshots(self) -> list[dict]:
        """The per-class lines (``MulticlassTracker.class_snapshots``)."""
        return self.tracker.class_snapshots()

    # ------------------------------------------------------------------ per record
    def on_event(self, rec) -> None:
        """Predict an event (and join the label that came before it, if any)."""
        ev = self._decode(rec, self.event_decoder)
        if ev is None:
            return
        eid = ev.id
        if eid in self.events_awaiting_label or self.recent.get(eid) is not None:
            self._dead(rec, f"duplicate event id {eid!r}")
            return
        try:
            if self._by is None:
                pred = self.clf.predict_interval_one(ev.x)
            else:
                pred = self.clf.predict_interval_one(ev.x, category=ev.category)
        except Exception as exc:  # noqa: BLE001 - any model error: reject this event only
            self._dead(rec, f"model could not score event {eid!r}: {exc}")
            return
        self._advance(rec.timestamp)
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
        out = {
            "id": eid,
            "label": label,
            "p0": p0,
            "p1": p1,
            "p": p,
            "probabilities": proba,
            "scores": scores,
        }
        if intervals is not None:
            out["intervals"] = {c: list(pair) for c, pair in intervals.items()}
        if pairs is not None:
            out["pairs"] = [[a, b, q0, q1] for (a, b), (q0, q1) in pairs.items()]
        out["scheme"] = self.scheme
        out["calibration_size"] = self.clf.calibration_size
        out["version"] = self._version
        category = None
        if self._by is not None:
            category = out["category"] = ev.category
        pending = PendingMulticlass(ev.x, label, p0, p1, p, proba, scores, intervals, category)
        self.send(self.config.predictions_topic, eid.encode(), orjson.dumps(out))
        counts = self.counts
        counts["events"] += 1
        counts["predictions"] += 1
        for old_id, _ in self.events_awaiting_label.put(eid, pending, self.clock):
            counts["expired"] += 1
            self.recent.add(old_id, "expired")
        early = self.labels_awaiting_event.pop(eid)
        if early is not None:
            self._join(eid, *early)

    def _join(self, eid: str, y: str, rec) -> None:
        """Join class ``y`` (from ``rec``) with its pending event: all or nothing. A class
        beyond ``max_classes`` or a label the learner refuses is a dead letter and leaves
        the state (the pending event included) as it was."""
        clf = self.clf
        if y not in clf.classes._index and len(clf.classes) >= self.config.max_classes:
            self._dead(
                rec,
                f"label {y!r} of {eid!r} would be class number {len(clf.classes) + 1}, "
                f"beyond max_classes={self.config.max_classes}",
            )
            return
        pred = self.events_awaiting_label.get(eid)
        kw = {"category": pred.category} if self._by is not None else {}
        try:
            clf.learn_one(pred.x, y, **kw)
        except Exception as exc:  # noqa: BLE001 - any model error: reject this label only
            self._dead(rec, f"learner rejected the label of {eid!r}: {exc!r}")
            return
        if pred.label is not None:  # predictions before any class are not tracked
            self.tracker.update(
                pred.label, pred.p0, pred.p1, pred.p, pred.proba, y,
                scores=pred.scores, intervals=pred.intervals, **kw,
            )  # fmt: skip
        self.events_awaiting_label.pop(eid)
        self.recent.add(eid, "joined")
        self.counts["labels"] += 1
