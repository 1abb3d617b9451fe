"""The conformal alarm's arithmetic (``streamcal.core.conformal_alarm``), compiled by numba
when it imports.

One code path: the same functions run compiled or, without numba, as plain Python over the
same arrays (slower, and still exact: the draws are integer arithmetic that int64 holds).
Two steps that touch a whole bag row, ranking a score and inserting it, have an
uncompiled twin (``_rank``, ``_insert``): numpy's ``searchsorted`` and a slice move
where an interpreted loop would take O(bag) steps per label (30-45 µs at 600 scores).

The alarm lives in one float64 array ``k`` (its layout: ``_conformal_alarm_layout``), whose
tail holds the bags: row y (``BAG_CAP`` long) holds, sorted ascending, the conformity
scores of the bag of label y (its first ``sizes[y]`` entries). One array and two numbers
per call: numba checks the type of every argument on every call, an array's dearly.
"""

from __future__ import annotations

import math

from streamcal.core._conformal_alarm_layout import (
    ALARM_AT,
    BAG_CAP,
    HEAD,
    HIGH_TAIL,
    LAST_P_LABEL,
    LAST_P_SCORE,
    LINEAR,
    LOG_LABEL,
    LOG_S,
    LOG_SCORE,
    LOW,
    LOW_AT,
    N_CLASSES,
    N_LABEL_BETS,
    N_RATES,
    N_SCORE_BETS,
    ONSET,
    RESERVE_EVERY,
    RNG,
    SEGMENT,
    SET_ASIDE,
    THRESHOLD,
    N,
)  # fmt: skip
from streamcal.core._jit import COMPILED  # noqa: F401 - read by the caller and the tests
from streamcal.core._jit import jit as _jit

_MASK = 0xFFFFFFFF
_SPAN = 4294967295.0  # 2^32 - 1: the states of xorshift32


@_jit
def draw(k):
    """The next tie-breaking draw, uniform on (0, 1): Marsaglia's xorshift32 (13, 17, 5).
    Every intermediate fits in 45 bits: the same integers compiled or not."""
    x = int(k[RNG])
    x ^= (x << 13) & _MASK
    x ^= x >> 17
    x ^= (x << 5) & _MASK
    k[RNG] = float(x)
    return (x - 0.5) / _SPAN


@_jit
def bet(kind, param, p):
    """Betting function ``kind`` with parameter ``param`` at p-value p (see the layout)."""
    if kind == LINEAR:
        return 1.0 + param * (p - 0.5)
    if kind == HIGH_TAIL:
        p = 1.0 - p
    return param * p ** (param - 1.0)


@_jit
def _jump_bet(w, rates, bets, p):
    """One Composite Jumper step on weights ``w`` (R rows of E, flat; changed in place):
    share within each jump rate's row (``rates``: the R rates), bet (``bets``: the E
    kinds, then their E parameters), renormalise. Returns the capital's factor."""
    R = len(rates)
    E = len(bets) // 2
    for r in range(R):  # the jump: a fraction J of each row's capital spread evenly
        lo = r * E
        J = rates[r]
        total = 0.0
        for e in range(E):
            total += w[lo + e]
        spread = J * total / E
        for e in range(E):
            w[lo + e] = (1.0 - J) * w[lo + e] + spread
    Z = 0.0
    for e in range(E):  # the bet
        f = bet(bets[e], bets[E + e], p)
        for r in range(R):
            v = w[r * E + e] * f
            w[r * E + e] = v
            Z += v
    inv = 1.0 / Z
    for i in range(R * E):
        w[i] *= inv
    return Z


if COMPILED:

    @_jit
    def _jump_and_bet(k, w0, E, kinds, p):
        """``_jump_bet`` of the part whose R rows of E weights start at ``w0`` and whose
        bets' kinds start at ``kinds`` (their parameters right after), on views of ``k``.
        Returns ln of the capital's factor."""
        R = int(k[N_RATES])
        return math.log(_jump_bet(k[w0 : w0 + R * E], k[HEAD : HEAD + R],
                                  k[kinds : kinds + 2 * E], p))  # fmt: skip

else:  # interpreted: on lists of floats, several times faster than numpy's scalars

    def _jump_and_bet(k, w0, E, kinds, p):
        """``_jump_bet`` of the part whose R rows of E weights start at ``w0`` and whose
        bets' kinds start at ``kinds`` (their parameters right after), on lists copied
        from ``k`` and back. Returns ln of the capital's factor."""
        R = int(k[N_RATES])
        w = k[w0 : w0 + R * E].tolist()
        Z = _jump_bet(w, k[HEAD : HEAD + R].tolist(), k[kinds : kinds + 2 * E].tolist(), float(p))
        k[w0 : w0 + R * E] = w
        return math.log(Z)


@_jit
def _offsets(k):
    """(label bets' kinds, score bets' kinds, label weights, counts, sizes, score weights,
    bags)."""
    R, EL, ES = int(k[N_RATES]), int(k[N_LABEL_BETS]), int(k[N_SCORE_BETS])
    K = int(k[N_CLASSES])
    lk = HEAD + R
    sk = lk + 2 * EL
    wl = sk + 2 * ES
    counts = wl + R * EL
    ws = counts + 2 * K
    return lk, sk, wl, counts, counts + K, ws, ws + K * R * ES


