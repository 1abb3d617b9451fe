"""The checkpoint state format, its version, and the upgrades from older versions.

A checkpoint holds one unit of calibration (``streamcal.stream.unit``) as plain data,
``{"version": VERSION, "state": ...}``. The river model is kept as its own pickle;
everything else is dicts, lists, numbers, strings, bytes and numpy arrays, so renaming a
class never breaks a saved state.

Every stateful part has one form: ``part.to_state()`` gives plain data and the
classmethod ``Part.from_state(state, **deps)`` rebuilds it, ``deps`` being keywords for
what is not data (the scoring model, a callable, a converter, the settings):

* stream: ``CalibrationUnit`` (``config=``, ``send=``, ``store=``, ``key=``: its waiting
  entries are in the store), ``Pending`` (its counters; given to the unit as ``state=``);
* learner: ``VennAbersClassifier`` (``by=``, only for a callable ``by``), the modes
  ``PretrainedVennAbers``, ``SimplifiedVennAbers`` and ``VennAbers`` (``model=``),
  ``MondrianVennAbers`` (``model=`` and the classifier's settings), a Mondrian category
  (``owner=``), ``FeatureMatrix``;
* monitoring: ``CalibrationTracker``, ``CategoryBreakdown``;
* core: ``ScoreStore`` (``backend=``).

There is one version for all of it, ``VERSION`` below: the parts carry none of their
own, and the upgrade steps for every layer's parts are here (only reading a version-1
pickle also goes through the ``__setstate__`` of a few classes that 0.1 pickled and that
still load as themselves). ``ScoreStore.to_state()``
has its own ``format`` because the store is also used, pickled and saved on its own,
outside any checkpoint, and ``streamcal.core`` cannot depend on this module; a
checkpoint does not use it (the modes keep their store as its ``(scores, labels)``
arrays), so a change of the store's format never needs a checkpoint upgrade. Versions:

1. streamcal 0.1: a pickle of the processor's objects (``ProcessorState``, private
   classes included), framed with ``checkpoint.MAGIC_V1``.
2. plain data, as above (``unit`` state: see ``CalibrationUnit.to_state``).
3. Mondrian (``--by``): the classifier state has ``by``, ``mondrian``, ``min_category``,
   ``fallback`` and ``max_categories`` (with ``by``, its ``mode_state`` is
   ``MondrianVennAbers.to_state()``: one mode state per category); the tracker state has
   ``categories`` (``CategoryBreakdown.to_state()``); the fingerprint has ``by``,
   ``min_category``, ``fallback`` and ``max_categories``. An upgraded state gets the
   defaults of ``streamcal.learner.settings.ClassifierSettings``.
4. Protection (``--protect``): the classifier state has ``protect`` and ``protection``
   (``streamcal.learner.protection.Protection.to_state()``: each protector); the tracker
   state has ``protected_labels`` and ``protection``; a pending prediction has
   ``category`` and ``p_protected`` after its 5 values when protection is on; the
   fingerprint has ``protect`` and ``alarm_alpha``. An upgraded state has protection off
   and these two as None ("before protection"), which resumes with either setting:
   with ``--protect`` (the default) its protectors start fresh, p is unchanged.
5. Multiclass (``--task multiclass``): the fingerprint has ``task`` and ``scheme`` (the
   scheme in use, None for binary). A multiclass unit's state has the same keys as a
   binary one's, with ``VennAbersMultiClassifier.to_state()`` as its classifier,
   ``MulticlassTracker.to_state()`` as its tracker and ``PendingMulticlass`` tuples as
   its pending predictions (``streamcal.stream.tasks``). An upgraded state is
   binary: ``task`` "binary", ``scheme`` None. The classifier's ``refresh_period`` (the
   refresh schedule in use) is absent from a state written before the multiclass default
   became ``2 * window``: that state resumes with the ``window`` it ran with (no new
   version: the key is optional).
6. Waiting entries on disk: what waits for a partner (``pending``, ``waiting``,
   ``recent``) is in the unit's ``KVStore`` (``streamcal.stream.pending``), committed in
   the same atomic batch as this state, which keeps only ``pending``, the counters and
   sequence numbers of ``Pending.to_state()``; ``counts`` has ``evicted`` and
   ``labels_lost`` (absent from older states: 0); ``checkpoints`` numbers the unit's
   checkpoints (absent: 0). An upgraded state carries its old
   entries as ``legacy`` (``{"pending": [(id, deadline, prediction tuple)], "waiting":
   [(id, deadline, (y, record tuple))], "recent": [(id, status)]}``, oldest first), which
   ``CalibrationUnit.from_state`` puts into the store.
7. The conformal alarm (``--alarm``): the fingerprint has ``alarm`` (the flag; an
   upgraded state has None, "before the alarm's own flag", which resumes with either
   value, ``protect`` deciding as before). A binary classifier's ``protection`` is
   ``Protection.to_state()`` with ``recalibrate``, ``gain`` and ``alarm`` (the alarm's
   ``streamcal.learner.alarm.Alarm.to_state()``: one conformal alarm per category); a
   multiclass classifier has ``alarm_alpha`` and ``alarm``. A version-6 state may carry
   the protection of before the conformal alarm, whose protectors' own test was the
   alarm (``params`` ``{"alpha": ...}``, ``alarm_at``, no ``alarm``): the upgrade keeps
   its protectors as they were (so p_protected is unchanged; the clip ``eps`` they ran
   with, 0.01, stays the one of categories that come later, and their ln S no longer
   restarts at a burn-in, so that the sum of their ln S is what protection gained since
   then) and drops the old alarm. The tracker's reports of it (``protection``, and each
   category's) go too. The unit then gives the classifier a fresh alarm that starts at
   the resume, counting from the unit's label count (``streamcal.stream.tasks``): its
   ``alarm_at`` and ``alarm_onset`` stay on the axis of the metric lines. A version-6
   state written with the conformal alarm already (the same layout as 7) keeps it.
   The label horizon (``--label-horizon``) adds optional keys, no version: the
   fingerprint's ``label_horizon``, ``label_default``, ``late_labels`` (absent: no
   horizon), ``pending``'s ``matured`` cursor (absent: 0) and the counts
   ``labels_late``, ``labels_defaulted``, ``label_delay_warnings`` (absent: 0).

``upgrade`` brings an older state to ``VERSION`` one step at a time and refuses a newer
one with a one-line error. Add a version: bump ``VERSION``, write the step from the
previous one into ``_STEPS``, keep every older step.
"""

