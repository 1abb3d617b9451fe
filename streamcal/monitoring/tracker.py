"""The calibration tracker: losses and calibration statistics of a stream of Venn-Abers pairs.

One ``update(p0, p1, y, score)`` per labelled prediction. The stream processor keeps one
per model and writes ``snapshot()`` to its metric log, so the numbers a user computes in
Python and the numbers an operator sees are produced by the same code.

Means are river's ``stats.Mean`` in value (the same float operations, inlined), windows
revert them as ``river.utils.Rolling`` does. The per-update loss terms are river's too in
value: the log-loss term is ``metrics.LogLoss``'s (same clamp), square loss is
``metrics.MSE`` on 0/1 labels (the Brier score); the tests check both against river.
They are computed once per update and fed to the means, and the window stores the terms
themselves, so leaving it costs no logarithm. The tracker runs for every label in the
stream processor: wrapping ``metrics.LogLoss`` in ``Rolling`` cost about 3x more per
update than river's ``Mean`` objects fed with the terms, which in turn cost about 3x more
than the inlined means here.

``update`` checks its input and counts the label at once, but folds it into the float
statistics (means, window, reliability bins) later, in batches of up to ``BATCH`` labels,
before anything reads them: the same operations in the same order, so the same values. In
the processor, where an update runs between a model's scoring and learning, the batched
fold costs about half of the same work done one label at a time (3 µs per event less,
``docs/performance.md``).
"""

from __future__ import annotations

import math
from collections import deque
from numbers import Integral, Real

from river import stats

from streamcal.core.validate import check_label
from streamcal.learner.settings import DEFAULT_MAX_CATEGORIES
from streamcal.monitoring.categories import CategoryBreakdown
from streamcal.monitoring.reliability import ReliabilityBins
from streamcal.monitoring.schema import (
    ALARM,
    ALARM_KEYS,
    FIELDS,
    PROTECTION,
    PROTECTION_KEYS,
    SNAPSHOT_KEYS,
)

__all__ = ["ALARM_KEYS", "CalibrationTracker", "PROTECTION_KEYS", "SNAPSHOT_KEYS", "add_terms",
           "means_state", "restore_means",
           "prediction_in_range"]  # fmt: skip

# The fields of the optional features, in schema order: (key, feature)
_OPTIONAL = tuple((f.key, f.only_with) for f in FIELDS if f.only_with in (PROTECTION, ALARM))

# river.metrics.LogLoss clamps probabilities to [1e-15, 1 - 1e-15].
_EPS = 1e-15

BATCH = 256  # labels held before they are folded into the statistics (any read folds them)


