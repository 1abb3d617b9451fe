"""The alarm's read-only properties, for an estimator whose ``_alarm`` is None (no alarm)
or an object with ``alarm_at``, ``onset``, ``log_martingale`` and ``alarms`` (the
multiclass classifier's ``Alarm``, the regressor's ``ResidualAlarm``)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["AlarmView"]


class AlarmView:
    """``alarm``, ``alarm_at``, ``alarm_onset``, ``log_martingale``, ``alarms``."""

    _alarm = None

    @property
    def alarm(self) -> bool:
        """With ``alarm_alpha``: True once the alarm fired (sticky); else False."""
        return self._alarm is not None and self._alarm.alarm_at is not None

    @property
    def alarm_at(self) -> int | None:
        """With ``alarm_alpha``: the number of labels learned when the alarm fired."""
        return None if self._alarm is None else self._alarm.alarm_at

    @property
    def alarm_onset(self) -> int | None:
        """With ``alarm_alpha``, once the alarm fired: where the change is estimated to
        have begun (a label count)."""
        return None if self._alarm is None else self._alarm.onset

    @property
    def log_martingale(self) -> float | None:
        """With ``alarm_alpha``: ln S of the alarm (the largest over the categories)."""
        return None if self._alarm is None else self._alarm.log_martingale

    @property
    def alarms(self) -> Mapping:
        """With ``alarm_alpha``: the alarm (``streamcal.core.ConformalAlarm``) of each
        category (``None`` without ``by``), created at its first label; empty without. A
        read-only view."""
        return MappingProxyType({}) if self._alarm is None else self._alarm.alarms
