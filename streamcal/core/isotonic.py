"""The isotonic calibrator of Vovk & Petej (2014), section 3: PAVA with tied scores pooled.

This module is the reference: short, exact, and slow on purpose. Everything fast in
streamcal (``venn_abers``, ``ScoreStore``) is tested against it.

Block means are kept as exact integer pairs (ones, count) while PAVA runs and are
compared by cross-multiplication, so the fit is exact; only the returned values are
float divisions of those integers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streamcal.core.ties import group_ties
from streamcal.core.validate import check_arrays, check_score, check_test_scores

__all__ = [
    "IsotonicCalibrator",
    "pava",
    "isotonic_calibrator",
    "venn_abers_bruteforce",
    "dir_predict",
]


def pava(w, s) -> list[tuple[int, int, int]]:
    """PAVA over pooled groups; returns blocks as (number of groups, count, ones).

    Adjacent blocks with equal means are merged, so the blocks are the maximal level sets
    of the fit (the canonical partition, which the stores' ``_check`` compares against).

    >>> pava([1, 1, 2, 1], [1, 0, 1, 1])
    [(3, 4, 2), (1, 1, 1)]
    """
    blocks: list[list[int]] = []  # [groups, count, ones]
    for wi, si in zip(np.asarray(w).tolist(), np.asarray(s).tolist(), strict=True):
        blocks.append([1, wi, si])
        # merge while the left block's mean is not below the right one's: s1/w1 >= s2/w2
        while len(blocks) > 1 and blocks[-2][2] * blocks[-1][1] >= blocks[-1][2] * blocks[-2][1]:
            g, c, o = blocks.pop()
            blocks[-1][0] += g
            blocks[-1][1] += c
            blocks[-1][2] += o
    return [tuple(b) for b in blocks]


@dataclass(frozen=True)
class IsotonicCalibrator:
    """The increasing function g fitted by PAVA, defined on the distinct scores.

    ``thresholds`` are the distinct calibration scores in increasing order and
    ``values[i]`` is g(thresholds[i]).
    """

    thresholds: np.ndarray
    values: np.ndarray

    def __call__(self, score: float) -> float:
        """g at a calibration score; a score that is not one raises ``KeyError``."""
        score = check_score(score)
        i = int(np.searchsorted(self.thresholds, score))
        if i == len(self.thresholds) or self.thresholds[i] != score:
            raise KeyError(f"{score!r} is not a calibration score")
        return float(self.values[i])

    def nearest(self, scores) -> np.ndarray:
        """g at the nearest calibration score, the smaller one on ties (the paper's DIR)."""
        x = check_test_scores(scores)
        t = self.thresholds
        if len(t) == 0:
            raise ValueError("an empty calibrator has no nearest score")
        hi = np.clip(np.searchsorted(t, x, side="left"), 0, len(t) - 1)
        lo = np.clip(hi - 1, 0, len(t) - 1)
        pick_lo = np.abs(x - t[lo]) <= np.abs(t[hi] - x)
        return self.values[np.where(pick_lo, lo, hi)]


def isotonic_calibrator(scores, labels) -> IsotonicCalibrator:
    """Fit the isotonic calibrator to (score, label) pairs, ties pooled.

    >>> g = isotonic_calibrator([0.1, 0.2, 0.3, 0.3], [0, 1, 0, 1])
    >>> g.thresholds.tolist(), g.values.tolist()
    ([0.1, 0.2, 0.3], [0.0, 0.6666666666666666, 0.6666666666666666])
    """
    t, w, s = group_ties(scores, labels)
    values = np.empty(len(t))
    i = 0
    for groups, count, ones in pava(w, s):
        values[i : i + groups] = ones / count
        i += groups
    return IsotonicCalibrator(t, values)


def venn_abers_bruteforce(cal_scores, cal_labels, score) -> tuple[float, float]:
    """(p0, p1) for one test score, straight from the definition: two PAVA fits.

    This is the oracle the fast code is tested against; it costs O(n log n) per call.

    >>> venn_abers_bruteforce([0.1, 0.2, 0.8, 0.9], [0, 1, 0, 1], 0.5)
    (0.3333333333333333, 0.6666666666666666)
    >>> venn_abers_bruteforce([], [], 0.5)
    (0.0, 1.0)
    """
    score = check_score(score)
    s, y = check_arrays(cal_scores, cal_labels)
    s = np.append(s, score)
    p = []
    for label in (0, 1):
        g = isotonic_calibrator(s, np.append(y, label))
        p.append(g(score))
    return p[0], p[1]


def dir_predict(cal_scores, cal_labels, test_scores) -> np.ndarray:
    """The paper's DIR baseline: plain isotonic regression, read at the nearest score.

    Calibration ties are pooled; a test score halfway between two calibration scores
    takes the smaller one. DIR can output exactly 0 or 1, hence infinite log loss.

    >>> dir_predict([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1], [0.0, 0.5, 1.0]).tolist()
    [0.0, 0.0, 1.0]
    """
    return isotonic_calibrator(cal_scores, cal_labels).nearest(test_scores)
