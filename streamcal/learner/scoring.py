"""Turning a river classifier into a scoring function: its P(True) for an object.

Every mode scores through this one module, so calibration and test objects are always
scored by the same function, which is what Venn-Abers validity needs.

Features are handed to the model in a canonical (sorted) order. Summing the same terms
in another order can change a score in its last bit, and isotonic calibration is
sensitive to ties: two equal objects must get exactly equal scores, whatever order their
features arrived in.
"""

from __future__ import annotations

import numpy as np
from river import compose

from streamcal.core.validate import NonFiniteScore, check_score, suspect
from streamcal.errors import pre_release

__all__ = [
    "NonFiniteScore",
    "FeatureOrder",
    "canonical",
    "ordered",
    "score_one",
    "score_sorted",
    "score_many",
    "LearnScore",
    "batch_scores",
    "near_held",
]


def _sorted_keys(x: dict) -> tuple[list, bool]:
    """(canonical key order of ``x``, whether ``x`` is already in it)."""
    try:
        keys = sorted(x)
    except TypeError:
        keys = sorted(x, key=repr)
    return keys, tuple(x) == tuple(keys)


class FeatureOrder:
    """``canonical`` and ``ordered`` that remember the last key order they sorted.

    A stream's objects mostly repeat one key order, so it is sorted once, not once per
    object. Each mode object keeps its own (no state shared between classifiers).

    >>> order = FeatureOrder()
    >>> order.canonical({"b": 1, "a": 2})
    {'a': 2, 'b': 1}
    >>> x = {"a": 1, "b": 2}
    >>> order.ordered(x) is x, order.ordered({"b": 2, "a": 1})
    (True, {'a': 1, 'b': 2})
    """

    __slots__ = ("_last",)

    def __init__(self):
        self._last = ((), (), True)  # (key order seen last, its sorted keys, already sorted)

    def __setstate__(self, state):
        last = state[1]["_last"]
        if type(last[1]) is not tuple:  # names_values gives them as they are
            raise ValueError(pre_release("a feature order pickled with its keys in a list"))
        self._last = last

    def _keys(self, x: dict) -> tuple[tuple, bool]:
        order = tuple(x)
        last = self._last  # one read: safe if threads share the object
        if order == last[0]:
            return last[1], last[2]
        keys, in_order = _sorted_keys(x)
        self._last = (order, tuple(keys), in_order)
        return self._last[1], in_order

    def canonical(self, x: dict) -> dict:
        """See the module function ``canonical``."""
        return {k: x[k] for k in self._keys(x)[0]}

    def ordered(self, x: dict) -> dict:
        """See the module function ``ordered``."""
        keys, in_order = self._keys(x)
        return x if in_order else {k: x[k] for k in keys}

    def names_values(self, x: dict) -> tuple[tuple, tuple]:
        """``x``'s feature names and values in canonical order, as two tuples (the
        names' tuple is the same object for every ``x`` of one key order).

        >>> FeatureOrder().names_values({"b": 1, "a": 2})
        (('a', 'b'), (2, 1))
        """
        order = tuple(x)
        last = self._last
        if order != last[0]:
            self._keys(x)
            last = self._last
        if last[2]:
            return last[0], tuple(x.values())
        keys = last[1]
        return keys, tuple([x[k] for k in keys])


def canonical(x: dict) -> dict:
    """A copy of ``x`` with its features in sorted order (by ``repr`` if names don't compare).

    >>> canonical({"b": 1, "a": 2})
    {'a': 2, 'b': 1}
    """
    return {k: x[k] for k in _sorted_keys(x)[0]}


def ordered(x: dict) -> dict:
    """``x`` itself if its features are already in canonical order, else ``canonical(x)``.

    For objects that are only read (scored, learned), never kept: no copy on the common
    path, where a stream's objects arrive in one key order, often already sorted. (The
    mode objects use a ``FeatureOrder``, which also sorts that key order only once.)

    >>> x = {"a": 1, "b": 2}
    >>> ordered(x) is x, ordered({"b": 2, "a": 1})
    (True, {'a': 1, 'b': 2})
    """
    keys, in_order = _sorted_keys(x)
    return x if in_order else {k: x[k] for k in keys}


def score_one(model, x) -> float:
    """P(True) of ``x`` by ``model``, features sorted first (see ``score_sorted``).

    >>> from river import linear_model
    >>> score_one(linear_model.LogisticRegression(), {"a": 1.0})
    0.5
    """
    return score_sorted(model, ordered(x))


