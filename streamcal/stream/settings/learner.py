"""The classifier's settings from the processor's: ``--protect``, ``--alarm`` and
``--alarm-alpha`` as the classifier's one ``protect``, and ``ClassifierSettings`` from a
configuration or a checkpoint's fingerprint.
"""

from __future__ import annotations

from collections.abc import Mapping

from streamcal.learner.settings import FIELDS as CLASSIFIER_SETTINGS
from streamcal.learner.settings import ClassifierSettings

__all__ = ["protect_setting", "settings_of"]


def protect_setting(protect: bool, alarm: bool, alarm_alpha: float) -> dict | bool:
    """The classifier's ``protect`` for ``--protect``, ``--alarm`` and ``--alarm-alpha``:
    protection and the alarm, the alarm alone (``"recalibrate": False``: p_protected is p,
    no protector runs), or neither. The library's protection always runs its alarm.

    The processor keeps every pending prediction's p and passes it back with the label,
    so the classifier need not remember them (``"lookup": False``: no feature key and no
    table entry per prediction, and no table in the checkpoint).

    >>> protect_setting(True, True, 0.05), protect_setting(False, False, 0.05)
    ({'alpha': 0.05, 'lookup': False}, False)
    >>> protect_setting(False, True, 0.05)
    {'alpha': 0.05, 'lookup': False, 'recalibrate': False}
    """
    if not (protect or alarm):
        return False
    return {"alpha": alarm_alpha, "lookup": False, **({} if protect else {"recalibrate": False})}


def settings_of(values: Mapping) -> ClassifierSettings:
    """The classifier's settings for the processor's ``values`` as given (None: not
    given), e.g. a checkpoint's fingerprint: ``protect`` and ``alarm`` are the flags,
    ``alarm_alpha`` the level; a ``protect`` of None (a task without protection) means
    off."""
    given = {k: values.get(k) for k in CLASSIFIER_SETTINGS}
    if given["protect"] is not None:
        given["protect"] = protect_setting(given["protect"], values.get("alarm"),
                                           values.get("alarm_alpha"))  # fmt: skip
    return ClassifierSettings.given(**given)
