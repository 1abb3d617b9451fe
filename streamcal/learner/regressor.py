"""ConformalPredictiveRegressor: a river regressor whose every prediction is a calibrated
predictive distribution (an online, split conformal predictive system).

Each label's residual is taken *before* the model learns it (prequential, as the
classifier's default mode): alpha = (y - yhat) / sigma, with yhat the model's prediction
and sigma an optional difficulty estimate (a second regressor learning |y - yhat|). The
residuals are held by category (``streamcal.learner.residuals``: the user's ``by`` key and
a bin of yhat) in ``RankStore``s, and a prediction is the conformal predictive
distribution of its category (``streamcal.core.cps``), every query in O(log n).

The guarantee: if the residuals are exchangeable (a model that no longer learns, or one
whose errors have settled), the PIT Q(y_true, tau) is uniform and each interval covers
with at least its probability, in each category. A model that keeps improving makes the
older residuals larger than the new ones, which would leave the intervals too wide and
the PIT off for good: so only the newest ``window`` residuals are held (1000 by default,
as the classifiers' calibration window). A window keeps the guarantee of a model that no
longer learns (the newest residuals of an exchangeable stream are exchangeable with the
next one) and makes a learning model's held residuals those of a model close to the one
that predicts; ``window=None`` holds every residual.

With ``by`` the classifiers' Mondrian rules apply (``streamcal.learner.mondrian``): at
most ``max_categories`` keys hold residuals (the least recently labelled evicted, with
its alarm), and by default a key holding fewer than ``min_category`` residuals in the bin
of yhat (none: never labelled, or evicted) is answered from the pooled residuals, the
newest ``window`` of the whole stream in that bin. **A pooled answer has the marginal
guarantee only** (the intervals cover as claimed on average over the objects so
answered, as without ``by``), not the per-category one; ``fallback="off"`` answers every
key from its own residuals only (an unbounded interval until it holds enough).
"""

from __future__ import annotations

from collections.abc import Iterator
from numbers import Real

import numpy as np
from river import base

from streamcal.core.cps import cdf_value
from streamcal.core.validate import check_features
from streamcal.errors import pre_release
from streamcal.learner.alarm_view import AlarmView
from streamcal.learner.churn import CategoryChurn
from streamcal.learner.mondrian import FROM_X, category_of, hashable_category
from streamcal.learner.predictive_distribution import PredictiveDistribution
from streamcal.learner.residual_alarm import ResidualAlarm
from streamcal.learner.residuals import ResidualStores
from streamcal.learner.settings import (
    DEFAULT_MAX_CATEGORIES,
    DEFAULT_MIN_CATEGORY,
    DEFAULT_WINDOW,
    check_mondrian,
)

__all__ = ["ConformalPredictiveRegressor"]

SIGMA_FLOOR = 0.1  # sigma is at least this times the mean absolute residual so far