def score_sorted(model, x) -> float:
    """P(True) according to ``model``; 0.5 when it has learned nothing and returns ``{}``.

    A model that has seen only one class may return a one-key dict: the missing class
    then has probability 0 (or its complement, whichever key is present).

    ``x`` must already be in canonical order (``canonical(x)``). A model whose arithmetic
    overflows on ``x`` (river's Gaussian estimators square a feature of 1e300) raises
    ``NonFiniteScore`` naming the feature most likely to blame.
    """
    try:
        return _p_true(model.predict_proba_one(x))
    except ArithmeticError as exc:  # OverflowError, ZeroDivisionError: no finite output
        raise NonFiniteScore(unscorable(x, exc)) from None


def unscorable(x: dict, exc: BaseException) -> str:
    """The message of a model that could not score ``x`` (``exc``), naming its feature
    most likely to blame (``streamcal.core.validate.suspect``)."""
    feature, value = suspect(x)
    blame = "" if feature is None else f" (its feature {feature!r} = {value!r})"
    return f"the wrapped model could not score the object{blame}: {exc!r}"


def _p_true(proba) -> float:
    """P(True) from a ``predict_proba_one`` result (see ``score_sorted``)."""
    if not proba:
        return 0.5
    if True in proba:
        p = proba[True]
    elif False in proba:
        p = 1.0 - proba[False]
    else:
        raise ValueError(
            f"the wrapped model predicted labels {sorted(proba, key=repr)!r}: "
            "a binary classifier over False/True is needed"
        )
    try:
        return check_score(p)
    except ValueError:
        # a float that is not finite: the model is broken (the guard's finding); else the
        # model returned something that is not a probability at all
        error = NonFiniteScore if isinstance(p, float | np.floating) else ValueError
        raise error(f"the wrapped model returned P(True) = {p!r}, not a finite number") from None


def score_many(model, xs) -> list[float]:
    """``score_sorted`` for each (canonical) object of ``xs``, in order, with the same model."""
    return [score_sorted(model, x) for x in xs]


# Relative rounding error of one float64 operation.
_EPS = float(np.finfo(np.float64).eps)


def batch_scores(model, batch) -> tuple[np.ndarray, np.ndarray] | None:
    """The score of every row of ``batch`` (``streamcal.learner.minibatch.Batch``) in one
    computation, with a bound on each one's distance from ``score_sorted``'s: ``(scores,
    bounds)``; None when this model has no batched scorer here (then score row by row).

    Two kinds of model have one:

    * ``FieldScore``: the field's column, checked as ``score_one`` checks it; exact
      (bounds 0).
    * ``LogisticRegression`` alone or after one ``StandardScaler`` (river's defaults: log
      loss, zero initial weights), numeric features without NaN: the logit summed with
      numpy (``streamcal.learner.linear.score_rows``). Only the rounding differs from
      river's ``predict_proba_one``; the bound covers it with a wide margin: per row,
      ``4 (2d + 12) eps (sum |w_j x_j| + |b| + 1) + 1e-12`` for d features (the sums'
      and the scaling's rounding in both computations, the sigmoid's slope of at most
      1/4, and the clipping at |logit| = 30).

    The bound lets a Venn-Abers answer be read from the batched score exactly: the store's
    answer depends only on which held scores are below, equal to or above the score, so a
    batched score farther than its bound from every held score gets the one-by-one score's
    answer (``near_held`` finds the others).

    >>> import pandas as pd
    >>> from river import linear_model, preprocessing
    >>> from streamcal.learner.minibatch import Batch
    >>> model = preprocessing.StandardScaler() | linear_model.LogisticRegression()
    >>> for i in range(50):
    ...     model.learn_one({"a": float(i % 7), "b": float(i % 3)}, i % 7 > i % 3)
    >>> X = pd.DataFrame({"a": [1.0, 5.0], "b": [2.0, 0.0]})
    >>> scores, bounds = batch_scores(model, Batch(X))
    >>> one = [score_one(model, x) for x in Batch(X).rows()]
    >>> bool((abs(scores - one) <= bounds).all()), bool((bounds < 1e-11).all())
    (True, True)
    """
    from streamcal.learner.field_score import FieldScore
    from streamcal.learner.linear import linear_parts, score_rows

    if type(model) is FieldScore:
        scores = model.score_many(batch)
        return None if scores is None else (scores, np.zeros(len(scores)))
    parts = linear_parts(model)
    if parts is None or type(parts[1].initializer).__name__ != "Zeros":
        return None
    X = batch.matrix()
    if X is None:
        return None
    scores = score_rows(parts, batch.columns, X)
    scaler, lr = parts
    weights = lr._weights
    w = np.array([weights[k] if k in weights else 0.0 for k in batch.columns])
    if scaler is not None:
        means, var = scaler.means, scaler.vars
        m = np.array([means.get(k, 0.0) for k in batch.columns])
        v = np.array([var.get(k, 0.0) for k in batch.columns])
        with np.errstate(invalid="ignore", divide="ignore"):
            X = np.where(v > 0, (X - m) / np.where(v > 0, np.sqrt(v), 1.0), 0.0)
    size = np.abs(X * w).sum(axis=1) + abs(lr.intercept) + 1.0
    d = X.shape[1]
    return scores, 4.0 * (2 * d + 12) * _EPS * size + 1e-12


