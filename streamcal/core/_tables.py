"""numba kernels for batch Venn-Abers: the F0 / F1 tables over the tie-pooled groups.

After Vovk, Petej & Fedorova (2015): for every group position i, F1[i] is p1 for a test
point pooled with group i (label 1) and F0[i] is p0 for one pooled with group i (label 0).
A test score x then reads p0 = F0[c] (c the last group with score <= x) and p1 = F1[d]
(d the first group with score >= x): equal scores are pooled, never mapped to a neighbour.

With the cumulative sum diagram P_0 = (0, 0), P_j = (W_j, S_j) and the PAVA blocks, F1[d]
is the slope of the lower bridge between the hull of P_{l-1}..P_{d-1} (B = [l..r] the block
holding d, swept left to right with a stack) and the chain P_r + (1, 1), P_r' + (1, 1), ...
of later block ends; F0 is the mirror image. Tangents are found by binary search on the
stack, so the tables cost O(k log k) for k groups (plus a walk along the chain of block ends
that is almost always empty; it gallops, so it stays logarithmic per step).
All sums are int64 and comparisons cross-multiplied: the tables are exact fractions.

Without numba (an optional dependency) the same functions run as plain Python: exact,
about a hundred times slower (O(k log k) interpreted steps for k groups).
"""

from __future__ import annotations

import numpy as np

try:
    from numba import njit
except ImportError:  # numba is optional: run the same code interpreted

    def njit(*args, **kwargs):
        return args[0] if args and callable(args[0]) else lambda f: f


@njit(cache=True)
def _blocks(X, Y):
    """PAVA block ends (CSD point indices) of the CSD X, Y (points 0..k)."""
    k = X.shape[0] - 1
    ends = np.empty(k + 1, np.int64)
    ends[0] = 0
    nb = 1  # ends[0] = 0 is a sentinel: the start of block 0
    for j in range(1, k + 1):
        ends[nb] = j
        nb += 1
        # merge while the left block's mean is >= the right one's
        while nb >= 3:
            a, b, c = ends[nb - 3], ends[nb - 2], ends[nb - 1]
            if (Y[b] - Y[a]) * (X[c] - X[b]) >= (Y[c] - Y[b]) * (X[b] - X[a]):
                ends[nb - 2] = c
                nb -= 1
            else:
                break
    return ends[:nb]


@njit(cache=True)
def _below_next(X, Y, ends, e, num, den):
    """Is block e + 1's mean below num / den (so the bridge must reach past end e)?"""
    return (Y[ends[e + 1]] - Y[ends[e]]) * den < num * (X[ends[e + 1]] - X[ends[e]])


@njit(cache=True)
def _above_prev(X, Y, ends, e, num, den):
    """Is block e's mean (it ends at anchor e) above num / den (so go left of anchor e)?"""
    return (Y[ends[e]] - Y[ends[e - 1]]) * den > num * (X[ends[e]] - X[ends[e - 1]])


@njit(cache=True)
def _cross(ox, oy, ax, ay, bx, by):
    return (ax - ox) * (by - oy) - (ay - oy) * (bx - ox)


@njit(cache=True)
def _max_to(sx, sy, h, ax, ay):
    """max over stack vertices (increasing x) of slope(vertex, A); A is right of all."""
    lo, hi = 0, h - 1
    while lo < hi:  # first i whose step to i + 1 does not raise the slope to A
        i = (lo + hi) >> 1
        if (sy[i + 1] - sy[i]) * (ax - sx[i]) < (ay - sy[i]) * (sx[i + 1] - sx[i]):
            lo = i + 1
        else:
            hi = i
    return ay - sy[lo], ax - sx[lo]


@njit(cache=True)
def _min_from(sx, sy, h, qx, qy, shift):
    """min over stack vertices of slope(Q, vertex + (shift, 0)); the stack holds its
    rightmost vertex at 0 and its leftmost at h - 1; Q is left of all."""
    lo, hi = 0, h - 1  # in left-to-right order: vertex u is stack[h - 1 - u]
    while lo < hi:
        u = (lo + hi) >> 1
        a = h - 1 - u
        b = a - 1
        if (sy[b] - sy[a]) * (sx[a] + shift - qx) < (sy[a] - qy) * (sx[b] - sx[a]):
            lo = u + 1
        else:
            hi = u
    a = h - 1 - lo
    return sy[a] - qy, sx[a] + shift - qx