from __future__ import annotations

import io
import pickle

import numpy as np

from streamcal.learner.settings import DEFAULT_MAX_CATEGORIES, MONDRIAN_SETTINGS, ClassifierSettings
from streamcal.stream.state.errors import CheckpointError
from streamcal.stream.tasks import LEGACY_TASK

__all__ = ["VERSION", "upgrade", "from_v1"]

VERSION = 7

_STEPS: dict = {}  # version -> function(state) -> the state of version + 1

# What a classifier saved before Mondrian calibration had: none of its settings.
_BEFORE_MONDRIAN = {k: getattr(ClassifierSettings(), k) for k in MONDRIAN_SETTINGS}


def upgrade(doc, where: str):
    """The state in ``doc`` (``{"version": n, "state": ...}``) at the current version."""
    version = doc.get("version") if isinstance(doc, dict) else None
    if not isinstance(version, int) or "state" not in doc:
        raise CheckpointError(f"{where} carries no state format version; refusing it")
    if version > VERSION:
        raise CheckpointError(
            f"{where} has state format version {version}, newer than this streamcal's "
            f"({VERSION}); upgrade streamcal to read it"
        )
    state = doc["state"]
    for v in range(version, VERSION):
        state = _STEPS[v](state)
    return state


# ---------------------------------------------------------------- version 2 -> 3
def _no_categories(
    top_k: int = 10, bins: int = 10, max_categories: int = DEFAULT_MAX_CATEGORIES
) -> dict:
    empty = {"labels": 0, "ones": 0, "p0": 0.0, "p1": 0.0, "log": 0.0, "square": 0.0,
             "bins": [bins, [0] * bins, [0] * bins, [0.0] * bins]}  # fmt: skip
    return {"top_k": top_k, "bins": bins, "max_categories": max_categories, "sums": [],
            "untracked": empty}  # fmt: skip