class _Means:
    """Running means of the per-update terms, computed exactly as ``river.stats.Mean`` does.

    The same floating-point operations in the same order as one ``stats.Mean`` per term
    (so the values are bit-equal), but in one object with one shared count: the tracker
    runs for every label in the stream processor, and five ``Mean`` objects wrapped in a
    ``Rolling`` cost several times more per update. Raw-score terms are None for updates
    without a score and then skipped (they have their own count); so are the protected
    probability's terms (``prot_*``, count ``n_prot``), which may be left out altogether.

    >>> m = _Means()
    >>> m.update(1.0, 2.0, 3.0, None, None)
    >>> m.update(3.0, 2.0, 1.0, 0.5, 0.25)
    >>> m.get("log"), m.get("raw_log")
    (2.0, 0.5)
    >>> m.revert(1.0, 2.0, 3.0, None, None)
    >>> m.get("width"), m.n
    (1.0, 1)
    """

    __slots__ = ("n", "log", "square", "width", "n_raw", "raw_log", "raw_square",
                 "n_prot", "prot_log", "prot_square")  # fmt: skip
    # Slots added later, with their initial values: states written before them lack them.
    _LATER = {"n_prot": 0, "prot_log": 0.0, "prot_square": 0.0}

    def __init__(self):
        self.n = self.n_raw = self.n_prot = 0
        self.log = self.square = self.width = self.raw_log = self.raw_square = 0.0
        self.prot_log = self.prot_square = 0.0

    def update(self, log, square, width, raw_log, raw_square, prot_log=None, prot_square=None):
        self.n = n = self.n + 1
        k = 1.0 / n  # stats.Mean: mean += (w / n) * (x - mean), w = 1.0
        self.log += k * (log - self.log)
        self.square += k * (square - self.square)
        self.width += k * (width - self.width)
        if raw_log is not None:
            self.n_raw = n = self.n_raw + 1
            k = 1.0 / n
            self.raw_log += k * (raw_log - self.raw_log)
            self.raw_square += k * (raw_square - self.raw_square)
        if prot_log is not None:
            self.n_prot = n = self.n_prot + 1
            k = 1.0 / n
            self.prot_log += k * (prot_log - self.prot_log)
            self.prot_square += k * (prot_square - self.prot_square)

    def revert(self, log, square, width, raw_log, raw_square, prot_log=None, prot_square=None):
        self.n = n = self.n - 1
        if n == 0:  # stats.Mean.revert resets to 0.0 when empty
            self.log = self.square = self.width = 0.0
        else:
            k = 1.0 / n
            self.log -= k * (log - self.log)
            self.square -= k * (square - self.square)
            self.width -= k * (width - self.width)
        if raw_log is not None:
            self.n_raw = n = self.n_raw - 1
            if n == 0:
                self.raw_log = self.raw_square = 0.0
            else:
                k = 1.0 / n
                self.raw_log -= k * (raw_log - self.raw_log)
                self.raw_square -= k * (raw_square - self.raw_square)
        if prot_log is not None:
            self.n_prot = n = self.n_prot - 1
            if n == 0:
                self.prot_log = self.prot_square = 0.0
            else:
                k = 1.0 / n
                self.prot_log -= k * (prot_log - self.prot_log)
                self.prot_square -= k * (prot_square - self.prot_square)

    def get(self, name):
        """The mean of one term, None before its first value."""
        if name.startswith("raw"):
            n = self.n_raw
        else:
            n = self.n_prot if name.startswith("prot") else self.n
        return getattr(self, name) if n else None

    def __getstate__(self):
        return {k: getattr(self, k) for k in self.__slots__}

    def __setstate__(self, state):
        if isinstance(state.get("log"), stats.Mean):  # pickled by an earlier streamcal: Means
            state = _means_state(state)
        for k in self.__slots__:
            setattr(self, k, state[k] if k in state else self._LATER[k])


def add_terms(whole: _Means, recent: _Means, window: deque, size: int, terms: tuple) -> None:
    """Add one label's loss ``terms`` to the means of the whole stream (``whole``) and of
    the last ``size`` labels (``recent``, over the terms kept in ``window``): as river's
    ``Rolling``, the oldest is reverted first. Both trackers keep their losses this way.

    >>> whole, recent, window = _Means(), _Means(), deque()
    >>> for x in (1.0, 2.0, 6.0):
    ...     add_terms(whole, recent, window, 2, (x, 0.0, 0.0, None, None))
    >>> whole.get("log"), recent.get("log"), len(window)
    (3.0, 4.0, 2)
    """
    whole.update(*terms)
    if len(window) == size:
        recent.revert(*window.popleft())
    recent.update(*terms)
    window.append(terms)


def means_state(whole: _Means, recent: _Means, window: deque) -> dict:
    """``add_terms``' state as plain data (``restore_means`` reads it back)."""
    return {"all": whole.__getstate__(), "recent": recent.__getstate__(),
            "terms": [list(t) for t in window]}  # fmt: skip


def restore_means(state: dict, whole: _Means, recent: _Means) -> deque:
    """Set ``whole`` and ``recent`` from ``means_state``'s ``state``; the window it kept."""
    whole.__setstate__(state["all"])
    recent.__setstate__(state["recent"])
    return deque(tuple(t) for t in state["terms"])


def _means_state(old: dict) -> dict:
    """The state of a ``_Means`` from its earlier form, one ``stats.Mean`` per term."""
    state = {k: old[k]._mean for k in ("log", "square", "width", "raw_log", "raw_square")}
    state["n"], state["n_raw"] = int(old["log"].n), int(old["raw_log"].n)
    return state


def prediction_in_range(p0, p1, p=None, score=None, p_protected=None) -> bool:
    """Whether ``CalibrationTracker.update`` accepts this prediction: p0, p1, and p, the
    raw score and the protected probability when given, all numbers in [0, 1].

    p0 > p1 is allowed: full Venn-Abers (Algorithm 1, mode "va") retrains the scorer
    differently for the two labels, so the pair need not be ordered.

    >>> prediction_in_range(0.6, 0.4), prediction_in_range(0.2, 1.5), prediction_in_range("a", 1)
    (True, False, False)
    """
    try:
        ok = 0.0 <= p0 <= 1.0 and 0.0 <= p1 <= 1.0
        ok = ok and (p is None or 0.0 <= p <= 1.0)
        ok = ok and (score is None or 0.0 <= score <= 1.0)
        return ok and (p_protected is None or 0.0 <= p_protected <= 1.0)
    except TypeError:
        return False