@_jit
def _log_mean(a, b):
    """ln((e^a + e^b) / 2) without overflow."""
    hi, lo = (a, b) if a >= b else (b, a)
    return hi + math.log1p(math.exp(lo - hi)) - math.log(2.0)


if COMPILED:

    @_jit
    def _rank(k, row, m, c):
        """(the first index of the bag row's ``m`` scores at ``row`` that is >= c, the
        first that is > c): two binary searches."""
        lo, hi = 0, m
        while lo < hi:
            mid = (lo + hi) // 2
            if k[row + mid] < c:
                lo = mid + 1
            else:
                hi = mid
        left = lo
        hi = m
        while lo < hi:
            mid = (lo + hi) // 2
            if k[row + mid] <= c:
                lo = mid + 1
            else:
                hi = mid
        return left, lo

    @_jit
    def _insert(k, row, m, at, c):
        """Put c at index ``at`` of the bag row of ``m`` scores, the later ones moved up."""
        for i in range(row + m, row + at, -1):
            k[i] = k[i - 1]
        k[row + at] = c

else:  # interpreted: numpy does the O(bag) parts in C

    def _rank(k, row, m, c):
        """(the first index of the bag row's ``m`` scores at ``row`` that is >= c, the
        first that is > c).

        >>> import numpy as np
        >>> _rank(np.array([9.0, 1.0, 2.0, 2.0, 3.0]), 1, 4, 2.0)
        (1, 3)
        """
        bag = k[row : row + m]
        return int(bag.searchsorted(c, "left")), int(bag.searchsorted(c, "right"))

    def _insert(k, row, m, at, c):
        """Put c at index ``at`` of the bag row of ``m`` scores, the later ones moved up.

        >>> import numpy as np
        >>> k = np.array([9.0, 1.0, 3.0, 0.0]); _insert(k, 1, 2, 1, 2.0); k.tolist()
        [9.0, 1.0, 2.0, 3.0]
        """
        k[row + at + 1 : row + m + 1] = k[row + at : row + m]  # numpy copies overlaps safely
        k[row + at] = c


@_jit
def learn(k, code, c):
    """Label y with conformity score c (``code`` = y), or without a score (``code`` =
    -1 - y): the label part's p-value and bet, then, unless this scored label is set
    aside, the score part's; ln S after it.

    Returns NaN, having changed nothing, if the bag row of y is full (the caller grows it).
    """
    has_score = code >= 0
    y = code if has_score else -1 - code
    lk, sk, wl, counts, sizes, ws, bags = _offsets(k)
    every = int(k[RESERVE_EVERY])
    seg = int(k[SEGMENT]) + 1 if has_score else int(k[SEGMENT])
    aside = has_score and every > 0 and seg % every == 0
    scored = has_score and not aside
    m = int(k[sizes + y])
    if scored and m >= int(k[BAG_CAP]):
        return math.nan
    # The label part: nonconformity -(count of the label in the bag), the bag every label
    # so far and this one; ties by a draw.
    K = int(k[N_CLASSES])
    k[counts + y] += 1.0
    n = k[N] + 1.0
    cy = k[counts + y]
    below = 0.0
    equal = 0.0
    for j in range(K):
        cj = k[counts + j]
        if cj < cy:
            below += cj
        elif cj == cy:
            equal += cj
    p = (below + draw(k) * equal) / n
    k[LAST_P_LABEL] = p
    k[LOG_LABEL] += _jump_and_bet(k, wl, int(k[N_LABEL_BETS]), lk, p)
    # The score part: c ranked among the bag of label y (less conforming: smaller p).
    k[SEGMENT] = seg
    k[SET_ASIDE] = 1.0 if aside else 0.0
    k[LAST_P_SCORE] = -1.0
    if scored:
        row = bags + y * int(k[BAG_CAP])
        left, lo = _rank(k, row, m, c)
        ps = (left + draw(k) * (lo - left + 1)) / (m + 1.0)
        k[LAST_P_SCORE] = ps
        ES = int(k[N_SCORE_BETS])  # label y's own jumper: its bets may depend on y
        k[LOG_SCORE] += _jump_and_bet(k, ws + y * int(k[N_RATES]) * ES, ES, sk, ps)
        _insert(k, row, m, lo, c)  # after its equals
        k[sizes + y] = m + 1.0
    k[N] = n
    log_s = _log_mean(k[LOG_LABEL], k[LOG_SCORE])
    k[LOG_S] = log_s
    if log_s < k[LOW]:
        k[LOW] = log_s
        k[LOW_AT] = n
    if k[ALARM_AT] < 0.0 and log_s >= k[THRESHOLD]:
        k[ALARM_AT] = n
        k[ONSET] = k[LOW_AT]
    return log_s


@_jit
def run(k, codes, cs, path, p_label, p_score):
    """``learn`` over a sequence: ln S, the label part's and the score part's p-values
    (-1: none) after each label into ``path``, ``p_label``, ``p_score``. Stops at the
    first label whose bag row is full and returns its index (the length if none)."""
    for j in range(codes.shape[0]):
        log_s = learn(k, codes[j], cs[j])
        if log_s != log_s:
            return j
        path[j] = log_s
        p_label[j] = k[LAST_P_LABEL]
        p_score[j] = k[LAST_P_SCORE]
    return codes.shape[0]
