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

* ``scores[cid, i]``: score of group i of chunk cid (i < L).
* ``sums[cid, 0|1, j]``: cumulative counts / ones of chunk cid after its first j groups.
* ``hulls[cid, :, h] = (x, y, j)``: the lower-hull vertices of the chunk's local CSD.
* ``lengths[cid] = (L, hull length)``.
* ``order[pos]``: chunk id at position pos (chunks in score order); ``firsts[pos]``: its
  first score.
* ``block_ends[b]``: score of the last group of block b; ``block_sums[b] = (count, ones)``.
* ``meta``: scalars, indices below. ``free_ids``: recycled chunk ids.
* super-chunks: see the comment on the state S below.

A *point* is addressed as (pos, j): the CSD point after the first j groups of chunk pos.

Every kernel lives in this one file on purpose: with ``cache=True`` numba checks a cached
kernel against its own file only, so a caller cached from another file would keep calling
the old version of an edited callee. One file means one edit invalidates every kernel.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.experimental import structref

CAP = 256  # default groups per chunk (scores.shape[1]); a full chunk splits in two halves

SUPER = 8  # chunks per super-chunk when built; a super-chunk splits above 2 * SUPER
HC = 40  # hull vertices kept per chunk (a longer hull is read point by point)
HMAX = 96  # hull vertices kept per super-chunk; a longer hull is not kept (chunks used)

M_M = 0  # chunks in use (positions)
M_NB = 1  # blocks
M_NIDS = 2  # chunk ids ever handed out (high-water mark)
M_NFREE = 3  # recycled chunk ids available in free_ids
M_N = 4  # pairs held
M_K = 5  # groups (distinct scores)
M_NS = 6  # super-chunks in use
M_NSIDS = 7  # super-chunk ids ever handed out
M_NSFREE = 8  # recycled super-chunk ids available in free_supers
M_HCAP = 9  # most pairs the hull scratch serves (hull_room(M_HCAP) <= its length)
META_SIZE = 10

ERR_NOT_HELD = 1
NEED_ROOM = 2

# State S: one numba structref holding the arrays. Passing it to a compiled kernel unboxes
# one object; a tuple of the 17 arrays cost ~0.6-0.9 µs more per call (a third of an
# operation on a small store). Fields:
#   scores, sums, hulls, lengths, order, firsts: chunks (see the module docstring)
#   block_ends, block_sums: blocks
#   meta, free_ids: scalars, recycled chunk ids
#   supers[g] = (first chunk position, super id) for super-chunk g in order; supers[ns, 0] = m
#   super_info[sid] = (count, ones, hull length or -1 if stale or 0 if too long)
#   super_hulls[sid, 0|1, h], super_where[sid, h]: hull vertices (relative to the
#   super-chunk's start) and where each is, k * sums.shape[2] + j for point j of the
#   super-chunk's k-th chunk (a refresh then needs no scores: only a block re-fit reads
#   them); free_supers: recycled super ids
#   scratch[h] = (x, y), scratch_scores[h]: the hull of one range scan (``_hull``) and the
#   PAVA stack of ``_fix_blocks``; sized by ``hull_room`` (an add returns NEED_ROOM first
#   if the store would outgrow it)
#   ranges[r] = (kind, row, pos, lo, hi, bx, by): the candidate ranges of one scan (see
#   ``_candidates``), 3 rows per chunk id


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
    ("scores", _F2), ("sums", _I3), ("hulls", _I3), ("lengths", _I2), ("order", _I1),
    ("firsts", _F1), ("block_ends", _F1), ("block_sums", _I2), ("meta", _I1),
    ("free_ids", _I1), ("supers", _I2), ("super_info", _I2), ("super_hulls", _I3),
    ("super_where", _I2), ("free_supers", _I1), ("scratch", _I2), ("scratch_scores", _F1),
    ("ranges", _I2),
)  # fmt: skip
_STATE = StateType(list(_STATE_TYPES))
STATE_FIELDS = tuple(name for name, _ in _STATE_TYPES)


# fmt: off
@njit(cache=True)
def new_state(scores, sums, hulls, lengths, order, firsts, block_ends, block_sums, meta,
              free_ids, supers, super_info, super_hulls, super_where, free_supers, scratch,
              scratch_scores, ranges):
    """Pack the arrays (C-contiguous, of the dtypes and ranks in ``_STATE``, in the order of
    ``STATE_FIELDS``) into a State.

    Compiled and cached like the kernels (the structref's own constructor would be
    compiled afresh in every process)."""
    S = structref.new(_STATE)
    S.scores, S.sums, S.hulls, S.lengths, S.order, S.firsts = (
        scores, sums, hulls, lengths, order, firsts)
    S.block_ends, S.block_sums, S.meta, S.free_ids = block_ends, block_sums, meta, free_ids
    S.supers, S.super_info, S.super_hulls, S.super_where, S.free_supers = (
        supers, super_info, super_hulls, super_where, free_supers)
    S.scratch, S.scratch_scores, S.ranges = scratch, scratch_scores, ranges
    return S
# fmt: on


# --------------------------------------------------------------------------- locating