def _protection_state(log_martingale, alarm, alarm_at, alpha, onset=None, gain=None) -> dict:
    """The reported state of an alarm (and of protection's gain) as plain JSON-ready
    numbers, checked.

    >>> _protection_state(2.5, True, 40, 0.01, onset=31, gain=1.5)
    {'log_martingale': 2.5, 'alarm': 1, 'alarm_at': 40, 'alpha': 0.01, 'onset': 31, 'gain': 1.5}
    """
    lm = log_martingale
    if isinstance(lm, bool) or not isinstance(lm, Real) or not math.isfinite(lm):
        raise ValueError(f"log_martingale must be a finite number, got {log_martingale!r}")
    if alarm not in (0, 1) or isinstance(alarm, float):
        raise ValueError(f"alarm must be a bool (or 0/1), got {alarm!r}")
    if alarm_at is not None and (
        isinstance(alarm_at, bool) or not isinstance(alarm_at, Integral) or alarm_at < 0
    ):
        raise ValueError(f"alarm_at must be a label count or None, got {alarm_at!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, Real) or not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be a number in (0, 1), got {alpha!r}")
    if onset is not None and (
        isinstance(onset, bool) or not isinstance(onset, Integral) or onset < 0
    ):
        raise ValueError(f"alarm_onset must be a label count or None, got {onset!r}")
    if gain is not None and (
        isinstance(gain, bool) or not isinstance(gain, Real) or not math.isfinite(gain)
    ):
        raise ValueError(f"protection_gain must be a finite number or None, got {gain!r}")
    return {
        "log_martingale": float(log_martingale),
        "alarm": int(alarm),
        "alarm_at": None if alarm_at is None else int(alarm_at),
        "alpha": float(alpha),
        "onset": None if onset is None else int(onset),
        "gain": None if gain is None else float(gain),
    }


def _log_loss(y, q):
    """river's ``metrics.LogLoss`` term: -log of the probability given to ``y``, clamped."""
    if q < _EPS:
        q = _EPS
    elif q > 1.0 - _EPS:
        q = 1.0 - _EPS
    return -math.log(q) if y else -math.log(1.0 - q)


