"""numba kernels behind ScoreStore: a chunked sorted list of tie-pooled groups plus PAVA blocks.

Geometry (see docs of ``ScoreStore``): the groups, sorted by score, define the cumulative
sum diagram (CSD) P_0 = (0, 0), P_j = (W_j, S_j). The isotonic fit is the slope of its
greatest convex minorant (GCM); the PAVA blocks are the GCM's segments. For a test score x:

* p1 is the slope of the lower bridge between {P_0..P_{d-1}} and {P_j + (1, 1) : j >= d},
  d the first group with score >= x. Inside the block B = [l..r] holding d, the bridge's left
  end is a point of P_{l-1}..P_{d-1} and its right end is P_r or a later block end, taken
  while the next block's mean is below the current slope.
* p0 is the mirror image: bridge between {P_0..P_{c-1}} and {P_j + (1, 0) : j >= c}.

Only lower-hull vertices can be tangent points, so each chunk of at most ``CAP`` groups keeps
the lower hull of its own CSD; a scan over a block reads only hull vertices of the chunks it
covers whole. Sums are int64 (exact) and slopes are compared by cross-multiplication, so the
answers are exact fractions, divided once at the end.

State layout (all numpy arrays, so the store pickles as plain arrays):

* ``T[cid, i]``: score of group i of chunk cid (i < L).
* ``CC[cid, 0|1, j]``: cumulative counts / ones of chunk cid after its first j groups.
* ``HV[cid, h]``: local indices j of the lower-hull vertices of the chunk's CSD.
* ``CM[cid] = (L, hull length)``.
* ``ORD[pos]``: chunk id at position pos (chunks in score order); ``FIRST[pos]``: its first score.
* ``BT[b]``: score of the last group of block b; ``BWS[b] = (count, ones)`` of block b.
* ``META``: scalars, indices below. ``FREE``: recycled chunk ids.

A *point* is addressed as (pos, j): the CSD point after the first j groups of chunk pos.
"""

from __future__ import annotations

import numpy as np
from numba import njit

CAP = 256  # default groups per chunk (T.shape[1]); a full chunk splits in two halves

M_M = 0  # chunks in use (positions)
M_NB = 1  # blocks
M_NIDS = 2  # chunk ids ever handed out (high-water mark)
M_NFREE = 3  # recycled chunk ids available in FREE
M_N = 4  # pairs held
M_K = 5  # groups (distinct scores)
META_SIZE = 6

ERR_NOT_HELD = 1


# --------------------------------------------------------------------------- locating


