"""A unit of calibration: one Venn-Abers classifier with everything its joins need.

With ``--scope global`` the processor has one unit fed by every partition of both
topics; with ``--scope partition`` one unit per partition number p, fed by partition p
of the events and partition p of the labels (co-partitioned topics: the same event id
lands in the same partition of both). A partition of a keyed stream is a random
subsample of it, so each unit is a Venn predictor on its own, valid as the global one
is; the price is that each unit's model and calibration set see 1/P of the labels.

Per event: decode, score (``predict_interval_one``), send the prediction, wait in the
pending store. Per label: decode, join with its pending event, record the loss of the
prediction that was made (``CalibrationTracker``), let the model learn. Anything that
cannot be processed is sent to the dead-letter topic with its original bytes and a
reason, and leaves the state untouched. The unit only sends: the processor owns the
clients, the order records come in (``streamcal.stream.ordering``) and the checkpoints.

The state is plain data (``to_state`` / ``from_state``; the format and its versions are in
``streamcal.stream.migrations``), bound to the settings in ``FINGERPRINT``.
"""

from __future__ import annotations

from typing import NamedTuple

import orjson

import streamcal
from streamcal.core.merge import SCALAR_MERGES
from streamcal.learner.settings import FIELDS as CLASSIFIER_SETTINGS
from streamcal.learner.settings import ClassifierSettings
from streamcal.monitoring.tracker import prediction_in_range
from streamcal.stream.checkpoint import CheckpointError
from streamcal.stream.deadletter import dead_letter
from streamcal.stream.messages import BadInput, Fields, decode_event, decode_label
from streamcal.stream.models import make_model
from streamcal.stream.pending import RecentIds, WaitingRoom