def category_minimum(min_category, fallback, by, window, bins) -> int:
    """The residuals a key needs in a bin to answer on its own (below: pooled): 0 without
    the pooled fallback, else ``min_category``, by default ``DEFAULT_MIN_CATEGORY`` or half
    a bin's share of the window if smaller (a key with a full window then answers on its
    own in most bins).

    >>> category_minimum(None, None, "g", 1000, 10), category_minimum(None, None, "g", 1000, 1)
    (50, 100)
    >>> category_minimum(7, None, "g", 1000, 10), category_minimum(None, "off", "g", 1000, 10)
    (7, 0)
    """
    if by is None or fallback == "off":
        return 0
    if min_category is not None:
        return min_category
    if window is None:
        return DEFAULT_MIN_CATEGORY
    return max(1, min(DEFAULT_MIN_CATEGORY, window // (2 * bins)))


def _check_count(name: str, v, allow_none: bool = False) -> None:
    if v is None and allow_none:
        return
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{name} must be an integer >= 1{' or None' if allow_none else ''}, "
                         f"got {v!r}")  # fmt: skip


def _check_target(y) -> float:
    """y as a float, or ``ValueError``: a label must be a finite real number (numpy's
    too; not a bool, not a string)."""
    if type(y) is not float:
        if isinstance(y, (bool, np.bool_)) or not isinstance(y, Real):
            raise ValueError(f"a label must be a finite number, got {y!r}")
        y = float(y)
    if y - y != 0.0:
        raise ValueError(f"a label must be a finite number, got {y!r}")
    return y


def _number(v) -> float | None:
    """A model's output as a finite float, else None."""
    if isinstance(v, bool) or not isinstance(v, Real):
        return None
    v = float(v)
    return v if v - v == 0.0 else None


class ConformalPredictiveRegressor(AlarmView, base.Regressor):
    """Calibrated predictive distributions for a river regressor, online.

    Parameters
    ----------
    regressor
        The river regressor; it learns every label, after the label's residual is taken.
        A prediction that is not a finite number counts as 0 (river's regressors predict
        0 before their first label).
    bins
        Mondrian bins of the prediction yhat (``streamcal.learner.residuals``): each bin
        has its own residuals, so the spread follows yhat. 1: one pool.
    by
        Mondrian categories of the user's own: a feature name, or a function of ``x``
        returning a hashable key (picklable for the regressor to be); within each key,
        the bins of yhat.
    difficulty
        A river regressor estimating the size of the error, learning |y - yhat| online:
        residuals are divided by its prediction (normalised conformal prediction), so
        intervals are narrower for easy objects and wider for hard ones. None: sigma = 1.
    window
        Hold the residuals of the newest ``window`` labels of each ``by`` key only (of
        the stream without ``by``; default 1000, the classifiers' ``DEFAULT_WINDOW``, per
        category as theirs); None: all, which suits a model that has stopped learning
        (the early residuals of a learning one are larger than its present errors:
        measured in docs/performance.md).
    alarm_alpha
        A conformal test martingale against exchangeability (``ConformalAlarm``, one per
        ``by`` key, on the residuals of frozen copies of the model:
        ``streamcal.learner.residual_alarm``): ``alarm`` turns True when it reaches
        1 / alarm_alpha, which on an exchangeable stream happens with probability at most
        alarm_alpha, whatever the model. None: no alarm.
    alarm_period
        Labels of a ``by`` key between two snapshots of the model for the alarm.
    min_category, fallback
        With ``by``, by default: a key holding fewer than ``min_category`` residuals in
        the bin of yhat (none: never labelled, or evicted) is answered from the pooled
        residuals (the newest ``window`` of the whole stream, in that bin; default 100,
        or half a bin's share of the window, ``window / (2 bins)``, if smaller).
        **Such an answer has only the marginal guarantee (coverage on average over the
        objects so answered, as without ``by``); the per-category guarantee holds for the
        answers from a key's own residuals.** ``fallback="off"``: every key from its own
        residuals only (an infinite interval until it holds enough), as before.
    max_categories
        With ``by``: at most this many keys hold residuals (and alarms); the least
        recently labelled one is evicted when a new one comes (``evictions`` counts
        them), so memory stays bounded however many values the key has. A key that
        churns (most evicted keys had fewer than ``min_category`` residuals) brings one
        ``CategoryChurnWarning``.
    seed
        Seeds the taus of ``cdf`` (a replay draws the same).
    backend
        The ``RankStore`` backend (None: as ``ScoreStore``'s choice).

    Examples
    --------

    >>> from river import datasets, linear_model, preprocessing
    >>> from streamcal import ConformalPredictiveRegressor
    >>> model = ConformalPredictiveRegressor(
    ...     preprocessing.StandardScaler() | linear_model.LinearRegression(), bins=2)
    >>> covered = []
    >>> for i, (x, y) in enumerate(datasets.TrumpApproval()):
    ...     dist = model.predict_distribution_one(x)
    ...     lo, hi = dist.interval(0.8)
    ...     if i >= 200:
    ...         covered.append(lo <= y <= hi)
    ...     model.learn_one(x, y)
    >>> round(sum(covered) / len(covered), 2)
    0.9
    >>> dist = model.predict_distribution_one(x)
    >>> dist.quantile(0.1) <= dist.median <= dist.quantile(0.9)
    True
    >>> 0.0 <= dist.cdf(y) <= 1.0, dist.crps(y) >= 0.0
    (True, True)

    With ``by``, a new key is answered from the pooled residuals until it holds its own:

    >>> by_hour = ConformalPredictiveRegressor(linear_model.LinearRegression(), bins=1,
    ...                                        by="hour", max_categories=3, min_category=30)
    >>> for i in range(300):
    ...     by_hour.learn_one({"a": float(i % 7), "hour": i % 3}, float(i % 7 + i % 3))
    >>> by_hour.categories, by_hour.evictions
    ([0, 1, 2], 0)
    >>> by_hour.predict_distribution_one({"a": 1.0, "hour": 1}).n  # its own residuals
    100
    >>> by_hour.predict_distribution_one({"a": 1.0, "hour": 5}).n  # none: the pooled ones
    300
    """

    def __init__(self, regressor: base.Regressor, bins: int = 10, by=None, difficulty=None,
                 window: int | None = DEFAULT_WINDOW, alarm_alpha: float | None = None,
                 alarm_period: int = 1000, seed: int = 0, backend: str | None = None,
                 min_category: int | None = None, fallback: str | None = None,
                 max_categories: int = DEFAULT_MAX_CATEGORIES):  # fmt: skip
        _check_count("bins", bins)
        check_mondrian(by, min_category, fallback, max_categories, offered=by is not None,
                       needs="by")  # fmt: skip
        _check_count("window", window, allow_none=True)
        _check_count("alarm_period", alarm_period)
        if alarm_alpha is not None and not (isinstance(alarm_alpha, float) and 0 < alarm_alpha < 1):
            raise ValueError(f"alarm_alpha must be a float in (0, 1) or None, got {alarm_alpha!r}")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
        self.regressor = regressor
        self.bins = bins
        self.by = by
        self.difficulty = difficulty
        self.window = window
        self.alarm_alpha = alarm_alpha
        self.alarm_period = alarm_period
        self.seed = seed
        self.backend = backend
        self.min_category = min_category
        self.fallback = fallback
        self.max_categories = max_categories
        minimum = category_minimum(min_category, fallback, by, window, bins)
        self._residuals = ResidualStores(
            bins, window, backend, seed, max_categories=None if by is None else max_categories,
            pooled=by is not None and fallback != "off", min_category=minimum,
        )  # fmt: skip
        # cold: fewer residuals in all than a bin needs to answer on its own, so it never
        # did (without the fallback, the default's count, as the classifiers')
        self._churn = CategoryChurn(minimum or category_minimum(None, None, by, window, bins),
                                    items="residuals")  # fmt: skip
        self._alarm = None if alarm_alpha is None else ResidualAlarm(alarm_alpha, alarm_period)
        self._version = 0  # labels learned: a distribution given before is stale
        self._queries = 0
        self._mean_abs = 0.0  # running mean |residual|: sigma's floor and fallback
        self._last: tuple | None = None  # (x, its copy, yhat, sigma) of the last query

    @classmethod
    def _unit_test_params(cls) -> Iterator[dict]:
        from river import linear_model, preprocessing

        yield {"regressor": preprocessing.StandardScaler() | linear_model.LinearRegression()}
        yield {"regressor": linear_model.LinearRegression(), "bins": 1, "window": 30,
               "difficulty": linear_model.LinearRegression(), "alarm_alpha": 0.01}  # fmt: skip
        yield {"regressor": linear_model.LinearRegression(), "bins": 2, "by": "gallup",
               "max_categories": 5, "min_category": 3, "alarm_alpha": 0.01}  # fmt: skip

    # ------------------------------------------------------------------ predictions

    def _key(self, x: dict, category):
        """The ``by`` key of x: ``category`` if given, else from x (None without ``by``)."""
        if self.by is None:
            return None
        return category_of(self.by, x) if category is FROM_X else hashable_category(category)

    def _predict(self, x: dict, category=FROM_X) -> tuple:
        """(key, yhat, sigma) of x, reusing the last query's when x is the same object
        unchanged and nothing was learned since (the prequential predict-then-learn)."""
        last = self._last
        if last is not None and last[0] is x and last[1] == x:
            return (self._key(x, category), *last[2:])
        check_features(x)
        key = self._key(x, category)
        y_hat = _number(self.regressor.predict_one(x))
        if y_hat is None:  # a model with nothing to say (or broken) predicts 0, as river's do
            y_hat = 0.0
        sigma = 1.0
        if self.difficulty is not None and self._mean_abs > 0:
            # A guess below a tenth of the typical error is not trusted: one residual
            # divided by a tiny sigma would be an outlier in every later distribution.
            guess = _number(self.difficulty.predict_one(x))
            floor = SIGMA_FLOOR * self._mean_abs
            sigma = self._mean_abs if guess is None else max(guess, floor)
        self._last = (x, dict(x), y_hat, sigma)
        return key, y_hat, sigma

    def predict_distribution_one(self, x: dict, category=FROM_X) -> PredictiveDistribution:
        """The predictive distribution of x's label (see ``PredictiveDistribution``). With
        ``by``, ``category=c`` gives x's key instead of deriving it from x."""
        key, y_hat, sigma = self._predict(x, category)
        self._queries += 1
        return PredictiveDistribution(y_hat, sigma, (self.seed, self._queries),
                                      self._residuals.store(key, y_hat), self,
                                      self._version)  # fmt: skip

    def predict_one(self, x: dict) -> float:
        """The median of x's predictive distribution (yhat before any label)."""
        return self.predict_distribution_one(x).median

    def predict_many(self, X):
        """``predict_one`` of every row of the ``pandas.DataFrame`` X, as a Series."""
        import pandas as pd

        return pd.Series([self.predict_one(x) for x in X.to_dict(orient="records")],
                         index=X.index, dtype=float)  # fmt: skip

    def score_label(self, y_hat: float, sigma: float, y, tau: float, key=None) -> tuple:
        """(PIT, CRPS) of the label ``y`` of an earlier prediction (its model output
        ``y_hat``, difficulty ``sigma``, tau and ``by`` key: ``PredictiveDistribution``'s),
        against the residuals of its category held *now*: for a label that comes after
        other labels were learned, when its distribution is stale. Ask before learning
        ``y``: its own residual would then be counted. CRPS is nan with no residual.

        >>> from river import linear_model
        >>> model = ConformalPredictiveRegressor(linear_model.LinearRegression(), bins=1)
        >>> for i in range(20):
        ...     model.learn_one({"a": 1.0}, float(i % 5))
        >>> dist = model.predict_distribution_one({"a": 1.0})
        >>> pit, crps = model.score_label(dist.y_hat, dist.sigma, 3.0, dist.tau)
        >>> (pit, crps) == (dist.cdf(3.0), dist.crps(3.0))
        True
        """
        y = _check_target(y)
        store = self._residuals.store(key, y_hat)
        alpha = (y - y_hat) / sigma
        return cdf_value(store, alpha, tau), sigma * store.crps(alpha)

    # ------------------------------------------------------------------ learning

    def learn_one(self, x: dict, y, category=FROM_X) -> None:
        """Take the residual of label y (before the model learns it), hold it, then let
        the model (and the difficulty estimate) learn. ``ValueError`` on a label or
        feature that is not a finite number, before anything changes. With ``by``,
        ``category=`` as for the prediction."""
        y = _check_target(y)
        key, y_hat, sigma = self._predict(x, category)
        snapshot = None if self._alarm is None else self._alarm.snapshot_due(key, self.regressor)
        # the model first: if it refuses the object (raises), nothing else has changed
        self.regressor.learn_one(x, y)
        if self.difficulty is not None:
            self.difficulty.learn_one(x, abs(y - y_hat))
        gone = self._residuals.add(key, y_hat, (y - y_hat) / sigma)
        if gone is not None:
            if self._alarm is not None:
                self._alarm.forget(gone[0])
            self._churn.evicted(gone[1], self._residuals.evictions, self.by,
                                self.max_categories, stacklevel=3)  # fmt: skip
        if self._alarm is not None:
            self._alarm.learn(key, snapshot, x, y)
        self._version += 1
        self._mean_abs += (abs(y - y_hat) - self._mean_abs) / self._version
        self._last = None

    def learn_many(self, X, y) -> None:
        """``learn_one`` of every row of X with its label in y (by position); every label
        is checked before anything is learned."""
        labels = [_check_target(v) for v in y]
        rows = X.to_dict(orient="records")
        if len(rows) != len(labels):
            raise ValueError(f"{len(rows)} rows but {len(labels)} labels")
        for x, v in zip(rows, labels, strict=True):
            self.learn_one(x, v)

    # ------------------------------------------------------------------ inspection

    @property
    def calibration_size(self) -> int:
        """Residuals held."""
        return len(self._residuals)

    @property
    def categories(self) -> list:
        """With ``by``: the keys holding residuals, least recently labelled first; else
        ``[]``."""
        return [] if self.by is None else list(self._residuals.sizes)

    @property
    def evictions(self) -> int:
        """Keys dropped so far to stay within ``max_categories`` (0 without ``by``)."""
        return self._residuals.evictions

    @property
    def bin_edges(self) -> list[float]:
        """The edges of the bins of yhat in force (empty before the first fit)."""
        return list(self._residuals.edges)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_last"] = None  # holds the caller's dict; a prediction is redone after loading
        return state

    def __setstate__(self, state: dict) -> None:
        if "_churn" not in state:  # keys not bounded: only before the first release
            raise ValueError(pre_release("a regressor pickled without bounded keys"))
        self.__dict__.update(state)
