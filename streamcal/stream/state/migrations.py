"""The checkpoint state format, its version, and the upgrades from older versions (none
yet: the first release's format is the only one read).

A checkpoint holds one unit of calibration (``streamcal.stream.unit``) as plain data,
``{"version": VERSION, "state": ...}``. The river model is kept as its own pickle;
everything else is dicts, lists, numbers, strings, bytes and numpy arrays, so renaming a
class never breaks a saved state.

Every stateful part has one form: ``part.to_state()`` gives plain data and the
classmethod ``Part.from_state(state, **deps)`` rebuilds it, ``deps`` being keywords for
what is not data (the scoring model, a callable, a converter, the settings):

* stream: ``CalibrationUnit`` (``config=``, ``send=``, ``store=``, ``key=``: its waiting
  entries are in the unit's ``KVStore``, committed in the same atomic batch as this
  state), ``Pending`` (its counters and sequence numbers; given to the unit as
  ``state=``);
* learner: ``VennAbersClassifier`` and ``VennAbersMultiClassifier`` (``by=``, only for a
  callable ``by``), the modes ``PretrainedVennAbers``, ``SimplifiedVennAbers`` and
  ``VennAbers`` (``model=``), ``MondrianVennAbers`` (``model=`` and the classifier's
  settings), a Mondrian category (``owner=``), ``FeatureMatrix``, ``Protection`` and its
  alarm;
* monitoring: ``CalibrationTracker``, ``MulticlassTracker``, ``CategoryBreakdown``;
* core: ``ScoreStore`` (``backend=``).

A unit's state has ``unit``, ``fingerprint`` (the settings it binds: a resume with other
ones is refused), ``streamcal_version``, ``classifier``, ``tracker``, ``pending``,
``counts``, ``offsets``, ``clock`` and ``checkpoints`` (the unit's checkpoint count).
There is one version for all of it, ``VERSION`` below: the parts carry none of their
own. ``ScoreStore.to_state()`` has its own ``format`` because the store is also used,
pickled and saved on its own, outside any checkpoint, and ``streamcal.core`` cannot
depend on this module; a checkpoint does not use it (the modes keep their store as its
``(scores, labels)`` arrays), so a change of the store's format never needs a checkpoint
upgrade.

Version 7 is the first release's, the one format. Versions 1 to 6 (and the framing of
version 1, ``STREAMCAL-CHECKPOINT v1``) were written by development versions before
the first release, which no user holds: they are refused with one line, as a newer
version is. Add a version: bump ``VERSION`` and write the step from the previous one
into ``_STEPS`` (``version -> function(state) -> the state of version + 1``); keep the
steps of every version a release wrote.

>>> upgrade({"version": VERSION, "state": {"unit": None}}, "here")
{'unit': None}
>>> upgrade({"version": 6, "state": {}}, "checkpoint 'c'")
Traceback (most recent call last):
...
streamcal.stream.state.errors.CheckpointError: checkpoint 'c' has state format version 6, ...
"""

from __future__ import annotations

from streamcal.errors import pre_release
from streamcal.stream.state.errors import CheckpointError

__all__ = ["FIRST", "VERSION", "refuse_before_first", "upgrade"]

VERSION = 7
FIRST = 7  # the first release's version: older ones were never released

_STEPS: dict = {}  # version -> function(state) -> the state of version + 1


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
    if version < FIRST:
        refuse_before_first(where, f"state format version {version}")
    state = doc["state"]
    for v in range(version, VERSION):
        state = _STEPS[v](state)
    return state


def refuse_before_first(where: str, what: str):
    """``CheckpointError``: ``where`` holds ``what``, written before the first release."""
    raise CheckpointError(f"{where} has {pre_release(what)}; start over with an empty "
                          "--state-dir (and a new --state-topic, if it has one)")