def near_held(held: np.ndarray, scores: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Which ``scores`` lie within their ``bounds`` of a score in ``held`` (sorted).

    >>> near_held(np.array([0.2, 0.5]), np.array([0.1, 0.5, 0.2001]), np.array([1e-3] * 3))
    array([False,  True,  True])
    """
    if len(held) == 0:
        return np.zeros(len(scores), dtype=bool)
    i = np.searchsorted(held, scores)
    below = held[np.maximum(i - 1, 0)]
    above = held[np.minimum(i, len(held) - 1)]
    return (np.abs(scores - below) <= bounds) | (np.abs(above - scores) <= bounds)


class LearnScore:
    """``model.learn_one(x, y)``, then the score of ``x`` by the model that just learned it.

    Equal to ``model.learn_one(x, y); score_sorted(model, x)`` (``x`` canonical), float for
    float. For a river pipeline of unsupervised transformers ending in a classifier (such
    as ``StandardScaler | LogisticRegression``), the transformers' output while learning
    is reused for the score: they have learned ``x`` already and the classifier's learning
    does not change them, so transforming ``x`` again would give the same features. This
    follows the pipeline's own ``learn_one`` step by step (river's plan of the pipeline);
    anything else, or a pipeline in a ``learn_during_predict`` context, goes the plain way.

    >>> from river import linear_model, preprocessing
    >>> a = preprocessing.StandardScaler() | linear_model.LogisticRegression()
    >>> b = a.clone()
    >>> learn_score = LearnScore(a)
    >>> for i in range(5):
    ...     x = {"u": float(i), "v": float(i * i)}
    ...     s = learn_score(x, i % 2 == 0)
    ...     b.learn_one(x, i % 2 == 0)
    ...     assert s == score_sorted(b, x)
    >>> round(s, 3)
    0.503
    """

    def __init__(self, model):
        self.model = model
        self._plan = None  # the pipeline plan the split was made from
        self._split = None  # (transformers, classifier), or None: the plain way

    def _current_split(self):
        model = self.model
        if type(model) is not compose.Pipeline or model._LEARN_UNSUPERVISED_DURING_PREDICT:
            return None
        plan = getattr(model, "_plan", None)
        if plan is None or plan is not self._plan:
            self._split = _pipeline_split(model)
            self._plan = getattr(model, "_plan", None)
        return self._split

    def __call__(self, x: dict, y) -> float:
        split = self._current_split()
        if split is None:
            self.model.learn_one(x, y)
            return score_sorted(self.model, x)
        transformers, last = split
        for t in transformers:  # as Pipeline.learn_one for an unsupervised transformer
            t.learn_one(x)
            x = t.transform_one(x)
        last.learn_one(x=x, y=y)
        return _p_true(last.predict_proba_one(x))

    def __getstate__(self):
        return self.model  # the split is rebuilt from the (copied) model's own steps

    def __setstate__(self, model):
        self.__init__(model)


def _pipeline_split(model):
    """(transformers, classifier) if the pipeline's plan has only plain unsupervised
    transformers before a supervised final step taking no extra arguments, else None."""
    try:
        plan = model._plan if model._plan is not None else model._build_plan()
    except AttributeError:  # another river version: no plan to follow
        return None
    if not plan:
        return None
    *steps, final = plan
    if len(final) != 4 or final[0] != "final" or final[2] is not True:
        return None
    for item in steps:
        if len(item) != 4 or item[0] != "transformer" or item[2] is not False:
            return None
    return tuple(item[1] for item in steps), final[1]
