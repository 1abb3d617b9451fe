"""A label-maturity horizon: labels learned in prediction order, once their prediction is old.

When a label's delay depends on its outcome (a chargeback comes in days, "no chargeback"
only when the dispute window closes, often never as a message), the labels that have
arrived at any moment over-represent the quick class. A learner that takes them in
arrival order is biased, and the labelled stream it sees is not exchangeable, so the
Venn-Abers guarantee and the alarm's promise are lost even on a stationary stream.

The fix practitioners use: an object counts as labelled only once it is older than a
horizon H. Its label (or an implicit default, "no chargeback = 0") is then learned in the
order of the predictions. The matured stream is the prediction stream delayed by H, so it
is exchangeable whenever the objects are; the price is a calibration set H older.

``VennAbersClassifier(..., label_horizon=H, label_default=None)`` keeps a ``Horizon``.
The library has no record time, so H is counted in predictions:

* Every prediction (``predict_proba_one``, ``predict_interval_one``, ``predict_one``, a row
  of ``predict_proba_many``) waits in a queue, with its features (a copy), its
  ``category=`` and, with ``protect``, the base p it was given.
* ``learn_one(x, y)`` gives ``y`` to the oldest waiting prediction of an object with the
  same features (and ``category=``), found by a keyed look-up, as the protection finds
  the p it gave (``streamcal.learner.protection``); nothing is learned yet.
* **Convention:** prediction i matures when prediction i + H is asked for, before it is
  answered. Every prediction made from then on has learned it. A label given before that
  is in time: with river's ``progressive_val_score(..., delay=d)`` (``simulate_qa``
  reveals the answer of question i just before question i + d), every label of delay
  ``d <= H`` is in time. The matured predictions are learned in prediction order: with
  their label, or ``label_default`` if it has none (if no default is set, such a
  prediction is dropped: ``unlabelled``).
* A label for which no prediction waits (its prediction matured already, or it was never
  predicted, or it already has a label) is **late**: counted in ``late_labels`` and not
  learned. Learning it would put it out of order, which is the very bias the horizon
  removes; the stream processor does the same by default (it dead-letters it).

Memory: at most H waiting predictions, each a copy of its feature dict plus a key (an
``EventKey``: tuples of its names and values) and ~150 bytes: O(H) feature dicts, kept in
the state. The predictions of a matured object are forgotten at once.

>>> hz = Horizon(2, default=False)
>>> for i in range(3):
...     hz.wait({"a": float(i)}, {})
>>> hz.label({"a": 1.0}, True, {}), hz.label({"a": 9.0}, True, {}), hz.late
(True, False, 1)
>>> [(x, y) for x, y, _ in hz.release()]  # predictions 0 and 1 matured (2 waits)
[({'a': 0.0}, False), ({'a': 1.0}, True)]
>>> len(hz), hz.defaulted
(1, 1)
"""

from __future__ import annotations

from collections import deque

from streamcal.learner.event_key import EventKey, FeatureOrder, event_key
from streamcal.learner.label_delays import LabelDelays
from streamcal.learner.protection import _plain
from streamcal.learner.settings import check_horizon

__all__ = ["DelayWatch", "Horizon", "WATCH_LABELS", "prediction_key"]

WATCH_LABELS = 10_000  # labels whose delays are watched (without a horizon), then no more
WATCH_PREDICTIONS = 10_000  # predictions remembered for the watch (the newest)
WATCH_MAX = 1_000_000  # predictions after which the watch stops, labels matched or not

_NO_LABEL = object()


def prediction_key(x: dict, kwargs, order: FeatureOrder | None = None) -> EventKey | None:
    """The look-up key of object ``x``: its ``category=`` (if ``kwargs`` has it) and its
    features, whatever their order (``order``: the caller's ``FeatureOrder``, which sorts
    a key order once); None if a value is unhashable.

    >>> prediction_key({"a": 1, "b": 2}, {}) == prediction_key({"b": 2, "a": 1}, {})
    True
    """
    return event_key(order or FeatureOrder(), kwargs.get("category"), x)


