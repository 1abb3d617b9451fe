"""A classifier's protection: its protectors (one, or one per category), the base p it gave,
and its alarm.

``VennAbersClassifier(..., protect=True)`` keeps one of these; ``Protected`` is the
classifier's side of it (its read-outs, and what a prediction and a label give it). Two
things live here, with separate promises:

* **The protectors** (``streamcal.core.Protector``): the protected probability, whose
  cumulative log loss is the base p's minus ``ln S`` of its protector. That ln S is what
  protection gained (``protection_gain``: summed over the categories, the total log loss
  saved); it is not the alarm.
* **The alarm** (``streamcal.learner.alarm``, conformal test martingales): fires with
  probability at most ``alpha`` on an exchangeable stream, whatever the model. It does not
  use the protectors: with ``"recalibrate": False`` the alarm runs alone and the
  classifier's p is the Venn-Abers p.

The protector Each protector
(``streamcal.core.Protector``) must learn a label together with the base probability that
was *given* for that object, which may differ from the one the classifier would give now if
other labels came in between (late labels). Where that p comes from, in order:

1. ``learn_one(x, y, p=...)``: the caller kept it (the stream processor keeps every pending
   prediction). Exact, and costs nothing here.
2. The base p of the most recent prediction of an object with the same features (and
   category), kept for the last ``MAX_GIVEN`` predictions. Exact for a river loop with
   delayed labels, as long as at most ``MAX_GIVEN`` predictions wait for their labels
   and two objects waiting at once do not have identical features.
3. Otherwise (a label for an object never predicted, or forgotten): the base p the
   classifier gives the object now, before learning its label. The alarm stays a valid
   test (that p is fixed before the label is seen); only the loss identity is approximate.

Labels right after their predictions get the same p by all three routes.

Route 2 costs a feature key and a table entry per prediction (1-2 µs, and up to
``MAX_GIVEN`` entries in the state). A caller that always takes route 1 turns it off
with ``protect={"lookup": False}`` (``streamcal.learner.settings.check_protect``):
predictions then remember nothing, and a label without ``p=`` takes route 3.

With ``by``, every category has its own protector and its own alarm (created at its first
label; at most ``max_categories``, the least recently labelled dropped first). The
classifier's ``alarm`` is any category's: with k categories, a false alarm somewhere has
probability at most k alpha.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from types import MappingProxyType

from streamcal.core import SCALAR_MERGES, Protector
from streamcal.core.protector import check_probability
from streamcal.errors import pre_release
from streamcal.learner.alarm import ALARM_KEYS, Alarm
from streamcal.learner.event_key import EventKey, FeatureOrder, event_key
from streamcal.learner.settings import check_protect

__all__ = ["MAX_GIVEN", "Protected", "Protection", "check_protect"]

MAX_GIVEN = 10_000  # predictions whose base p is remembered, for late labels


def _plain(v):
    """A key read back from plain data: JSON-like formats turn tuples into lists."""
    return tuple(_plain(e) for e in v) if isinstance(v, list) else v


class Protection:
    """Protectors by category (``None`` without ``by``) and the base p of recent predictions.

    >>> prot = Protection({})
    >>> round(prot.predict(None, 0.2), 12)  # nothing learned: p
    0.2
    >>> for i in range(100):
    ...     prot.remember(None, {"a": 1.0}, 0.2)
    ...     prot.learn(None, prot.recall(None, {"a": 1.0}), 1)
    >>> round(prot.protection_gain, 1), round(prot.predict(None, 0.2), 2)
    (95.9, 0.57)
    >>> prot.recall(None, {"a": 1.0}) is None
    True
    >>> prot.give(None, {"b": 2.0}, 0.3) == prot.predict(None, 0.3), prot.recall(None, {"b": 2.0})
    (True, 0.3)
    """

    def __init__(self, params: dict, max_categories: int | None = None,
                 mode: str = "pretrained", period: int | None = None):  # fmt: skip
        params = dict(params)
        self.lookup = params.pop("lookup", True)  # remember the given p's (route 2)
        self.recalibrate = params.pop("recalibrate", True)  # the protectors run
        alarm_params = {k: params.pop(k) for k in ALARM_KEYS if k in params}
        # The protector's ln S is what it gained, from the first label: its burn-in (a
        # restart of ln S for its own test) has no use here and is left out.
        params.pop("burn_in", None)
        self.params = {**params, "burn_in": 0}  # the Protector's
        self.max_categories = max_categories
        # the alarm's score part: sva / va take a snapshot every 2 windows (period)
        self.alarm = Alarm(alarm_params, mode, period, max_categories)
        self.gain = 0.0  # the protectors' ln S summed: the log loss protection saved
        self.protectors: OrderedDict = OrderedDict()  # category -> Protector, LRU first
        self._given: dict = {}  # EventKey -> base p, oldest first
        self._fresh = Protector(**self.params)  # answers for categories without labels
        self._order = FeatureOrder()  # the canonical feature order, sorted once per key order
        self.n = 0  # labels learned by the protectors, all categories

    @property
    def protection_gain(self) -> float:
        """What protection gained: the protectors' ln S summed over the categories (a
        dropped category's included), that is the base p's cumulative log loss minus the
        protected p's, with labels in order (0 before any label)."""
        return self.gain

    @property
    def alarm_at(self) -> int | None:
        """The alarm's label count when it fired (None before)."""
        return self.alarm.alarm_at

    @property
    def log_martingale(self) -> float:
        """The alarm's ln S (with categories, the largest)."""
        return self.alarm.log_martingale

    def observe(self, category, state, x: dict, y: int, before: bool, copy=None):
        """Give the alarm label ``y`` of ``x``, in two calls around the mode state's learn:
        ``before`` it (``state``: the classifier's) it changes nothing and returns what
        the second call needs (for ``"sva"`` and ``"va"``, the frozen copy of the model a
        snapshot due at this label takes, or None); after it (``state``: the category's,
        whose calibration set then holds x's score in ``"pretrained"``; ``copy``: what the
        first call returned) the alarm learns the label. A label the model refuses
        between the two leaves the alarm as it was."""
        alarm = self.alarm
        if alarm.mode == "pretrained":
            if not before:
                alarm.learn(category, state, x, y)
            return None
        if before:
            return alarm.snapshot_due(category, state.model)
        alarm.learn_snapshot(category, copy, x, y)
        return None

    def __setstate__(self, state):
        given = state["_given"]
        if "alarm" not in state or (given and type(next(iter(given))) is tuple):
            raise ValueError(pre_release("a protection pickled before its alarm or EventKey"))
        self.__dict__.update(state)

    def _key(self, category, x: dict) -> EventKey | None:
        """The look-up key of object ``x`` of ``category``: None if a value is unhashable."""
        return event_key(self._order, category, x)

    def predict(self, category, p: float) -> float:
        """The protected p for base p of an object of ``category``; no side effects (p
        itself without ``recalibrate``)."""
        if not self.recalibrate:
            return p
        return self.protectors.get(category, self._fresh).predict(p)

    def give(self, category, x: dict, p: float) -> float:
        """The protected p the classifier gives for base p of ``x`` (of ``category``),
        remembering p for x's label (with the look-up): ``remember``, then ``predict``, in
        one call, as the classifier makes it for every prediction."""
        if not self.recalibrate:
            return p
        if self.lookup:
            self.remember(category, x, p)
        return self.protectors.get(category, self._fresh).predict(p)

    def remember(self, category, x: dict, p: float) -> None:
        """Keep ``p`` as the base p given for ``x`` (with the look-up; not if x has an
        unhashable value)."""
        key = self._key(category, x) if self.lookup else None
        if key is not None:
            given = self._given
            given.pop(key, None)  # re-inserted: the newest prediction of these features
            given[key] = p
            if len(given) > MAX_GIVEN:
                del given[next(iter(given))]

    def recall(self, category, x: dict) -> float | None:
        """The base p given for ``x`` (forgotten then), or None if not remembered."""
        if not self._given:
            return None
        key = self._key(category, x)
        return None if key is None else self._given.pop(key, None)

    def learn(self, category, p: float, y: int) -> None:
        """Learn label ``y`` of an object of ``category`` whose base p was ``p``."""
        if not self.recalibrate:
            return
        prot = self.protectors.get(category)
        if prot is None:
            if self.max_categories is not None and len(self.protectors) >= self.max_categories:
                self.protectors.popitem(last=False)
            prot = self.protectors[category] = Protector(**self.params)
        elif self.max_categories is not None:  # least recently labelled first: evicted first
            self.protectors.move_to_end(category)
        before = prot.log_martingale
        self.gain += prot.learn(p, y) - before
        self.n += 1

    def to_state(self) -> dict:
        """Plain data: the protectors (least recently labelled first) and the given p's."""
        return {
            "params": dict(self.params),
            "recalibrate": self.recalibrate,
            "protectors": [[c, p.to_state()] for c, p in self.protectors.items()],
            "given": [[k.category, list(k.names), list(k.values), p]
                      for k, p in self._given.items()],  # fmt: skip
            "n": self.n,
            "gain": self.gain,
            "alarm": self.alarm.to_state(),
        }

    @classmethod
    def from_state(
        cls, state: dict, max_categories: int | None = None, lookup: bool = True,
        mode: str = "pretrained", period: int | None = None,
    ) -> Protection:  # fmt: skip
        """The protection ``to_state`` described; without ``lookup`` the given p's it
        remembered are dropped (the caller gives them from now on)."""
        params = {k: v for k, v in state["params"].items() if k not in ALARM_KEYS}
        self = cls({**params, "lookup": lookup, "recalibrate": state["recalibrate"]},
                   max_categories, mode, period)  # fmt: skip
        self.alarm = Alarm.from_state(state["alarm"], max_categories)
        for c, st in state["protectors"]:
            self.protectors[_plain(c)] = Protector.from_state(st)
        if lookup:
            for c, names, values, p in state["given"]:
                self._given[EventKey(_plain(c), _plain(names), _plain(values))] = p
        self.n = state["n"]
        self.gain = state["gain"]
        return self


