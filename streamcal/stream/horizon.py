"""Label maturity in the processor (``--label-horizon``): labels learned in event order.

When a label's delay depends on its outcome (a chargeback comes in days, "no chargeback"
never comes as a message), the labels that have arrived at any moment over-represent the
quick class: a model and a calibration set fed in arrival order are biased, and the
labelled stream is not exchangeable, so the alarm fires on a stream that did not drift.
With a horizon H, an event's label, whenever it came, is joined only once the event is
H old in record time, in event order: the matured stream is the event stream delayed by
H, exchangeable whenever the events are. An event without a label at H gets
``--label-default`` if given (joined as a label, counted in ``labels_defaulted``), else it
expires. A label that comes after its event matured is counted in ``labels_late`` and
dead-lettered (``--late-labels dead-letter``, the default: learning it late would bring
the outcome-dependent order back), or, with ``--late-labels learn`` and no default, the
unlabelled event waits until ``--pending-ttl`` and its label is joined when it comes.

The waiting events stay in ``Pending``'s store (on disk, within ``--pending-max-bytes``):
a label for a waiting event is attached to its entry, and the events' sequence, ordered
by deadline = maturity, gives the order in which they mature.

Without a horizon, ``DelayWatch`` feeds each joined label's delay (record time) to
``LabelDelays`` and logs once when the delays look outcome-dependent.
"""

from __future__ import annotations

import logging
import math

import orjson

from streamcal.learner.label_delays import LabelDelays
from streamcal.stream.pending import ATTACHED, DEFAULTED, EVENT, EXPIRED, JOINED, split
from streamcal.stream.records import Rec, pack_label, unpack_label
from streamcal.stream.tasks import task_of

__all__ = ["DelayWatch", "LabelHorizon", "check_horizon", "check_late_labels", "check_settings"]

log = logging.getLogger(__name__)

LATE_LABELS = ("dead-letter", "learn")


def check_horizon(h: float) -> None:
    """``--label-horizon``'s own constraint (``ValueError`` naming the flag)."""
    if not math.isfinite(h) or h <= 0:
        raise ValueError(
            f"label_horizon (--label-horizon) must be a positive duration (e.g. 30s, 2h, "
            f"7d), got {h!r}"
        )


def check_late_labels(value: str) -> None:
    """``--late-labels``' own constraint (``ValueError`` naming the flag)."""
    if value not in LATE_LABELS:
        raise ValueError(
            f"late_labels (--late-labels) must be one of {', '.join(LATE_LABELS)}, got {value!r}"
        )


def check_settings(config) -> None:
    """``ValueError`` (one line naming the flag, the value and the fix) for
    ``--label-horizon``, ``--label-default`` and ``--late-labels`` settings of ``config``
    that do not go together (each one's own constraint is checked before)."""
    h = config.label_horizon
    if h is None:
        for name, off in (("label_default", None), ("late_labels", "dead-letter")):
            if getattr(config, name) != off:
                flag = "--" + name.replace("_", "-")
                raise ValueError(f"{name} ({flag}) needs --label-horizon")
        return
    if h > config.pending_ttl:
        raise ValueError(
            f"label_horizon (--label-horizon) is {h:g} s, longer than pending_ttl "
            f"(--pending-ttl) {config.pending_ttl:g} s, the longest an event waits for its "
            f"label: give --pending-ttl at least {h:g}"
        )
    if config.label_default is None:
        return
    if config.late_labels == "learn":
        raise ValueError(
            "late_labels (--late-labels) learn takes no --label-default: with a default the "
            "label of an event is settled at the horizon (a later one is dead-lettered)"
        )
    default_label(config)


def default_label(config):
    """``--label-default`` as the task's label (binary: a bool; multiclass: the class)."""
    text = config.label_default
    return None if text is None else task_of(config).default_label(text)