class _Waiting:
    """A prediction waiting to mature."""

    __slots__ = ("index", "x", "kwargs", "p", "y", "key")

    def __init__(self, index, x, kwargs, p, y=_NO_LABEL, key=None):
        self.index, self.x, self.kwargs, self.p, self.y, self.key = index, x, kwargs, p, y, key


class Horizon:
    """The predictions waiting for their labels until ``horizon`` more were asked for.

    Parameters
    ----------
    horizon
        H, in predictions (see the module docstring for the convention).
    default
        The label of a prediction that matured without one; None: it is dropped.
    """

    def __init__(self, horizon: int, default=None):
        check_horizon(horizon, default)
        self.horizon = horizon
        self.default = default
        self.n = 0  # predictions made
        self.late = 0  # labels with no waiting prediction: not learned
        self.defaulted = 0  # predictions matured without a label, given the default
        self.unlabelled = 0  # predictions matured without a label and dropped (no default)
        self.releasing = False  # the classifier is learning what matured
        self._queue: deque[_Waiting] = deque()  # in prediction order
        self._unlabelled: dict = {}  # key -> deque of its waiting predictions without label
        self._order = FeatureOrder()  # the keys' feature order, sorted once per key order

    def __reduce__(self):
        # its sentinel of "no label yet" is an identity: pickled through the plain state
        return (Horizon.from_state, (self.to_state(),))

    def __len__(self) -> int:
        """Predictions waiting (at most ``horizon``)."""
        return len(self._queue)

    def wait(self, x: dict, kwargs, p: float | None = None) -> None:
        """A prediction for ``x`` was just made (``kwargs``: its ``category=``, if any; ``p``:
        the base p it was given, for the protection)."""
        kept = {"category": kwargs["category"]} if "category" in kwargs else {}
        w = _Waiting(self.n, dict(x), kept, p)
        w.key = prediction_key(w.x, kept, self._order)
        self.n += 1
        self._queue.append(w)
        if w.key is not None:
            same = self._unlabelled.get(w.key)
            if same is None:
                self._unlabelled[w.key] = deque((w,))
            else:
                same.append(w)

    def label(self, x: dict, y, kwargs) -> bool:
        """Give ``y`` to the oldest waiting prediction of ``x`` without a label (True); False
        (counted in ``late``) if there is none."""
        w = self._take(x, kwargs)
        if w is None:
            self.late += 1
            return False
        w.y = y
        return True

    def _take(self, x: dict, kwargs) -> _Waiting | None:
        key = prediction_key(x, kwargs, self._order)
        if key is None:  # an unhashable value: compared one by one
            category = kwargs.get("category")
            return next((w for w in self._queue if w.key is None and w.y is _NO_LABEL
                         and w.kwargs.get("category") == category and w.x == x), None)  # fmt: skip
        same = self._unlabelled.get(key)
        if same is None:
            return None
        w = same.popleft()
        if not same:
            del self._unlabelled[key]
        return w

    def next_due(self) -> tuple | None:
        """The oldest matured prediction to learn, taken off the queue: ``(x, y, kwargs)``
        with ``p=`` in kwargs if it was kept; None when none is due. Matured predictions
        without a label get the default, or are dropped (counted)."""
        queue = self._queue
        limit = self.n - self.horizon  # prediction i matures when i + H is asked for
        while queue and queue[0].index <= limit:
            w = queue.popleft()
            y = w.y
            if y is _NO_LABEL:
                if w.key is not None:  # the oldest of its key: released in order
                    same = self._unlabelled[w.key]
                    same.popleft()
                    if not same:
                        del self._unlabelled[w.key]
                if self.default is None:
                    self.unlabelled += 1
                    continue
                y = self.default
                self.defaulted += 1
            kwargs = dict(w.kwargs)
            if w.p is not None:
                kwargs["p"] = w.p
            return w.x, y, kwargs
        return None

    def release(self) -> list[tuple]:
        """Every matured prediction, in order (``next_due`` until None)."""
        out = []
        while (item := self.next_due()) is not None:
            out.append(item)
        return out

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict:
        """Plain data: the settings, the counts and the waiting predictions in order."""
        return {
            "horizon": self.horizon,
            "default": self.default,
            "n": self.n,
            "late": self.late,
            "defaulted": self.defaulted,
            "unlabelled": self.unlabelled,
            "waiting": [
                [w.index, dict(w.x), w.kwargs.get("category"), "category" in w.kwargs, w.p,
                 w.y is not _NO_LABEL, None if w.y is _NO_LABEL else w.y]
                for w in self._queue
            ],  # fmt: skip
        }

    @classmethod
    def from_state(cls, state: dict) -> Horizon:
        """The horizon ``to_state`` described."""
        self = cls(state["horizon"], state["default"])
        for name in ("n", "late", "defaulted", "unlabelled"):
            setattr(self, name, state[name])
        for index, x, category, has_category, p, labelled, y in state["waiting"]:
            kwargs = {"category": _plain(category)} if has_category else {}
            w = _Waiting(index, x, kwargs, p, y if labelled else _NO_LABEL)
            w.key = prediction_key(x, kwargs, self._order)
            self._queue.append(w)
            if not labelled and w.key is not None:
                self._unlabelled.setdefault(w.key, deque()).append(w)
        return self




