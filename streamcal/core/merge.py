"""Merging a Venn-Abers pair (p0, p1) into one probability (Vovk & Petej 2014, section 4).

``merge_log`` is minimax for log loss, ``merge_square`` for square loss; ``merge_mean``
is the midpoint, for comparison. All take scalars or numpy arrays.
"""

from __future__ import annotations

import numpy as np

__all__ = ["merge_log", "merge_square", "merge_mean", "MERGES", "SCALAR_MERGES"]


def _out(x):
    return float(x) if np.ndim(x) == 0 else x


def merge_log(p0, p1):
    """p1 / (1 - p0 + p1): minimax for log loss, never 0 or 1 when 0 <= p0 < 1 and p1 > 0.

    >>> merge_log(0.2, 0.4)
    0.3333333333333333
    >>> merge_log(np.array([0.0, 0.5]), np.array([1.0, 0.5])).tolist()
    [0.5, 0.5]
    """
    p0 = np.asarray(p0, dtype=float)
    p1 = np.asarray(p1, dtype=float)
    return _out(p1 / (1.0 - p0 + p1))


def merge_square(p0, p1):
    """p1 + p0**2 / 2 - p1**2 / 2: minimax for square loss.

    >>> merge_square(0.2, 0.4)
    0.34
    """
    p0 = np.asarray(p0, dtype=float)
    p1 = np.asarray(p1, dtype=float)
    return _out(p1 + p0 * p0 / 2.0 - p1 * p1 / 2.0)


def merge_mean(p0, p1):
    """(p0 + p1) / 2.

    >>> merge_mean(0.2, 0.4)
    0.30000000000000004
    """
    p0 = np.asarray(p0, dtype=float)
    p1 = np.asarray(p1, dtype=float)
    return _out((p0 + p1) / 2.0)


MERGES = {"log": merge_log, "square": merge_square, "mean": merge_mean}

# The same merges on Python floats: the same operations in the same order, hence the same
# results bit for bit, without numpy's per-call overhead (a few µs, on every prediction).
SCALAR_MERGES = {
    "log": lambda p0, p1: p1 / (1.0 - p0 + p1),
    "square": lambda p0, p1: p1 + p0 * p0 / 2.0 - p1 * p1 / 2.0,
    "mean": lambda p0, p1: (p0 + p1) / 2.0,
}
