"""A unit of calibration: one Venn-Abers classifier with everything its joins need.

With ``--scope global`` the processor has one unit fed by every partition of both
topics; with ``--scope partition`` one unit per partition number p, fed by partition p
of the events and partition p of the labels (co-partitioned topics: the same event id
lands in the same partition of both). A partition of a keyed stream is a random
subsample of it, so each unit is a Venn predictor on its own, valid as the global one
is; the price is that each unit's model and calibration set see 1/P of the labels.

One flow for every task (the task, ``streamcal.stream.tasks``, supplies its parts). Per
event: decode, predict, send the prediction, and keep what the join needs until the label
comes (``pending``, on disk: ``streamcal.stream.pending``); a label that came first is
joined at once. Per label: decode, join with its waiting event (or wait for it), record
the loss of the prediction that was made (the tracker), let the model learn. Anything that
cannot be processed is sent to the dead-letter topic with its original bytes and a
reason, and leaves the state untouched. An object the model could not learn without
breaking (``streamcal.learner.guard``: its learning was undone) is a dead letter too, of
its label's record: the label just joined (modes "sva" and "va": refused as a whole), or,
in the default mode, whose model learns an object at a later refresh, one joined
earlier, found among the records of the labels joined last (``_recent``; one joined
before a restart, or too long ago, has a dead letter holding its object instead).

The unit only sends: the processor owns the clients, the order records come in
(``streamcal.stream.kafka.ordering``) and the checkpoints. The walk of a record goes one
way: the processor hands it to ``handle``, which returns whether a metric line is due;
the unit calls nothing of the processor.

The state is in two parts that are committed together (``streamcal.stream.state.units``):
the waiting entries in the unit's ``KVStore``, and the small rest as plain data
(``to_state`` / ``from_state``: the classifier, the tracker, counters, offsets, clock;
the format and its versions are in ``streamcal.stream.state.migrations``), bound to the
settings in ``FINGERPRINT`` (``streamcal.stream.state.fingerprint``).
"""

from __future__ import annotations

from collections import deque
from enum import IntEnum

import orjson

import streamcal
from streamcal.learner.guard import SNAPSHOT_PERIOD
from streamcal.monitoring.histogram import DELAY_BOUNDS, Histogram
from streamcal.stream.bounds import size_text
from streamcal.stream.deadletter import dead_letter
from streamcal.stream.horizon import DelayWatch, LabelHorizon
from streamcal.stream.intake import Reject, decode
from streamcal.stream.kafka import fingerprints
from streamcal.stream.messages import Fields
from streamcal.stream.packing import FeatureCodec
from streamcal.stream.pending import (
    ABSENT,
    DEFAULTED,
    EVENT,
    EVICTED,
    EXPIRED,
    JOINED,
    LABEL,
    Pending,
)
from streamcal.stream.records import Rec as _Rec
from streamcal.stream.records import pack_label as _pack_label
from streamcal.stream.records import unpack_label as _unpack_label
from streamcal.stream.state.fingerprint import FINGERPRINT, check_fingerprint, fingerprint_of
from streamcal.stream.state.kv import KVStore
from streamcal.stream.tasks import task_of

__all__ = [
    "CalibrationUnit",
    "FINGERPRINT",
    "GLOBAL_UNIT",
    "TopicRank",
]

# The id of the unit of ``--scope global`` (a partition unit's id is its partition
# number). None, as checkpoints have always written it.
GLOBAL_UNIT = None


class TopicRank(IntEnum):
    """Which input a record comes from; at equal timestamps an event goes before a label
    (the rank is part of the merge order, ``streamcal.stream.kafka.ordering``)."""

    EVENT = 0
    LABEL = 1


_EVENT = TopicRank.EVENT  # looked up once: compared per record
_COUNTS = ("events", "labels", "predictions", "expired", "evicted", "labels_lost",
           "dead_letters", "rejected_state_records", "labels_late",
           "labels_defaulted", "label_delay_warnings")  # fmt: skip

# The names of the finished kinds in plain data (``export_waiting``'s ``recent``).
_STATUS = {JOINED: "joined", EXPIRED: "expired", EVICTED: "evicted", DEFAULTED: "defaulted"}