class DelayWatch:
    """Without a horizon: each label's delay in predictions (since its object's prediction),
    given to ``LabelDelays``, which says once if the delays look outcome-dependent.

    Only the first ``WATCH_LABELS`` labels matched to a prediction are watched (the delays
    are a property of the source, seen early), with the keys of the newest
    ``WATCH_PREDICTIONS`` predictions (a delay longer than that is not measured); then
    (or after ``WATCH_MAX`` predictions, for a caller that predicts and learns different
    objects) ``done`` and the table is freed. It costs a key per prediction (~1 µs) while
    it lasts. Not in the classifier's state: a restored classifier
    watches again (a pickle keeps only whether the warning was given).

    >>> watch, said = DelayWatch(min_labels=2), []
    >>> for i in range(400):  # labels: True 5 predictions later, False 300
    ...     watch.predicted({"i": i}, {})
    ...     if i >= 300:
    ...         said += [watch.labelled({"i": i - 5}, True, {})]
    ...         said += [watch.labelled({"i": i - 300}, False, {})]
    >>> [text[:60] for text in said if text]  # said once
    ['label delays depend on the outcome: labels of class True cam']
    >>> {y: round(d) for y, d in watch.delays.typical().items()}  # predictions since
    {True: 6, False: 301}
    """

    def __init__(self, said: bool = False, **delays):
        self.n = 0  # predictions seen
        self.labels = 0  # labels matched to a prediction
        self._index: dict = {}  # key -> index of its newest prediction, oldest first
        self._order = FeatureOrder()
        self.delays = LabelDelays(
            unit="predictions",
            advice="set label_horizon to about the delay's high quantile (docs/library.md)",
            **delays,
        )
        self.delays.said = said

    def __reduce__(self):
        return (DelayWatch, (self.delays.said,))

    @property
    def done(self) -> bool:
        """Whether the watch is over (the warning was given, or enough labels were seen)."""
        return self.delays.said or self.labels >= WATCH_LABELS or self.n >= WATCH_MAX

    def predicted(self, x: dict, kwargs) -> None:
        """A prediction for ``x`` was just made."""
        key = prediction_key(x, kwargs, self._order)
        if key is not None:
            index = self._index
            index.pop(key, None)  # re-inserted: the newest prediction of these features
            index[key] = self.n
            if len(index) > WATCH_PREDICTIONS:
                del index[next(iter(index))]
        self.n += 1
        if self.n >= WATCH_MAX:
            self._index = {}

    def labelled(self, x: dict, y, kwargs) -> str | None:
        """Label ``y`` of ``x`` came: its delay is counted (if its prediction is known); the
        warning's text the first time the delays look outcome-dependent."""
        if not self._index:
            return None
        key = prediction_key(x, kwargs, self._order)
        i = None if key is None else self._index.pop(key, None)
        if i is None:
            return None
        self.labels += 1
        text = self.delays.add(y, self.n - i)
        if self.done:
            self._index = {}
        return text