def _v2_to_v3(state: dict) -> dict:
    """Before Mondrian: no ``by``, no per-category statistics."""
    state = dict(state)
    state["classifier"] = {**_BEFORE_MONDRIAN, "mondrian": False, **state["classifier"]}
    tracker = state["tracker"]
    state["tracker"] = {"categories": _no_categories(bins=tracker["bins"]), **tracker}
    fingerprint = dict.fromkeys(MONDRIAN_SETTINGS)  # not given
    state["fingerprint"] = {**fingerprint, **state["fingerprint"]}
    return state


_STEPS[2] = _v2_to_v3


# ---------------------------------------------------------------- version 3 -> 4
def _v3_to_v4(state: dict) -> dict:
    """Before protection: no protectors, and a fingerprint that binds to neither setting."""
    state = dict(state)
    state["classifier"] = {"protect": False, "protection": None, **state["classifier"]}
    state["tracker"] = {"protected_labels": 0, "protection": None, **state["tracker"]}
    state["fingerprint"] = {"protect": None, "alarm_alpha": None, **state["fingerprint"]}
    return state


_STEPS[3] = _v3_to_v4


# ---------------------------------------------------------------- version 4 -> 5
def _v4_to_v5(state: dict) -> dict:
    """Before multiclass: every state is binary."""
    state = dict(state)
    state["fingerprint"] = {"task": LEGACY_TASK, "scheme": None, **state["fingerprint"]}
    return state


_STEPS[4] = _v4_to_v5


# ---------------------------------------------------------------- version 5 -> 6
def _v5_to_v6(state: dict) -> dict:
    """Before the waiting entries went to the unit's store: they come as ``legacy``, which
    ``CalibrationUnit.from_state`` puts into the store."""
    state = dict(state)
    state["legacy"] = {
        "pending": state.pop("pending")["items"],
        "waiting": state.pop("waiting")["items"],
        "recent": state.pop("recent")["items"],
    }
    state["pending"] = None  # the counters of an empty store (the import adds to them)
    return state


_STEPS[5] = _v5_to_v6


# ---------------------------------------------------------------- version 6 -> 7
_OLD_PROTECTOR_EPS = 0.01  # the protectors' clip before the conformal alarm


def _v6_to_v7(state: dict) -> dict:
    """Before the alarm's own flag; the protection of before the conformal alarm becomes
    protectors only (the unit adds the alarm at the resume)."""
    state = dict(state)
    state["fingerprint"] = {"alarm": None, **state["fingerprint"]}
    prot = state["classifier"].get("protection")
    if prot is None or "alarm" in prot:  # none, or the conformal alarm's layout already
        return state
    params = {k: v for k, v in prot["params"].items() if k not in ("alpha", "burn_in")}
    protectors = [[c, {**p, "burn_in": 0}] for c, p in prot["protectors"]]
    state["classifier"] = {**state["classifier"], "protection": {
        "params": {"eps": _OLD_PROTECTOR_EPS, **params, "burn_in": 0},
        "recalibrate": True,
        "protectors": protectors,
        "given": prot["given"],
        "n": prot["n"],
        "gain": sum(p["log_martingale"] for _, p in protectors),
    }}  # fmt: skip
    tracker = dict(state["tracker"])
    tracker["protection"] = None
    if "categories" in tracker:
        categories = dict(tracker["categories"])
        protected = categories.get("protected", False)
        categories["sums"] = [[c, {**sums, "protection": None}] for c, sums in categories["sums"]]
        categories["untracked"] = {**categories["untracked"], "protection": None}
        categories["alarmed"] = protected  # the rows keep the alarm's fields
        tracker["categories"] = categories
    state["tracker"] = tracker
    return state


_STEPS[6] = _v6_to_v7


# ---------------------------------------------------------------- version 1
class _V1ProcessorState:
    """``streamcal.stream.processor.ProcessorState`` of 0.1: only its attributes matter."""


