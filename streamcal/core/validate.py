"""Input checks shared by the core: one place decides what a score and a label are, and
what a label as a message carries it (a JSON value) means: the stream processor's decoders
and the report's labels files read labels with the same rules."""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np


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
