"""Input checks shared by the core: one place decides what a score and a label are, and
what a label as a message carries it (a JSON value) means: the stream processor's decoders
and the report's labels files read labels with the same rules."""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np

from streamcal.errors import InputError


class NonFiniteScore(InputError, ValueError):
    """A model's output is not a finite number (NaN, an infinity): a model broken by what
    it learned, told apart from other errors so that the learning that broke it can be
    undone (``streamcal.learner.guard``)."""


def check_score(score) -> float:
    """Return ``score`` as a float, or raise ``ValueError`` naming it.

    >>> check_score(0.25)
    0.25
    >>> check_score(float("nan"))
    Traceback (most recent call last):
    ...
    ValueError: score must be a finite real number, got nan
    """
    # Fast path for the common case (a finite Python float): isinstance with the Real ABC
    # costs ~0.5 µs, and scores are checked several times per event in the stream processor.
    if type(score) is float and score - score == 0.0:
        return score
    if isinstance(score, (bool, np.bool_)) or not isinstance(score, Real):
        raise ValueError(f"score must be a finite real number, got {score!r}")
    value = float(score)
    if not math.isfinite(value):
        raise ValueError(f"score must be a finite real number, got {score!r}")
    return value


def check_features(x: dict) -> dict:
    """``x`` itself, or ``ValueError`` naming the first feature whose value is a number
    that is not finite: NaN, an infinity, or an integer beyond the float range (a model
    turns it into one). Other values (strings, None, ...) are the model's to judge.

    One C-level sum decides the common case: a sum of finite numbers is finite unless it
    overflows, and any NaN or infinity makes it non-finite; anything else (a sum that
    overflows, a value that is not a number) goes the long way, value by value.

    >>> check_features({"a": 1.5, "b": 2, "c": "red"})
    {'a': 1.5, 'b': 2, 'c': 'red'}
    >>> check_features({"a": 1e308, "b": 1e308})  # each is finite
    {'a': 1e+308, 'b': 1e+308}
    >>> check_features({"a": 1.0, "b": float("nan")})
    Traceback (most recent call last):
    ...
    ValueError: feature 'b' is not finite: nan
    """
    try:
        if math.isfinite(sum(x.values())):
            return x
    except (TypeError, OverflowError):
        pass
    for k, v in x.items():
        why = not_finite(v)
        if why is not None:
            raise ValueError(f"feature {short_repr(k)} {why}")
    return x


def not_finite(v) -> str | None:
    """Why the value ``v`` is a number that is not finite (``"is not finite: nan"``), or
    None: a finite number, or not a number at all.

    >>> not_finite(2.0), not_finite("x"), not_finite(float("-inf")), not_finite(10**400)
    (None, None, 'is not finite: -inf', 'is beyond the float range: an integer of 401 digits')
    """
    if type(v) is float:
        return None if v - v == 0.0 else f"is not finite: {v!r}"
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, Real):
        # pandas' missing value (without importing pandas): float() of it raises TypeError
        return "is missing: pd.NA" if type(v).__name__ == "NAType" else None
    try:
        f = float(v)
    except OverflowError:
        return f"is beyond the float range: an integer of {len(str(abs(int(v))))} digits"
    return None if math.isfinite(f) else f"is not finite: {v!r}"


def suspect(x: dict) -> tuple:
    """(feature, value) of ``x`` most likely to break a model that learns it: the first
    value that is a number but not finite, else the number of largest magnitude; (None,
    None) if it has no number.

    >>> suspect({"a": 2.0, "b": -1e300, "c": "red"}), suspect({"c": "red"})
    (('b', -1e+300), (None, None))
    """
    best, size = (None, None), -1.0
    for k, v in x.items():
        if not_finite(v) is not None:
            return k, v
        if isinstance(v, Real) and not isinstance(v, (bool, np.bool_)):
            a = abs(float(v))
            if a > size:
                best, size = (k, v), a
    return best


def suspect_kind(x: dict) -> str | None:
    """What in ``x`` a numeric model most likely raised ``TypeError`` on, as a phrase: the
    first value that is not a number (a string left in the features), else the first
    feature name that is not a string (river's models expect string names); None if
    neither.

    >>> suspect_kind({"x1": 0.3, "country": "fr"}), suspect_kind({0: 1.5}), suspect_kind({"a": 1})
    ("its feature 'country' = 'fr' is not a number", 'its feature name 0 is not a string', None)
    """
    for k, v in x.items():
        if not isinstance(v, Real):
            return f"its feature {short_repr(k)} = {short_repr(v)} is not a number"
    for k in x:
        if not isinstance(k, str):
            return f"its feature name {short_repr(k)} is not a string"
    return None


