"""The regressor's alarm: a conformal test martingale (``streamcal.core.ConformalAlarm``)
on the residuals of frozen copies of the model, one alarm per ``by`` key.

The residuals of a model that learns every label are not exchangeable even when the
stream is (they shrink as it learns), so an alarm on them would fire on any stream. As
the classifier's modes "sva" and "va" do (``streamcal.learner.alarm``), the alarm scores
with *snapshots*: copies of the model taken before it learns the key's labels 0, 1, 2, 4,
... (doubling) up to ``period``, then every ``period`` labels. A snapshot waits one
period before it scores: meanwhile every ``RESERVE_EVERY``-th label is set aside, scored
by the waiting snapshot (which never learned it), and becomes its bag; the others are
scored by the snapshot in use and ranked, as conformity -|y - snapshot(x)|, among its
bag and the segment's earlier ones. So every ranked score and its bag come from one
frozen model that learned none of them: within a segment they are exchangeable under
exchangeability of the stream, and the promise of ``ConformalAlarm`` holds (the alarm
fires with probability at most alpha on an exchangeable stream), whatever the model.
The bag is what lets a change at a segment's start be seen: the new residuals are
ranked against residuals from before it.

A change of spread or of bias makes |y - snapshot(x)| larger than the earlier ones:
small p-values, on which the alarm's bets win. Cost: one more prediction per label and
a copy of the model per snapshot.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from types import MappingProxyType

from streamcal.core.conformal_alarm import ConformalAlarm
from streamcal.learner.alarm import RESERVE_EVERY, _next_snapshot

__all__ = ["ResidualAlarm"]


class _Feed:
    __slots__ = ("alarm", "current", "waiting", "bag", "seen")

    def __init__(self, alpha: float, seed: int):
        self.alarm = ConformalAlarm(alpha, n_classes=1, reserve_every=0, seed=seed)
        self.current = None  # the snapshot that scores
        self.waiting = None  # the next one, scoring only its bag
        self.bag: list[float] = []
        self.seen = 0


def _conformity(snapshot, x: dict, y: float) -> float:
    y_hat = snapshot.predict_one(x)
    residual = y - y_hat if isinstance(y_hat, (int, float)) else 0.0
    return -abs(residual) if residual - residual == 0.0 else 0.0  # a broken one: no signal


class ResidualAlarm:
    """The alarms of a regressor, by ``by`` key (see the module docstring).

    >>> import random
    >>> from river import linear_model
    >>> rng = random.Random(0)
    >>> model, alarm = linear_model.LinearRegression(), ResidualAlarm(0.01, period=200)
    >>> for i in range(2000):
    ...     x = {"a": rng.gauss(0, 1)}
    ...     y = 2 * x["a"] + rng.gauss(0, 1 if i < 1200 else 3)  # the noise triples at 1200
    ...     snapshot = alarm.snapshot_due(None, model)
    ...     model.learn_one(x, y)
    ...     alarm.learn(None, snapshot, x, y)
    >>> alarm.alarm_at, alarm.onset
    (1227, 885)
    """

    def __init__(self, alpha: float, period: int):
        self.alpha = alpha
        self.period = period
        self.feeds: dict = {}
        self.n = 0  # labels, all keys
        self.alarm_at: int | None = None
        self.onset: int | None = None

    def snapshot_due(self, key, model):
        """Before ``model`` learns a label of ``key``: a frozen copy of it if the schedule
        takes a snapshot at this label, else None. Changes nothing."""
        feed = self.feeds.get(key)
        seen = 0 if feed is None else feed.seen
        return copy.deepcopy(model) if seen == _next_snapshot(seen, self.period) else None

    def learn(self, key, snapshot, x: dict, y: float) -> None:
        """Label y of x (of the ``by`` key ``key``), with what ``snapshot_due`` returned
        for it before the model learned it."""
        feed = self.feeds.get(key)
        if feed is None:
            feed = self.feeds[key] = _Feed(self.alpha, seed=len(self.feeds) + 1)
        if snapshot is not None:
            if feed.waiting is not None:
                feed.current = feed.waiting
                feed.alarm.restart(feed.bag, [0] * len(feed.bag))
            feed.waiting = snapshot
            feed.bag = []
        feed.seen += 1
        self.n += 1
        if feed.seen % RESERVE_EVERY == 0 or feed.current is None:
            feed.bag.append(_conformity(feed.waiting, x, y))
            feed.alarm.learn(0)  # the label part only
        else:
            feed.alarm.learn(0, _conformity(feed.current, x, y))
        if self.alarm_at is None and feed.alarm.alarm_at is not None:
            self.alarm_at = self.n
            # the key's own count of the onset, on the regressor's scale (exact for one key)
            self.onset = self.n - feed.alarm.n + feed.alarm.onset

    def forget(self, key) -> None:
        """Drop the alarm of ``key`` (evicted by the regressor: memory stays bounded). The
        alarm's first firing, if any, stays; a key that comes back starts a new one."""
        self.feeds.pop(key, None)

    @property
    def alarms(self) -> Mapping:
        """The ``ConformalAlarm`` of each key: a read-only view."""
        return MappingProxyType({key: feed.alarm for key, feed in self.feeds.items()})

    @property
    def log_martingale(self) -> float:
        """The largest ln S over the keys (0 before any label)."""
        return max((f.alarm.log_martingale for f in self.feeds.values()), default=0.0)