class LabelHorizon:
    """The unit's side of the horizon (see the module docstring); ``Pending`` keeps the
    entries. Each method takes the unit whose join, counts and dead letters it uses."""

    def __init__(self, config):
        self.horizon = config.label_horizon
        self.default = default_label(config)
        self.learn_late = config.late_labels == "learn"

    @staticmethod
    def pending_settings(config) -> dict:
        """``Pending``'s horizon settings: an unlabelled event left waiting at its maturity
        (``--late-labels learn``, no default) expires at ``--pending-ttl``."""
        h = config.label_horizon
        if h is None:
            return {}
        keep = config.late_labels == "learn" and config.label_default is None
        return {"horizon": h, "keep": config.pending_ttl - h if keep else 0.0}

    def mature(self, unit, now: float) -> bool:
        """Join, in event order, the labels (or the default) of the events that matured at
        clock ``now``; without either an event expires, or waits for a late label."""
        pending, counts = unit.pending, unit.counts
        matured = pending.mature(now)
        for eid, seq, kind, stored in matured:
            payload, label = split(kind, stored)
            if label is not None:
                y, rec = unpack_label(label)
            elif self.default is not None:
                y, rec = self.default, self._default_record(unit, eid, now)
            elif self.learn_late:
                continue  # waits until --pending-ttl for a late label
            else:
                pending.take_event(eid, seq, stored, EXPIRED)
                counts["expired"] += 1
                continue
            if unit._join(eid, unit.task.unpack(payload), y, rec):
                status = JOINED if label is not None else DEFAULTED
                counts["labels_defaulted"] += status == DEFAULTED
            else:  # refused (dead-lettered): the event leaves without a label
                status = EXPIRED
                counts["expired"] += 1
            pending.take_event(eid, seq, stored, status)
        return bool(matured)

    def _default_record(self, unit, eid: str, now: float) -> Rec:
        """What a dead letter of a default label names: the labels topic, no offset."""
        value = orjson.dumps({"id": eid, "label": self.default, "default": True})
        partition = -1 if unit.unit is None else unit.unit
        return Rec(unit.config.labels_topic, partition, -1, int(now * 1000), eid.encode(), value)

    def wait_event(self, unit, eid: str, pred, label: bytes | None) -> None:
        """Let the predicted event ``eid`` wait for its horizon, with the ``label`` that
        came before it (packed) if any."""
        evicted = unit.pending.wait_event(eid, unit.task.pack(pred, unit.clock), unit.clock,
                                         label=label)
        self._evicted(unit, evicted)

    def on_label(self, unit, rec, lab, kind: int, payload, seq: int) -> bool:
        """Handle a label whose id is a waiting event (attach it, or join it late), one
        that matured, or one with a label attached; False for the other kinds (the unit's
        usual handling: a label waits for its event, duplicates, bounds)."""
        pending, eid = unit.pending, lab.id
        if kind == EVENT and unit._advance(rec.timestamp):
            kind, payload, seq = pending.lookup(eid)  # it may have matured just now
        if kind == EVENT and not pending.is_matured(seq):
            self._evicted(unit, pending.attach(eid, seq, payload, pack_label(lab.y, rec)))
            return True
        if kind == EVENT:  # matured, left waiting for a late label (--late-labels learn)
            unit.counts["labels_late"] += 1
            if unit._join(eid, unit.task.unpack(payload), lab.y, rec):
                pending.take_event(eid, seq, payload)
            return True
        h = f"label_horizon={self.horizon:g} s"
        if kind == ATTACHED:
            unit._dead(rec, f"duplicate label for {eid!r} (a label waits for the horizon)")
        elif kind == DEFAULTED:
            unit.counts["labels_late"] += 1
            unit._dead(rec, f"label for {eid!r} came after its event matured and was given "
                       f"the default label {self.default!r} ({h}); not learned")  # fmt: skip
        elif kind == EXPIRED:
            unit.counts["labels_late"] += 1
            why = (f"expired (pending_ttl={unit.config.pending_ttl:g} s)" if self.learn_late
                   else f"matured without a label ({h}, late_labels=dead-letter: learning "
                   "it now would bring back the outcome-dependent order the horizon "
                   "removes)")  # fmt: skip
            unit._dead(rec, f"label for {eid!r} came after its event {why}")
        else:
            return False
        return True

    @staticmethod
    def _evicted(unit, evicted: list) -> None:
        """Count the events a bound pushed out, and dead-letter their attached labels."""
        unit.counts["evicted"] += len(evicted)
        for _, label in unit.pending.lost_labels():
            unit.counts["labels_lost"] += 1
            unit._dead(unpack_label(label)[1], "label pushed out with its event by a waiting "
                       f"bound before the horizon ({unit._event_bounds()})")  # fmt: skip


class DelayWatch:
    """Without a horizon: each joined label's delay in record time, to ``LabelDelays``;
    its warning is logged once. Looks at the first ``limit`` labels of a unit (a store
    read each, about 30 µs at 10^5 waiting): outcome-dependent delays are a property of
    the source, there from its first labels."""

    def __init__(self, unit_name: str, limit: int = 20_000):
        self.unit_name = unit_name
        self.left = limit  # labels it will still look at
        self.delays = LabelDelays(
            unit="s", advice="run with --label-horizon (about the delays' high quantile) "
            "and, if negatives never come as labels, --label-default 0 (docs/processor.md)",
        )  # fmt: skip

    @property
    def said(self) -> bool:
        return self.delays.said

    @property
    def watching(self) -> bool:
        return self.left > 0 and not self.delays.said

    def add(self, y, delay: float) -> bool:
        """Count one label's ``delay`` (s); True if it made the warning."""
        self.left -= 1
        text = self.delays.add(y, delay)
        if text is None:
            return False
        log.warning("unit %s: %s", self.unit_name, text,
                    extra={"event": "label_delays", "unit": self.unit_name})  # fmt: skip
        return True
