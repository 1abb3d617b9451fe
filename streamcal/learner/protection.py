"""A classifier's protection: its protectors (one, or one per category) and the base p it gave.

``VennAbersClassifier(..., protect=True)`` keeps one of these. Each protector
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

With ``by``, every category has its own protector (created at its first label; at most
``max_categories``, the least recently labelled dropped first), so the alarm of a category
tests that category's forecasts. The classifier's ``alarm`` is any category's: each
category's false-alarm probability is at most alpha, so with k categories, at most k alpha.
A label costs O(1) whatever the number of categories: the largest log S over them is kept
as the labels come, and only recomputed (when read) after its category's log S fell.
"""

from __future__ import annotations

from collections import OrderedDict

from streamcal.core import Protector
from streamcal.learner.scoring import FeatureOrder
from streamcal.learner.settings import check_protect

__all__ = ["MAX_GIVEN", "Protection", "check_protect"]

MAX_GIVEN = 10_000  # predictions whose base p is remembered, for late labels


_NO_MAX = (float("-inf"), None)  # the largest log S over no category


def _plain(v):
    """A key read back from plain data: JSON-like formats turn tuples into lists."""
    return tuple(_plain(e) for e in v) if isinstance(v, list) else v


class Protection:
    """Protectors by category (``None`` without ``by``) and the base p of recent predictions.

    >>> prot = Protection({"burn_in": 0})
    >>> round(prot.predict(None, 0.2), 12)  # nothing learned: p
    0.2
    >>> for i in range(100):
    ...     prot.remember(None, {"a": 1.0}, 0.2)
    ...     prot.learn(None, prot.recall(None, {"a": 1.0}), 1)
    >>> prot.alarm_at, round(prot.predict(None, 0.2), 2), prot.recall(None, {"a": 1.0})
    (14, 0.57, None)
    >>> prot.give(None, {"b": 2.0}, 0.3) == prot.predict(None, 0.3), prot.recall(None, {"b": 2.0})
    (True, 0.3)
    """

    # Protections pickled before these existed (class attributes as their defaults)
    lookup = True
    _max: tuple | None = None

    def __init__(self, params: dict, max_categories: int | None = None):
        params = dict(params)
        self.lookup = params.pop("lookup", True)  # remember the given p's (route 2)
        self.params = params  # the Protector's
        self.max_categories = max_categories
        self.protectors: OrderedDict = OrderedDict()  # category -> Protector, LRU first
        self._given: dict = {}  # (category, names, values) -> base p, oldest first
        self._fresh = Protector(**self.params)  # answers for categories without labels
        self._order = FeatureOrder()  # the canonical feature order, sorted once per key order
        self.n = 0  # labels learned, all categories
        self.alarm_at: int | None = None  # self.n when the first protector alarmed
        # (the largest log S over the categories, its category); None: to recompute
        self._max: tuple | None = _NO_MAX

    @property
    def log_martingale(self) -> float:
        """The largest log S over the categories (0 before any label)."""
        if self._max is None:  # its category's log S fell, or it was dropped
            self._max = max(
                ((p.log_martingale, c) for c, p in self.protectors.items()),
                key=lambda lc: lc[0],
                default=_NO_MAX,
            )
        return self._max[0] if self.protectors else 0.0

    def _key(self, category, x: dict):
        """The look-up key of object ``x`` of ``category``: None if a value is unhashable."""
        cx = self._order.ordered(x)
        try:
            key = (category, tuple(cx), tuple(cx.values()))
            hash(key)
        except TypeError:
            return None
        return key

    def predict(self, category, p: float) -> float:
        """The protected p for base p of an object of ``category``; no side effects."""
        return self.protectors.get(category, self._fresh).predict(p)

    def give(self, category, x: dict, p: float) -> float:
        """The protected p the classifier gives for base p of ``x`` (of ``category``),
        remembering p for x's label (with the look-up): ``remember``, then ``predict``, in
        one call, as the classifier makes it for every prediction."""
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
        prot = self.protectors.get(category)
        if prot is None:
            if self.max_categories is not None and len(self.protectors) >= self.max_categories:
                dropped, _ = self.protectors.popitem(last=False)
                if self._max is not None and self._max[1] == dropped:
                    self._max = None
            prot = self.protectors[category] = Protector(**self.params)
        elif self.max_categories is not None:  # least recently labelled first: evicted first
            self.protectors.move_to_end(category)
        log_s = prot.learn(p, y)
        self.n += 1
        # The alarm fires only as ln S reaches ln(1 / alpha) > 0: below 0 it cannot have.
        if log_s > 0.0 and self.alarm_at is None and prot.alarm:
            self.alarm_at = self.n
        top = self._max
        if top is not None:
            if log_s >= top[0]:  # the new largest
                self._max = (log_s, category)
            elif top[1] == category:  # the largest fell: another category's may be larger
                self._max = None

    def to_state(self) -> dict:
        """Plain data: the protectors (least recently labelled first) and the given p's."""
        return {
            "params": dict(self.params),
            "protectors": [[c, p.to_state()] for c, p in self.protectors.items()],
            "given": [[c, list(names), list(values), p]
                      for (c, names, values), p in self._given.items()],  # fmt: skip
            "n": self.n,
            "alarm_at": self.alarm_at,
        }

    @classmethod
    def from_state(
        cls, state: dict, max_categories: int | None = None, lookup: bool = True
    ) -> Protection:
        """The protection ``to_state`` described; without ``lookup`` the given p's it
        remembered are dropped (the caller gives them from now on)."""
        self = cls({**state["params"], "lookup": lookup}, max_categories)
        for c, st in state["protectors"]:
            self.protectors[_plain(c)] = Protector.from_state(st)
        if lookup:
            for c, names, values, p in state["given"]:
                self._given[(_plain(c), _plain(names), _plain(values))] = p
        self.n, self.alarm_at = state["n"], state["alarm_at"]
        self._max = None  # computed when read
        return self