def check_label(label) -> int:
    """Return ``label`` as 0 or 1, or raise ``ValueError`` naming it.

    Accepted: ``bool``, ``numpy.bool_``, and integers (Python or numpy) equal to 0 or 1.
    Floats are refused on purpose: ``0.7`` is not a label, and ``1.0`` usually means
    probabilities were passed where labels were meant.

    >>> check_label(True), check_label(0)
    (1, 0)
    >>> check_label(2)
    Traceback (most recent call last):
    ...
    ValueError: label must be 0/1 or False/True, got 2
    """
    if label is True or label is False:  # fast paths: the common cases, without isinstance
        return int(label)
    if type(label) is int and (label == 0 or label == 1):
        return label
    if isinstance(label, (bool, np.bool_)):
        return int(label)
    if isinstance(label, Integral) and label in (0, 1):
        return int(label)
    raise ValueError(f"label must be 0/1 or False/True, got {label!r}")


def check_arrays(scores, labels) -> tuple[np.ndarray, np.ndarray]:
    """Validate calibration arrays; return (float64 scores, int64 labels)."""
    s = np.asarray(scores)
    y = np.asarray(labels)
    if s.ndim != 1 or y.ndim != 1:
        raise ValueError(f"scores and labels must be 1-d, got shapes {s.shape} and {y.shape}")
    if s.shape != y.shape:
        raise ValueError(f"scores and labels differ in length: {s.shape[0]} != {y.shape[0]}")
    if s.dtype == bool or not np.issubdtype(s.dtype, np.number) or np.iscomplexobj(s):
        raise ValueError(f"scores must be real numbers, got dtype {s.dtype}")
    s = s.astype(np.float64, copy=False)
    bad = ~np.isfinite(s)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"score must be a finite real number, got {s[i]!r} at position {i}")
    if y.dtype == bool:
        return s, y.astype(np.int64)
    if not np.issubdtype(y.dtype, np.integer):
        if y.size:
            raise ValueError(f"labels must be 0/1 integers or booleans, got dtype {y.dtype}")
        return s, y.astype(np.int64)
    y = y.astype(np.int64, copy=False)
    bad = (y != 0) & (y != 1)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"label must be 0/1 or False/True, got {y[i]!r} at position {i}")
    return s, y


def check_test_scores(scores) -> np.ndarray:
    """Validate test scores (scalar or array); return a float64 array."""
    s = np.asarray(scores)
    if s.dtype == bool or not np.issubdtype(s.dtype, np.number) or np.iscomplexobj(s):
        raise ValueError(f"scores must be real numbers, got dtype {s.dtype}")
    s = s.astype(np.float64, copy=False)
    bad = ~np.isfinite(s)
    if bad.any():
        raise ValueError(f"score must be a finite real number, got {s[bad].flat[0]!r}")
    return s


def short_repr(v, limit: int = 80) -> str:
    """A repr of ``v`` of at most ~``limit`` characters, safe for any JSON value (no repr
    of a container: a deeply nested one would recurse once per level).

    >>> short_repr(2.5), short_repr([1, [2]]), short_repr("x" * 100)[-16:]
    ('2.5', 'an array of 2 items', '(102 characters)')
    """
    if type(v) is dict:
        return f"an object of {len(v)} keys"
    if type(v) is list:
        return f"an array of {len(v)} items"
    text = repr(v)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


# Binary labels as producers write them: numbers from CSV or pandas (1.0), strings ("1").
# 1.0 == 1 == True hash alike, so floats and booleans find their key; 0.5, 2 and "yes" do not.
_BINARY = {0: 0, 1: 1, "0": 0, "1": 1, "false": 0, "true": 1}
_BINARY_TYPES = frozenset((bool, int, float, str))


def binary_label(value) -> int:
    """0 or 1 from a binary label in a message (a JSON value): true/false, 0/1 (also
    0.0/1.0), or the strings "0"/"1"/"true"/"false"; ``ValueError`` otherwise.

    >>> binary_label(True), binary_label("0"), binary_label(1.0)
    (1, 0, 1)
    >>> binary_label(2)
    Traceback (most recent call last):
    ...
    ValueError: label is not binary (0/1, true/false or "0"/"1"/"true"/"false"): 2
    """
    if type(value) in _BINARY_TYPES:
        y = _BINARY.get(value)
        if y is not None:
            return y
    raise ValueError(
        f'label is not binary (0/1, true/false or "0"/"1"/"true"/"false"): {short_repr(value)}'
    )


def class_label(value) -> str:
    """A class from a multiclass label in a message (a JSON value): a non-empty string, or
    an integer as its decimal string (``4`` and ``"4"`` are one class, as ids are, and
    every class is a JSON object key in the predictions); ``ValueError`` for anything
    else: a boolean, a float, null, an array or an object names no class without a guess
    (``true`` could be ``1`` or ``"true"``, ``4.0`` could be ``4``).

    >>> class_label(4), class_label("refund")
    ('4', 'refund')
    >>> class_label(4.0)
    Traceback (most recent call last):
    ...
    ValueError: label is not a class (a string or an integer): 4.0
    """
    t = type(value)
    if t is str:
        if not value:
            raise ValueError("empty label (a class name must not be empty)")
        return value
    if t is int:
        return str(value)
    raise ValueError(f"label is not a class (a string or an integer): {short_repr(value)}")
