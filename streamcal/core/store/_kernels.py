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
the lower hull of its own CSD, and each super-chunk (a run of SUPER..2*SUPER chunks) the
hull of those hulls; a scan over a block reads the hull vertices of the super-chunks it
covers whole, then of the chunks it covers whole, then the points of at most two partial
chunks. Sums are int64 (exact) and slopes are compared by cross-multiplication, so the
answers are exact fractions, divided once at the end.

Updates: after an add or remove only the block holding x can split (every other old block
is a union of new blocks). ``_fast_fix`` checks in half a block scan whether the block stays
whole (the usual case); otherwise ``_fix_blocks`` takes the block's local GCM as its new
sub-blocks and merges violators with the neighbouring blocks as PAVA would.

Cost per operation: O(log n) to locate plus the scan of (part of) one block, about
B / (CAP * SUPER) super-chunk hulls + 2 * 2 * SUPER chunk hulls + 2 * CAP points for a
block of B groups. For smooth calibration curves B ~ n^0.7; for a flat curve B ~ n.

State layout (all numpy arrays, so the store pickles as plain arrays):

* ``T[cid, i]``: score of group i of chunk cid (i < L).
* ``CC[cid, 0|1, j]``: cumulative counts / ones of chunk cid after its first j groups.
* ``HV[cid, :, h] = (x, y, j)``: the lower-hull vertices of the chunk's local CSD.
* ``CM[cid] = (L, hull length)``.
* ``ORD[pos]``: chunk id at position pos (chunks in score order); ``FIRST[pos]``: its first score.
* ``BT[b]``: score of the last group of block b; ``BWS[b] = (count, ones)`` of block b.
* ``META``: scalars, indices below. ``FREE``: recycled chunk ids.
* super-chunks: see the comment on the state S below.

A *point* is addressed as (pos, j): the CSD point after the first j groups of chunk pos.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.experimental import structref

CAP = 256  # default groups per chunk (T.shape[1]); a full chunk splits in two halves

SUPER = 8  # chunks per super-chunk when built; a super-chunk splits above 2 * SUPER
HC = 40  # hull vertices kept per chunk (a longer hull is read point by point)
HMAX = 96  # hull vertices kept per super-chunk; a longer hull is not kept (chunks used)

M_M = 0  # chunks in use (positions)
M_NB = 1  # blocks
M_NIDS = 2  # chunk ids ever handed out (high-water mark)
M_NFREE = 3  # recycled chunk ids available in FREE
M_N = 4  # pairs held
M_K = 5  # groups (distinct scores)
M_NS = 6  # super-chunks in use
M_NSIDS = 7  # super-chunk ids ever handed out
M_NSFREE = 8  # recycled super-chunk ids available in SFREE
M_HCAP = 9  # most pairs the hull scratch serves (hull_room(M_HCAP) <= its length)
META_SIZE = 10

ERR_NOT_HELD = 1
NEED_ROOM = 2

# State S: one numba structref holding the arrays. Passing it to a compiled kernel unboxes
# one object; a tuple of the 17 arrays cost ~0.6-0.9 µs more per call (a third of an
# operation on a small store). Fields:
#   T, CC, HV, CM, ORD, FIRST  chunks (see the module docstring)
#   BT, BWS                    blocks
#   META, FREE                 scalars, recycled chunk ids
#   SP[g] = (first chunk position, super id) for super-chunk g in order; SP[ns, 0] = m
#   SI[sid] = (count, ones, hull length or -1 if stale or 0 if too long)
#   SH[sid, 0|1, h], SHJ[sid, h]: hull vertices (relative to the super-chunk's start) and
#   where each is, k * CC.shape[2] + j for point j of the super-chunk's k-th chunk (a
#   refresh then needs no scores: only a block re-fit reads them); SFREE: recycled super ids
#   HX[h] = (x, y), HT[h]: scratch for the hull of one range scan (``_hull``) and the PAVA
#   stack of ``_fix_blocks``; sized by ``hull_room`` (an add returns NEED_ROOM first if the
#   store would outgrow it)


@structref.register
class StateType(types.StructRef):
    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class State(structref.StructRefProxy):
    """The store's arrays as one object for the kernels; made by ``new_state``."""


structref.define_boxing(StateType, State)

_I1, _I2, _I3 = types.int64[::1], types.int64[:, ::1], types.int64[:, :, ::1]
_F1, _F2 = types.float64[::1], types.float64[:, ::1]
_STATE_TYPES = (
    ("T", _F2), ("CC", _I3), ("HV", _I3), ("CM", _I2), ("ORD", _I1), ("FIRST", _F1),
    ("BT", _F1), ("BWS", _I2), ("META", _I1), ("FREE", _I1), ("SP", _I2), ("SI", _I2),
    ("SH", _I3), ("SHJ", _I2), ("SFREE", _I1), ("HX", _I2), ("HT", _F1),
)  # fmt: skip
_STATE = StateType(list(_STATE_TYPES))
STATE_FIELDS = tuple(name for name, _ in _STATE_TYPES)