class _V1WaitingLabel:
    """``streamcal.stream.processor._WaitingLabel`` of 0.1, pickled as (y, record tuple)."""

    def __setstate__(self, state):
        self.y, self.rec = state[0], tuple(state[1])


class _V1Rec(tuple):
    def __new__(cls, *fields):
        return tuple.__new__(cls, fields)


class _V1Slots:
    """A ``__slots__`` class of 0.1 without ``__getstate__``: pickled as (None, slots)."""

    def __setstate__(self, state):
        slots = state[1] if isinstance(state, tuple) else state
        for k, v in slots.items():
            setattr(self, k, v)


class _V1WaitingRoom(_V1Slots):
    """``streamcal.stream.pending.WaitingRoom`` of 0.1-0.5: id -> (deadline, value), in order."""

    def to_state(self) -> dict:
        items = [(k, d, v) for k, (d, v) in self._items.items()]
        return {"ttl": self.ttl, "max_size": self.max_size, "items": items}


class _V1RecentIds(_V1Slots):
    """``streamcal.stream.pending.RecentIds`` of 0.1-0.5: id -> status, in order."""

    def to_state(self) -> dict:
        return {"max_size": self.max_size, "items": list(self._items.items())}


class _V1ScoreStore:
    """``streamcal.core.store.ScoreStore`` of 0.1, pickled as its tie-pooled groups: score
    ``t``, count ``w`` and count of ones ``s`` (read here, whatever the store becomes)."""

    def __setstate__(self, state):
        self.t = np.asarray(state["t"], dtype=np.float64)
        self.w = np.asarray(state["w"], dtype=np.int64)
        self.s = np.asarray(state["s"], dtype=np.int64)

    def to_arrays(self):
        scores = np.repeat(self.t, self.w)
        labels = np.repeat(np.tile(np.array([0, 1], np.int64), len(self.w)),
                           np.column_stack([self.w - self.s, self.s]).ravel())  # fmt: skip
        return scores, labels


_V1_CLASSES = {
    ("streamcal.stream.processor", "ProcessorState"): _V1ProcessorState,
    ("streamcal.stream.processor", "_WaitingLabel"): _V1WaitingLabel,
    ("streamcal.stream.processor", "_Rec"): _V1Rec,
    ("streamcal.core.store", "ScoreStore"): _V1ScoreStore,
    ("streamcal.stream.pending", "WaitingRoom"): _V1WaitingRoom,
    ("streamcal.stream.pending", "RecentIds"): _V1RecentIds,
}


class _V1Unpickler(pickle.Unpickler):
    def find_class(self, module, name):
        cls = _V1_CLASSES.get((module, name))
        return cls if cls is not None else super().find_class(module, name)


def from_v1(payload: bytes) -> dict:
    """A version-1 checkpoint's payload (authenticated) as ``{"version", "state"}``.

    The classes that 0.1 pickled and that have changed since are read through the
    stand-ins above; the learner's and the monitoring's objects still load as
    themselves and give their current ``to_state()``, so the result has the current
    version.
    """
    old = _V1Unpickler(io.BytesIO(payload)).load()
    if not isinstance(old, _V1ProcessorState):
        raise CheckpointError("the checkpoint does not hold a streamcal processor state")
    # a 0.1 classifier predates Mondrian calibration: give it the settings' defaults
    for k, v in _BEFORE_MONDRIAN.items():
        old.clf.__dict__.setdefault(k, v)
    waiting = old.waiting.to_state()
    waiting["items"] = [(k, d, (v.y, tuple(v.rec))) for k, d, v in waiting["items"]]
    state = {
        "unit": None,
        "fingerprint": dict(old.fingerprint),
        "streamcal_version": old.version,
        "classifier": old.clf.to_state(),
        "tracker": old.tracker.to_state(),
        "pending": old.pending.to_state(),
        "waiting": waiting,
        "recent": old.recent.to_state(),
        "counts": dict(old.counts),
        "offsets": [(t, p, o) for (t, p), o in old.offsets.items()],
        "clock": old.clock,
    }
    return {"version": 5, "state": state}  # upgraded from 5 on by ``upgrade``
