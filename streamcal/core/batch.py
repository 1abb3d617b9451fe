"""Batch Venn-Abers: (p0, p1) for many test scores against one calibration set.

PLACEHOLDER (loops over the brute-force oracle); replaced by the O((n + m) log n)
precomputation of Vovk, Petej & Fedorova (2015) behind the same signature.
"""

from __future__ import annotations

import numpy as np

from streamcal.core._validate import check_arrays, check_test_scores
from streamcal.core.isotonic import venn_abers_bruteforce

__all__ = ["venn_abers"]


def venn_abers(cal_scores, cal_labels, test_scores) -> tuple[np.ndarray, np.ndarray]:
    """(p0, p1) arrays for ``test_scores`` given calibration pairs.

    >>> p0, p1 = venn_abers([0.1, 0.2, 0.8, 0.9], [0, 1, 0, 1], [0.5, 1.0])
    >>> p0.tolist(), p1.tolist()
    ([0.3333333333333333, 0.5], [0.6666666666666666, 1.0])
    """
    s, y = check_arrays(cal_scores, cal_labels)
    x = check_test_scores(test_scores)
    out = [venn_abers_bruteforce(s, y, float(v)) for v in x.ravel()]
    p0 = np.array([o[0] for o in out], dtype=float).reshape(x.shape)
    p1 = np.array([o[1] for o in out], dtype=float).reshape(x.shape)
    return p0, p1
