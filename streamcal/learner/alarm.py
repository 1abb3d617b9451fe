"""The classifier's alarm: conformal test martingales (``streamcal.core.ConformalAlarm``) fed
from the classifier's own scores, one per category.

What feeds the score part depends on the mode, since its scorer must not have seen the
objects it ranks nor the bag (see ``streamcal.core.conformal_alarm``):

* ``"pretrained"`` (and every mode object built like it: Mondrian categories, the
  multiclass windows, ``FieldScore``): the model is frozen between refreshes, and the
  object's score by it is already in the calibration set: **no extra scoring**. A refresh
  restarts the score part; its bag is the set-aside objects still in the calibration set
  after the refresh (the model learned only older ones), whose new scores the refresh
  has just computed. The label that triggers a refresh is the first of the new segment.
* ``"sva"`` and ``"va"``: the model learns every label, so its scores of two objects are
  never by one scorer. The alarm scores with frozen copies of the model (*snapshots*),
  taken after the category's labels 0, 1, 2, 4, 8, ... (doubling, so that the first ones
  are not of a model that has learned nothing) until ``2 * window``, then every ``2 *
  window`` labels: a schedule of counts, as validity needs. A snapshot waits one period
  before it scores: meanwhile every 4th label is set aside, scored by the waiting
  snapshot (which never saw it), and becomes its bag; the others are ranked by the
  snapshot in use. One model score per label either way: the extra cost of these modes.

With ``by``, each category has its own alarm (created at its first label; dropped with
the category's calibration when ``max_categories`` evicts it): the category's labels,
ranked among its own, test the exchangeability of that category's sub-stream, which is
what Mondrian calibration assumes. The classifier's ``alarm`` is any category's: with k
categories each alarm has level alpha, so some alarm fires falsely with probability at
most k * alpha (a union bound; ``alpha / k`` gives alpha overall for k known categories).
"""

from __future__ import annotations

import pickle
from collections import OrderedDict
from collections.abc import Mapping

from streamcal.core.conformal_alarm import ConformalAlarm
from streamcal.learner.scoring import FeatureOrder, score_sorted

__all__ = ["ALARM_KEYS", "Alarm", "SNAPSHOT_WINDOWS", "conformity", "snapshot_period"]

SNAPSHOT_WINDOWS = 2  # sva / va: a new snapshot every this many windows of labels
ALARM_KEYS = ("alpha",)  # the keys of ``protect`` that are the alarm's
RESERVE_EVERY = 4  # sva / va: every this many labels of a period is set aside

_NO_MAX = (float("-inf"), None)


def _next_snapshot(seen: int, period: int) -> int:
    """Whether a snapshot is due after ``seen`` labels: ``seen`` itself if so.

    >>> [n for n in range(40) if _next_snapshot(n, 10) == n]
    [0, 1, 2, 4, 8, 10, 20, 30]
    """
    if seen < period:
        return seen if seen & (seen - 1) == 0 else -1  # the powers of 2 (and 0)
    return seen if seen % period == 0 else -1


def snapshot_period(window: int | None) -> int:
    """Labels between two snapshots of the model ("sva", "va"): ``SNAPSHOT_WINDOWS``
    windows (of the default window when there is none).

    >>> snapshot_period(300), snapshot_period(None)
    (600, 2000)
    """
    return SNAPSHOT_WINDOWS * (1000 if window is None else window)


def conformity(s, y: int) -> float:
    """How well score ``s`` fits label ``y``: for a binary score (P(True)), ``s`` if y = 1
    and ``-s`` if y = 0; for a score vector, the class's entry (0 for a class it lacks).

    >>> conformity(0.8, 1), conformity(0.8, 0), conformity((0.1, 0.7), 1), conformity((0.3,), 2)
    (0.8, -0.8, 0.7, 0.0)
    """
    if isinstance(s, tuple):
        return s[y] if y < len(s) else 0.0
    return s if y else -s


def _seed(i: int) -> int:
    """A distinct draw seed for the i-th alarm (any fixed function of a count is fine: the
    draws only need to be independent of the data)."""
    return (2654435761 * (i + 1)) % 4294967291 or 1


