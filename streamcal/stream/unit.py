"""A unit of calibration: one Venn-Abers classifier with everything its joins need.

With ``--scope global`` the processor has one unit fed by every partition of both
topics; with ``--scope partition`` one unit per partition number p, fed by partition p
of the events and partition p of the labels (co-partitioned topics: the same event id
lands in the same partition of both). A partition of a keyed stream is a random
subsample of it, so each unit is a Venn predictor on its own, valid as the global one
is; the price is that each unit's model and calibration set see 1/P of the labels.

Per event: decode, score (``predict_interval_one``), send the prediction, wait for the
label (``events_awaiting_label``; a label that comes first waits in
``labels_awaiting_event``). Per label: decode, join with its pending event, record the loss of the
prediction that was made (``CalibrationTracker``), let the model learn. Anything that
cannot be processed is sent to the dead-letter topic with its original bytes and a
reason, and leaves the state untouched. The unit only sends: the processor owns the
clients, the order records come in (``streamcal.stream.kafka.ordering``) and the
checkpoints. The walk of a record goes one way: the processor hands it to ``handle``,
which returns whether a metric line is due; the unit calls nothing of the processor.

The state is plain data (``to_state`` / ``from_state``; the format and its versions are in
``streamcal.stream.state.migrations``), bound to the settings in ``FINGERPRINT``.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, NamedTuple

import orjson

import streamcal
from streamcal.core.merge import SCALAR_MERGES
from streamcal.learner.settings import FIELDS as CLASSIFIER_SETTINGS
from streamcal.monitoring.tracker import prediction_in_range
from streamcal.stream.config import resolved_scheme, settings_of
from streamcal.stream.deadletter import dead_letter
from streamcal.stream.messages import BadInput, Fields, decode_event, decode_label
from streamcal.stream.models import make_model
from streamcal.stream.pending import RecentIds, WaitingRoom
from streamcal.stream.state.errors import CheckpointError

__all__ = ["CalibrationUnit", "FINGERPRINT", "GLOBAL_UNIT", "PendingPrediction", "TopicRank"]

# The id of the unit of ``--scope global`` (a partition unit's id is its partition
# number). None, as checkpoints have always written it.
GLOBAL_UNIT = None


class TopicRank(IntEnum):
    """Which input a record comes from; at equal timestamps an event goes before a label
    (the rank is part of the merge order, ``streamcal.stream.kafka.ordering``)."""

    EVENT = 0
    LABEL = 1


_EVENT = TopicRank.EVENT  # looked up once: compared per record
_COUNTS = ("events", "labels", "predictions", "expired", "dead_letters")

_merge_square = SCALAR_MERGES["square"]

# Settings a checkpoint is bound to: resuming with other ones would mix two states. The
# classifier's are compared as ClassifierSettings, so that a setting left to its default
# and the same value given explicitly are one setting.
_INPUT_FINGERPRINT = (
    "events_topic",
    "labels_topic",
    "model",
    "id_field",
    "features_field",
    "label_field",
)
# Protection (``--protect``, ``--alarm-alpha``: the classifier's ``protect``): the
# protectors' state is in the checkpoint, so it is bound to it too. A state from before
# protection has them as None: it resumes with either setting (its protectors, if on,
# start fresh; p is unchanged).
_PROTECTION_FINGERPRINT = ("protect", "alarm_alpha")
# The task (--task) and the multiclass scheme, recorded as given; the scheme is compared
# once its default is filled in (``resolved_scheme``). A state without them (before
# version 5) is binary.
_TASK_FINGERPRINT = ("task", "scheme")
FINGERPRINT = (
    _INPUT_FINGERPRINT
    + tuple(k for k in CLASSIFIER_SETTINGS if k not in _PROTECTION_FINGERPRINT)
    + _PROTECTION_FINGERPRINT
    + _TASK_FINGERPRINT
)


class PendingPrediction(NamedTuple):
    """An event's prediction, kept until its label comes (or it expires)."""

    x: dict
    p0: float
    p1: float
    p: float
    score: float
    category: Any = None  # with --by only
    p_protected: float | None = None  # with --protect only

    def to_state(self, by, protect: bool = False) -> tuple:
        """Plain data: the features and 4 numbers, then the category with ``--by``, then
        p_protected with ``--protect`` (the category then always, None without ``--by``)."""
        if protect:
            return tuple(self)
        return tuple(self)[:6] if by is not None else tuple(self)[:5]