@njit(cache=True)
def new_state(T, CC, HV, CM, ORD, FIRST, BT, BWS, META, FREE, SP, SI, SH, SHJ, SFREE, HX, HT):
    """Pack the arrays (C-contiguous, of the dtypes and ranks in ``_STATE``) into a State.

    Compiled and cached like the kernels (the structref's own constructor would be
    compiled afresh in every process)."""
    S = structref.new(_STATE)
    S.T, S.CC, S.HV, S.CM, S.ORD, S.FIRST = T, CC, HV, CM, ORD, FIRST
    S.BT, S.BWS, S.META, S.FREE = BT, BWS, META, FREE
    S.SP, S.SI, S.SH, S.SHJ, S.SFREE, S.HX, S.HT = SP, SI, SH, SHJ, SFREE, HX, HT
    return S


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


@njit(cache=True, inline="always")
def _pt_after(S, x, right):
    """Point after the last group with score <= x (right) or < x; (0, 0) if none."""
    T, CM, ORD, FIRST, META = S.T, S.CM, S.ORD, S.FIRST, S.META
    pos = _chunk_pos(FIRST, META[M_M], x)
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
def _super_of(SP, ns, pos):
    """Index g of the super-chunk holding chunk position pos."""
    lo, hi = 0, ns
    while lo < hi:
        mid = (lo + hi) >> 1
        if SP[mid, 0] <= pos:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


# --------------------------------------------------------------------------- hulls


@njit(cache=True)
def _chunk_hull(CC, HV, CM, cid, keep):
    """Lower hull (monotone chain) of the chunk's local CSD points j = 0..L, where points
    0..keep are unchanged since the hull was last computed.

    The old vertices with j <= keep stay the start of the chain: a point between two of
    them lies on or above the segment joining them, so it is on no lower hull of a set
    holding both. The chain restarts after the last of them, about half the chunk per
    update instead of all of it.

    Vertices are stored compactly as HV[cid] = (x, y, j) rows so a scan reads a few cache
    lines per chunk; a hull longer than HV holds is not kept (length 0: read every point).
    """
    L = CM[cid, 0]
    hc = HV.shape[2]
    h = 1  # point 0 = (0, 0) is always the first vertex
    nh = CM[cid, 1] if keep > 0 else 0  # keep = 0: recompute (a new or rebuilt chunk)
    while h < nh and HV[cid, 2, h] <= keep:
        h += 1
    HV[cid, 0, 0] = 0
    HV[cid, 1, 0] = 0
    HV[cid, 2, 0] = 0
    for j in range(HV[cid, 2, h - 1] + 1, L + 1):
        x = CC[cid, 0, j]
        y = CC[cid, 1, j]
        while h >= 2:
            ox = HV[cid, 0, h - 2]
            oy = HV[cid, 1, h - 2]
            if (HV[cid, 0, h - 1] - ox) * (y - oy) - (HV[cid, 1, h - 1] - oy) * (x - ox) <= 0:
                h -= 1
            else:
                break
        if h == hc:
            CM[cid, 1] = 0
            return
        HV[cid, 0, h] = x
        HV[cid, 1, h] = y
        HV[cid, 2, h] = j
        h += 1
    CM[cid, 1] = h


@njit(cache=True)
def _refresh_super(CC, HV, CM, ORD, SP, SI, SH, SHJ, g):
    """Recompute super-chunk g's totals and hull (the hull of its chunks' hulls).

    Reads only the chunks' hull rows where hulls are kept (not their scores or sums): a
    query that covers a stale super-chunk pays for this, and every add stales one.
    """
    sid = SP[g, 1]
    hmax = SH.shape[2]
    step = CC.shape[2]  # SHJ packs (chunk offset k, point j) as k * step + j
    h = 0
    bx = 0
    by = 0
    ok = True
    for pos in range(SP[g, 0], SP[g + 1, 0]):
        cid = ORD[pos]
        nh = CM[cid, 1]
        if ok:
            first = 0 if h == 0 else 1
            for u in range(first, nh if nh > 0 else CM[cid, 0] + 1):
                if nh > 0:
                    j = HV[cid, 2, u]
                    px = bx + HV[cid, 0, u]
                    py = by + HV[cid, 1, u]
                else:
                    j = u
                    px = bx + CC[cid, 0, j]
                    py = by + CC[cid, 1, j]
                while h >= 2:
                    ox = SH[sid, 0, h - 2]
                    oy = SH[sid, 1, h - 2]
                    if (SH[sid, 0, h - 1] - ox) * (py - oy) - (SH[sid, 1, h - 1] - oy) * (
                        px - ox
                    ) <= 0:
                        h -= 1
                    else:
                        break
                if h == hmax:
                    ok = False
                    break
                SH[sid, 0, h] = px
                SH[sid, 1, h] = py
                SHJ[sid, h] = (pos - SP[g, 0]) * step + j
                h += 1
        if nh > 0:  # the last hull vertex is the chunk's last point: its totals
            bx += HV[cid, 0, nh - 1]
            by += HV[cid, 1, nh - 1]
        else:
            L = CM[cid, 0]
            bx += CC[cid, 0, L]
            by += CC[cid, 1, L]
    SI[sid, 0] = bx
    SI[sid, 1] = by
    SI[sid, 2] = h if ok else 0


