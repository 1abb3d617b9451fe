"""Batch Venn-Abers: (p0, p1) for many test scores against one calibration set.

The precomputation of Vovk, Petej & Fedorova (2015): pool tied calibration scores into
groups, compute exact tables F0, F1 over group positions in O(k log k) (see
``streamcal.core._tables``), then answer each test score by two binary searches. Total
O((n + m) log n) for n calibration and m test scores.
"""

from __future__ import annotations

import numpy as np

from streamcal.core._tables import tables
from streamcal.core.ties import group_ties
from streamcal.core.validate import check_test_scores

__all__ = ["venn_abers"]


def venn_abers(cal_scores, cal_labels, test_scores) -> tuple[np.ndarray, np.ndarray]:
    """(p0, p1) arrays for ``test_scores`` given calibration pairs, exactly.

    p0 (p1) is the isotonic fit at the test score after adding it with label 0 (1) to the
    calibration pairs, equal scores pooled. The output has the shape of ``test_scores``.

    >>> p0, p1 = venn_abers([0.1, 0.2, 0.8, 0.9], [0, 1, 0, 1], [0.5, 1.0])
    >>> p0.tolist(), p1.tolist()
    ([0.3333333333333333, 0.5], [0.6666666666666666, 1.0])
    >>> p0, p1 = venn_abers([], [], [0.5])
    >>> p0.tolist(), p1.tolist()
    ([0.0], [1.0])
    """
    t, w, ones = group_ties(cal_scores, cal_labels)
    x = check_test_scores(test_scores)
    flat = x.ravel()
    p0 = np.zeros(flat.shape[0])
    p1 = np.ones(flat.shape[0])
    if len(t):
        F0, F1 = tables(w, ones)
        c = np.searchsorted(t, flat, side="right") - 1  # last group with score <= x
        d = np.searchsorted(t, flat, side="left")  # first group with score >= x
        has_c = c >= 0
        has_d = d < len(t)
        p0[has_c] = F0[c[has_c]]
        p1[has_d] = F1[d[has_d]]
    return p0.reshape(x.shape), p1.reshape(x.shape)