class _Rec(NamedTuple):
    """What a dead letter needs of a record (ConsumerRecords hold more, e.g. headers)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


class CalibrationUnit:
    """The state of one unit and its join/learn logic (see the module docstring).

    ``unit`` is ``GLOBAL_UNIT`` for the global unit, else the partition number.
    ``send(topic, key, value)`` (the outbox's) delivers predictions and dead letters.
    """

    def __init__(self, config, unit: int | None = GLOBAL_UNIT, send=None):
        self.config = config
        self.unit = unit
        settings = config.classifier_settings()
        self._protect = settings.protect_params if self._PROTECTABLE else None  # None: off
        self.clf = self._new_classifier(config, settings)
        self.tracker = self._new_tracker(config)
        # event id -> PendingPrediction; event id -> (y, _Rec)
        self.events_awaiting_label = WaitingRoom(config.pending_ttl, config.pending_max)
        self.labels_awaiting_event = WaitingRoom(config.label_wait, config.label_wait_max)
        self.recent = RecentIds(config.dedupe_window)
        self.counts = dict.fromkeys(_COUNTS, 0)
        self.offsets: dict[tuple[str, int], int] = {}  # next offset to process
        self.clock = float("-inf")  # the largest record timestamp seen (s)
        self.fingerprint = self._fingerprint(config)
        self.version = streamcal.__version__  # of the streamcal that started this state
        self.send = send
        self._fields = Fields.of(config)
        self._by = config.by
        self._version = streamcal.__version__

    # ------------------------------------------------------------------ what a kind of unit
    # (binary here, ``MulticlassUnit``) sets: its classifier, tracker, pending predictions
    # and fingerprint. The joins, the waiting rooms and the state layout are shared.

    # Whether the classifier takes ``protect`` (``--protect``); else the unit has none.
    _PROTECTABLE = True
    # What a pending prediction is (``from_state`` rebuilds it from its plain tuple).
    _PENDING = PendingPrediction

    @staticmethod
    def _classifier_class():
        from streamcal.learner import VennAbersClassifier

        return VennAbersClassifier

    @staticmethod
    def _tracker_class():
        from streamcal.monitoring.tracker import CalibrationTracker

        return CalibrationTracker

    def _new_classifier(self, config, settings):
        # protect has "lookup" off: _join passes every label's p back
        return self._classifier_class()(make_model(config.model), **settings.as_dict())

    @classmethod
    def _new_tracker(cls, config):
        return cls._tracker_class()(
            window=config.tracker_window,
            bins=config.tracker_bins,
            top_k=config.top_k,
            max_categories=config.classifier_settings().max_categories,
        )

    @staticmethod
    def _fingerprint(config) -> dict:
        return {k: getattr(config, k) for k in FINGERPRINT}

    def _pending_to_state(self, pending) -> tuple:
        return pending.to_state(self._by, self._protect is not None)

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict:
        """The unit as plain data (see ``streamcal.stream.state.migrations``)."""
        pending = self.events_awaiting_label.to_state()
        self._report_protection()
        pending["items"] = [(k, d, self._pending_to_state(v)) for k, d, v in pending["items"]]
        waiting = self.labels_awaiting_event.to_state()
        waiting["items"] = [(k, d, (y, tuple(rec))) for k, d, (y, rec) in waiting["items"]]
        return {
            "unit": self.unit,
            "fingerprint": dict(self.fingerprint),
            "streamcal_version": self.version,
            "classifier": self.clf.to_state(),
            "tracker": self.tracker.to_state(),
            "pending": pending,
            "waiting": waiting,
            "recent": self.recent.to_state(),
            "counts": dict(self.counts),
            "offsets": [(t, p, o) for (t, p), o in self.offsets.items()],
            "clock": self.clock,
        }

    @classmethod
    def from_state(cls, state: dict, *, config, send=None) -> CalibrationUnit:
        """The unit ``to_state`` described; ``CheckpointError`` if it was made with other
        settings (``FINGERPRINT``) than ``config``'s (a state of another task included)."""
        check_fingerprint(state, config)
        self = cls(config, state["unit"], send=send)
        clf_state = state["classifier"]
        if self._protect is not None:
            # The protect in effect (check_fingerprint matched its flags): "lookup" off
            # also for a state written with it on. A state from before protection has
            # no protectors: they start fresh.
            clf_state = {**clf_state, "protect": self.clf.protect,
                         "protection": clf_state.get("protection")}  # fmt: skip
        self.clf = self._classifier_class().from_state(clf_state)
        self.tracker = self._tracker_class().from_state(state["tracker"])
        pending = cls._PENDING
        self.events_awaiting_label = WaitingRoom.from_state(
            state["pending"], value=lambda v: pending(*v)
        )
        self.labels_awaiting_event = WaitingRoom.from_state(
            state["waiting"], value=lambda v: (v[0], _Rec(*v[1]))
        )
        self.recent = RecentIds.from_state(state["recent"])
        self.counts = dict(state["counts"])
        self.offsets = {(t, p): o for t, p, o in state["offsets"]}
        self.clock = state["clock"]
        self.version = state["streamcal_version"]
        return self

    def snapshot(self) -> dict:
        """What a metric line takes from the unit (by name, see ``streamcal.stream.metrics``):
        the counts, the tracker's snapshot, the sizes of the waiting rooms."""
        values = dict(self.counts)
        self._report_protection()
        # With the reliability bins on every line (2.4 KB instead of 0.5 KB of JSON with 10
        # bins, +6 µs per line, one line per metrics_every labels) so that `streamcal
        # report` can draw reliability diagrams from any metric log, even a cut-off one.
        values.update(self.tracker.snapshot(reliability=True))
        values.update(
            pending=len(self.events_awaiting_label),
            waiting_labels=len(self.labels_awaiting_event),
            calibration_size=self.clf.calibration_size,
        )
        return values

    def category_snapshots(self) -> list[dict]:
        """The rows of the per-category metric lines (with ``--by``)."""
        return self.tracker.category_snapshots()

    @classmethod
    def empty_snapshot(cls, config) -> dict:
        """``snapshot()`` of a unit that has seen nothing, without making one (no model)."""
        values = dict.fromkeys(_COUNTS, 0)
        values.update(cls._new_tracker(config).snapshot(reliability=True))
        values.update(pending=0, waiting_labels=0, calibration_size=0)
        return values

    # ------------------------------------------------------------------ per record
    def handle(self, rank: TopicRank, rec) -> bool:
        """Process one input record and move past it (``offsets``); True when a metric
        line is due: the label count has just reached a multiple of ``metrics_every`` (so
        metric lines are keyed on the input and replay identically)."""
        labels = self.counts["labels"]
        if rank == _EVENT:
            self.on_event(rec)
        else:
            self.on_label(rec)
        self.offsets[(rec.topic, rec.partition)] = rec.offset + 1
        joined = self.counts["labels"]  # a record joins at most one label
        return joined != labels and joined % self.config.metrics_every == 0

    def _dead(self, rec, reason: str, value=None) -> None:
        self.counts["dead_letters"] += 1
        self.send(
            self.config.dead_letter_topic,
            rec.key,
            dead_letter(
                value=rec.value if value is None else value,
                key=rec.key,
                topic=rec.topic,
                partition=rec.partition,
                offset=rec.offset,
                timestamp_ms=rec.timestamp,
                reason=reason,
                version=self._version,
            ),
        )

    def _advance(self, ts_ms: int) -> None:
        now = ts_ms / 1000.0
        if now <= self.clock:
            return
        self.clock = now
        if self.events_awaiting_label:
            for eid, _ in self.events_awaiting_label.expire(now):
                self.counts["expired"] += 1
                self.recent.add(eid, "expired")
        if self.labels_awaiting_event:
            for _, (_, rec) in self.labels_awaiting_event.expire(now):
                self._dead(
                    rec,
                    f"label without event: no event with this id within "
                    f"label_wait={self.config.label_wait:g} s",
                )

    def _decode(self, rec, decode):
        """The decoded message, or None once a bad one is dead-lettered."""
        try:
            return decode(rec.value, self._fields)
        except BadInput as exc:
            self._dead(rec, str(exc))
            return None

    # What decodes an input record (``MulticlassUnit`` decodes class labels).
    event_decoder = staticmethod(decode_event)
    label_decoder = staticmethod(decode_label)

    def on_event(self, rec) -> None:
        """Predict an event (and join the label that came before it, if any)."""
        ev = self._decode(rec, decode_event)
        if ev is None:
            return
        eid = ev.id
        if eid in self.events_awaiting_label or self.recent.get(eid) is not None:
            self._dead(rec, f"duplicate event id {eid!r}")
            return
        try:
            if self._by is None:
                iv = self.clf.predict_interval_one(ev.x)
            else:  # the event's category, read at decoding (a feature, or a top-level field)
                iv = self.clf.predict_interval_one(ev.x, category=ev.category)
        except Exception as exc:  # noqa: BLE001 - e.g. score:FIELD without the field
            self._dead(rec, f"model could not score event {eid!r}: {exc}")
            return
        self._advance(rec.timestamp)
        p0, p1, p, score = iv.p0, iv.p1, iv.p, iv.score
        out = {
            "id": eid,
            "p0": p0,
            "p1": p1,
            "p": p,
            "p_square": _merge_square(p0, p1),
            "score": score,
            "calibration_size": self.clf.calibration_size,
            "version": self._version,
        }
        category = p_protected = None
        if self._by is not None:
            category = out["category"] = ev.category
        if self._protect is not None:
            p_protected = out["p_protected"] = iv.p_protected
        pending = PendingPrediction(ev.x, p0, p1, p, score, category, p_protected)
        self.send(self.config.predictions_topic, eid.encode(), orjson.dumps(out))
        counts = self.counts
        counts["events"] += 1
        counts["predictions"] += 1
        for old_id, _ in self.events_awaiting_label.put(eid, pending, self.clock):
            counts["expired"] += 1
            self.recent.add(old_id, "expired")
        early = self.labels_awaiting_event.pop(eid)  # (y, label record), or None
        if early is not None:
            self._join(eid, *early)

    def on_label(self, rec) -> None:
        """Join a label with its event, or keep it until the event comes."""
        lab = self._decode(rec, self.label_decoder)
        if lab is None:
            return
        eid = lab.id
        if eid in self.events_awaiting_label:
            self._advance(rec.timestamp)
            self._join(eid, lab.y, rec)
            return
        if eid in self.labels_awaiting_event:
            self._dead(rec, f"duplicate label for {eid!r} (a label is already waiting)")
            return
        status = self.recent.get(eid)
        if status == "joined":
            self._dead(rec, f"duplicate label for {eid!r} (already joined)")
            return
        if status == "expired":
            self._dead(rec, f"label for {eid!r} came after its event expired (pending_ttl/max)")
            return
        self._advance(rec.timestamp)
        kept = _Rec(
            topic=rec.topic,
            partition=rec.partition,
            offset=rec.offset,
            timestamp=rec.timestamp,
            key=rec.key,
            value=rec.value,
        )
        for _, (_, old) in self.labels_awaiting_event.put(eid, (lab.y, kept), self.clock):
            self._dead(
                old,
                f"label without event: waiting room full (label_wait_max="
                f"{self.config.label_wait_max})",
            )

    def _join(self, eid: str, y: bool, rec) -> None:
        """Join label ``y`` (from ``rec``) with its pending event: all or nothing. If the
        tracker or the learner refuses, the label becomes a dead letter and the state (the
        pending event included) is left as it was."""
        pred = self.events_awaiting_label.get(eid)
        p0, p1, p, score, pp = pred.p0, pred.p1, pred.p, pred.score, pred.p_protected
        if not prediction_in_range(p0, p1, p, score, pp):  # first: learning is not undone
            extra = "" if pp is None else f", p_protected={pp!r}"
            self._dead(
                rec,
                f"tracker rejected the prediction of {eid!r}: "
                f"p0={p0!r}, p1={p1!r}, p={p!r}, score={score!r}{extra}",
            )
            return
        kw = {"category": pred.category} if self._by is not None else {}
        clf = self.clf
        try:
            if self._protect is None:
                clf.learn_one(pred.x, y, **kw)
            else:  # the protector learns from the p that was given, however late the label
                clf.learn_one(pred.x, y, p=p, **kw)
        except Exception as exc:  # noqa: BLE001 - any model error: reject this label only
            self._dead(rec, f"learner rejected the label of {eid!r}: {exc!r}")
            return
        if pp is None:  # off, or an event predicted before protection was turned on
            self.tracker.update(p0, p1, y, score=score, p=p, **kw)
        else:
            self.tracker.update(p0, p1, y, score=score, p=p, p_protected=pp, **kw)
        if self._by is not None and self._protect is not None and pred.category is not None:
            self._report_category_protection(pred.category)
        self.events_awaiting_label.pop(eid)
        self.recent.add(eid, "joined")
        self.counts["labels"] += 1

    def _report_protection(self) -> None:
        """Give the tracker the unit's protection state (with ``--by`` the largest log S
        and the first alarm over the categories) before it is read. Done here rather than
        per label: the tracker keeps only the latest report, which is a function of the
        classifier's state, so reading it late gives the same value and saves a few µs
        per label."""
        if self._protect is None or not self.counts["labels"]:
            return
        clf = self.clf
        self.tracker.update_protection(
            clf.log_martingale, clf.alarm, clf.alarm_at, alpha=self._protect["alpha"],
            alarm_onset=clf.alarm_onset, protection_gain=clf.protection_gain,
        )

    def _report_category_protection(self, category) -> None:
        """Give the tracker the state of ``category``'s alarm after its label: per
        label, since the tracker's "(other)" row keeps the largest log S reported so far
        (a null category has no row, as in ``CalibrationTracker.update``)."""
        alarm = self.clf.alarms.get(category)
        if alarm is not None:
            self.tracker.update_protection(
                alarm.log_martingale, alarm.alarm, alarm.alarm_at, alpha=self._protect["alpha"],
                category=category,
            )  # fmt: skip


def check_fingerprint(state: dict, config) -> None:
    """``CheckpointError`` (one line) if ``state`` was made with other settings.

    The fingerprint holds the settings as given (None: not given); the classifier's are
    compared once their defaults are filled in (``ClassifierSettings.given``).
    """
    fingerprint = state.get("fingerprint", {})
    pairs = [(k, fingerprint.get(k), getattr(config, k)) for k in _INPUT_FINGERPRINT]
    pairs += [
        (k, fingerprint[k], getattr(config, k))
        for k in _PROTECTION_FINGERPRINT
        if fingerprint.get(k) is not None  # None: the state predates protection
    ]
    task = fingerprint.get("task") or "binary"
    pairs += [
        ("task", task, config.task),
        ("scheme", resolved_scheme(task, fingerprint.get("scheme")), config.multiclass_scheme()),
    ]
    now = config.classifier_settings()
    try:
        saved = settings_of(fingerprint)
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"checkpoint has invalid classifier settings: {exc}") from None
    names = [k for k in CLASSIFIER_SETTINGS if k not in _PROTECTION_FINGERPRINT]
    if fingerprint.get("protect") is not None:  # else it predates protection: either
        names.append("protect")  # the flags matched above: this compares what they imply
    pairs += [(k, getattr(saved, k), getattr(now, k)) for k in names]
    for k, written, configured in pairs:
        if written != configured:
            raise CheckpointError(
                f"checkpoint was written with {k}={written!r} but the "
                f"processor is configured with {k}={configured!r}; use another "
                "state directory or the same settings"
            )