@njit(cache=True, inline="always")
def _push(HX, HT, h, px, py, t, want_scores):
    """Monotone-chain step: add point (px, py) (x above every point so far) to the lower
    hull HX[:h]; returns the new length. Collinear points are dropped."""
    while h >= 2:
        ox = HX[h - 2, 0]
        oy = HX[h - 2, 1]
        if (HX[h - 1, 0] - ox) * (py - oy) - (HX[h - 1, 1] - oy) * (px - ox) <= 0:
            h -= 1
        else:
            break
    HX[h, 0] = px
    HX[h, 1] = py
    if want_scores:
        HT[h] = t
    return h + 1


HULL = 0  # _scan modes: push the candidates onto a hull in the scratch,
SLOPE = 1  # keep the extreme slope to an anchor,
LINE = 2  # keep the least y * ax - x * ay (the lowest point under slope ay / ax)


@njit(cache=True, inline="always")
def _extreme(den, num, bn, bd, want_max):
    """The larger (``want_max``) or smaller of the slopes num / den and bn / bd, as an exact
    fraction with a positive denominator; bd == 0 means no slope yet."""
    if den < 0:
        num = -num
        den = -den
    if bd == 0 or (num * bd > bn * den if want_max else num * bd < bn * den):
        return num, den
    return bn, bd


@njit(cache=True, inline="always")
def _take(HX, HT, h, px, py, t, want_scores, mode, ax, ay, want_max, bn, bd):
    """Take a candidate as ``_scan``'s mode says. SLOPE keeps the extreme slope bn / bd
    between the candidate and the anchor (ax, ay); LINE keeps bn = min(py * ax - px * ay).
    Both test each point on its own, where a hull push depends on the stack: ~2x faster
    on scans of 10^4+ candidates."""
    if mode == SLOPE:
        bn, bd = _extreme(px - ax, py - ay, bn, bd, want_max)
        return h, bn, bd
    if mode == LINE:
        v = py * ax - px * ay
        if bd == 0 or v < bn:
            bn = v
            bd = 1
        return h, bn, bd
    return _push(HX, HT, h, px, py, t, want_scores), bn, bd


@njit(cache=True)
def _partial(T, CC, HV, CM, cid, jlo, jhi, bx, by, ws, HX, HT, h, mode, ax, ay, wm, bn, bd):
    """Take the candidates among points jlo..jhi of chunk cid; returns (h, bn, bd).

    A point strictly between two chunk-hull vertices that are both in the range lies on
    or above the segment joining them, so it is on the lower hull of no superset of the
    range: only the points before the first vertex in the range, the vertices in it and
    the points after the last one can be tangent points. With a kept hull (often 20-40
    vertices for 256 groups) that skips most of a partial chunk.
    """
    nh = CM[cid, 1]
    ua = 0
    while ua < nh and HV[cid, 2, ua] < jlo:
        ua += 1
    ub = ua
    while ub < nh and HV[cid, 2, ub] <= jhi:
        ub += 1
    t = np.nan
    if ub == ua:  # no vertex in the range (or no hull kept): every point
        ja = jhi + 1
        jb = jhi
    else:
        ja = HV[cid, 2, ua]
        jb = HV[cid, 2, ub - 1]
    for j in range(jlo, ja):
        if ws:
            t = T[cid, j - 1]
        px = bx + CC[cid, 0, j]
        py = by + CC[cid, 1, j]
        h, bn, bd = _take(HX, HT, h, px, py, t, ws, mode, ax, ay, wm, bn, bd)
    for u in range(ua, ub):
        j = HV[cid, 2, u]
        if ws:
            t = T[cid, j - 1]
        px = bx + HV[cid, 0, u]
        py = by + HV[cid, 1, u]
        h, bn, bd = _take(HX, HT, h, px, py, t, ws, mode, ax, ay, wm, bn, bd)
    for j in range(jb + 1, jhi + 1):
        if ws:
            t = T[cid, j - 1]
        px = bx + CC[cid, 0, j]
        py = by + CC[cid, 1, j]
        h, bn, bd = _take(HX, HT, h, px, py, t, ws, mode, ax, ay, wm, bn, bd)
    return h, bn, bd