@njit(cache=True)
def _bisect(a, n, x, right):
    """Number of the sorted a[:n] that are < x (or <= x if right)."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) >> 1
        v = a[mid]
        if v < x or (right and v == x):
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def _chunk_pos(firsts, m, x):
    """Position of the last chunk whose first score is <= x (0 if none)."""
    return max(_bisect(firsts, m, x, True) - 1, 0)


@njit(cache=True)
def _search(scores, cid, L, x, right):
    """Number of groups of chunk cid with score < x (or <= x if right)."""
    return _bisect(scores[cid], L, x, right)


@njit(cache=True, inline="always")
def _pt_after(S, x, right):
    """Point after the last group with score <= x (right) or < x; (0, 0) if none."""
    scores, lengths, order, firsts, meta = S.scores, S.lengths, S.order, S.firsts, S.meta
    pos = _chunk_pos(firsts, meta[M_M], x)
    i = _search(scores, order[pos], lengths[order[pos], 0], x, right)
    if i == 0 and pos > 0:
        pos -= 1
        i = lengths[order[pos], 0]
    return pos, i


@njit(cache=True)
def _first_block(block_ends, nb, x):
    """Index of the first block whose last score is >= x (nb if none)."""
    return _bisect(block_ends, nb, x, False)


@njit(cache=True)
def _super_of(supers, ns, pos):
    """Index g of the super-chunk holding chunk position pos."""
    return _bisect(supers[:, 0], ns, pos, True) - 1


# --------------------------------------------------------------------------- hulls


@njit(cache=True)
def _chunk_hull(sums, hulls, lengths, cid, keep):
    """Lower hull (monotone chain) of the chunk's local CSD points j = 0..L, where points
    0..keep are unchanged since the hull was last computed.

    The old vertices with j <= keep stay the start of the chain: a point between two of
    them lies on or above the segment joining them, so it is on no lower hull of a set
    holding both. The chain restarts after the last of them, about half the chunk per
    update instead of all of it.

    Vertices are stored compactly as hulls[cid] = (x, y, j) rows so a scan reads a few cache
    lines per chunk; a hull longer than hulls holds is not kept (length 0: read every point).
    """
    L = lengths[cid, 0]
    hc = hulls.shape[2]
    h = 1  # point 0 = (0, 0) is always the first vertex
    nh = lengths[cid, 1] if keep > 0 else 0  # keep = 0: recompute (a new or rebuilt chunk)
    while h < nh and hulls[cid, 2, h] <= keep:
        h += 1
    hulls[cid, 0, 0] = 0
    hulls[cid, 1, 0] = 0
    hulls[cid, 2, 0] = 0
    for j in range(hulls[cid, 2, h - 1] + 1, L + 1):
        x = sums[cid, 0, j]
        y = sums[cid, 1, j]
        while h >= 2:
            ox = hulls[cid, 0, h - 2]
            oy = hulls[cid, 1, h - 2]
            if (hulls[cid, 0, h - 1] - ox) * (y - oy) - (hulls[cid, 1, h - 1] - oy) * (x - ox) <= 0:
                h -= 1
            else:
                break
        if h == hc:
            lengths[cid, 1] = 0
            return
        hulls[cid, 0, h] = x
        hulls[cid, 1, h] = y
        hulls[cid, 2, h] = j
        h += 1
    lengths[cid, 1] = h


@njit(cache=True)
def _refresh_super(S, g):
    """Recompute super-chunk g's totals and hull (the hull of its chunks' hulls).

    Reads only the chunks' hull rows where hulls are kept (not their scores or sums): a
    query that covers a stale super-chunk pays for this, and every add stales one.
    """
    sums, hulls, lengths, order, supers = S.sums, S.hulls, S.lengths, S.order, S.supers
    super_info, super_hulls, super_where = S.super_info, S.super_hulls, S.super_where
    sid = supers[g, 1]
    hmax = super_hulls.shape[2]
    step = sums.shape[2]  # super_where packs (chunk offset k, point j) as k * step + j
    h = 0
    bx = 0
    by = 0
    ok = True
    for pos in range(supers[g, 0], supers[g + 1, 0]):
        cid = order[pos]
        nh = lengths[cid, 1]
        if ok:
            first = 0 if h == 0 else 1
            for u in range(first, nh if nh > 0 else lengths[cid, 0] + 1):
                if nh > 0:
                    j = hulls[cid, 2, u]
                    px = bx + hulls[cid, 0, u]
                    py = by + hulls[cid, 1, u]
                else:
                    j = u
                    px = bx + sums[cid, 0, j]
                    py = by + sums[cid, 1, j]
                while h >= 2:
                    ox = super_hulls[sid, 0, h - 2]
                    oy = super_hulls[sid, 1, h - 2]
                    if (super_hulls[sid, 0, h - 1] - ox) * (py - oy) - (
                        super_hulls[sid, 1, h - 1] - oy
                    ) * (px - ox) <= 0:
                        h -= 1
                    else:
                        break
                if h == hmax:
                    ok = False
                    break
                super_hulls[sid, 0, h] = px
                super_hulls[sid, 1, h] = py
                super_where[sid, h] = (pos - supers[g, 0]) * step + j
                h += 1
        if nh > 0:  # the last hull vertex is the chunk's last point: its totals
            bx += hulls[cid, 0, nh - 1]
            by += hulls[cid, 1, nh - 1]
        else:
            L = lengths[cid, 0]
            bx += sums[cid, 0, L]
            by += sums[cid, 1, L]
    super_info[sid, 0] = bx
    super_info[sid, 1] = by
    super_info[sid, 2] = h if ok else 0


@njit(cache=True, inline="always")
def _push(scratch, scratch_scores, h, px, py, t, want_scores):
    """Monotone-chain step: add point (px, py) (x above every point so far) to the lower
    hull scratch[:h]; returns the new length. Collinear points are dropped."""
    while h >= 2:
        ox = scratch[h - 2, 0]
        oy = scratch[h - 2, 1]
        if (scratch[h - 1, 0] - ox) * (py - oy) - (scratch[h - 1, 1] - oy) * (px - ox) <= 0:
            h -= 1
        else:
            break
    scratch[h, 0] = px
    scratch[h, 1] = py
    if want_scores:
        scratch_scores[h] = t
    return h + 1


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


# --------------------------------------------------------------------------- scans
#
# One walk, three scanners. A scan reads the CSD points after a start point up to an end
# point, but only the candidates (points that can be lower-hull vertices): whole
# super-chunks inside the range give their hull vertices, whole chunks theirs, and the rest
# (at most two partial chunks) the points ``_partial`` keeps. The walk, ``_candidates``,
# lists them as ranges in ``S.ranges``: entries lo..hi-1 of one row of one array (see
# ``_coords``) plus a base point. The scanners read the ranges:
#
# * ``_hull`` pushes the candidates onto a lower hull in the scratch,
# * ``_steepest`` keeps the extreme slope from an anchor,
# * ``_lowest`` keeps the lowest point under a line of given slope.
#
# The last two test each point on its own, where a hull push depends on the stack: ~2x
# faster on scans of 10^4+ candidates. Addresses ``start``, ``end`` are (chunk position,
# j) pairs; ``origin`` is the coordinates given to the start point (the others follow).
# The walk writes its ranges to an array instead of calling back a scanner (numba cannot
# cache a kernel that takes a function) or handing them out one call at a time (measured
# 2-3x slower on whole-store scans: reference-count updates on every call).

SUPER_HULL = 0  # range kinds: super-chunk hull vertices (super_hulls[sid]),
CHUNK_HULL = 1  # chunk hull vertices (hulls[cid]),
CHUNK_POINTS = 2  # chunk points (sums[cid])


@njit(cache=True, inline="always")
def _put(ranges, n, rng):
    """Append range rng = (kind, row, pos, lo, hi, bx, by) unless it is empty."""
    if rng[3] >= rng[4]:
        return n
    for k in range(7):
        ranges[n, k] = rng[k]
    return n + 1


@njit(cache=True, inline="always")
def _coords(super_hulls, hulls, sums, kind, row):
    """The coordinates of a range of this kind: entry u is (xy[0, u], xy[1, u]) relative to
    the range's base. One view per range keeps the scanners' inner loops plain loads (a
    branch per point instead is ~2x slower on scans of 10^6 pairs)."""
    if kind == SUPER_HULL:
        return super_hulls[row]
    if kind == CHUNK_HULL:
        return hulls[row]
    return sums[row]


@njit(cache=True, inline="always")
def _score_at(S, kind, row, pos, u):
    """Score of the group that entry u of a range ends (pos: the range's chunk position;
    a super-chunk's vertices say which of its chunks, see ``super_where``)."""
    if kind == SUPER_HULL:
        k = S.super_where[row, u]
        step = S.sums.shape[2]
        return S.scores[S.order[pos + k // step], k % step - 1]
    if kind == CHUNK_HULL:
        return S.scores[row, S.hulls[row, 2, u] - 1]
    return S.scores[row, u - 1]


@njit(cache=True, inline="always")
def _partial(lengths, hulls, cid, jlo, jhi):
    """Which points jlo..jhi of chunk cid can be candidates: (ja, ua, ub, jb) for the points
    jlo..ja-1, the hull vertices ua..ub-1 and the points jb+1..jhi.

    A point strictly between two chunk-hull vertices that are both in the range lies on
    or above the segment joining them, so it is on the lower hull of no superset of the
    range: only the points before the first vertex in the range, the vertices in it and
    the points after the last one can be tangent points. With a kept hull (often 20-40
    vertices for 256 groups) that skips most of a partial chunk.
    """
    nh = lengths[cid, 1]
    ua = 0
    while ua < nh and hulls[cid, 2, ua] < jlo:
        ua += 1
    ub = ua
    while ub < nh and hulls[cid, 2, ub] <= jhi:
        ub += 1
    if ub == ua:  # no vertex in the range (or no hull kept): every point
        return jhi + 1, ua, ub, jhi
    return hulls[cid, 2, ua], ua, ub, hulls[cid, 2, ub - 1]


@njit(cache=True)
def _candidates(S, start, end, incl_start, origin):
    """The walk: write the candidate ranges of the points after ``start`` up to ``end`` to
    ``S.ranges`` (rows (kind, row, pos, lo, hi, bx, by), pos the range's chunk position);
    return (number of ranges, x, y), (x, y) the end point. The start point itself is never
    listed; ``incl_start`` says whether a hull beginning at it may stand for the points.

    ``ranges`` has 3 rows per chunk (a chunk without a kept hull gives three, see
    ``_partial``), enough for any scan.
    """
    sums, hulls, lengths, order, ranges = S.sums, S.hulls, S.lengths, S.order, S.ranges
    supers, super_info = S.supers, S.super_info
    ps, js = start
    pe, je = end
    bx, by = origin
    if ps == pe and js == je:
        return 0, bx, by
    n = 0
    cid = order[ps]
    bx -= sums[cid, 0, js]  # (bx, by): the current chunk's point 0
    by -= sums[cid, 1, js]
    pos = ps
    g = _super_of(supers, S.meta[M_NS], ps)
    while pos <= pe:
        if pos == supers[g, 0] and (pos != ps or (js == 0 and incl_start)):
            last = supers[g + 1, 0] - 1
            if last < pe or (last == pe and je == lengths[order[pe], 0]):
                sid = supers[g, 1]
                if super_info[sid, 2] < 0:
                    _refresh_super(S, g)
                nh = super_info[sid, 2]
                if nh > 0:  # the whole super-chunk by its hull (vertex 0: point (pos, 0))
                    n = _put(ranges, n, (SUPER_HULL, sid, pos, 1, nh, bx, by))
                    bx += super_info[sid, 0]
                    by += super_info[sid, 1]
                    pos = last + 1
                    g += 1
                    continue
        cid = order[pos]
        L = lengths[cid, 0]
        jlo = js + 1 if pos == ps else 1
        jhi = je if pos == pe else L
        # a chunk hull also spans the chunk's point 0: use it only when that point counts
        if jlo == 1 and jhi == L and (pos != ps or incl_start) and lengths[cid, 1] > 0:
            n = _put(ranges, n, (CHUNK_HULL, cid, pos, 1, lengths[cid, 1], bx, by))
        else:
            ja, ua, ub, jb = _partial(lengths, hulls, cid, jlo, jhi)
            n = _put(ranges, n, (CHUNK_POINTS, cid, pos, jlo, ja, bx, by))
            n = _put(ranges, n, (CHUNK_HULL, cid, pos, ua, ub, bx, by))
            n = _put(ranges, n, (CHUNK_POINTS, cid, pos, jb + 1, jhi + 1, bx, by))
        bx += sums[cid, 0, jhi]
        by += sums[cid, 1, jhi]
        pos += 1
        if pos == supers[g + 1, 0]:
            g += 1
    return n, bx, by


@njit(cache=True)
def _hull(S, start, end, incl_start, want_scores):
    """Lower hull of the CSD points after ``start`` up to ``end`` (the start point first if
    ``incl_start``), written to ``scratch`` in coordinates relative to the start point and,
    if ``want_scores``, to ``scratch_scores`` (the score of the group each vertex ends;
    reading scores costs cache misses, so queries skip them). Returns the number of
    vertices. Built in one pass into the preallocated scratch (no allocation), sized by
    ``hull_room(n)``, which bounds any such hull."""
    scratch, scratch_scores, ranges = S.scratch, S.scratch_scores, S.ranges
    super_hulls, hulls, sums = S.super_hulls, S.hulls, S.sums
    h = 0
    if incl_start:
        h = _push(scratch, scratch_scores, h, 0, 0, np.nan, want_scores)
    n, _, _ = _candidates(S, start, end, incl_start, (0, 0))
    t = np.nan
    for r in range(n):
        kind, row, pos, lo, hi, bx, by = _row(ranges, r)
        xy = _coords(super_hulls, hulls, sums, kind, row)
        for u in range(lo, hi):
            if want_scores:
                t = _score_at(S, kind, row, pos, u)
            h = _push(scratch, scratch_scores, h, bx + xy[0, u], by + xy[1, u], t, want_scores)
    return h


@njit(cache=True)
def _steepest(S, start, end, incl_start, origin, anchor, want_max):
    """The largest (``want_max``) or smallest slope from ``anchor`` to a candidate (the
    start point too if ``incl_start``; coordinates as ``_candidates``), an exact fraction
    (num, den), den > 0 (den = 0: none); and the end point: (num, den, x, y)."""
    ranges, super_hulls, hulls, sums = S.ranges, S.super_hulls, S.hulls, S.sums
    ax, ay = anchor
    bn = 0
    bd = 0
    if incl_start:
        bn, bd = _extreme(origin[0] - ax, origin[1] - ay, bn, bd, want_max)
    n, lx, ly = _candidates(S, start, end, incl_start, origin)
    for r in range(n):
        kind, row, _, lo, hi, bx, by = _row(ranges, r)
        xy = _coords(super_hulls, hulls, sums, kind, row)
        for u in range(lo, hi):
            bn, bd = _extreme(bx + xy[0, u] - ax, by + xy[1, u] - ay, bn, bd, want_max)
    return bn, bd, lx, ly


@njit(cache=True)
def _lowest(S, start, end, slope):
    """The least y * dx - x * dy over the candidates (start point excluded, coordinates
    relative to it), slope = (dx, dy): the lowest point under that slope (0 if none); and
    the end point: (least, x, y)."""
    ranges, super_hulls, hulls, sums = S.ranges, S.super_hulls, S.hulls, S.sums
    dx, dy = slope
    low = 0
    found = False
    n, lx, ly = _candidates(S, start, end, False, (0, 0))
    for r in range(n):
        kind, row, _, lo, hi, bx, by = _row(ranges, r)
        xy = _coords(super_hulls, hulls, sums, kind, row)
        for u in range(lo, hi):
            v = (by + xy[1, u]) * dx - (bx + xy[0, u]) * dy
            if not found or v < low:
                low = v
                found = True
    return low, lx, ly


@njit(cache=True, inline="always")
def _row(ranges, r):
    return (
        ranges[r, 0],
        ranges[r, 1],
        ranges[r, 2],
        ranges[r, 3],
        ranges[r, 4],
        ranges[r, 5],
        ranges[r, 6],
    )


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
def _best(scratch, n, ax, ay, sx, sy, want_max):
    """Extreme slope between anchor (ax, ay) and points scratch[:n] shifted by (sx, sy), as an
    exact fraction (num, den), den > 0."""
    bn = 0
    bd = 0
    for i in range(n):
        bn, bd = _extreme(scratch[i, 0] + sx - ax, scratch[i, 1] + sy - ay, bn, bd, want_max)
    return bn, bd


# --------------------------------------------------------------------------- queries


@njit(cache=True)
def _p1(S, x):
    scores, lengths, order, block_ends = S.scores, S.lengths, S.order, S.block_ends
    block_sums, meta = S.block_sums, S.meta
    m = meta[M_M]
    nb = meta[M_NB]
    if meta[M_N] == 0:
        return 1.0
    last = order[m - 1]
    if x > scores[last, lengths[last, 0] - 1]:
        return 1.0
    b = _first_block(block_ends, nb, x)
    if b == 0:
        ps, js = 0, 0
    else:
        ps, js = _pt_after(S, block_ends[b - 1], True)
    scratch = S.scratch
    n = _hull(S, (ps, js), _pt_after(S, x, False), True, False)
    ax = block_sums[b, 0] + 1
    ay = block_sums[b, 1] + 1
    bn, bd = _best(scratch, n, ax, ay, 0, 0, True)
    # walk right along the GCM while the next block's mean is below the bridge slope
    while b + 1 < nb and block_sums[b + 1, 1] * bd < bn * block_sums[b + 1, 0]:
        b += 1
        ax += block_sums[b, 0]
        ay += block_sums[b, 1]
        bn, bd = _best(scratch, n, ax, ay, 0, 0, True)
    return bn / bd


@njit(cache=True)
def _p0(S, x):
    scores, order, block_ends, block_sums = S.scores, S.order, S.block_ends, S.block_sums
    meta = S.meta
    nb = meta[M_NB]
    if meta[M_N] == 0:
        return 0.0
    if x < scores[order[0], 0]:
        return 0.0
    pc, jc = _pt_after(S, x, True)  # P_c
    tc = scores[order[pc], jc - 1]
    b = _first_block(block_ends, nb, tc)
    pe, je = _pt_after(S, block_ends[b], True)  # P_r
    # coordinates relative to P_{c-1} = (pc, jc - 1); the last hull vertex is always P_r
    scratch = S.scratch
    n = _hull(S, (pc, jc - 1), (pe, je), False, False)
    qx = scratch[n - 1, 0] - block_sums[b, 0]  # the anchor starts at P_{l-1}
    qy = scratch[n - 1, 1] - block_sums[b, 1]
    bn, bd = _best(scratch, n, qx, qy, 1, 0, False)
    # walk left along the GCM while the previous block's mean is above the bridge slope
    while b > 0 and block_sums[b - 1, 1] * bd > bn * block_sums[b - 1, 0]:
        b -= 1
        qx -= block_sums[b, 0]
        qy -= block_sums[b, 1]
        bn, bd = _best(scratch, n, qx, qy, 1, 0, False)
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
    scores, sums, order, block_ends = S.scores, S.sums, S.order, S.block_ends
    block_sums, meta = S.block_sums, S.meta
    if meta[M_N] == 0:
        return 0.0, 1.0
    nb = meta[M_NB]
    b = _first_block(block_ends, nb, x)
    if b == nb or x < scores[order[0], 0]:  # above or below every score: one side is trivial
        return _p0(S, x), _p1(S, x)
    ps, js = (0, 0) if b == 0 else _pt_after(S, block_ends[b - 1], True)
    anchor = (block_sums[b, 0] + 1, block_sums[b, 1] + 1)
    bn, bd, lx, ly = _steepest(S, (ps, js), _pt_after(S, x, False), True, (0, 0), anchor, True)
    if b + 1 < nb and block_sums[b + 1, 1] * bd < bn * block_sums[b + 1, 0]:
        p1 = _p1(S, x)
    else:
        p1 = bn / bd
    pc, jc = _pt_after(S, x, True)  # P_c
    cid = order[pc]
    tc = scores[cid, jc - 1]
    if block_ends[b - 1] >= tc if b > 0 else False:  # c ends the previous block
        return _p0(S, x), p1
    if tc != x:  # p1's scan ended at P_c: step back to P_{c-1}
        lx -= sums[cid, 0, jc] - sums[cid, 0, jc - 1]
        ly -= sums[cid, 1, jc] - sums[cid, 1, jc - 1]
    pr = _pt_after(S, block_ends[b], True)  # P_r
    bn, bd, _, _ = _steepest(S, (pc, jc - 1), pr, False, (lx, ly), (-1, 0), False)
    if b > 0 and block_sums[b - 1, 1] * bd > bn * block_sums[b - 1, 0]:
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
    block_ends, block_sums, meta = S.block_ends, S.block_sums, S.meta
    m = meta[M_M]
    nb = meta[M_NB]
    b = _first_block(block_ends, nb, x)
    if b == 0 or m == 0:
        ps, js = 0, 0
    else:
        ps, js = _pt_after(S, block_ends[b - 1], True)
    if m == 0:
        pe, je = 0, 0
    elif b < nb:
        pe, je = _pt_after(S, block_ends[b], True)
    else:
        pe, je = _pt_after(S, x, True)
    scratch, scratch_scores = S.scratch, S.scratch_scores
    if m == 0:
        scratch[0, 0] = 0
        scratch[0, 1] = 0
        h = 1
    else:  # the block's local GCM
        h = _hull(S, (ps, js), (pe, je), True, True)
    # sub-blocks = hull segments, then PAVA against the neighbours; the stack reuses the scratch
    ns = 0
    li = b - 1
    ri = b + 1 if b < nb else nb
    for v in range(1, h):
        w = scratch[v, 0] - scratch[v - 1, 0]
        s = scratch[v, 1] - scratch[v - 1, 1]
        scratch[ns, 0] = w
        scratch[ns, 1] = s
        scratch_scores[ns] = scratch_scores[v]
        ns += 1
        ns, li = _settle(scratch, scratch_scores, ns, li, block_sums)
    while (
        ns > 0
        and ri < nb
        and scratch[ns - 1, 1] * block_sums[ri, 0] > block_sums[ri, 1] * scratch[ns - 1, 0]
    ):
        scratch[ns - 1, 0] += block_sums[ri, 0]
        scratch[ns - 1, 1] += block_sums[ri, 1]
        scratch_scores[ns - 1] = block_ends[ri]
        ri += 1
        ns, li = _settle(scratch, scratch_scores, ns, li, block_sums)
    new_nb = li + 1 + ns + (nb - ri)
    if new_nb > block_ends.shape[0]:
        return -new_nb
    # splice: blocks[0..li] + stack + blocks[ri..nb-1]
    dst = li + 1 + ns
    if dst < ri:
        for k in range(nb - ri):
            block_ends[dst + k] = block_ends[ri + k]
            block_sums[dst + k, 0] = block_sums[ri + k, 0]
            block_sums[dst + k, 1] = block_sums[ri + k, 1]
    elif dst > ri:
        for k in range(nb - ri - 1, -1, -1):
            block_ends[dst + k] = block_ends[ri + k]
            block_sums[dst + k, 0] = block_sums[ri + k, 0]
            block_sums[dst + k, 1] = block_sums[ri + k, 1]
    for k in range(ns):
        block_ends[li + 1 + k] = scratch_scores[k]
        block_sums[li + 1 + k, 0] = scratch[k, 0]
        block_sums[li + 1 + k, 1] = scratch[k, 1]
    meta[M_NB] = new_nb
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
    block_ends, block_sums, meta = S.block_ends, S.block_sums, S.meta
    nb = meta[M_NB]
    b = _first_block(block_ends, nb, x)
    if b == nb or (deleted and block_ends[b] == x):
        return False
    w = block_sums[b, 0] + dw
    s = block_sums[b, 1] + y * dw
    if w == 0:
        return False
    if b == 0:
        ps, js = 0, 0
    else:
        ps, js = _pt_after(S, block_ends[b - 1], True)
    if (y == 1) == (dw == 1):  # the chord rises
        if b + 1 < nb and block_sums[b + 1, 1] * w < s * block_sums[b + 1, 0]:
            return False
        bn, bd, _, _ = _steepest(S, (ps, js), _pt_after(S, x, False), True, (0, 0), (w, s), True)
        if bn * w > s * bd:
            return False
    else:
        if b > 0 and block_sums[b - 1, 1] * w > s * block_sums[b - 1, 0]:
            return False
        qs, qj = _pt_after(S, x, False)  # P'_{g-1}
        pe, je = _pt_after(S, block_ends[b], True)  # P'_r
        if qs == pe and qj == je:
            return False
        # is a point strictly below the new chord, the line through P'_r of slope s / w?
        low, ex, ey = _lowest(S, (qs, qj), (pe, je), (w, s))
        if low < ey * w - ex * s:
            return False
    block_sums[b, 0] = w
    block_sums[b, 1] = s
    return True


@njit(cache=True)
def fix_blocks(S, x):
    """Entry point of ``_fix_blocks`` (the store retries it after growing the blocks)."""
    return _fix_blocks(S, x)


@njit(cache=True)
def _settle(scratch, scratch_scores, ns, li, block_sums):
    """PAVA merges on the stack top, reaching into the old blocks on the left as needed."""
    while True:
        if (
            ns >= 2
            and scratch[ns - 2, 1] * scratch[ns - 1, 0] > scratch[ns - 1, 1] * scratch[ns - 2, 0]
        ):
            scratch[ns - 2, 0] += scratch[ns - 1, 0]
            scratch[ns - 2, 1] += scratch[ns - 1, 1]
            scratch_scores[ns - 2] = scratch_scores[ns - 1]
            ns -= 1
        elif (
            ns == 1
            and li >= 0
            and block_sums[li, 1] * scratch[0, 0] > scratch[0, 1] * block_sums[li, 0]
        ):
            scratch[0, 0] += block_sums[li, 0]
            scratch[0, 1] += block_sums[li, 1]
            li -= 1
        else:
            return ns, li


@njit(cache=True)
def pava_blocks(t, w, s, block_ends, block_sums):
    """PAVA over groups (exact integer means); writes blocks, returns their number."""
    nb = 0
    for i in range(t.shape[0]):
        block_ends[nb] = t[i]
        block_sums[nb, 0] = w[i]
        block_sums[nb, 1] = s[i]
        nb += 1
        while (
            nb >= 2
            and block_sums[nb - 2, 1] * block_sums[nb - 1, 0]
            >= block_sums[nb - 1, 1] * block_sums[nb - 2, 0]
        ):
            block_sums[nb - 2, 0] += block_sums[nb - 1, 0]
            block_sums[nb - 2, 1] += block_sums[nb - 1, 1]
            block_ends[nb - 2] = block_ends[nb - 1]
            nb -= 1
    return nb


# --------------------------------------------------------------------------- groups


@njit(cache=True)
def _new_id(meta, free_ids, nfree, nids):
    if meta[nfree] > 0:
        meta[nfree] -= 1
        return free_ids[meta[nfree]]
    i = meta[nids]
    meta[nids] += 1
    return i


@njit(cache=True, inline="always")
def _stale(S, pos):
    """Mark the super-chunk holding chunk position pos as needing a refresh."""
    supers, super_info, meta = S.supers, S.super_info, S.meta
    g = _super_of(supers, meta[M_NS], pos)
    super_info[supers[g, 1], 2] = -1


@njit(cache=True)
def _insert_pos(S, pos, cid, first):
    """Put chunk cid at position pos (pos >= 1); it joins the super-chunk of pos - 1."""
    order, firsts, meta, supers = S.order, S.firsts, S.meta, S.supers
    super_info, free_supers = S.super_info, S.free_supers
    m = meta[M_M]
    for k in range(m, pos, -1):
        order[k] = order[k - 1]
        firsts[k] = firsts[k - 1]
    order[pos] = cid
    firsts[pos] = first
    meta[M_M] = m + 1
    ns = meta[M_NS]
    g = _super_of(supers, ns, pos - 1)
    for k in range(g + 1, ns + 1):
        supers[k, 0] += 1
    super_info[supers[g, 1], 2] = -1
    size = supers[g + 1, 0] - supers[g, 0]
    if size > 2 * SUPER:  # split the super-chunk in two
        sid = _new_id(meta, free_supers, M_NSFREE, M_NSIDS)
        for k in range(ns + 1, g + 1, -1):
            supers[k, 0] = supers[k - 1, 0]
            supers[k, 1] = supers[k - 1, 1]
        supers[g + 1, 0] = supers[g, 0] + size // 2
        supers[g + 1, 1] = sid
        super_info[sid, 2] = -1
        meta[M_NS] = ns + 1


@njit(cache=True)
def _delete_pos(S, pos):
    order, firsts, meta, free_ids = S.order, S.firsts, S.meta, S.free_ids
    supers, super_info, free_supers = S.supers, S.super_info, S.free_supers
    free_ids[meta[M_NFREE]] = order[pos]
    meta[M_NFREE] += 1
    m = meta[M_M]
    for k in range(pos, m - 1):
        order[k] = order[k + 1]
        firsts[k] = firsts[k + 1]
    meta[M_M] = m - 1
    ns = meta[M_NS]
    g = _super_of(supers, ns, pos)
    for k in range(g + 1, ns + 1):
        supers[k, 0] -= 1
    if supers[g, 0] == supers[g + 1, 0]:  # the super-chunk is empty: drop it
        free_supers[meta[M_NSFREE]] = supers[g, 1]
        meta[M_NSFREE] += 1
        for k in range(g, ns):
            supers[k, 0] = supers[k + 1, 0]
            supers[k, 1] = supers[k + 1, 1]
        meta[M_NS] = ns - 1
    else:
        super_info[supers[g, 1], 2] = -1


@njit(cache=True)
def _split(S, pos):
    scores, sums, hulls, lengths = S.scores, S.sums, S.hulls, S.lengths
    order, meta, free_ids = S.order, S.meta, S.free_ids
    cid = order[pos]
    L = lengths[cid, 0]
    half = L // 2
    c2 = _new_id(meta, free_ids, M_NFREE, M_NIDS)
    n2 = L - half
    bw = sums[cid, 0, half]
    bs = sums[cid, 1, half]
    for i in range(n2):
        scores[c2, i] = scores[cid, half + i]
    for j in range(n2 + 1):
        sums[c2, 0, j] = sums[cid, 0, half + j] - bw
        sums[c2, 1, j] = sums[cid, 1, half + j] - bs
    lengths[cid, 0] = half
    lengths[c2, 0] = n2
    _chunk_hull(sums, hulls, lengths, cid, 0)
    _chunk_hull(sums, hulls, lengths, c2, 0)
    _insert_pos(S, pos + 1, c2, scores[c2, 0])


@njit(cache=True)
def add(S, x, y):
    """Add one pair. Returns fix_blocks' code, or NEED_ROOM (nothing changed) when a split
    could find no free chunk or super-chunk id or the hull scratch is full: the caller grows
    the arrays and retries."""
    scores, sums, hulls, lengths = S.scores, S.sums, S.hulls, S.lengths
    order, firsts, meta, free_ids = S.order, S.firsts, S.meta, S.free_ids
    supers, super_info, free_supers = S.supers, S.super_info, S.free_supers
    if (
        (meta[M_NIDS] == scores.shape[0] and meta[M_NFREE] == 0)
        or (meta[M_NSIDS] == super_info.shape[0] and meta[M_NSFREE] == 0)
        or meta[M_N] >= meta[M_HCAP]
    ):
        return NEED_ROOM
    if meta[M_M] == 0:
        cid = _new_id(meta, free_ids, M_NFREE, M_NIDS)
        lengths[cid, 0] = 0
        sums[cid, 0, 0] = 0
        sums[cid, 1, 0] = 0
        order[0] = cid
        firsts[0] = x
        meta[M_M] = 1
        sid = _new_id(meta, free_supers, M_NSFREE, M_NSIDS)
        supers[0, 0] = 0
        supers[0, 1] = sid
        supers[1, 0] = 1
        super_info[sid, 2] = -1
        meta[M_NS] = 1
    m = meta[M_M]
    pos = _chunk_pos(firsts, m, x)
    cid = order[pos]
    L = lengths[cid, 0]
    i = _search(scores, cid, L, x, False)
    if i < L and scores[cid, i] == x:
        for j in range(i + 1, L + 1):
            sums[cid, 0, j] += 1
            sums[cid, 1, j] += y
    else:
        for j in range(L, i, -1):
            scores[cid, j] = scores[cid, j - 1]
        for j in range(L + 1, i + 1, -1):
            sums[cid, 0, j] = sums[cid, 0, j - 1] + 1
            sums[cid, 1, j] = sums[cid, 1, j - 1] + y
        scores[cid, i] = x
        sums[cid, 0, i + 1] = sums[cid, 0, i] + 1
        sums[cid, 1, i + 1] = sums[cid, 1, i] + y
        L += 1
        lengths[cid, 0] = L
        meta[M_K] += 1
        if i == 0:
            firsts[pos] = x
    meta[M_N] += 1
    _stale(S, pos)
    if L >= scores.shape[1]:
        _split(S, pos)
    else:
        _chunk_hull(sums, hulls, lengths, cid, i)
    if _fast_fix(S, x, y, 1, False):
        return 0
    return _fix_blocks(S, x)


@njit(cache=True)
def _absorb_next(S, pos):
    """Append chunk pos + 1 to chunk pos (the caller checked it fits)."""
    scores, sums, hulls, lengths, order = S.scores, S.sums, S.hulls, S.lengths, S.order
    a = order[pos]
    c = order[pos + 1]
    La = lengths[a, 0]
    Lc = lengths[c, 0]
    bw = sums[a, 0, La]
    bs = sums[a, 1, La]
    for i in range(Lc):
        scores[a, La + i] = scores[c, i]
    for j in range(1, Lc + 1):
        sums[a, 0, La + j] = bw + sums[c, 0, j]
        sums[a, 1, La + j] = bs + sums[c, 1, j]
    lengths[a, 0] = La + Lc
    _chunk_hull(sums, hulls, lengths, a, 0)
    _stale(S, pos)
    _delete_pos(S, pos + 1)


@njit(cache=True)
def remove(S, x, y):
    """Remove one pair. Returns ERR_NOT_HELD (state untouched) or fix_blocks' code."""
    scores, sums, hulls, lengths = S.scores, S.sums, S.hulls, S.lengths
    order, firsts, meta = S.order, S.firsts, S.meta
    m = meta[M_M]
    if m == 0:
        return ERR_NOT_HELD
    pos = _chunk_pos(firsts, m, x)
    cid = order[pos]
    L = lengths[cid, 0]
    i = _search(scores, cid, L, x, False)
    if i == L or scores[cid, i] != x:
        return ERR_NOT_HELD
    w = sums[cid, 0, i + 1] - sums[cid, 0, i]
    s = sums[cid, 1, i + 1] - sums[cid, 1, i]
    if (y == 1 and s == 0) or (y == 0 and w == s):
        return ERR_NOT_HELD
    meta[M_N] -= 1
    _stale(S, pos)
    if w == 1:
        for j in range(i, L - 1):
            scores[cid, j] = scores[cid, j + 1]
        for j in range(i + 1, L):
            sums[cid, 0, j] = sums[cid, 0, j + 1] - 1
            sums[cid, 1, j] = sums[cid, 1, j + 1] - y
        L -= 1
        lengths[cid, 0] = L
        meta[M_K] -= 1
        if L == 0:
            _delete_pos(S, pos)
        else:
            if i == 0:
                firsts[pos] = scores[cid, 0]
            # keep chunks from fragmenting under sliding windows
            m = meta[M_M]
            half = scores.shape[1] // 2
            if pos + 1 < m and L + lengths[order[pos + 1], 0] <= half:
                _absorb_next(S, pos)
            elif pos > 0 and L + lengths[order[pos - 1], 0] <= half:
                _absorb_next(S, pos - 1)
            else:
                _chunk_hull(sums, hulls, lengths, cid, i)
    else:
        for j in range(i + 1, L + 1):
            sums[cid, 0, j] -= 1
            sums[cid, 1, j] -= y
        _chunk_hull(sums, hulls, lengths, cid, i)
    if _fast_fix(S, x, y, -1, w == 1):
        return 0
    return _fix_blocks(S, x)


@njit(cache=True)
def build_hulls(S):
    """Chunk hulls, then super-chunk hulls, of a freshly bulk-built state."""
    sums, hulls, lengths, order, meta = S.sums, S.hulls, S.lengths, S.order, S.meta
    for pos in range(meta[M_M]):
        _chunk_hull(sums, hulls, lengths, order[pos], 0)
    for g in range(meta[M_NS]):
        _refresh_super(S, g)


@njit(cache=True)
def groups(S, t, w, s):
    """Write the groups in score order into t, w, s (sized meta[M_K])."""
    scores, sums, lengths, order, meta = S.scores, S.sums, S.lengths, S.order, S.meta
    k = 0
    for pos in range(meta[M_M]):
        cid = order[pos]
        for i in range(lengths[cid, 0]):
            t[k] = scores[cid, i]
            w[k] = sums[cid, 0, i + 1] - sums[cid, 0, i]
            s[k] = sums[cid, 1, i + 1] - sums[cid, 1, i]
            k += 1