@njit(cache=True)
def _reach_right(X, Y, ends, nb, sx, sy, h, b):
    """F1's bridge slope for block b's hull (``h`` stack vertices) once the next block's
    mean is below the first bridge: walked right while the next block's mean is below
    it (galloping, then a binary search). The walk is almost always empty."""
    step = 1
    good = b  # last end known to need extending past
    while True:
        cand = min(good + step, nb)
        n2, d2 = _max_to(sx, sy, h, X[ends[cand]] + 1, Y[ends[cand]] + 1)
        if cand == nb or not (
            (Y[ends[cand + 1]] - Y[ends[cand]]) * d2 < n2 * (X[ends[cand + 1]] - X[ends[cand]])
        ):
            break
        good = cand
        step *= 2
    # the answer's end lies in (good, cand]: binary search the first that stops
    a_, c_ = good + 1, cand
    while a_ < c_:
        mid = (a_ + c_) >> 1
        n2, d2 = _max_to(sx, sy, h, X[ends[mid]] + 1, Y[ends[mid]] + 1)
        if (Y[ends[mid + 1]] - Y[ends[mid]]) * d2 < n2 * (X[ends[mid + 1]] - X[ends[mid]]):
            a_ = mid + 1
        else:
            c_ = mid
    return _max_to(sx, sy, h, X[ends[a_]] + 1, Y[ends[a_]] + 1)


@njit(cache=True)
def _reach_left(X, Y, ends, sx, sy, h, b):
    """F0's bridge slope for block b's hull once the previous block's mean is above the
    first bridge: walked left while it is (galloping, then a binary search)."""
    step = 1
    good = b - 1  # the anchor is the start of block b, i.e. ends[b - 1]
    while True:
        cand = max(good - step, 0)
        n2, d2 = _min_from(sx, sy, h, X[ends[cand]], Y[ends[cand]], 1)
        if cand == 0 or not (
            (Y[ends[cand]] - Y[ends[cand - 1]]) * d2 > n2 * (X[ends[cand]] - X[ends[cand - 1]])
        ):
            break
        good = cand
        step *= 2
    a_, c_ = cand, good - 1  # the answer's anchor lies in [cand, good - 1]
    while a_ < c_:
        mid = (a_ + c_ + 1) >> 1
        n2, d2 = _min_from(sx, sy, h, X[ends[mid]], Y[ends[mid]], 1)
        if (Y[ends[mid]] - Y[ends[mid - 1]]) * d2 > n2 * (X[ends[mid]] - X[ends[mid - 1]]):
            c_ = mid - 1
        else:
            a_ = mid
    return _min_from(sx, sy, h, X[ends[a_]], Y[ends[a_]], 1)


@njit(cache=True)
def _f1_block(X, Y, ends, nb, b, sx, sy, F1):
    """F1 of block b's groups: sweep d left to right; stack = lower hull of P_lo..P_{d-1}."""
    lo, hi = ends[b - 1], ends[b]  # block = groups lo+1..hi (1-based), points lo..hi
    h = 0
    for d in range(lo + 1, hi + 1):
        px, py = X[d - 1], Y[d - 1]
        while (
            h >= 2
            and (sx[h - 1] - sx[h - 2]) * (py - sy[h - 2])
            - (sy[h - 1] - sy[h - 2]) * (px - sx[h - 2])
            <= 0
        ):
            h -= 1
        sx[h] = px
        sy[h] = py
        h += 1
        num, den = _max_to(sx, sy, h, X[hi] + 1, Y[hi] + 1)
        # walk right while the next block's mean is below the bridge slope
        if b < nb and _below_next(X, Y, ends, b, num, den):
            num, den = _reach_right(X, Y, ends, nb, sx, sy, h, b)
        F1[d - 1] = num / den


@njit(cache=True)
def _f0_block(X, Y, ends, b, sx, sy, F0):
    """F0 of block b's groups: sweep c right to left; stack = lower hull of P_c..P_hi
    (rightmost at 0)."""
    lo, hi = ends[b - 1], ends[b]
    h = 0
    for c in range(hi, lo, -1):
        px, py = X[c], Y[c]
        while (
            h >= 2
            and (sx[h - 1] - px) * (sy[h - 2] - py) - (sy[h - 1] - py) * (sx[h - 2] - px) <= 0
        ):
            h -= 1
        sx[h] = px
        sy[h] = py
        h += 1
        num, den = _min_from(sx, sy, h, X[lo], Y[lo], 1)
        # walk left while the previous block's mean is above the bridge slope
        if b > 1 and _above_prev(X, Y, ends, b - 1, num, den):
            num, den = _reach_left(X, Y, ends, sx, sy, h, b)
        F0[c - 1] = num / den


@njit(cache=True)
def tables(w, s):
    """F0, F1 for groups with counts w and ones s (scores sorted, distinct)."""
    k = w.shape[0]
    X = np.zeros(k + 1, np.int64)
    Y = np.zeros(k + 1, np.int64)
    for i in range(k):
        X[i + 1] = X[i] + w[i]
        Y[i + 1] = Y[i] + s[i]
    ends = _blocks(X, Y)
    nb = ends.shape[0] - 1
    F0 = np.empty(k)
    F1 = np.empty(k)
    sx = np.empty(k + 1, np.int64)  # the hull's stack, shared by the blocks' sweeps
    sy = np.empty(k + 1, np.int64)
    for b in range(1, nb + 1):
        _f1_block(X, Y, ends, nb, b, sx, sy, F1)
        _f0_block(X, Y, ends, b, sx, sy, F0)
    return F0, F1