class _Feed:
    """One category's alarm and where its scores come from (see the module docstring).

    It mirrors two counters of its alarm in Python numbers (the scored labels of the
    segment, the least ln S so far), because reading them from the alarm's array on every
    label would cost more than the alarm's arithmetic."""

    __slots__ = ("alarm", "version", "reserves", "snapshot", "order", "seen", "low_n",
                 "segment", "every", "low", "waiting")  # fmt: skip

    def __init__(self, params: dict, seed: int, snapshot: bool):
        self.alarm = ConformalAlarm(**params, seed=seed)
        if snapshot:  # the set-aside labels are the feed's: the alarm gets them without score
            self.alarm = ConformalAlarm(**{**params, "reserve_every": 0}, seed=seed)
        self.waiting = None  # sva / va: (the next snapshot, its bag's scores and labels)
        self.version = None  # the pretrained state's version the segment scores with
        self.reserves: list = []  # the state's n_seen of each set-aside label
        self.snapshot = None  # sva / va: the frozen copy of the model
        self.order = FeatureOrder() if snapshot else None
        self.seen = 0  # labels of this feed (sva / va: the snapshot's age)
        self.low_n = 0  # the classifier's label count where this alarm's ln S was lowest
        self._mirror(RESERVE_EVERY if snapshot else None)

    def _mirror(self, every: int | None = None) -> None:
        a = self.alarm
        self.segment, self.low = a.segment_size, a.lowest
        self.every = a.reserve_every if every is None else every

    def learn_pretrained(self, st, y: int) -> float:
        """After ``st.learn(x, y)``: rank the newest calibration object's score; ln S."""
        cal = st.calibration
        if st.version != self.version:
            if self.version is not None:  # a refresh: the set-aside objects still held
                scores, labels = [], []
                base = len(cal) - st.n_seen - 1  # calibration index of label number 0
                for r in self.reserves:
                    i = base + r
                    if 0 <= i < len(cal) - 1:  # not learned by the new scorer, not this one
                        item = cal[i]
                        scores.append(conformity(item[2], item[1]))
                        labels.append(item[1])
                self.alarm.restart(scores, labels)
                self.segment = 0
            self.reserves = []
            self.version = st.version
        s = cal[-1][2]
        log_s = self.alarm.learn(y, (s if y else -s) if type(s) is float else conformity(s, y))
        self.segment += 1
        if self.every and self.segment % self.every == 0:  # the alarm set it aside
            self.reserves.append(st.n_seen)
        return log_s

    def learn_snapshot(self, copy, x: dict, y: int, period: int) -> float:
        """sva / va, label y of x, once the model has learned it: at a point of the
        schedule the waiting snapshot starts scoring, with the objects set aside for it
        as its bag, and a new one waits: ``copy``, the model as it was before it learned
        x (``Alarm.snapshot_due``); then x is set aside for the waiting one (every
        ``every``-th label of the period) or ranked by the one in use (the label part
        only while there is none). Returns ln S."""
        seen = self.seen
        if seen == _next_snapshot(seen, period):
            waiting = self.waiting
            self.snapshot = None if waiting is None else waiting[0]
            self.alarm.restart(*(((), ()) if waiting is None else (waiting[1], waiting[2])))
            self.waiting = (copy, [], [])
            self.segment = 0
        self.seen += 1
        self.segment += 1
        if self.every and self.segment % self.every == 0:
            snap, scores, labels = self.waiting
            scores.append(conformity(score_sorted(snap, self.order.ordered(x)), y))
            labels.append(y)
            return self.alarm.learn(y)
        if self.snapshot is None:
            return self.alarm.learn(y)
        s = score_sorted(self.snapshot, self.order.ordered(x))
        return self.alarm.learn(y, conformity(s, y))

    def to_state(self) -> dict:
        return {
            "alarm": self.alarm.to_state(),
            "version": self.version,
            "reserves": list(self.reserves),
            "snapshot": None if self.snapshot is None else pickle.dumps(self.snapshot),
            "waiting": None if self.waiting is None else [pickle.dumps(self.waiting[0]),
                                                          *self.waiting[1:]],  # fmt: skip
            "segment": self.segment,
            "seen": self.seen,
            "low_n": self.low_n,
        }

    @classmethod
    def from_state(cls, state: dict) -> _Feed:
        self = cls.__new__(cls)
        self.alarm = ConformalAlarm.from_state(state["alarm"])
        self.version, self.reserves = state["version"], list(state["reserves"])
        snap, waiting = state["snapshot"], state["waiting"]
        self.snapshot = None if snap is None else pickle.loads(snap)
        if waiting is not None:
            waiting = (pickle.loads(waiting[0]), list(waiting[1]), list(waiting[2]))
        self.waiting = waiting
        snapshots = waiting is not None
        self.order = FeatureOrder() if snapshots else None
        self.seen, self.low_n = state["seen"], state["low_n"]
        self._mirror(RESERVE_EVERY if snapshots else None)
        self.segment = state["segment"]
        return self