class CalibrationTracker:
    """Cumulative and rolling losses, reliability bins and the Corollary 1 band.

    Parameters
    ----------
    window
        Number of most recent updates behind the ``recent_*`` statistics.
    bins
        Number of equal-width reliability bins on [0, 1] (for ``ece`` and ``reliability``).
    top_k, max_categories
        Per-category statistics (updates given a ``category``): ``category_snapshots()``
        shows the ``top_k`` categories by volume plus ``"(other)"``; at most
        ``max_categories`` are counted one by one (``streamcal.monitoring.categories``).

    ``update(p0, p1, y, score=None, p=None, category=None)`` takes the Venn-Abers pair,
    the label (0/1 or bool), optionally the raw model probability ``score``, the merged
    probability ``p`` (default: the log-loss merge p1 / (1 - p0 + p1)) and a category.
    Raw statistics cover the updates that came with a score (``raw_labels`` of them;
    ``recent_raw_*``: those among the last ``window`` updates). Log loss clips its
    argument to [1e-15, 1 - 1e-15] like river's ``LogLoss``; the log merge never needs it
    (Lemma 3 of Vovk & Petej: 0 < p < 1), a raw score may.

    Corollary 1 of Vovk & Petej: under exchangeability, ``mean_p0 <= frequency <= mean_p1``
    up to sampling error: the report allows 3 standard errors of the frequency,
    sqrt(f (1 - f) / n) each (``monitoring.report.SAMPLING_ERROR_SE``). A Mondrian
    calibrator promises it inside every category: pass ``category`` to check that too.

    >>> t = CalibrationTracker(window=2, bins=2)
    >>> t.update(0.2, 0.4, 0, score=0.3)
    >>> t.update(0.6, 0.9, 1, score=0.7)
    >>> t.update(0.5, 0.8, 1)
    >>> s = t.snapshot()
    >>> s["labels"], s["raw_labels"], s["frequency"]
    (3, 2, 0.6666666666666666)
    >>> round(s["mean_p0"], 6), round(s["mean_p1"], 6), round(s["mean_width"], 6)
    (0.433333, 0.7, 0.266667)
    >>> round(s["recent_mean_width"], 6), s["recent_raw_square_loss"]  # the last two updates
    (0.3, 0.09)
    >>> round(s["raw_log_loss"], 6)  # mean of -log(1 - 0.3) and -log(0.7)
    0.356675
    >>> [b["count"] for b in t.reliability("p")], [b["count"] for b in t.reliability("score")]
    ([1, 2], [1, 1])

    Per category (a Mondrian calibrator's segments):

    >>> t = CalibrationTracker(top_k=1)
    >>> for c, y in [("fr", 1), ("fr", 0), ("de", 1)]:
    ...     t.update(0.4, 0.6, y, category=c)
    >>> [(r["category"], r["labels"], r["frequency"]) for r in t.category_snapshots()]
    [('fr', 2, 0.5), ('(other)', 1, 1.0)]

    The alarm and protection (``docs/alerts.md``): ``update_protection(log_martingale,
    alarm, alarm_at, alpha)`` records the alarm's state after the label (per category with
    ``category=``), and ``update(..., p_protected=q)`` adds the losses of the protected
    probability (``protection_gain=`` of ``update_protection``: what protection gained).
    The ``ALARM_KEYS`` are in the snapshot once an alarm's state was recorded, the
    ``PROTECTION_KEYS`` once a protected probability or a gain was: a tracker without
    either gives the snapshot it always did.

    >>> t = CalibrationTracker()
    >>> t.update(0.2, 0.4, 1, p_protected=0.5)
    >>> t.update_protection(0.4, False, None, alpha=0.01)
    >>> s = t.snapshot()
    >>> round(s["protected_log_loss"], 6), s["log_martingale"], s["alarm"], s["alarm_at"]
    (0.693147, 0.4, 0, None)
    >>> alone = CalibrationTracker()  # the alarm alone: no protected fields
    >>> alone.update(0.2, 0.4, 1)
    >>> alone.update_protection(0.4, False, None, alpha=0.01)
    >>> "alarm" in alone.snapshot(), "protected_log_loss" in alone.snapshot()
    (True, False)
    >>> "alarm" in CalibrationTracker().snapshot()
    False
    """

    def __init__(
        self,
        window: int = 1000,
        bins: int = 10,
        top_k: int = 10,
        max_categories: int = DEFAULT_MAX_CATEGORIES,
    ):
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be a positive integer, got {window!r}")
        self.window = window
        self.bins = bins
        self.labels = 0
        self.ones = 0
        self.raw_labels = 0
        self.protected_labels = 0
        # Checked labels not yet folded into the float statistics, as plain-float rows
        # (p0, p1, y, score, p, p_protected); ``_all.n`` labels are.
        self._pending: list = []
        # The alarm's state (and protection's gain) as last reported
        # (``update_protection``), or None.
        self._protection: dict | None = None
        self._all = _Means()
        self._recent = _Means()  # over the terms in _window, reverted as they leave it
        self._window: deque = deque()  # per-update terms, oldest first
        self._p0 = self._p1 = 0.0  # means of p0 and p1 over the ``labels`` updates
        self._rel = ReliabilityBins(bins)
        self._raw_rel = ReliabilityBins(bins)
        self._categories = CategoryBreakdown(top_k, bins, max_categories)

    def update(
        self,
        p0: float,
        p1: float,
        y,
        score: float | None = None,
        p: float | None = None,
        category=None,
        p_protected: float | None = None,
    ):
        """Add one labelled prediction (of ``category``, if given: any value, named by
        ``str``), with the protected probability ``p_protected`` given for it, if any.
        Raises ValueError (state unchanged) on bad input."""
        y = check_label(y)
        if not prediction_in_range(p0, p1, p, score, p_protected):
            # The message of a tracker without protection stays what it was.
            extra = "" if p_protected is None else f", p_protected={p_protected!r}"
            raise ValueError(
                "need p0, p1, p and score in [0, 1] (score may be None), got "
                f"p0={p0!r}, p1={p1!r}, p={p!r}, score={score!r}{extra}"
            )
        if p is None:
            p = p1 / (1.0 - p0 + p1)
        # Plain floats from here on, converted now so that folding cannot fail later (and
        # numpy scalars would leak into the JSON snapshot).
        row = (
            float(p0), float(p1), y, None if score is None else float(score), float(p),
            None if p_protected is None else float(p_protected),
        )  # fmt: skip
        self.labels += 1
        self.ones += y
        if score is not None:
            self.raw_labels += 1
        if p_protected is not None:
            self.protected_labels += 1
        if category is None:
            pending = self._pending
            pending.append(row)
            if len(pending) >= BATCH:
                self._fold_pending()
        else:  # the category's statistics need this label's terms now
            self._fold_pending()
            log, square, prot_log, prot_square = self._fold(*row)
            self._categories.update(
                category, row[0], row[1], y, p=row[4], log=log, square=square,
                prot_log=prot_log, prot_square=prot_square,
            )  # fmt: skip

    def _fold_pending(self) -> None:
        """Fold the labels held back into the statistics, in the order they came."""
        pending = self._pending
        if pending:
            self._pending = []
            fold = self._fold
            for row in pending:
                fold(*row)

    def _fold(self, p0, p1, y, score, p, q) -> tuple:
        """Fold one checked label (``q``: its protected probability, or None) into the
        float statistics; its log and square loss terms and the protected ones (None
        without q)."""
        width = p1 - p0
        log, square = _log_loss(y, p), (y - p) * (y - p)
        if score is None:
            raw_log = raw_square = None
        else:
            raw_log, raw_square = _log_loss(y, score), (y - score) * (y - score)
            self._raw_rel.update(score, y)
        if q is None:  # the window keeps the terms it kept before protection
            terms = (log, square, width, raw_log, raw_square)
            prot_log = prot_square = None
        else:
            prot_log, prot_square = _log_loss(y, q), (y - q) * (y - q)
            terms = (log, square, width, raw_log, raw_square, prot_log, prot_square)
        add_terms(self._all, self._recent, self._window, self.window, terms)
        k = 1.0 / self._all.n  # as river's stats.Mean, over the labels folded so far
        self._p0 += k * (p0 - self._p0)
        self._p1 += k * (p1 - self._p1)
        self._rel.update(p, y)
        return log, square, prot_log, prot_square

    def update_protection(
        self, log_martingale: float, alarm, alarm_at: int | None = None,
        alpha: float = 0.01, category=None, alarm_onset: int | None = None,
        protection_gain: float | None = None,
    ) -> None:  # fmt: skip
        """Record the alarm's state after a label: the natural log of its test martingale,
        whether it (sticky) has fired, the label count when it fired (None before), its
        level ``alpha`` and the estimated onset of the change; of ``category``'s alarm if
        given. ``protection_gain``: what protection gained so far (the unit's; not per
        category). The latest report is what the snapshot shows. ValueError (state
        unchanged) on bad input."""
        state = _protection_state(log_martingale, alarm, alarm_at, alpha, alarm_onset,
                                  protection_gain)  # fmt: skip
        if category is None:
            self._protection = state
        else:
            self._categories.update_protection(category, state)

    def __getstate__(self):
        self._fold_pending()  # a pickle or copy holds the statistics themselves
        return dict(self.__dict__)

    def __setstate__(self, state):
        if "_window" not in state:  # pickled by an earlier streamcal (a checkpoint)
            rolling = state["_recent"]  # a river Rolling of _Means, its inputs in .window
            state["_recent"] = rolling.obj
            state["_window"] = deque(args for args, _ in rolling.window)
            state["_p0"], state["_p1"] = state["_p0"]._mean, state["_p1"]._mean
        if "_categories" not in state:  # from before per-category statistics
            state["_categories"] = CategoryBreakdown(bins=state["bins"])
        state.setdefault("protected_labels", 0)  # from before protection
        state.setdefault("_protection", None)
        state.setdefault("_pending", [])  # from before the batched folding: all folded
        self.__dict__.update(state)

    def reliability(self, which: str = "p") -> list[dict]:
        """Reliability bins of the calibrated ``"p"`` or of the raw ``"score"``.

        A list of ``{"lo", "hi", "count", "mean_pred", "frequency"}`` (None in empty bins).
        """
        self._fold_pending()
        if which == "p":
            return self._rel.table()
        if which == "score":
            return self._raw_rel.table()
        raise ValueError(f'which must be "p" or "score", got {which!r}')

    def snapshot(self, reliability: bool = False) -> dict:
        """The statistics as a flat JSON-ready dict: the tracker fields of the metric schema
        (``SNAPSHOT_KEYS``, in order; None if undefined), then, in schema order, the
        ``PROTECTION_KEYS`` once protection was recorded (``update(p_protected=)``, or a
        gain to ``update_protection``) and the ``ALARM_KEYS`` once an alarm's state was
        (``update_protection``).

        With ``reliability=True`` it also carries the bins: ``reliability`` (of p) and
        ``raw_reliability`` (of the score, None without scores), so that a report made from
        a metric log alone can draw reliability diagrams.
        """
        self._fold_pending()
        n = self.labels
        a, w = self._all, self._recent
        out = {
            "labels": n,
            "raw_labels": self.raw_labels,
            "log_loss": a.get("log"),
            "recent_log_loss": w.get("log"),
            "square_loss": a.get("square"),
            "recent_square_loss": w.get("square"),
            "raw_log_loss": a.get("raw_log"),
            "recent_raw_log_loss": w.get("raw_log"),
            "raw_square_loss": a.get("raw_square"),
            "recent_raw_square_loss": w.get("raw_square"),
            "mean_width": a.get("width"),
            "recent_mean_width": w.get("width"),
            "ece": self._rel.ece(),
            "raw_ece": self._raw_rel.ece(),
            "mean_p0": self._p0 if n else None,
            "frequency": self.ones / n if n else None,
            "mean_p1": self._p1 if n else None,
        }
        prot = self._protection
        on = (PROTECTION if self.protected_labels or (prot and prot.get("gain") is not None)
              else None, ALARM if prot is not None else None)  # fmt: skip
        if on != (None, None):
            prot = prot or {}
            values = {
                "protected_labels": self.protected_labels,
                "protected_log_loss": a.get("prot_log"),
                "recent_protected_log_loss": w.get("prot_log"),
                "protected_square_loss": a.get("prot_square"),
                "recent_protected_square_loss": w.get("prot_square"),
                "log_martingale": prot.get("log_martingale"),
                "alarm": prot.get("alarm"),
                "alarm_at": prot.get("alarm_at"),
                "alarm_alpha": prot.get("alpha"),
                "alarm_onset": prot.get("onset"),
                "protection_gain": prot.get("gain"),
            }
            out.update((k, values[k]) for k, feature in _OPTIONAL if feature in on)
        if reliability:
            out["reliability"] = self._rel.table()
            out["raw_reliability"] = self._raw_rel.table() if self.raw_labels else None
        return out

    def category_snapshots(self) -> list[dict]:
        """Per-category metric lines: the top ``top_k`` categories by labels, then
        ``"(other)"`` (when labels fell outside them); each ``{"category": str,
        *CATEGORY_KEYS}`` (then the ``CATEGORY_PROTECTION_KEYS`` once a protected
        probability, the ``CATEGORY_ALARM_KEYS`` once an alarm's state was recorded for a
        category). Empty if no update had a category."""
        return self._categories.rows()

    def class_snapshots(self) -> list[dict]:
        """Per-class lines: none for binary predictions (``MulticlassTracker`` has them)."""
        return []

    def to_state(self) -> dict:
        """The tracker as plain data (numbers and lists), per-category statistics
        included; ``from_state`` rebuilds it."""
        self._fold_pending()
        return {
            "window": self.window,
            "bins": self.bins,
            "labels": self.labels,
            "ones": self.ones,
            "raw_labels": self.raw_labels,
            "protected_labels": self.protected_labels,
            "protection": None if self._protection is None else dict(self._protection),
            **means_state(self._all, self._recent, self._window),
            "p0": self._p0,
            "p1": self._p1,
            "rel": list(self._rel.__getstate__()),
            "raw_rel": list(self._raw_rel.__getstate__()),
            "categories": self._categories.to_state(),
        }

    @classmethod
    def from_state(cls, state: dict) -> CalibrationTracker:
        """The tracker ``to_state`` described.

        >>> t = CalibrationTracker(window=2)
        >>> t.update(0.2, 0.4, 0, score=0.3)
        >>> CalibrationTracker.from_state(t.to_state()).snapshot() == t.snapshot()
        True
        """
        categories = CategoryBreakdown.from_state(state["categories"])
        self = cls(state["window"], state["bins"], categories.top_k, categories.max_categories)
        self._categories = categories
        self.labels, self.ones = state["labels"], state["ones"]
        self.raw_labels = state["raw_labels"]
        # States written before protection have neither key.
        self.protected_labels = state.get("protected_labels", 0)
        prot = state.get("protection")
        self._protection = None if prot is None else dict(prot)
        self._window = restore_means(state, self._all, self._recent)
        self._p0, self._p1 = state["p0"], state["p1"]
        self._rel.__setstate__(tuple(state["rel"]))
        self._raw_rel.__setstate__(tuple(state["raw_rel"]))
        return self

    def __repr__(self):
        return f"CalibrationTracker(window={self.window}, bins={self.bins}, labels={self.labels})"