class Protected:
    """The protection as ``VennAbersClassifier`` shows and feeds it: its read-outs, the
    protected p of a prediction, and a label's way to the protectors and alarms. A mixin:
    it reads the classifier's ``_protection`` (None without ``protect``), ``_state``,
    ``by`` and ``merge``."""

    @property
    def alarm(self) -> bool:
        """With ``protect``: True once the alarm's conformal test martingale (any
        category's, with ``by``) reached 1 / alpha (sticky); False without ``protect``."""
        return self._protection is not None and self._protection.alarm_at is not None

    @property
    def alarm_at(self) -> int | None:
        """With ``protect``: the number of labels learned when the alarm fired (None
        before, and without ``protect``)."""
        return None if self._protection is None else self._protection.alarm_at

    @property
    def log_martingale(self) -> float | None:
        """With ``protect``: ln of the alarm's test martingale against exchangeability
        (with ``by``, the largest over the categories); None without ``protect``."""
        return None if self._protection is None else self._protection.log_martingale

    @property
    def alarm_onset(self) -> int | None:
        """With ``protect``, once the alarm fired: the label count where the change is
        estimated to have begun (None before, and without ``protect``)."""
        return None if self._protection is None else self._protection.alarm.onset

    @property
    def protection_gain(self) -> float | None:
        """With ``protect``: what protection gained, the Venn-Abers p's cumulative log loss
        minus the protected p's (labels in order; summed over the categories). None
        without ``protect``; 0 with ``"recalibrate": False``."""
        return None if self._protection is None else self._protection.protection_gain

    @property
    def protectors(self) -> Mapping:
        """With ``protect``: the protector of each category (``None`` without ``by``),
        created at its first label; empty without ``protect``. A read-only view (no
        copy: looking up one category costs O(1) however many there are)."""
        if self._protection is None:
            return MappingProxyType({})
        return MappingProxyType(self._protection.protectors)

    @property
    def alarms(self) -> Mapping:
        """With ``protect``: the alarm (``streamcal.core.ConformalAlarm``) of each category
        (``None`` without ``by``), created at its first label; empty without ``protect``.
        A live read-only view."""
        if self._protection is None:
            return MappingProxyType({})
        return self._protection.alarm.alarms

    def _protect_category(self, x: dict, kwargs):
        """x's category for the protection, with ``by`` (callers skip the call without)."""
        return kwargs["category"] if "category" in kwargs else self._state.category(x)

    def _protected(self, x: dict, kwargs, p: float) -> float:
        """The protected p of base p ``p`` just given for ``x`` (with ``protect``)."""
        category = None if self.by is None else self._protect_category(x, kwargs)
        return self._protection.give(category, x, p)

    def _protected_many(self, rows: list[dict], ps: list[float]) -> list[float]:
        """``_protected`` of every row of a mini-batch, base p ``ps``."""
        give = self._protection.give
        if self.by is None:
            return [give(None, x, p) for x, p in zip(rows, ps, strict=True)]
        category = self._state.category
        return [give(category(x), x, p) for x, p in zip(rows, ps, strict=True)]

    def _category_state(self, category):
        """The mode state that scores ``category`` (the whole state without ``by``; None
        for a category not labelled yet)."""
        st = self._state
        return st if self.by is None else st.categories.get(category)

    def _before_learning(self, x: dict, y: int, kwargs) -> tuple:
        """Before the model learns label ``y`` of ``x``: (x's category, the base p given
        for x, the alarm's look at x before). ``kwargs`` (the call's own dict) loses its
        ``p=``; the base p is that one, else the one remembered (forgotten either way),
        else the p x gets now, before its label (see the module docstring)."""
        prot = self._protection
        base = kwargs.pop("p", None)
        category = None if self.by is None else self._protect_category(x, kwargs)
        copy = prot.observe(category, self._state, x, y, before=True)
        if prot.recalibrate:
            if base is not None and (type(base) is not float or not 0.0 <= base <= 1.0):
                base = check_probability(base)  # only if not plainly valid, as the protector
            if prot.lookup:
                remembered = prot.recall(category, x)
                if base is None:
                    base = remembered
            if base is None:
                _, p0, p1 = self._state.predict(x, *self._category(kwargs))
                base = SCALAR_MERGES[self.merge](p0, p1)
        return category, base, copy

    def _after_learning(self, x: dict, y: int, before: tuple) -> None:
        """After the model learned ``y`` of ``x`` (a model error leaves all unchanged):
        the protector and the alarm learn it (``before``: ``_before_learning``'s)."""
        category, base, copy = before
        prot = self._protection
        prot.learn(category, base, y)
        prot.observe(category, self._category_state(category), x, y, before=False, copy=copy)