@njit(cache=True)
def _scan(S, ps, js, pe, je, incl_start, want_scores, mode, ox, oy, ax, ay, wm):
    """Lower hull of the CSD points after (ps, js) up to (pe, je), written to the scratch
    HX (coordinates relative to point (ps, js)) and, if ``want_scores``, HT (the score of
    the group each vertex ends; reading scores costs cache misses, so queries skip them).
    The start point itself comes first if ``incl_start``. Returns the number of vertices.

    Only hull vertices can be tangent points, so only candidates are pushed: whole
    super-chunks inside the range give their hull vertices, whole chunks theirs, and the
    rest (at most two partial chunks) the points ``_partial`` keeps. Built in one pass into
    the preallocated scratch: no allocation, no second pass. The scratch is sized by
    ``hull_room(n)``, which bounds any such hull.

    In modes SLOPE and LINE (see ``_take``) nothing is written and (bn, bd) is the
    result, over coordinates shifted by (ox, oy). Returns (h, bn, bd, lx, ly), (lx, ly)
    the shifted coordinates of the range's last point.
    """
    T, CC, HV, CM, ORD, META = S.T, S.CC, S.HV, S.CM, S.ORD, S.META
    SP, SI, SH, SHJ, HX, HT = S.SP, S.SI, S.SH, S.SHJ, S.HX, S.HT
    step = CC.shape[2]
    h = 0
    bn = 0
    bd = 0
    t = np.nan
    if incl_start:
        h, bn, bd = _take(HX, HT, h, ox, oy, t, want_scores, mode, ax, ay, wm, bn, bd)
    lx = ox  # the range's last point (its coordinates are returned)
    ly = oy
    if ps == pe and js == je:
        return h, bn, bd, lx, ly
    cid = ORD[ps]
    bx = ox - CC[cid, 0, js]
    by = oy - CC[cid, 1, js]
    pos = ps
    g = _super_of(SP, META[M_NS], ps)
    while True:
        if pos == SP[g, 0] and (pos != ps or (js == 0 and incl_start)):
            last = SP[g + 1, 0] - 1
            if last < pe or (last == pe and je == CM[ORD[pe], 0]):
                sid = SP[g, 1]
                if SI[sid, 2] < 0:
                    _refresh_super(CC, HV, CM, ORD, SP, SI, SH, SHJ, g)
                nh = SI[sid, 2]
                if nh > 0:
                    for u in range(1, nh):
                        if want_scores:
                            k = SHJ[sid, u]
                            t = T[ORD[pos + k // step], k % step - 1]
                        px = bx + SH[sid, 0, u]
                        py = by + SH[sid, 1, u]
                        h, bn, bd = _take(
                            HX, HT, h, px, py, t, want_scores, mode, ax, ay, wm, bn, bd
                        )
                    bx += SI[sid, 0]
                    by += SI[sid, 1]
                    pos = last + 1
                    g += 1
                    if pos > pe:
                        lx = bx
                        ly = by
                        break
                    continue
        cid = ORD[pos]
        L = CM[cid, 0]
        jlo = js + 1 if pos == ps else 1
        jhi = je if pos == pe else L
        # a chunk hull also spans the chunk's point 0: use it only when that point counts
        full = jlo == 1 and jhi == L and (pos != ps or incl_start) and CM[cid, 1] > 0
        if full:
            nc = CM[cid, 1] - 1
            for u in range(1, nc + 1):
                if want_scores:
                    t = T[cid, HV[cid, 2, u] - 1]
                px = bx + HV[cid, 0, u]
                py = by + HV[cid, 1, u]
                h, bn, bd = _take(HX, HT, h, px, py, t, want_scores, mode, ax, ay, wm, bn, bd)
            if pos == pe:
                lx = bx + HV[cid, 0, nc]
                ly = by + HV[cid, 1, nc]
                break
            # the last hull vertex is the chunk's last point: its totals
            bx += HV[cid, 0, nc]
            by += HV[cid, 1, nc]
        else:
            h, bn, bd = _partial(
                T,
                CC,
                HV,
                CM,
                cid,
                jlo,
                jhi,
                bx,
                by,
                want_scores,
                HX,
                HT,
                h,
                mode,
                ax,
                ay,
                wm,
                bn,
                bd,
            )
            if pos == pe:
                lx = bx + CC[cid, 0, jhi]
                ly = by + CC[cid, 1, jhi]
                break
            bx += CC[cid, 0, L]
            by += CC[cid, 1, L]
        pos += 1
        if pos == SP[g + 1, 0]:
            g += 1
    return h, bn, bd, lx, ly


@njit(cache=True)
def _hull(S, ps, js, pe, je, incl_start, want_scores):
    """``_scan`` building the hull in the scratch; returns its number of vertices."""
    return _scan(S, ps, js, pe, je, incl_start, want_scores, HULL, 0, 0, 0, 0, False)[0]


def hull_room(n: int) -> int:
    """Most vertices a strictly convex chain of CSD points spanning n pairs can have.

    Its edges have slopes in [0, 1] and strictly increasing, so their directions are
    distinct primitive vectors (a, b), 0 <= b <= a, with the a's summing to at most n;
    there are a + 1 such vectors per a, and the most edges come from taking the smallest
    a first. About (3n)^(2/3) / 2 + 1: 10.5 k at 10^6, 48 k at 10^7.

    >>> [hull_room(n) for n in (0, 1, 2, 5, 6, 10**6)]
    [1, 2, 3, 4, 5, 10472]
    """
    count, a = 1, 0
    while True:
        a += 1
        if n < a * (a + 1):
            return count + n // a
        n -= a * (a + 1)
        count += a + 1


@njit(cache=True)
def _best(HX, n, ax, ay, sx, sy, want_max):
    """Extreme slope between anchor (ax, ay) and points HX[:n] shifted by (sx, sy), as an
    exact fraction (num, den), den > 0."""
    bn = 0
    bd = 0
    for i in range(n):
        bn, bd = _extreme(HX[i, 0] + sx - ax, HX[i, 1] + sy - ay, bn, bd, want_max)
    return bn, bd


# --------------------------------------------------------------------------- queries


@njit(cache=True)
def _p1(S, x):
    T, CM, ORD, BT, BWS, META = S.T, S.CM, S.ORD, S.BT, S.BWS, S.META
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
        ps, js = _pt_after(S, BT[b - 1], True)
    pe, je = _pt_after(S, x, False)
    HX = S.HX
    n = _hull(S, ps, js, pe, je, True, False)
    ax = BWS[b, 0] + 1
    ay = BWS[b, 1] + 1
    bn, bd = _best(HX, n, ax, ay, 0, 0, True)
    # walk right along the GCM while the next block's mean is below the bridge slope
    while b + 1 < nb and BWS[b + 1, 1] * bd < bn * BWS[b + 1, 0]:
        b += 1
        ax += BWS[b, 0]
        ay += BWS[b, 1]
        bn, bd = _best(HX, n, ax, ay, 0, 0, True)
    return bn / bd


@njit(cache=True)
def _p0(S, x):
    T, ORD, BT, BWS, META = S.T, S.ORD, S.BT, S.BWS, S.META
    nb = META[M_NB]
    if META[M_N] == 0:
        return 0.0
    if x < T[ORD[0], 0]:
        return 0.0
    pc, jc = _pt_after(S, x, True)  # P_c
    tc = T[ORD[pc], jc - 1]
    b = _first_block(BT, nb, tc)
    pe, je = _pt_after(S, BT[b], True)  # P_r
    # coordinates relative to P_{c-1} = (pc, jc - 1); the last hull vertex is always P_r
    HX = S.HX
    n = _hull(S, pc, jc - 1, pe, je, False, False)
    qx = HX[n - 1, 0] - BWS[b, 0]  # the anchor starts at P_{l-1}
    qy = HX[n - 1, 1] - BWS[b, 1]
    bn, bd = _best(HX, n, qx, qy, 1, 0, False)
    # walk left along the GCM while the previous block's mean is above the bridge slope
    while b > 0 and BWS[b - 1, 1] * bd > bn * BWS[b - 1, 0]:
        b -= 1
        qx -= BWS[b, 0]
        qy -= BWS[b, 1]
        bn, bd = _best(HX, n, qx, qy, 1, 0, False)
    return bn / bd


@njit(cache=True)
def _pair(S, x):
    """(p0, p1) for x: one anchor each, streamed (no hull), p0 reusing p1's scan.

    Usually the bridge's far end is the end of the block holding x and no walk along the
    blocks is needed: then p1 is the best slope from the anchor P_r + (1, 1) over one scan
    of P_{l-1}..P_{d-1}, and p0 the best slope from P_{l-1} - (1, 0) over P_c..P_r, its
    coordinates offset by P_{c-1} - P_{l-1}, which p1's scan ends at. When a walk is
    needed (rare) or x's pools lie in different blocks, ``_p0`` / ``_p1`` answer.
    """
    T, CC, ORD, BT, BWS, META = S.T, S.CC, S.ORD, S.BT, S.BWS, S.META
    if META[M_N] == 0:
        return 0.0, 1.0
    nb = META[M_NB]
    b = _first_block(BT, nb, x)
    if b == nb or x < T[ORD[0], 0]:  # above or below every score: one side is trivial
        return _p0(S, x), _p1(S, x)
    ps, js = (0, 0) if b == 0 else _pt_after(S, BT[b - 1], True)
    pe, je = _pt_after(S, x, False)
    ax = BWS[b, 0] + 1
    ay = BWS[b, 1] + 1
    _, bn, bd, lx, ly = _scan(S, ps, js, pe, je, True, False, SLOPE, 0, 0, ax, ay, True)
    if b + 1 < nb and BWS[b + 1, 1] * bd < bn * BWS[b + 1, 0]:
        p1 = _p1(S, x)
    else:
        p1 = bn / bd
    pc, jc = _pt_after(S, x, True)  # P_c
    cid = ORD[pc]
    tc = T[cid, jc - 1]
    if BT[b - 1] >= tc if b > 0 else False:  # c ends the previous block
        return _p0(S, x), p1
    if tc != x:  # p1's scan ended at P_c: step back to P_{c-1}
        lx -= CC[cid, 0, jc] - CC[cid, 0, jc - 1]
        ly -= CC[cid, 1, jc] - CC[cid, 1, jc - 1]
    pr, jr = _pt_after(S, BT[b], True)  # P_r
    _, bn, bd, _, _ = _scan(S, pc, jc - 1, pr, jr, False, False, SLOPE, lx, ly, -1, 0, False)
    if b > 0 and BWS[b - 1, 1] * bd > bn * BWS[b - 1, 0]:
        return _p0(S, x), p1
    return bn / bd, p1


@njit(cache=True)
def query_many(S, xs, p0, p1):
    for i in range(xs.shape[0]):
        p0[i], p1[i] = _pair(S, xs[i])


@njit(cache=True)
def query_one(S, x):
    return _pair(S, x)


# --------------------------------------------------------------------------- blocks


@njit(cache=True)
def _fix_blocks(S, x):
    """Re-run PAVA locally after the group at score x changed.

    Only the block holding x can split (every other old block is a union of new blocks),
    so: take that block's local GCM as its new sub-blocks, then merge violators with the
    neighbouring blocks, stack-wise, as PAVA would. Returns 0, or -(blocks needed) without
    touching the block arrays if they are too small.
    """
    BT, BWS, META = S.BT, S.BWS, S.META
    m = META[M_M]
    nb = META[M_NB]
    b = _first_block(BT, nb, x)
    if b == 0 or m == 0:
        ps, js = 0, 0
    else:
        ps, js = _pt_after(S, BT[b - 1], True)
    if m == 0:
        pe, je = 0, 0
    elif b < nb:
        pe, je = _pt_after(S, BT[b], True)
    else:
        pe, je = _pt_after(S, x, True)
    HX, HT = S.HX, S.HT
    if m == 0:
        HX[0, 0] = 0
        HX[0, 1] = 0
        h = 1
    else:  # the block's local GCM
        h = _hull(S, ps, js, pe, je, True, True)
    # sub-blocks = hull segments, then PAVA against the neighbours; the stack reuses HX/HT
    ns = 0
    li = b - 1
    ri = b + 1 if b < nb else nb
    for v in range(1, h):
        w = HX[v, 0] - HX[v - 1, 0]
        s = HX[v, 1] - HX[v - 1, 1]
        HX[ns, 0] = w
        HX[ns, 1] = s
        HT[ns] = HT[v]
        ns += 1
        ns, li = _settle(HX, HT, ns, li, BWS)
    while ns > 0 and ri < nb and HX[ns - 1, 1] * BWS[ri, 0] > BWS[ri, 1] * HX[ns - 1, 0]:
        HX[ns - 1, 0] += BWS[ri, 0]
        HX[ns - 1, 1] += BWS[ri, 1]
        HT[ns - 1] = BT[ri]
        ri += 1
        ns, li = _settle(HX, HT, ns, li, BWS)
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
        BT[li + 1 + k] = HT[k]
        BWS[li + 1 + k, 0] = HX[k, 0]
        BWS[li + 1 + k, 1] = HX[k, 1]
    META[M_NB] = new_nb
    return 0


@njit(cache=True)
def _fast_fix(S, x, y, dw, deleted):
    """After adding (dw = 1) or removing (dw = -1) the pair (x, y): if the block holding x
    stays one block, update its totals and return True; else leave it to ``_fix_blocks``.

    With B = [l..r] the block and g the group of x, the new chord P_{l-1} -> P'_r rises
    (add a 1, remove a 0) or falls (add a 0, remove a 1). If it rises, the points right of
    g stay above it, so B stays one block iff no point of P_{l-1}..P_{g-1} lies below it
    and the next block's mean is not below it; if it falls, the mirror image (points left
    of g stay above; check P'_g..P'_r and the previous block). This reads half the block,
    against the whole block for a re-fit.
    """
    BT, BWS, META = S.BT, S.BWS, S.META
    nb = META[M_NB]
    b = _first_block(BT, nb, x)
    if b == nb or (deleted and BT[b] == x):
        return False
    w = BWS[b, 0] + dw
    s = BWS[b, 1] + y * dw
    if w == 0:
        return False
    if b == 0:
        ps, js = 0, 0
    else:
        ps, js = _pt_after(S, BT[b - 1], True)
    if (y == 1) == (dw == 1):  # the chord rises
        if b + 1 < nb and BWS[b + 1, 1] * w < s * BWS[b + 1, 0]:
            return False
        pe, je = _pt_after(S, x, False)
        _, bn, bd, _, _ = _scan(S, ps, js, pe, je, True, False, SLOPE, 0, 0, w, s, True)
        if bn * w > s * bd:
            return False
    else:
        if b > 0 and BWS[b - 1, 1] * w > s * BWS[b - 1, 0]:
            return False
        qs, qj = _pt_after(S, x, False)  # P'_{g-1}
        pe, je = _pt_after(S, BT[b], True)  # P'_r
        if qs == pe and qj == je:
            return False
        # is a point strictly below the new chord, the line through P'_r of slope s / w?
        _, low, _, ex, ey = _scan(S, qs, qj, pe, je, False, False, LINE, 0, 0, w, s, False)
        if low < ey * w - ex * s:
            return False
    BWS[b, 0] = w
    BWS[b, 1] = s
    return True


@njit(cache=True)
def fix_blocks(S, x):
    """Entry point of ``_fix_blocks`` (the store retries it after growing the blocks)."""
    return _fix_blocks(S, x)


@njit(cache=True)
def _settle(HX, HT, ns, li, BWS):
    """PAVA merges on the stack top, reaching into the old blocks on the left as needed."""
    while True:
        if ns >= 2 and HX[ns - 2, 1] * HX[ns - 1, 0] > HX[ns - 1, 1] * HX[ns - 2, 0]:
            HX[ns - 2, 0] += HX[ns - 1, 0]
            HX[ns - 2, 1] += HX[ns - 1, 1]
            HT[ns - 2] = HT[ns - 1]
            ns -= 1
        elif ns == 1 and li >= 0 and BWS[li, 1] * HX[0, 0] > HX[0, 1] * BWS[li, 0]:
            HX[0, 0] += BWS[li, 0]
            HX[0, 1] += BWS[li, 1]
            li -= 1
        else:
            return ns, li


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
def _new_id(META, FREE, nfree, nids):
    if META[nfree] > 0:
        META[nfree] -= 1
        return FREE[META[nfree]]
    i = META[nids]
    META[nids] += 1
    return i


@njit(cache=True, inline="always")
def _stale(S, pos):
    """Mark the super-chunk holding chunk position pos as needing a refresh."""
    SP, SI, META = S.SP, S.SI, S.META
    g = _super_of(SP, META[M_NS], pos)
    SI[SP[g, 1], 2] = -1


@njit(cache=True)
def _insert_pos(S, pos, cid, first):
    """Put chunk cid at position pos (pos >= 1); it joins the super-chunk of pos - 1."""
    ORD, FIRST, META, SP, SI, SFREE = S.ORD, S.FIRST, S.META, S.SP, S.SI, S.SFREE
    m = META[M_M]
    for k in range(m, pos, -1):
        ORD[k] = ORD[k - 1]
        FIRST[k] = FIRST[k - 1]
    ORD[pos] = cid
    FIRST[pos] = first
    META[M_M] = m + 1
    ns = META[M_NS]
    g = _super_of(SP, ns, pos - 1)
    for k in range(g + 1, ns + 1):
        SP[k, 0] += 1
    SI[SP[g, 1], 2] = -1
    size = SP[g + 1, 0] - SP[g, 0]
    if size > 2 * SUPER:  # split the super-chunk in two
        sid = _new_id(META, SFREE, M_NSFREE, M_NSIDS)
        for k in range(ns + 1, g + 1, -1):
            SP[k, 0] = SP[k - 1, 0]
            SP[k, 1] = SP[k - 1, 1]
        SP[g + 1, 0] = SP[g, 0] + size // 2
        SP[g + 1, 1] = sid
        SI[sid, 2] = -1
        META[M_NS] = ns + 1


@njit(cache=True)
def _delete_pos(S, pos):
    ORD, FIRST, META, FREE, SP, SI, SFREE = S.ORD, S.FIRST, S.META, S.FREE, S.SP, S.SI, S.SFREE
    FREE[META[M_NFREE]] = ORD[pos]
    META[M_NFREE] += 1
    m = META[M_M]
    for k in range(pos, m - 1):
        ORD[k] = ORD[k + 1]
        FIRST[k] = FIRST[k + 1]
    META[M_M] = m - 1
    ns = META[M_NS]
    g = _super_of(SP, ns, pos)
    for k in range(g + 1, ns + 1):
        SP[k, 0] -= 1
    if SP[g, 0] == SP[g + 1, 0]:  # the super-chunk is empty: drop it
        SFREE[META[M_NSFREE]] = SP[g, 1]
        META[M_NSFREE] += 1
        for k in range(g, ns):
            SP[k, 0] = SP[k + 1, 0]
            SP[k, 1] = SP[k + 1, 1]
        META[M_NS] = ns - 1
    else:
        SI[SP[g, 1], 2] = -1


@njit(cache=True)
def _split(S, pos):
    T, CC, HV, CM, ORD, META, FREE = S.T, S.CC, S.HV, S.CM, S.ORD, S.META, S.FREE
    cid = ORD[pos]
    L = CM[cid, 0]
    half = L // 2
    c2 = _new_id(META, FREE, M_NFREE, M_NIDS)
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
    _chunk_hull(CC, HV, CM, cid, 0)
    _chunk_hull(CC, HV, CM, c2, 0)
    _insert_pos(S, pos + 1, c2, T[c2, 0])


@njit(cache=True)
def add(S, x, y):
    """Add one pair. Returns fix_blocks' code, or NEED_ROOM (nothing changed) when a split
    could find no free chunk or super-chunk id or the hull scratch is full: the caller grows
    the arrays and retries."""
    T, CC, HV, CM, ORD, FIRST, META, FREE = S.T, S.CC, S.HV, S.CM, S.ORD, S.FIRST, S.META, S.FREE
    SP, SI, SFREE = S.SP, S.SI, S.SFREE
    if (
        (META[M_NIDS] == T.shape[0] and META[M_NFREE] == 0)
        or (META[M_NSIDS] == SI.shape[0] and META[M_NSFREE] == 0)
        or META[M_N] >= META[M_HCAP]
    ):
        return NEED_ROOM
    if META[M_M] == 0:
        cid = _new_id(META, FREE, M_NFREE, M_NIDS)
        CM[cid, 0] = 0
        CC[cid, 0, 0] = 0
        CC[cid, 1, 0] = 0
        ORD[0] = cid
        FIRST[0] = x
        META[M_M] = 1
        sid = _new_id(META, SFREE, M_NSFREE, M_NSIDS)
        SP[0, 0] = 0
        SP[0, 1] = sid
        SP[1, 0] = 1
        SI[sid, 2] = -1
        META[M_NS] = 1
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
    _stale(S, pos)
    if L >= T.shape[1]:
        _split(S, pos)
    else:
        _chunk_hull(CC, HV, CM, cid, i)
    if _fast_fix(S, x, y, 1, False):
        return 0
    return _fix_blocks(S, x)


@njit(cache=True)
def _absorb_next(S, pos):
    """Append chunk pos + 1 to chunk pos (the caller checked it fits)."""
    T, CC, HV, CM, ORD = S.T, S.CC, S.HV, S.CM, S.ORD
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
    _chunk_hull(CC, HV, CM, a, 0)
    _stale(S, pos)
    _delete_pos(S, pos + 1)


@njit(cache=True)
def remove(S, x, y):
    """Remove one pair. Returns ERR_NOT_HELD (state untouched) or fix_blocks' code."""
    T, CC, HV, CM, ORD, FIRST, META = S.T, S.CC, S.HV, S.CM, S.ORD, S.FIRST, S.META
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
    _stale(S, pos)
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
            _delete_pos(S, pos)
        else:
            if i == 0:
                FIRST[pos] = T[cid, 0]
            # keep chunks from fragmenting under sliding windows
            m = META[M_M]
            half = T.shape[1] // 2
            if pos + 1 < m and L + CM[ORD[pos + 1], 0] <= half:
                _absorb_next(S, pos)
            elif pos > 0 and L + CM[ORD[pos - 1], 0] <= half:
                _absorb_next(S, pos - 1)
            else:
                _chunk_hull(CC, HV, CM, cid, i)
    else:
        for j in range(i + 1, L + 1):
            CC[cid, 0, j] -= 1
            CC[cid, 1, j] -= y
        _chunk_hull(CC, HV, CM, cid, i)
    if _fast_fix(S, x, y, -1, w == 1):
        return 0
    return _fix_blocks(S, x)


@njit(cache=True)
def build_hulls(S):
    """Chunk hulls, then super-chunk hulls, of a freshly bulk-built state."""
    CC, HV, CM, ORD, META = S.CC, S.HV, S.CM, S.ORD, S.META
    SP, SI, SH, SHJ = S.SP, S.SI, S.SH, S.SHJ
    for pos in range(META[M_M]):
        _chunk_hull(CC, HV, CM, ORD[pos], 0)
    for g in range(META[M_NS]):
        _refresh_super(CC, HV, CM, ORD, SP, SI, SH, SHJ, g)


@njit(cache=True)
def groups(S, t, w, s):
    """Write the groups in score order into t, w, s (sized META[M_K])."""
    T, CC, CM, ORD, META = S.T, S.CC, S.CM, S.ORD, S.META
    k = 0
    for pos in range(META[M_M]):
        cid = ORD[pos]
        for i in range(CM[cid, 0]):
            t[k] = T[cid, i]
            w[k] = CC[cid, 0, i + 1] - CC[cid, 0, i]
            s[k] = CC[cid, 1, i + 1] - CC[cid, 1, i]
            k += 1