__all__ = ["CalibrationUnit", "FINGERPRINT"]

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
FINGERPRINT = _INPUT_FINGERPRINT + CLASSIFIER_SETTINGS


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

    ``unit`` is None for the global unit, else the partition number. ``send(topic, key,
    value)`` delivers predictions and dead letters; ``on_labels(unit)`` is called each
    time the label count reaches a multiple of ``config.metrics_every`` (so metric lines
    are keyed on the input and replay identically).
    """

    def __init__(self, config, unit: int | None = None, send=None, on_labels=None):
        from streamcal.learner import VennAbersClassifier
        from streamcal.monitoring.tracker import CalibrationTracker

        self.config = config
        self.unit = unit
        settings = config.classifier_settings()
        self.clf = VennAbersClassifier(make_model(config.model), **settings.as_dict())
        self.tracker = CalibrationTracker(
            window=config.tracker_window,
            bins=config.tracker_bins,
            top_k=config.top_k,
            max_categories=settings.max_categories,
        )
        self.pending = WaitingRoom(config.pending_ttl, config.pending_max)
        self.waiting = WaitingRoom(config.label_wait, config.label_wait_max)  # (y, _Rec)
        self.recent = RecentIds(config.dedupe_window)
        self.counts = {"events": 0, "labels": 0, "predictions": 0, "expired": 0, "dead_letters": 0}
        self.offsets: dict[tuple[str, int], int] = {}  # next offset to process
        self.clock = float("-inf")  # the largest record timestamp seen (s)
        self.fingerprint = {k: getattr(config, k) for k in FINGERPRINT}
        self.version = streamcal.__version__  # of the streamcal that started this state
        self.send = send
        self.on_labels = on_labels
        self._fields = Fields.of(config)
        self._by = config.by
        self._version = streamcal.__version__

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict:
        """The unit as plain data (see ``streamcal.stream.migrations``)."""
        waiting = self.waiting.to_state()
        waiting["items"] = [(k, d, (y, tuple(rec))) for k, d, (y, rec) in waiting["items"]]
        return {
            "unit": self.unit,
            "fingerprint": dict(self.fingerprint),
            "streamcal_version": self.version,
            "classifier": self.clf.to_state(),
            "tracker": self.tracker.to_state(),
            "pending": self.pending.to_state(),
            "waiting": waiting,
            "recent": self.recent.to_state(),
            "counts": dict(self.counts),
            "offsets": [(t, p, o) for (t, p), o in self.offsets.items()],
            "clock": self.clock,
        }

    @classmethod
    def from_state(cls, state: dict, *, config, send=None, on_labels=None) -> CalibrationUnit:
        """The unit ``to_state`` described; ``CheckpointError`` if it was made with other
        settings (``FINGERPRINT``) than ``config``'s."""
        from streamcal.learner import VennAbersClassifier
        from streamcal.monitoring.tracker import CalibrationTracker

        check_fingerprint(state, config)
        self = cls(config, state["unit"], send=send, on_labels=on_labels)
        self.clf = VennAbersClassifier.from_state(state["classifier"])
        self.tracker = CalibrationTracker.from_state(state["tracker"])
        self.pending = WaitingRoom.from_state(state["pending"])
        self.waiting = WaitingRoom.from_state(state["waiting"], value=lambda v: (v[0], _Rec(*v[1])))
        self.recent = RecentIds.from_state(state["recent"])
        self.counts = dict(state["counts"])
        self.offsets = {(t, p): o for t, p, o in state["offsets"]}
        self.clock = state["clock"]
        self.version = state["streamcal_version"]
        return self

    # ------------------------------------------------------------------ per record
    def _dead(self, rec, reason: str, value=None) -> None:
        self.counts["dead_letters"] += 1
        self.send(
            self.config.dead_letter_topic,
            rec.key,
            dead_letter(
                rec.value if value is None else value,
                rec.key,
                rec.topic,
                rec.partition,
                rec.offset,
                rec.timestamp,
                reason,
                self._version,
            ),
        )

    def _advance(self, ts_ms: int) -> None:
        now = ts_ms / 1000.0
        if now <= self.clock:
            return
        self.clock = now
        if self.pending:
            for eid, _ in self.pending.expire(now):
                self.counts["expired"] += 1
                self.recent.add(eid, "expired")
        if self.waiting:
            for _, (_, rec) in self.waiting.expire(now):
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

    def on_event(self, rec) -> None:
        ev = self._decode(rec, decode_event)
        if ev is None:
            return
        eid = ev.id
        if eid in self.pending or self.recent.get(eid) is not None:
            self._dead(rec, f"duplicate event id {eid!r}")
            return
        self._advance(rec.timestamp)
        if self._by is None:
            iv = self.clf.predict_interval_one(ev.x)
        else:  # the event's category, read at decoding (a feature, or a top-level field)
            iv = self.clf.predict_interval_one(ev.x, category=ev.category)
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
        if self._by is None:
            pending = (ev.x, p0, p1, p, score)
        else:
            out["category"] = ev.category
            pending = (ev.x, p0, p1, p, score, ev.category)
        self.send(self.config.predictions_topic, eid.encode(), orjson.dumps(out))
        counts = self.counts
        counts["events"] += 1
        counts["predictions"] += 1
        for old_id, _ in self.pending.put(eid, pending, self.clock):
            counts["expired"] += 1
            self.recent.add(old_id, "expired")
        waiting = self.waiting.pop(eid)
        if waiting is not None:
            self._join(eid, *waiting)

    def on_label(self, rec) -> None:
        lab = self._decode(rec, decode_label)
        if lab is None:
            return
        eid = lab.id
        if eid in self.pending:
            self._advance(rec.timestamp)
            self._join(eid, lab.y, rec)
            return
        if eid in self.waiting:
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
        kept = _Rec(rec.topic, rec.partition, rec.offset, rec.timestamp, rec.key, rec.value)
        for _, (_, old) in self.waiting.put(eid, (lab.y, kept), self.clock):
            self._dead(
                old,
                f"label without event: waiting room full (label_wait_max="
                f"{self.config.label_wait_max})",
            )

    def _join(self, eid: str, y: bool, rec) -> None:
        """Join label ``y`` (from ``rec``) with its pending event: all or nothing. If the
        tracker or the learner refuses, the label becomes a dead letter and the state (the
        pending event included) is left as it was."""
        x, p0, p1, p, score, *category = self.pending.get(eid)  # category: with --by
        if not prediction_in_range(p0, p1, p, score):  # first: the learner cannot be undone
            self._dead(
                rec,
                f"tracker rejected the prediction of {eid!r}: "
                f"p0={p0!r}, p1={p1!r}, p={p!r}, score={score!r}",
            )
            return
        kw = {"category": category[0]} if category else {}
        try:
            self.clf.learn_one(x, y, **kw)
        except Exception as exc:  # noqa: BLE001 - any model error: reject this label only
            self._dead(rec, f"learner rejected the label of {eid!r}: {exc!r}")
            return
        self.tracker.update(p0, p1, y, score=score, p=p, **kw)
        self.pending.pop(eid)
        self.recent.add(eid, "joined")
        self.counts["labels"] += 1
        # Keyed on the label count, not on time, so these lines replay identically.
        if self.counts["labels"] % self.config.metrics_every == 0 and self.on_labels:
            self.on_labels(self)


def check_fingerprint(state: dict, config) -> None:
    """``CheckpointError`` (one line) if ``state`` was made with other settings.

    The fingerprint holds the settings as given (None: not given); the classifier's are
    compared once their defaults are filled in (``ClassifierSettings.given``).
    """
    fingerprint = state.get("fingerprint", {})
    pairs = [(k, fingerprint.get(k), getattr(config, k)) for k in _INPUT_FINGERPRINT]
    try:
        saved = ClassifierSettings.given(**{k: fingerprint.get(k) for k in CLASSIFIER_SETTINGS})
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"checkpoint has invalid classifier settings: {exc}") from None
    now = config.classifier_settings()
    pairs += [(k, getattr(saved, k), getattr(now, k)) for k in CLASSIFIER_SETTINGS]
    for k, written, configured in pairs:
        if written != configured:
            raise CheckpointError(
                f"checkpoint was written with {k}={written!r} but the "
                f"processor is configured with {k}={configured!r}; use another "
                "state directory or the same settings"
            )