class CalibrationUnit:
    """The state of one unit and its join/learn logic (see the module docstring).

    ``unit`` is ``GLOBAL_UNIT`` for the global unit, else the partition number.
    ``send(topic, key, value)`` (the outbox's) delivers predictions and dead letters.
    ``store`` holds the waiting entries (default: a new store in a temporary directory);
    with ``key`` each of them is authenticated.
    """

    def __init__(self, config, unit: int | None = GLOBAL_UNIT, send=None,
                 store: KVStore | None = None, key: bytes | None = None, state=None):  # fmt: skip
        self.config = config
        self.unit = unit
        self.store = KVStore() if store is None else store
        self.task = task = task_of(config)(config, FeatureCodec(self.store))
        self._protect = task.protect  # None: off
        self.clf = task.new_classifier()
        self.clf.warn_unlearned = False  # its reports become dead letters (_unlearned)
        self.clf.watch_delays = False  # the unit watches label delays in record time
        # (id, record) of the labels given to the learner last, newest last: the records
        # of the labels whose objects it may still refuse to learn (see _unlearned)
        self._recent: deque = deque(maxlen=_recent_size(config, task.name))
        self.tracker = self._new_tracker(config)
        self.pending = Pending(
            self.store,
            ttl=config.pending_ttl,
            label_ttl=config.label_wait,
            max_bytes=config.pending_max_bytes,
            label_max_bytes=config.label_wait_max_bytes,
            max_events=config.pending_max,
            max_labels=config.label_wait_max,
            dedupe_window=config.dedupe_window,
            key=key,
            state=state,
            **LabelHorizon.pending_settings(config),
        )
        # None without --label-horizon; then the delays are watched instead
        self.horizon = None if config.label_horizon is None else LabelHorizon(config)
        name = "global" if unit is GLOBAL_UNIT else str(unit)
        self._delays = DelayWatch(name) if self.horizon is None else None
        self.counts = dict.fromkeys(_COUNTS, 0)
        self.label_delays = Histogram(DELAY_BOUNDS)  # of the labels joined (record time)
        self.offsets: dict[tuple[str, int], int] = {}  # next offset to process
        self.last_read: dict = {}  # (topic, partition) -> last record handled (fingerprints)
        self.clock = float("-inf")  # the largest record timestamp seen (s)
        self.fingerprint = fingerprint_of(config)
        self.version = streamcal.__version__  # of the streamcal that started this state
        self.send = send
        self._fields = Fields.of(config)
        self._version = streamcal.__version__
        self.checkpoints = 0  # checkpoints taken of this unit (numbers them)

    @classmethod
    def _new_tracker(cls, config):
        return task_of(config).tracker_class()(
            window=config.tracker_window,
            bins=config.tracker_bins,
            top_k=config.top_k,
            max_categories=config.classifier_settings().max_categories,
        )

    def close(self) -> None:
        """Close the store (uncommitted changes are dropped; a temporary store is removed)."""
        self.store.close()

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict:
        """The unit but its waiting entries (in the store) as plain data (see
        ``streamcal.stream.state.migrations``)."""
        self.task.report(self.clf, self.tracker, self.counts["labels"])
        classifier = self.clf.to_state()  # checks the model first: a broken one is not saved
        if self.clf.unlearned:
            self._unlearned()
        return {
            "unit": self.unit,
            "fingerprint": dict(self.fingerprint),
            "streamcal_version": self.version,
            "classifier": classifier,
            "tracker": self.tracker.to_state(),
            "pending": self.pending.to_state(),
            "counts": dict(self.counts),
            "label_delays": self.label_delays.to_line(),
            "offsets": [(t, p, o) for (t, p), o in self.offsets.items()],
            "read": fingerprints.rows(self.last_read),  # optional: absent from older states
            "clock": self.clock,
            "checkpoints": self.checkpoints,
        }

    @classmethod
    def from_state(cls, state: dict, *, config, send=None, store: KVStore | None = None,
                   key: bytes | None = None) -> CalibrationUnit:  # fmt: skip
        """The unit ``to_state`` described, its waiting entries in ``store``;
        ``CheckpointError`` if it was made with other settings (``FINGERPRINT``) than
        ``config``'s (a state of another task included)."""
        check_fingerprint(state, config)
        self = cls(config, state["unit"], send=send, store=store, key=key,
                   state=state["pending"])  # fmt: skip
        self.clf = self.task.classifier_from_state(state["classifier"])
        self.clf.warn_unlearned = False
        self.clf.watch_delays = False
        self.tracker = self.task.tracker_class().from_state(state["tracker"])
        self.counts.update(state["counts"])
        self.label_delays = Histogram(DELAY_BOUNDS, state.get("label_delays"))  # older: none
        self.offsets = {(t, p): o for t, p, o in state["offsets"]}
        self.last_read = fingerprints.marks(state.get("read", ()))
        self.clock = state["clock"]
        self.version = state["streamcal_version"]
        self.checkpoints = state["checkpoints"]
        if self._delays is not None and self.counts["label_delay_warnings"]:
            self._delays.left = 0  # it spoke before the restart: said once per unit
        return self

    def export_waiting(self) -> dict:
        """Every waiting entry and finished id as plain data (reads them all: for exports
        and tests; it has no place for the labels attached to events with a horizon,
        which it leaves out): pending ``(id, deadline, prediction tuple)``, waiting ``(id,
        deadline, (y, record tuple))``, recent ``(id, status)``."""
        task, pending = self.task, self.pending
        labels = []
        for eid, deadline, payload in pending.waiting(LABEL):
            y, rec = _unpack_label(payload)
            labels.append((eid, deadline, (y, tuple(rec))))
        return {
            "pending": [(eid, d, tuple(task.unpack(v))) for eid, d, v in pending.waiting(EVENT)],
            "waiting": labels,
            "recent": [(eid, _STATUS[kind]) for eid, kind in pending.finished_ids()],
        }

    def snapshot(self) -> dict:
        """What a metric line takes from the unit (by name, see ``streamcal.stream.metrics``):
        the counts, the tracker's snapshot, the sizes of what waits."""
        values = dict(self.counts)
        self.task.report(self.clf, self.tracker, self.counts["labels"])
        # With the reliability bins on every line (2.4 KB instead of 0.5 KB of JSON with 10
        # bins, +6 µs per line, one line per metrics_every labels) so that `streamcal
        # report` can draw reliability diagrams from any metric log, even a cut-off one.
        values.update(self.tracker.snapshot(reliability=True))
        pending = self.pending
        values.update(
            pending=pending.events,
            pending_bytes=pending.event_bytes,
            waiting_labels=pending.labels,
            waiting_label_bytes=pending.label_bytes,
            calibration_size=self.clf.calibration_size,
            label_delay_seconds=self.label_delays.to_line(),
        )
        return values

    def category_snapshots(self) -> list[dict]:
        """The rows of the per-category metric lines (with ``--by``)."""
        return self.tracker.category_snapshots()

    def class_snapshots(self) -> list[dict]:
        """The per-class lines of a multiclass unit (``MulticlassTracker.class_snapshots``)."""
        return self.tracker.class_snapshots()

    @classmethod
    def empty_snapshot(cls, config) -> dict:
        """``snapshot()`` of a unit that has seen nothing, without making one (no model)."""
        values = dict.fromkeys(_COUNTS, 0)
        values.update(cls._new_tracker(config).snapshot(reliability=True))
        values.update(pending=0, pending_bytes=0, waiting_labels=0, waiting_label_bytes=0,
                      calibration_size=0,
                      label_delay_seconds=Histogram(DELAY_BOUNDS).to_line())  # fmt: skip
        return values

    # ------------------------------------------------------------------ per record
    def handle(self, rank: TopicRank, rec, message=None) -> bool:
        """Process one input record (``message``: decoded already, ``streamcal.stream.intake``)
        and move past it (``offsets``); True when a metric line is due: the label count has
        just reached or passed a multiple of ``metrics_every`` (so metric lines are keyed on
        the input and replay identically)."""
        labels = self.counts["labels"]
        if rank == _EVENT:
            self.on_event(rec, message)
        else:
            self.on_label(rec, message)
        key = (rec.topic, rec.partition)
        self.offsets[key] = rec.offset + 1
        self.last_read[key] = rec
        every = self.config.metrics_every  # with a horizon a record may join many labels
        return self.counts["labels"] // every != labels // every

    def handle_batch(self, items: list, before=None, due=None) -> None:
        """``handle`` each ``(rank, record)`` of ``items`` (this unit's, in merge order), as
        one by one: decoded together first, the ids' waiting entries read from the store
        in one look-up, then each record in turn, ``before(record)`` first (if given) and
        ``due(self)`` after it when a metric line is due."""
        task, fields = self.task, self._fields
        decoders = (task.event_decoder, task.label_decoder)
        messages = [decode(rec, decoders[rank], fields) for rank, rec in items]
        self.pending.prefetch([m.id for m in messages if m.__class__ is not Reject])
        handle = self.handle
        for (rank, rec), message in zip(items, messages, strict=True):
            if before is not None:
                before(rec)
            if handle(rank, rec, message) and due is not None:
                due(self)

    def _dead(self, rec, reason: str, value=None) -> None:
        self.counts["dead_letters"] += 1
        value = rec.value if value is None else value
        letter = dead_letter(value, rec.key, rec.topic, rec.partition, rec.offset, rec.timestamp,
                             reason, self._version)  # fmt: skip
        self.send(self.config.dead_letter_topic, rec.key, letter)

    def _advance(self, ts_ms: int) -> bool:
        """Move the record-time clock to ``ts_ms`` (if later) and expire what waited past
        its deadline; True if anything expired."""
        now = ts_ms / 1000.0
        if now <= self.clock:
            return False
        self.clock = now
        matured = self.horizon is not None and self.horizon.mature(self, now)
        events, labels = self.pending.expire(now)
        if events:
            self.counts["expired"] += len(events)
        for _, payload in labels:
            self._dead(
                _unpack_label(payload)[1],
                f"label without event: no event with this id within "
                f"label_wait={self.config.label_wait:g} s",
            )
        return bool(matured or events or labels)

    def _decoded(self, rec, decoder, message):
        """``message`` (decoded already), else ``rec`` decoded; None once a record that
        cannot be processed is dead-lettered."""
        if message is None:
            message = decode(rec, decoder, self._fields)
        if message.__class__ is Reject:
            self._dead(rec, message.reason)
            return None
        return message

    def on_event(self, rec, message=None) -> None:
        """Predict an event (``message``: decoded already), then join the label that came
        before it or keep what the join needs until its label comes."""
        task = self.task
        ev = self._decoded(rec, task.event_decoder, message)
        if ev is None:
            return
        eid = ev.id
        pending = self.pending
        kind, payload, seq = pending.lookup(eid)
        if kind != ABSENT and kind != LABEL:
            self._dead(rec, f"duplicate event id {eid!r}")
            return
        try:
            out, pred = task.predict(self.clf, ev)
        except Exception as exc:  # noqa: BLE001 - e.g. score:FIELD without the field
            self._dead(rec, f"model could not score event {eid!r}: {exc}")
            return
        if self._advance(rec.timestamp) and kind == LABEL:
            kind, payload, seq = pending.lookup(eid)  # the early label may have expired
        self.send(self.config.predictions_topic, eid.encode(), orjson.dumps(out))
        counts = self.counts
        counts["events"] += 1
        counts["predictions"] += 1
        if self.horizon is not None:  # it waits for its horizon, with a label come first
            if kind == LABEL:
                pending.take_label(eid, seq, payload)
            self.horizon.wait_event(self, eid, pred, payload if kind == LABEL else None)
            return
        if kind == LABEL:
            y, label_rec = _unpack_label(payload)
            if self._join(eid, pred._replace(time=self.clock), y, label_rec):
                self._watch_delay(y)
                pending.take_label(eid, seq, payload)
                pending.finish(eid, JOINED)
                return
            # The label was refused (dead-lettered): it leaves, the event waits.
            pending.take_label(eid, seq, payload)
        counts["evicted"] += len(pending.wait_event(eid, task.pack(pred, self.clock), self.clock))

    def on_label(self, rec, message=None) -> None:
        """Join a label (``message``: decoded already) with its event, or keep it until
        the event comes."""
        lab = self._decoded(rec, self.task.label_decoder, message)
        if lab is None:
            return
        eid = lab.id
        pending = self.pending
        kind, payload, seq = pending.lookup(eid)
        if self.horizon is not None and self.horizon.on_label(self, rec, lab, kind, payload,
                                                              seq):  # fmt: skip
            return
        if kind == EVENT:
            if self._advance(rec.timestamp):
                kind, payload, seq = pending.lookup(eid)  # it may have expired just now
            if kind == EVENT:
                if self._join(eid, self.task.unpack(payload), lab.y, rec):
                    self._watch_delay(lab.y, rec.timestamp, seq)
                    pending.take_event(eid, seq, payload)
                return
        if kind == LABEL:
            self._dead(rec, f"duplicate label for {eid!r} (a label is already waiting)")
            return
        if kind == JOINED:
            self._dead(rec, f"duplicate label for {eid!r} (already joined)")
            return
        if kind == EXPIRED:
            self._dead(
                rec, f"label for {eid!r} came after its event expired "
                f"(pending_ttl={self.config.pending_ttl:g} s)",
            )  # fmt: skip
            return
        if kind == EVICTED:
            self.counts["labels_lost"] += 1
            self._dead(
                rec, f"label for {eid!r} came after its event was pushed out by a waiting "
                f"bound ({self._event_bounds()})",
            )  # fmt: skip
            return
        self._advance(rec.timestamp)
        lost = pending.wait_label(eid, _pack_label(lab.y, rec), self.clock)
        for _, old in lost:
            self.counts["labels_lost"] += 1
            self._dead(
                _unpack_label(old)[1],
                f"label without event: pushed out by a waiting bound ({self._label_bounds()})",
            )

    def _watch_delay(self, y, ts_ms: int | None = None, seq: int = -1) -> None:
        """Without a horizon, give the watch the delay of a label just joined to the
        waiting event ``seq`` (none: the label came first, no delay)."""
        watch = self._delays
        if watch is not None and watch.watching:
            delay = 0.0 if ts_ms is None else ts_ms / 1000 - self.pending.event_time(seq)
            self.counts["label_delay_warnings"] += watch.add(y, delay)

    def _event_bounds(self) -> str:
        cfg = self.config
        out = f"pending_max_bytes={size_text(cfg.pending_max_bytes)}"
        return out if cfg.pending_max is None else f"{out}, pending_max={cfg.pending_max}"

    def _label_bounds(self) -> str:
        cfg = self.config
        out = f"label_wait_max_bytes={size_text(cfg.label_wait_max_bytes)}"
        return out if cfg.label_wait_max is None else f"{out}, label_wait_max={cfg.label_wait_max}"

    def _join(self, eid: str, pred, y, rec) -> bool:
        """Join label ``y`` (from ``rec``) with its prediction ``pred``: all or nothing. If
        the task, the learner or the tracker refuses, the label becomes a dead letter, the
        state is left as it was and False is returned (the caller keeps what waits)."""
        task = self.task
        clf = self.clf
        reason = task.refuse(clf, pred, y, eid)  # first: learning is not undone
        if reason is not None:
            self._dead(rec, reason)
            return False
        try:
            task.learn(clf, pred, y)
        except Exception as exc:  # noqa: BLE001 - any model error: reject this label only
            self._dead(rec, f"learner rejected the label of {eid!r}: {exc!r}")
            return False
        if type(rec) is not _Rec:  # a client's record: only what a dead letter needs
            rec = tuple.__new__(_Rec, (rec.topic, rec.partition, rec.offset, rec.timestamp,
                                       rec.key, rec.value, ()))  # fmt: skip
        self._recent.append((eid, rec))
        if clf.unlearned and self._unlearned():
            return False  # refused as a whole (its dead letter is sent): nothing to track
        task.track(clf, self.tracker, pred, y)
        self.counts["labels"] += 1
        if pred.time is not None and rec.timestamp is not None:
            self.label_delays.observe(rec.timestamp / 1000 - pred.time)
        return True

    def _unlearned(self) -> bool:
        """A dead letter for each object the learner reports it did not learn (its
        learning was undone: ``streamcal.learner.guard``), of its label's record when the
        label is among the last ones given to it; True if the label just given was
        refused as a whole (then it is not tracked, as a label the learner raised for)."""
        clf, recent = self.clf, self._recent
        refused = False
        for r in list(clf.unlearned):
            entry = recent[-1 - r.labels_ago] if r.labels_ago < len(recent) else None
            undone = "undone, the model is as it was"
            if r.taken:
                undone += " (the label was joined: the tracker and the calibration set have it)"
            what = f"learning its object {r.why}; {undone}"
            if entry is None:  # joined before a restart, or too long ago to be kept
                who = f"an earlier event ({r.labels_ago} labels ago)"
                self._dead_object(r, f"model could not learn the label of {who}: {what}")
            else:
                self._dead(entry[1], f"model could not learn the label of {entry[0]!r}: {what}")
            refused = refused or r.refused
        clf.unlearned.clear()
        return refused

    def _dead_object(self, r, reason: str) -> None:
        """The dead letter of an object whose label's record is not at hand: its features
        and label as the value, the labels topic as the source (partition and offset -1)."""
        value = orjson.dumps({"features": r.x, "label": r.y}, option=orjson.OPT_NON_STR_KEYS,
                             default=repr)  # fmt: skip
        partition = -1 if self.unit is GLOBAL_UNIT else self.unit
        self._dead(_Rec(self.config.labels_topic, partition, -1, None, None, value), reason)


def _recent_size(config, task: str) -> int:
    """How many joined labels' records a unit keeps for the learner's later reports: the
    default mode learns an object at most ``window + refresh`` labels after it came (with
    ``--by`` a category's may wait longer: its dead letter then holds the object); the
    others report within ``SNAPSHOT_PERIOD`` labels. About 0.4 KB a record."""
    s = config.classifier_settings()
    if s.mode != "pretrained":
        return SNAPSHOT_PERIOD + 1
    return s.window + s.refresh_period_for(task) + 1
