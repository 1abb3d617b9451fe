"""Tie pooling: (score, label) pairs <-> groups (distinct score, count, number of ones).

Every exact algorithm in the core works on groups: equal scores are one group, so ties
are pooled by construction. This module is the one place that converts between the two.
"""

from __future__ import annotations

import numpy as np

from streamcal.core.validate import check_arrays

__all__ = ["group_ties", "ungroup"]


def group_ties(scores, labels) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pool equal scores: return (distinct sorted scores, counts w, numbers of ones s).

    >>> t, w, s = group_ties([0.5, 0.1, 0.5], [1, 0, 0])
    >>> t.tolist(), w.tolist(), s.tolist()
    ([0.1, 0.5], [1, 2], [0, 1])
    """
    scores, labels = check_arrays(scores, labels)
    t, inverse, w = np.unique(scores, return_inverse=True, return_counts=True)
    s = np.bincount(inverse.ravel(), weights=labels, minlength=len(t)).astype(np.int64)
    return t, w.astype(np.int64), s


def ungroup(t, w, s) -> tuple[np.ndarray, np.ndarray]:
    """The pairs of the groups, sorted by score, label 0 before 1 within a score.

    >>> scores, labels = ungroup([0.1, 0.5], [1, 2], [0, 1])
    >>> scores.tolist(), labels.tolist()
    ([0.1, 0.5, 0.5], [0, 0, 1])
    """
    t = np.asarray(t, np.float64)
    w = np.asarray(w, np.int64)
    s = np.asarray(s, np.int64)
    counts = np.empty(2 * len(w), np.int64)
    counts[0::2] = w - s
    counts[1::2] = s
    flags = np.tile(np.array([0, 1], np.int64), len(w))
    return np.repeat(t, w), np.repeat(flags, counts)
