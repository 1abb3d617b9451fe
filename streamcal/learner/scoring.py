"""Turning a river classifier into a scoring function: its P(True) for an object.

Every mode scores through this one module, so calibration and test objects are always
scored by the same function, which is what Venn-Abers validity needs.

Features are handed to the model in a canonical (sorted) order. Summing the same terms
in another order can change a score in its last bit, and isotonic calibration is
sensitive to ties: two equal objects must get exactly equal scores, whatever order their
features arrived in.
"""

from __future__ import annotations

from streamcal.core._validate import check_score

__all__ = ["canonical", "score_one", "score_sorted", "score_many"]


def canonical(x: dict) -> dict:
    """A copy of ``x`` with its features in sorted order (by ``repr`` if names don't compare).

    >>> canonical({"b": 1, "a": 2})
    {'a': 2, 'b': 1}
    """
    order = tuple(x)
    last = _last[0]  # one read: safe if threads share it
    if order == last[0]:  # streams mostly repeat one key order: sort it once
        keys = last[1]
    else:
        try:
            keys = sorted(x)
        except TypeError:
            keys = sorted(x, key=repr)
        _last[0] = (order, keys)
    return {k: x[k] for k in keys}


_last: list = [((), [])]  # [(key order seen last, its sorted keys)]


def score_one(model, x) -> float:
    """P(True) of ``x`` by ``model``, features sorted first (see ``score_sorted``).

    >>> from river import linear_model
    >>> score_one(linear_model.LogisticRegression(), {"a": 1.0})
    0.5
    """
    return score_sorted(model, canonical(x))


def score_sorted(model, x) -> float:
    """P(True) according to ``model``; 0.5 when it has learned nothing and returns ``{}``.

    A model that has seen only one class may return a one-key dict: the missing class
    then has probability 0 (or its complement, whichever key is present).

    ``x`` must already be in canonical order (``canonical(x)``).
    """
    proba = model.predict_proba_one(x)
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
        raise ValueError(
            f"the wrapped model returned P(True) = {p!r}, not a finite number"
        ) from None


def score_many(model, xs) -> list[float]:
    """``score_sorted`` for each (canonical) object of ``xs``, in order, with the same model."""
    return [score_sorted(model, x) for x in xs]
