"""The labels a user sends the classifiers: one place decides what is a class, what is a
missing label and what a float means, for ``VennAbersClassifier`` and
``VennAbersMultiClassifier`` alike (``learn_one`` and ``learn_many``).

* **Missing** -- None, NaN (a Python or numpy float) and ``pd.NA`` are refused
  (``ValueError``): a missing label is no class, and since NaN != NaN every NaN would
  otherwise be a class of its own. Drop unlabelled rows, or learn them once the label
  comes.
* **Floats** -- 0.0 and 1.0 (Python or numpy) are the classes 0 and 1: pandas turns a
  column of 0/1 labels into floats as soon as one of them is NaN. Any other float is
  refused, naming it: 0.7 is a probability, not a label, and 2.0 says nothing a user
  cannot say with the integer (``y.astype(int)`` once the missing labels are dropped).
* **numpy scalars** are their Python values (``np.int64(2)`` is ``2``, ``np.bool_`` a
  ``bool``), so that the classes are plain data in states and messages.
* An unhashable label is refused (``TypeError``); anything else hashable (a bool, an
  integer, a string, ...) names a class.

>>> import numpy as np
>>> take_label(np.float64(1.0)), take_label(np.int64(2)), take_label("spam")
(1, 2, 'spam')
>>> take_label(float("nan"))
Traceback (most recent call last):
...
ValueError: label nan is missing (None, NaN or pd.NA): drop unlabelled rows
>>> take_label(0.7)
Traceback (most recent call last):
...
ValueError: label 0.7 is a float, not 0.0 or 1.0: give classes as integers
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np

from streamcal.core.validate import short_repr

__all__ = ["is_binary", "take_label", "take_labels", "top_class"]


def take_label(y):
    """The class ``y`` names (see the module docstring), or ``ValueError`` (missing, a
    float other than 0.0/1.0) / ``TypeError`` (unhashable) naming it."""
    t = type(y)
    if t is bool or t is int or t is str:  # the common cases first
        return y
    if isinstance(y, np.generic):
        y = y.item()
    if y is None or type(y).__name__ == "NAType" or (isinstance(y, float) and y != y):
        raise ValueError(
            f"label {short_repr(y)} is missing (None, NaN or pd.NA): drop unlabelled rows"
        )
    if isinstance(y, Real) and not isinstance(y, Integral):
        if y == 0 or y == 1:
            return int(y)
        raise ValueError(
            f"label {short_repr(y)} is a float, not 0.0 or 1.0: give classes as integers"
        )
    try:
        hash(y)
    except TypeError:
        raise TypeError(f"a class label must be hashable, got {short_repr(y)}") from None
    return y


def take_labels(labels: list, index=None) -> list:
    """``take_label`` of every label of a mini-batch, all checked before any is learned;
    an error names the row (its label in ``index``, the DataFrame's index, else its
    position).

    >>> take_labels([1.0, 0.0, True])
    [1, 0, True]
    >>> take_labels([0, 0.5], index=["a", "b"])
    Traceback (most recent call last):
    ...
    ValueError: label 0.5 is a float, not 0.0 or 1.0: give classes as integers (row 'b')
    """
    out = []
    for i, y in enumerate(labels):
        try:
            out.append(take_label(y))
        except (ValueError, TypeError) as exc:
            row = i if index is None else index[i]
            raise type(exc)(f"{exc} (row {short_repr(row)})") from None
    return out


def is_binary(y) -> bool:
    """Whether a taken label (``take_label``) is a binary one: a bool, or the integer 0 or 1.

    >>> is_binary(True), is_binary(1), is_binary(2), is_binary("1")
    (True, True, False, False)
    """
    return y is True or y is False or (type(y) is int and (y == 0 or y == 1))


def top_class(proba: dict):
    """The class of largest probability in ``proba`` (the first on ties, as river's
    ``predict_one``), or None for an empty dict.

    >>> top_class({"a": 0.25, "b": 0.5, "c": 0.5}), top_class({})
    ('b', None)
    """
    return max(proba, key=proba.get) if proba else None