class Alarm:
    """The alarms of a classifier, by category (``None`` without ``by``).

    ``params`` are ``ConformalAlarm``'s (``alpha``, ...). ``mode`` says where the scores
    come from: ``"pretrained"`` reads the mode state's calibration set; ``"sva"`` and
    ``"va"`` score with a snapshot every ``period`` labels of the category.

    The labels flip at label 600 (same objects, same prior; a pretrained model whose
    scores, frozen between refreshes, no longer fit the labels):

    >>> import random
    >>> from river import linear_model
    >>> from streamcal.learner.pretrained import PretrainedVennAbers
    >>> rng = random.Random(0)
    >>> st = PretrainedVennAbers(linear_model.LogisticRegression(), window=200, refresh_every=200)
    >>> alarm = Alarm({"alpha": 0.01}, mode="pretrained")
    >>> for i in range(1200):
    ...     x = {"a": rng.gauss(0, 1)}
    ...     y = int(rng.random() < (0.9 if (x["a"] > 0) == (i < 600) else 0.1))
    ...     st.learn(x, y)
    ...     alarm.learn(None, st, x, y)
    >>> alarm.alarm_at, alarm.onset, alarm.n
    (636, 585, 1200)
    """

    def __init__(self, params: dict, mode: str = "pretrained", period: int | None = None,
                 max_categories: int | None = None):  # fmt: skip
        self.params = dict(params)
        self.threshold = ConformalAlarm(**self.params).log_threshold  # checks them now
        self.mode = mode
        self.period = period
        self.max_categories = max_categories
        self.feeds: OrderedDict = OrderedDict()  # category -> _Feed, least recently labelled first
        self.created = 0  # feeds created so far: the seed of the next
        self.n = 0  # labels learned, all categories
        self.alarm_at: int | None = None  # self.n when the first category's alarm fired
        self.onset: int | None = None  # that category's onset, on self.n's scale
        self._max: tuple | None = _NO_MAX

    @property
    def log_martingale(self) -> float:
        """The largest ln S over the categories (0 before any label)."""
        if self._max is None:
            self._max = max(((f.alarm.log_martingale, c) for c, f in self.feeds.items()),
                            key=lambda lc: lc[0], default=_NO_MAX)  # fmt: skip
        return self._max[0] if self.feeds else 0.0

    @property
    def alarms(self) -> Mapping:
        """The ``ConformalAlarm`` of each category: a live read-only view (looking up one
        category costs O(1)); do not change the alarms."""
        return _AlarmsView(self.feeds)

    def _feed(self, category) -> _Feed:
        feed = self.feeds.get(category)
        if feed is None:
            if self.max_categories is not None and len(self.feeds) >= self.max_categories:
                dropped, _ = self.feeds.popitem(last=False)
                if self._max is not None and self._max[1] == dropped:
                    self._max = None
            feed = self.feeds[category] = _Feed(self.params, _seed(self.created),
                                                snapshot=self.mode != "pretrained")  # fmt: skip
            # Its ln S starts at 0 now: its lowest so far, at the classifier's count (not at
            # 0, for a category first seen later or an alarm that started at a resume).
            feed.low_n = self.n
            self.created += 1
        elif self.max_categories is not None:
            self.feeds.move_to_end(category)
        return feed

    def snapshot_due(self, category, model):
        """sva / va, before the model learns a label of ``category``: a frozen copy of
        ``model`` if the schedule takes a snapshot at this label, else None. Changes
        nothing: ``learn_snapshot`` learns the label once the model has learned it, so a
        label the model refuses leaves the alarm as it was."""
        feed = self.feeds.get(category)
        seen = 0 if feed is None else feed.seen
        if seen != _next_snapshot(seen, self.period):
            return None
        return pickle.loads(pickle.dumps(model, protocol=pickle.HIGHEST_PROTOCOL))

    def learn_snapshot(self, category, copy, x: dict, y: int) -> None:
        """sva / va, after the model learned label ``y`` of ``x``: rank x with the
        category's snapshot (``copy``: what ``snapshot_due`` gave before the model learned)."""
        feed = self._feed(category)
        self._after(category, feed, feed.learn_snapshot(copy, x, y, self.period))

    def learn(self, category, st, x: dict, y: int) -> None:
        """pretrained: after ``st.learn(x, y)`` (``st``: the category's mode state)."""
        feed = self.feeds.get(category) if self.max_categories is None else None
        if feed is None:
            feed = self._feed(category)
        self._after(category, feed, feed.learn_pretrained(st, y))

    def _after(self, category, feed: _Feed, log_s: float) -> None:
        self.n += 1
        if log_s < feed.low:  # as the alarm's own record of its least ln S
            feed.low = log_s
            feed.low_n = self.n  # the category's counts are its own: keep the classifier's
        if log_s >= self.threshold and self.alarm_at is None:
            self.alarm_at = self.n
            self.onset = feed.low_n
        top = self._max
        if top is not None:
            if log_s >= top[0]:
                self._max = (log_s, category)
            elif top[1] == category:
                self._max = None

    def to_state(self) -> dict:
        return {
            "params": dict(self.params),
            "mode": self.mode,
            "period": self.period,
            "feeds": [[c, f.to_state()] for c, f in self.feeds.items()],
            "created": self.created,
            "n": self.n,
            "alarm_at": self.alarm_at,
            "onset": self.onset,
        }

    @classmethod
    def from_state(cls, state: dict, max_categories: int | None = None) -> Alarm:
        self = cls(state["params"], state["mode"], state["period"], max_categories)
        for c, st in state["feeds"]:
            self.feeds[_plain(c)] = _Feed.from_state(st)
        self.created, self.n = state["created"], state["n"]
        self.alarm_at, self.onset = state["alarm_at"], state["onset"]
        self._max = None
        return self


class _AlarmsView(Mapping):
    __slots__ = ("_feeds",)

    def __init__(self, feeds):
        self._feeds = feeds

    def __getitem__(self, category):
        return self._feeds[category].alarm

    def __iter__(self):
        return iter(self._feeds)

    def __len__(self):
        return len(self._feeds)


def _plain(v):
    """A key read back from plain data: JSON-like formats turn tuples into lists."""
    return tuple(_plain(e) for e in v) if isinstance(v, list) else v