@njit(cache=True)
def _chunk_pos(FIRST, m, x):
    """Position of the last chunk whose first score is <= x (0 if none)."""
    lo, hi = 0, m
    while lo < hi:
        mid = (lo + hi) >> 1
        if FIRST[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1 if lo > 0 else 0


@njit(cache=True)
def _search(T, cid, L, x, right):
    """Number of groups of chunk cid with score < x (or <= x if right)."""
    lo, hi = 0, L
    while lo < hi:
        mid = (lo + hi) >> 1
        v = T[cid, mid]
        if v < x or (right and v == x):
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def _pt_after(T, CM, ORD, FIRST, m, x, right):
    """Point after the last group with score <= x (right) or < x; (0, 0) if none."""
    pos = _chunk_pos(FIRST, m, x)
    i = _search(T, ORD[pos], CM[ORD[pos], 0], x, right)
    if i == 0 and pos > 0:
        pos -= 1
        i = CM[ORD[pos], 0]
    return pos, i


@njit(cache=True)
def _first_block(BT, nb, x):
    """Index of the first block whose last score is >= x (nb if none)."""
    lo, hi = 0, nb
    while lo < hi:
        mid = (lo + hi) >> 1
        if BT[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def _range_sum(CC, CM, ORD, ps, js, pe, je):
    """CSD displacement from point (ps, js) to point (pe, je)."""
    if ps == pe:
        cid = ORD[ps]
        return CC[cid, 0, je] - CC[cid, 0, js], CC[cid, 1, je] - CC[cid, 1, js]
    cid = ORD[ps]
    L = CM[cid, 0]
    dx = CC[cid, 0, L] - CC[cid, 0, js]
    dy = CC[cid, 1, L] - CC[cid, 1, js]
    for pos in range(ps + 1, pe):
        cid = ORD[pos]
        L = CM[cid, 0]
        dx += CC[cid, 0, L]
        dy += CC[cid, 1, L]
    cid = ORD[pe]
    return dx + CC[cid, 0, je], dy + CC[cid, 1, je]


# --------------------------------------------------------------------------- hulls


@njit(cache=True)
def _chunk_hull(CC, HV, CM, cid):
    """Lower hull (monotone chain) of the chunk's local CSD points j = 0..L."""
    L = CM[cid, 0]
    h = 0
    for j in range(L + 1):
        x = CC[cid, 0, j]
        y = CC[cid, 1, j]
        while h >= 2:
            o = HV[cid, h - 2]
            a = HV[cid, h - 1]
            ox = CC[cid, 0, o]
            oy = CC[cid, 1, o]
            if (CC[cid, 0, a] - ox) * (y - oy) - (CC[cid, 1, a] - oy) * (x - ox) <= 0:
                h -= 1
            else:
                break
        HV[cid, h] = j
        h += 1
    CM[cid, 1] = h


@njit(cache=True)
def _better(num, den, bn, bd, want_max):
    if want_max:
        return num * bd > bn * den
    return num * bd < bn * den


@njit(cache=True)
def _best_slope(CC, HV, CM, ORD, ps, js, pe, je, incl_start, ax, ay, sx, sy, want_max):
    """Extreme slope between anchor (ax, ay) and the points after (ps, js) up to (pe, je).

    Coordinates are relative to point (ps, js), which is a candidate itself if
    ``incl_start``. Each candidate is shifted by (sx, sy) first. Returns the slope as an
    exact fraction (num, den) with den > 0; den == 0 if there was no candidate.
    """
    bn = 0
    bd = 0
    if incl_start:
        num = sy - ay
        den = sx - ax
        if den < 0:
            num, den = -num, -den
        bn, bd = num, den
    cid = ORD[ps]
    bx = sx - CC[cid, 0, js]
    by = sy - CC[cid, 1, js]
    pos = ps
    while True:
        cid = ORD[pos]
        L = CM[cid, 0]
        jlo = js + 1 if pos == ps else 1
        jhi = je if pos == pe else L
        if jlo <= jhi:
            # the chunk hull also spans its point 0, so use it only when that point counts
            if jlo == 1 and jhi == L and (pos != ps or incl_start):
                for h in range(1, CM[cid, 1]):
                    j = HV[cid, h]
                    den = bx + CC[cid, 0, j] - ax
                    num = by + CC[cid, 1, j] - ay
                    if den < 0:
                        num, den = -num, -den
                    if bd == 0 or _better(num, den, bn, bd, want_max):
                        bn, bd = num, den
            else:
                for j in range(jlo, jhi + 1):
                    den = bx + CC[cid, 0, j] - ax
                    num = by + CC[cid, 1, j] - ay
                    if den < 0:
                        num, den = -num, -den
                    if bd == 0 or _better(num, den, bn, bd, want_max):
                        bn, bd = num, den
        if pos == pe:
            break
        bx += CC[cid, 0, L]
        by += CC[cid, 1, L]
        pos += 1
    return bn, bd


# --------------------------------------------------------------------------- queries


@njit(cache=True)
def _p1(T, CC, HV, CM, ORD, FIRST, BT, BWS, META, x):
    m = META[M_M]
    nb = META[M_NB]
    if META[M_N] == 0:
        return 1.0
    last = ORD[m - 1]
    if x > T[last, CM[last, 0] - 1]:
        return 1.0
    b = _first_block(BT, nb, x)
    if b == 0:
        ps, js = 0, 0
    else:
        ps, js = _pt_after(T, CM, ORD, FIRST, m, BT[b - 1], True)
    pe, je = _pt_after(T, CM, ORD, FIRST, m, x, False)
    ax = BWS[b, 0] + 1
    ay = BWS[b, 1] + 1
    bn, bd = _best_slope(CC, HV, CM, ORD, ps, js, pe, je, True, ax, ay, 0, 0, True)
    # walk right along the GCM while the next block's mean is below the bridge slope
    while b + 1 < nb and BWS[b + 1, 1] * bd < bn * BWS[b + 1, 0]:
        b += 1
        ax += BWS[b, 0]
        ay += BWS[b, 1]
        bn, bd = _best_slope(CC, HV, CM, ORD, ps, js, pe, je, True, ax, ay, 0, 0, True)
    return bn / bd


@njit(cache=True)
def _p0(T, CC, HV, CM, ORD, FIRST, BT, BWS, META, x):
    m = META[M_M]
    nb = META[M_NB]
    if META[M_N] == 0:
        return 0.0
    if x < T[ORD[0], 0]:
        return 0.0
    pc, jc = _pt_after(T, CM, ORD, FIRST, m, x, True)  # P_c
    tc = T[ORD[pc], jc - 1]
    b = _first_block(BT, nb, tc)
    pe, je = _pt_after(T, CM, ORD, FIRST, m, BT[b], True)  # P_r
    # coordinates relative to P_{c-1} = (pc, jc - 1)
    tx, ty = _range_sum(CC, CM, ORD, pc, jc - 1, pe, je)
    qx = tx - BWS[b, 0]
    qy = ty - BWS[b, 1]
    bn, bd = _best_slope(CC, HV, CM, ORD, pc, jc - 1, pe, je, False, qx, qy, 1, 0, False)
    # walk left along the GCM while the previous block's mean is above the bridge slope
    while b > 0 and BWS[b - 1, 1] * bd > bn * BWS[b - 1, 0]:
        b -= 1
        qx -= BWS[b, 0]
        qy -= BWS[b, 1]
        bn, bd = _best_slope(CC, HV, CM, ORD, pc, jc - 1, pe, je, False, qx, qy, 1, 0, False)
    return bn / bd


@njit(cache=True)
def query_many(T, CC, HV, CM, ORD, FIRST, BT, BWS, META, xs, p0, p1):
    for i in range(xs.shape[0]):
        p0[i] = _p0(T, CC, HV, CM, ORD, FIRST, BT, BWS, META, xs[i])
        p1[i] = _p1(T, CC, HV, CM, ORD, FIRST, BT, BWS, META, xs[i])


@njit(cache=True)
def query_one(T, CC, HV, CM, ORD, FIRST, BT, BWS, META, x):
    return (
        _p0(T, CC, HV, CM, ORD, FIRST, BT, BWS, META, x),
        _p1(T, CC, HV, CM, ORD, FIRST, BT, BWS, META, x),
    )


# --------------------------------------------------------------------------- blocks


@njit(cache=True)
def _grow(a, n):
    b = np.empty((2 * a.shape[0],) + a.shape[1:], a.dtype)
    b[:n] = a[:n]
    return b


@njit(cache=True)
def fix_blocks(T, CC, HV, CM, ORD, FIRST, BT, BWS, META, x):
    """Re-run PAVA locally after the group at score x changed.

    Only the block holding x can split (every other old block is a union of new blocks),
    so: take that block's local GCM as its new sub-blocks, then merge violators with the
    neighbouring blocks, stack-wise, as PAVA would. Returns 0, or -(blocks needed) without
    touching the block arrays if they are too small.
    """
    m = META[M_M]
    nb = META[M_NB]
    b = _first_block(BT, nb, x)
    if b == 0 or m == 0:
        ps, js = 0, 0
    else:
        ps, js = _pt_after(T, CM, ORD, FIRST, m, BT[b - 1], True)
    if m == 0:
        pe, je = 0, 0
    elif b < nb:
        pe, je = _pt_after(T, CM, ORD, FIRST, m, BT[b], True)
    else:
        pe, je = _pt_after(T, CM, ORD, FIRST, m, x, True)
    # monotone chain over the candidate points of the block: (x, y, last score)
    cap = 64
    hx = np.empty(cap, np.int64)
    hy = np.empty(cap, np.int64)
    ht = np.empty(cap, np.float64)
    h = 1
    hx[0] = 0
    hy[0] = 0
    ht[0] = 0.0
    if m > 0 and (ps != pe or js != je):
        cid = ORD[ps]
        bx = -CC[cid, 0, js]
        by = -CC[cid, 1, js]
        pos = ps
        while True:
            cid = ORD[pos]
            L = CM[cid, 0]
            jlo = js + 1 if pos == ps else 1
            jhi = je if pos == pe else L
            full = jlo == 1 and jhi == L
            nc = CM[cid, 1] - 1 if full else jhi - jlo + 1
            for u in range(max(nc, 0)):
                j = HV[cid, u + 1] if full else jlo + u
                px = bx + CC[cid, 0, j]
                py = by + CC[cid, 1, j]
                while h >= 2:
                    ox = hx[h - 2]
                    oy = hy[h - 2]
                    if (hx[h - 1] - ox) * (py - oy) - (hy[h - 1] - oy) * (px - ox) <= 0:
                        h -= 1
                    else:
                        break
                if h == cap:
                    hx = _grow(hx, h)
                    hy = _grow(hy, h)
                    ht = _grow(ht, h)
                    cap *= 2
                hx[h] = px
                hy[h] = py
                ht[h] = T[cid, j - 1]
                h += 1
            if pos == pe:
                break
            bx += CC[cid, 0, L]
            by += CC[cid, 1, L]
            pos += 1
    # sub-blocks = hull segments, then PAVA against the neighbours; stack reuses hx/hy/ht
    ns = 0
    li = b - 1
    ri = b + 1 if b < nb else nb
    for v in range(1, h):
        w = hx[v] - hx[v - 1]
        s = hy[v] - hy[v - 1]
        hx[ns] = w
        hy[ns] = s
        ht[ns] = ht[v]
        ns += 1
        while True:
            if ns >= 2 and hy[ns - 2] * hx[ns - 1] > hy[ns - 1] * hx[ns - 2]:
                hx[ns - 2] += hx[ns - 1]
                hy[ns - 2] += hy[ns - 1]
                ht[ns - 2] = ht[ns - 1]
                ns -= 1
            elif ns == 1 and li >= 0 and BWS[li, 1] * hx[0] > hy[0] * BWS[li, 0]:
                hx[0] += BWS[li, 0]
                hy[0] += BWS[li, 1]
                li -= 1
            else:
                break
    while ns > 0 and ri < nb and hy[ns - 1] * BWS[ri, 0] > BWS[ri, 1] * hx[ns - 1]:
        hx[ns - 1] += BWS[ri, 0]
        hy[ns - 1] += BWS[ri, 1]
        ht[ns - 1] = BT[ri]
        ri += 1
        while True:
            if ns >= 2 and hy[ns - 2] * hx[ns - 1] > hy[ns - 1] * hx[ns - 2]:
                hx[ns - 2] += hx[ns - 1]
                hy[ns - 2] += hy[ns - 1]
                ht[ns - 2] = ht[ns - 1]
                ns -= 1
            elif ns == 1 and li >= 0 and BWS[li, 1] * hx[0] > hy[0] * BWS[li, 0]:
                hx[0] += BWS[li, 0]
                hy[0] += BWS[li, 1]
                li -= 1
            else:
                break
    new_nb = li + 1 + ns + (nb - ri)
    if new_nb > BT.shape[0]:
        return -new_nb
    # splice: blocks[0..li] + stack + blocks[ri..nb-1]
    dst = li + 1 + ns
    if dst < ri:
        for k in range(nb - ri):
            BT[dst + k] = BT[ri + k]
            BWS[dst + k, 0] = BWS[ri + k, 0]
            BWS[dst + k, 1] = BWS[ri + k, 1]
    elif dst > ri:
        for k in range(nb - ri - 1, -1, -1):
            BT[dst + k] = BT[ri + k]
            BWS[dst + k, 0] = BWS[ri + k, 0]
            BWS[dst + k, 1] = BWS[ri + k, 1]
    for k in range(ns):
        BT[li + 1 + k] = ht[k]
        BWS[li + 1 + k, 0] = hx[k]
        BWS[li + 1 + k, 1] = hy[k]
    META[M_NB] = new_nb
    return 0


@njit(cache=True)
def pava_blocks(t, w, s, BT, BWS):
    """PAVA over groups (exact integer means); writes blocks, returns their number."""
    nb = 0
    for i in range(t.shape[0]):
        BT[nb] = t[i]
        BWS[nb, 0] = w[i]
        BWS[nb, 1] = s[i]
        nb += 1
        while nb >= 2 and BWS[nb - 2, 1] * BWS[nb - 1, 0] >= BWS[nb - 1, 1] * BWS[nb - 2, 0]:
            BWS[nb - 2, 0] += BWS[nb - 1, 0]
            BWS[nb - 2, 1] += BWS[nb - 1, 1]
            BT[nb - 2] = BT[nb - 1]
            nb -= 1
    return nb


# --------------------------------------------------------------------------- groups


@njit(cache=True)
def _new_chunk_id(META, FREE):
    if META[M_NFREE] > 0:
        META[M_NFREE] -= 1
        return FREE[META[M_NFREE]]
    cid = META[M_NIDS]
    META[M_NIDS] += 1
    return cid


@njit(cache=True)
def _insert_pos(ORD, FIRST, m, pos, cid, first):
    for k in range(m, pos, -1):
        ORD[k] = ORD[k - 1]
        FIRST[k] = FIRST[k - 1]
    ORD[pos] = cid
    FIRST[pos] = first


@njit(cache=True)
def _delete_pos(ORD, FIRST, m, pos):
    for k in range(pos, m - 1):
        ORD[k] = ORD[k + 1]
        FIRST[k] = FIRST[k + 1]


@njit(cache=True)
def _split(T, CC, HV, CM, ORD, FIRST, META, FREE, pos):
    cid = ORD[pos]
    L = CM[cid, 0]
    half = L // 2
    c2 = _new_chunk_id(META, FREE)
    n2 = L - half
    bw = CC[cid, 0, half]
    bs = CC[cid, 1, half]
    for i in range(n2):
        T[c2, i] = T[cid, half + i]
    for j in range(n2 + 1):
        CC[c2, 0, j] = CC[cid, 0, half + j] - bw
        CC[c2, 1, j] = CC[cid, 1, half + j] - bs
    CM[cid, 0] = half
    CM[c2, 0] = n2
    _insert_pos(ORD, FIRST, META[M_M], pos + 1, c2, T[c2, 0])
    META[M_M] += 1
    _chunk_hull(CC, HV, CM, cid)
    _chunk_hull(CC, HV, CM, c2)


@njit(cache=True)
def add(T, CC, HV, CM, ORD, FIRST, BT, BWS, META, FREE, x, y):
    """Add one pair; the caller guarantees a free chunk id. Returns fix_blocks' code."""
    if META[M_M] == 0:
        cid = _new_chunk_id(META, FREE)
        CM[cid, 0] = 0
        CC[cid, 0, 0] = 0
        CC[cid, 1, 0] = 0
        ORD[0] = cid
        FIRST[0] = x
        META[M_M] = 1
    m = META[M_M]
    pos = _chunk_pos(FIRST, m, x)
    cid = ORD[pos]
    L = CM[cid, 0]
    i = _search(T, cid, L, x, False)
    if i < L and T[cid, i] == x:
        for j in range(i + 1, L + 1):
            CC[cid, 0, j] += 1
            CC[cid, 1, j] += y
    else:
        for j in range(L, i, -1):
            T[cid, j] = T[cid, j - 1]
        for j in range(L + 1, i + 1, -1):
            CC[cid, 0, j] = CC[cid, 0, j - 1] + 1
            CC[cid, 1, j] = CC[cid, 1, j - 1] + y
        T[cid, i] = x
        CC[cid, 0, i + 1] = CC[cid, 0, i] + 1
        CC[cid, 1, i + 1] = CC[cid, 1, i] + y
        L += 1
        CM[cid, 0] = L
        META[M_K] += 1
        if i == 0:
            FIRST[pos] = x
    META[M_N] += 1
    if L >= T.shape[1]:
        _split(T, CC, HV, CM, ORD, FIRST, META, FREE, pos)
    else:
        _chunk_hull(CC, HV, CM, cid)
    return fix_blocks(T, CC, HV, CM, ORD, FIRST, BT, BWS, META, x)


@njit(cache=True)
def _drop_chunk(ORD, FIRST, META, FREE, pos):
    FREE[META[M_NFREE]] = ORD[pos]
    META[M_NFREE] += 1
    _delete_pos(ORD, FIRST, META[M_M], pos)
    META[M_M] -= 1


@njit(cache=True)
def _absorb_next(T, CC, HV, CM, ORD, FIRST, META, FREE, pos):
    """Append chunk pos + 1 to chunk pos (the caller checked it fits)."""
    a = ORD[pos]
    c = ORD[pos + 1]
    La = CM[a, 0]
    Lc = CM[c, 0]
    bw = CC[a, 0, La]
    bs = CC[a, 1, La]
    for i in range(Lc):
        T[a, La + i] = T[c, i]
    for j in range(1, Lc + 1):
        CC[a, 0, La + j] = bw + CC[c, 0, j]
        CC[a, 1, La + j] = bs + CC[c, 1, j]
    CM[a, 0] = La + Lc
    _drop_chunk(ORD, FIRST, META, FREE, pos + 1)
    _chunk_hull(CC, HV, CM, a)


@njit(cache=True)
def remove(T, CC, HV, CM, ORD, FIRST, BT, BWS, META, FREE, x, y):
    """Remove one pair. Returns ERR_NOT_HELD (state untouched) or fix_blocks' code."""
    m = META[M_M]
    if m == 0:
        return ERR_NOT_HELD
    pos = _chunk_pos(FIRST, m, x)
    cid = ORD[pos]
    L = CM[cid, 0]
    i = _search(T, cid, L, x, False)
    if i == L or T[cid, i] != x:
        return ERR_NOT_HELD
    w = CC[cid, 0, i + 1] - CC[cid, 0, i]
    s = CC[cid, 1, i + 1] - CC[cid, 1, i]
    if (y == 1 and s == 0) or (y == 0 and w == s):
        return ERR_NOT_HELD
    META[M_N] -= 1
    if w == 1:
        for j in range(i, L - 1):
            T[cid, j] = T[cid, j + 1]
        for j in range(i + 1, L):
            CC[cid, 0, j] = CC[cid, 0, j + 1] - 1
            CC[cid, 1, j] = CC[cid, 1, j + 1] - y
        L -= 1
        CM[cid, 0] = L
        META[M_K] -= 1
        if L == 0:
            _drop_chunk(ORD, FIRST, META, FREE, pos)
        else:
            if i == 0:
                FIRST[pos] = T[cid, 0]
            # keep chunks from fragmenting under sliding windows
            m = META[M_M]
            if pos + 1 < m and L + CM[ORD[pos + 1], 0] <= T.shape[1] // 2:
                _absorb_next(T, CC, HV, CM, ORD, FIRST, META, FREE, pos)
            elif pos > 0 and L + CM[ORD[pos - 1], 0] <= T.shape[1] // 2:
                _absorb_next(T, CC, HV, CM, ORD, FIRST, META, FREE, pos - 1)
            else:
                _chunk_hull(CC, HV, CM, cid)
    else:
        for j in range(i + 1, L + 1):
            CC[cid, 0, j] -= 1
            CC[cid, 1, j] -= y
        _chunk_hull(CC, HV, CM, cid)
    return fix_blocks(T, CC, HV, CM, ORD, FIRST, BT, BWS, META, x)


@njit(cache=True)
def build_hulls(CC, HV, CM, nch):
    for cid in range(nch):
        _chunk_hull(CC, HV, CM, cid)


@njit(cache=True)
def groups(T, CC, CM, ORD, META, t, w, s):
    """Write the groups in score order into t, w, s (sized META[M_K])."""
    k = 0
    for pos in range(META[M_M]):
        cid = ORD[pos]
        for i in range(CM[cid, 0]):
            t[k] = T[cid, i]
            w[k] = CC[cid, 0, i + 1] - CC[cid, 0, i]
            s[k] = CC[cid, 1, i + 1] - CC[cid, 1, i]
            k += 1
