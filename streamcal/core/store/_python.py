"""The pure-Python ScoreStore backend: tie-pooled groups in a ``sortedcontainers.SortedList``.

Same answers as the numba backend, bit for bit, on any Python that runs numpy.

Layout:

* groups: the distinct scores in a ``SortedList`` and their counts / ones in two dicts
  (the truth, from which everything else can be rebuilt);
* per sublist of the SortedList (a *chunk*, ~``load`` groups), the cumulative counts and
  ones of its groups as two float64 arrays of length L + 1 (the chunk's cumulative sum
  diagram, CSD), integers held exactly (float arithmetic on them is cheaper than int64's).
  They follow the sublists: an add or remove updates one chunk's arrays in place (views
  into a buffer with room for the longest sublist); when the SortedList splits or joins
  sublists (once every ~``load / 2`` updates), the sums of the chunks involved are cut
  anew along the new sublists;
* the PAVA blocks (maximal level sets of the isotonic fit) as three parallel lists: the
  score of each block's last group, its count and its number of ones.

A *point* (pos, j) is the CSD point after the first j groups of chunk pos. Every scan
reads the points of one block (or part of it) chunk by chunk, vectorised with numpy on
each chunk's arrays: a query costs about (block size / load) numpy passes, never a pass
over all n. An add scans the part of x's block on one side of x to see whether the block
stays one; when it follows a query of the same score with nothing changed in between (the
prequential step: predict, then learn the label), that query's scan already answered it,
and the add reuses it. Answers and tests are exact: counts are integers (below 2^53 in
every sum and product formed, so float64 holds them exactly), the tests "is a point below
a chord" are products of integers, and a slope is a float division of exact integers,
compared as a float. Two different fractions with denominators up to D differ by at
least 1 / D^2, far more than float64 rounding for D < 2^26, so with at most
``MAX_PAIRS`` pairs a float comparison of two slopes decides exactly what a
cross-multiplication would, and the largest of rounded slopes is the rounded largest
slope (rounding is monotone).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

import numpy as np
from sortedcontainers import SortedList

from streamcal.core.isotonic import pava
from streamcal.core.store import ScoreStore
from streamcal.core.validate import check_label, check_score, check_test_scores

_max = np.maximum.reduce  # ndarray.max() goes through a Python-level wrapper first
_min = np.minimum.reduce
_sub, _add, _mul, _div = np.subtract, np.add, np.multiply, np.divide

__all__ = ["PythonStore"]

LOAD = 8000  # groups per SortedList sublist: fewer, longer numpy passes per block scan
MAX_PAIRS = 2**26 - 4  # float slope comparisons are exact below this (module docstring)


class PythonStore(ScoreStore):
    """ScoreStore on sortedcontainers (see the module docstring); built by ``ScoreStore``."""

    backend = "python"

    def __init__(self, *, backend=None, _chunk=None):
        self._load = LOAD if _chunk is None else max(int(_chunk), 4)  # SortedList needs >= 4
        self._reset()

    def _reset(self) -> None:
        self._groups = SortedList()
        self._groups._reset(self._load)
        self._w: dict[float, int] = {}
        self._s: dict[float, int] = {}
        self._n = 0
        self._cw: list[np.ndarray] = []  # per chunk: cumulative counts, length L + 1
        self._cs: list[np.ndarray] = []  # per chunk: cumulative ones
        self._built: list[list] = []  # the sublists the chunk arrays were built for
        self._ends: list[float] = []  # per block: score of its last group
        self._bw: list[int] = []  # per block: count
        self._bs: list[int] = []  # per block: ones
        # (x, p0, p1) of the last query's scan inside x's block; any change drops it
        self._seen: tuple | None = None
        # Scratch for the block scans, as long as any chunk's arrays (``_room``): writing
        # into these instead of fresh arrays saves an allocation per numpy pass.
        self._u = np.empty(0)
        self._v = np.empty(0)

    @classmethod
    def _from_groups(cls, t, w, s, chunk=None) -> PythonStore:
        store = cls(_chunk=chunk)
        n = int(np.sum(w))
        if n > MAX_PAIRS:
            raise ValueError(f"the python store holds at most {MAX_PAIRS} pairs, got {n}")
        if len(t):
            scores = np.asarray(t, np.float64).tolist()
            store._groups.update(scores)
            store._w = dict(zip(scores, np.asarray(w).tolist(), strict=True))
            store._s = dict(zip(scores, np.asarray(s).tolist(), strict=True))
            store._n = n
            store._rebuild(w, s)
            store._ends, store._bw, store._bs = _blocks(scores, w, s)
        return store

    def _groups_arrays(self):
        t = np.array(list(self._groups), np.float64)
        w = np.fromiter(map(self._w.__getitem__, t.tolist()), np.int64, len(t))
        s = np.fromiter(map(self._s.__getitem__, t.tolist()), np.int64, len(t))
        return t, w, s

    def __len__(self) -> int:
        return self._n

    def _chunk_size(self) -> int:
        return self._load

    def clear(self) -> None:
        self._reset()

    # ------------------------------------------------------------------ chunks

    def _chunk_arrays(self, lst):
        cw = np.zeros(len(lst) + 1, np.float64)
        cs = np.zeros(len(lst) + 1, np.float64)
        np.cumsum(np.fromiter(map(self._w.__getitem__, lst), np.int64, len(lst)), out=cw[1:])
        np.cumsum(np.fromiter(map(self._s.__getitem__, lst), np.int64, len(lst)), out=cs[1:])
        return cw, cs

    def _grow(self, a: np.ndarray, i: int, inc: int) -> np.ndarray:
        """Chunk cumulative sums ``a`` after inserting a group of ``inc`` after point i.

        Shifted in place inside a buffer, so an insert is two numpy passes over the suffix
        and no allocation; the arrays are views into it. The buffer doubles when full, up to
        room for the longest sublist (2 * load groups, plus the one whose add splits it): a
        store built in bulk and never updated keeps arrays of its exact size, and the many
        small stores of a per-category calibration stay small.
        """
        m = len(a)
        buf = a.base
        if buf is None or len(buf) <= m:
            buf = np.empty(min(2 * m + 2, 2 * self._load + 2))
            buf[:m] = a
            self._room(len(buf))
        buf[i + 1 : m + 1] = buf[i:m]
        if inc:
            buf[i + 1 : m + 1] += inc
        return buf[: m + 1]

    def _room(self, m: int) -> None:
        """Scratch for scans over up to m points."""
        if m > len(self._u):
            size = min(2 * m, 2 * self._load + 2)
            self._u = np.empty(size)
            self._v = np.empty(size)

    def _rebuild(self, w=None, s=None) -> None:
        """Every chunk's arrays: from the groups' counts ``w`` and ones ``s`` (in score
        order) in a bulk build, else from the dicts (a store's first group)."""
        lists = self._groups._lists
        if w is None:
            sums = [self._chunk_arrays(lst) for lst in lists]
            self._cw = [cw for cw, _ in sums]
            self._cs = [cs for _, cs in sums]
        else:  # not from the dicts: a lookup per group costs ~100x more (see _recut)
            self._cw = _cut(np.asarray(w, np.int64), lists)
            self._cs = _cut(np.asarray(s, np.int64), lists)
        self._built = list(lists)
        self._room(max(map(len, lists), default=0) + 1)

    def _recut(self, lo: int, hi: int) -> None:
        """After the SortedList split sublist lo (hi = lo + 1) or joined lo and lo + 1 (hi =
        lo + 2, maybe splitting the result again): chunks lo..hi-1, their arrays already
        updated for the pair added or removed, hold in order the groups of the new sublists
        from lo on; cut their sums anew. From the counts (differences of the sums), not the
        dicts: a lookup per group in a dict of n scores costs ~100x more (cache misses).
        """
        lists = self._groups._lists
        new = lists[lo : hi + len(lists) - len(self._cw)]
        for arrays in (self._cw, self._cs):
            arrays[lo:hi] = _cut(np.concatenate([np.diff(a) for a in arrays[lo:hi]]), new)
        self._built[lo:hi] = new
        self._room(max(map(len, new)) + 1)

    # ------------------------------------------------------------------ points

    def _after(self, x: float, right: bool) -> tuple[int, int]:
        """The point after the last group with score <= x (right) or < x: (0, 0) if there is
        none, else (pos, j) with j >= 1, so that equal points have equal coordinates."""
        lists = self._groups._lists
        maxes = self._groups._maxes
        if right:
            pos = bisect_right(maxes, x)
            j = bisect_right(lists[pos], x) if pos < len(maxes) else 0
        else:
            pos = bisect_left(maxes, x)
            j = bisect_left(lists[pos], x) if pos < len(maxes) else 0
        if j == 0:
            if pos == 0:
                return 0, 0
            pos -= 1
            j = len(lists[pos])
        return pos, j

    def _spans(self, ps, js, pe, je):
        """The points (ps, js)..(pe, je) chunk by chunk: (pos, counts, ones, lo, hi, bx, by),
        the points lo..hi of chunk pos's cumulative sums plus (bx, by) being their
        coordinates relative to point (ps, js). lo > hi: no point of that chunk."""
        cw, cs = self._cw, self._cs
        bx = -int(cw[ps][js])
        by = -int(cs[ps][js])
        pos, lo = ps, js
        while pos < pe:
            a, c = cw[pos], cs[pos]
            yield pos, a, c, lo, len(a) - 1, bx, by
            bx += int(a[-1])
            by += int(c[-1])
            pos += 1
            lo = 1  # point 0 of this chunk is the last point of the previous one
        yield pe, cw[pe], cs[pe], lo, je, bx, by

    def _pieces(self, ps, js, pe, je):
        """The points (ps, js)..(pe, je) chunk by chunk as (counts, ones, bx, by): views of
        a chunk's cumulative sums and what to add to them (see ``_spans``)."""
        for _, a, c, lo, hi, bx, by in self._spans(ps, js, pe, je):
            if lo <= hi:
                yield a[lo : hi + 1], c[lo : hi + 1], bx, by

    def _offset(self, ps, js, pe, je) -> tuple[int, int]:
        """Coordinates of point (pe, je) relative to point (ps, js)."""
        cw, cs = self._cw, self._cs
        x = int(cw[pe][je]) - int(cw[ps][js])
        y = int(cs[pe][je]) - int(cs[ps][js])
        for pos in range(ps, pe):
            x += int(cw[pos][-1])
            y += int(cs[pos][-1])
        return x, y

    def _max_slope_to(self, ps, js, pe, je, ax, ay) -> float:
        """Largest slope from a point of the range to the anchor (ax, ay), right of every
        point of the range (coordinates relative to (ps, js))."""
        best = -1.0
        for X, Y, bx, by in self._pieces(ps, js, pe, je):
            v = float(_max(((ay - by) - Y) / ((ax - bx) - X)))
            if v > best:
                best = v
        return best

    def _min_slope_from(self, ps, js, pe, je, qx, qy) -> float:
        """Smallest slope from the anchor (qx, qy), left of every point of the range, to a
        point of the range (coordinates relative to (ps, js))."""
        best = 2.0
        for X, Y, bx, by in self._pieces(ps, js, pe, je):
            v = float(_min(((by - qy) + Y) / ((bx - qx) + X)))
            if v < best:
                best = v
        return best

    def _below_chord(self, ps, js, pe, je, w, s, fs=-1, fj=0) -> bool:
        """Is a point of the range, from point (fs, fj) on if given, strictly below the line
        of slope s / w through (ps, js)? Exact: int64 products."""
        u, v = self._u, self._v
        if ps == pe:  # from is in this chunk too
            a, c = self._cw[ps], self._cs[ps]
            lo = max(js, fj)
            k = je + 1 - lo
            t = _mul(c[lo : je + 1], w, out=u[:k])
            off = int(c[js]) * w - int(a[js]) * s
            return _min(_sub(t, _mul(a[lo : je + 1], s, out=v[:k]), out=t)) < off
        for pos, a, c, lo, hi, bx, by in self._spans(ps, js, pe, je):
            if pos < fs:
                continue
            if pos == fs and fj > lo:
                lo = fj
            if lo <= hi:
                k = hi + 1 - lo
                t = _mul(c[lo : hi + 1], w, out=u[:k])
                if _min(_sub(t, _mul(a[lo : hi + 1], s, out=v[:k]), out=t)) < bx * s - by * w:
                    return True
        return False

    # ------------------------------------------------------------------ queries

    def query(self, score) -> tuple[float, float]:
        x = score if type(score) is float and score - score == 0.0 else check_score(score)
        if self._n == 0:
            return 0.0, 1.0
        return self._pair(x)

    def _pair(self, x: float) -> tuple[float, float]:
        """(p0, p1) in one pass over the block B = [l..r] holding x, in coordinates relative
        to P_{l-1}: p1 the largest slope from P_{l-1}..P_{d-1} to (|B| + 1, ones(B) + 1),
        p0 the smallest from (-1, 0) to P_c..P_r. When x is at a block boundary or an
        answer must walk to a neighbouring block (both rare), ``_p0`` / ``_p1`` answer."""
        ends, bw, bs = self._ends, self._bw, self._bs
        nb = len(ends)
        b = bisect_left(ends, x)
        if b == nb:
            return self._p0(x), 1.0
        ps, js = self._block_start(b)
        pe, je = self._end(ends[b])  # P_r
        # P_{d-1} and P_c from one search (lst[jd] exists: x <= ends[b], a held score); they
        # differ iff x is a held score
        lists = self._groups._lists
        pc = pd = bisect_left(self._groups._maxes, x)
        lst = lists[pd]
        jd = bisect_left(lst, x)
        jc = jd + 1 if lst[jd] == x else jd
        if jd == 0:
            pd, jd = (pd - 1, len(lists[pd - 1])) if pd else (0, 0)
            if jc == 0:
                pc, jc = pd, jd
        if (pd == ps and jd == js) or (pc == pe and jc == je):
            return self._p0(x), self._p1(x)
        ax = bw[b] + 1
        ay = bs[b] + 1
        u, v = self._u, self._v
        if ps == pe:  # the usual case below ~10^5 pairs: no loop over chunks
            a, c = self._cw[ps], self._cs[ps]
            x0, y0 = a[js], c[js]
            k = jd + 1 - js
            num = _sub(ay + y0, c[js : jd + 1], out=u[:k])
            p1 = _max(_div(num, _sub(ax + x0, a[js : jd + 1], out=v[:k]), out=num))
            k = je + 1 - jc
            num = _sub(c[jc : je + 1], y0, out=u[:k])
            p0 = _min(_div(num, _sub(a[jc : je + 1], x0 - 1.0, out=v[:k]), out=num))
            return self._walk(x, b, p0, p1)
        p1 = -1.0
        p0 = 2.0
        for pos, a, c, lo, hi, bx, by in self._spans(ps, js, pe, je):
            if pos <= pd:
                top = jd if pos == pd else hi
                k = max(top + 1 - lo, 0)
                num = _sub(ay - by, c[lo : top + 1], out=u[:k])
                m = _max(_div(num, _sub(ax - bx, a[lo : top + 1], out=v[:k]), out=num))
                if m > p1:
                    p1 = m
            if pos >= pc:
                k = max(hi + 1 - (jc if pos == pc else lo), 0)
                start = hi + 1 - k
                num = _add(by, c[start : hi + 1], out=u[:k])
                m = _min(_div(num, _add(bx + 1, a[start : hi + 1], out=v[:k]), out=num))
                if m < p0:
                    p0 = m
        return self._walk(x, b, p0, p1)

    def _walk(self, x: float, b: int, p0, p1) -> tuple[float, float]:
        """(p0, p1) from the scan of x's block b: ``_p0`` / ``_p1`` redo an answer that
        must walk to a neighbouring block (the neighbour's mean is past it)."""
        self._seen = (x, p0, p1)
        bw, bs = self._bw, self._bs
        if b + 1 < len(bw) and bs[b + 1] / bw[b + 1] < p1:
            p1 = self._p1(x)
        if b > 0 and bs[b - 1] / bw[b - 1] > p0:
            p0 = self._p0(x)
        return float(p0), float(p1)

    def query_many(self, scores):
        x = check_test_scores(scores)
        flat = x.ravel().tolist()
        p0 = np.zeros(len(flat))
        p1 = np.ones(len(flat))
        if self._n:
            pair = self._pair
            for i, xi in enumerate(flat):
                p0[i], p1[i] = pair(xi)
        return p0.reshape(x.shape), p1.reshape(x.shape)

    def _block_start(self, b: int) -> tuple[int, int]:
        return (0, 0) if b == 0 else self._end(self._ends[b - 1])

    def _end(self, t: float) -> tuple[int, int]:
        """The point after the group of the held score t: ``_after(t, True)``, shorter."""
        pos = bisect_left(self._groups._maxes, t)
        return pos, bisect_right(self._groups._lists[pos], t)

    def _p1(self, x: float) -> float:
        """The largest slope from P_{l-1}..P_{d-1} to P_r + (1, 1), d the first group with
        score >= x and [l..r] its block; the far end walks right along the blocks while the
        next block's mean is below the slope."""
        ends, bw, bs = self._ends, self._bw, self._bs
        nb = len(ends)
        b = bisect_left(ends, x)
        if b == nb:
            return 1.0
        ps, js = self._block_start(b)
        pe, je = self._after(x, False)  # P_{d-1}
        ax = bw[b] + 1
        ay = bs[b] + 1
        one = pe == ps and je == js  # d starts the block: P_{l-1} is the only candidate
        p1 = ay / ax if one else self._max_slope_to(ps, js, pe, je, ax, ay)
        while b + 1 < nb and bs[b + 1] / bw[b + 1] < p1:
            b += 1
            ax += bw[b]
            ay += bs[b]
            p1 = ay / ax if one else self._max_slope_to(ps, js, pe, je, ax, ay)
        return p1

    def _p0(self, x: float) -> float:
        """The smallest slope from P_{l-1} - (1, 0) to P_c..P_r, c the last group with score
        <= x and [l..r] its block; the near end walks left while the previous block's mean
        is above the slope."""
        ends, bw, bs = self._ends, self._bw, self._bs
        pc, jc = self._after(x, True)  # P_c
        if jc == 0:
            return 0.0
        tc = self._groups._lists[pc][jc - 1]
        b = bisect_left(ends, tc)
        one = ends[b] == tc  # c ends the block: P_r is the only candidate
        if one:  # the anchor relative to P_c = P_r
            qx, qy = -bw[b] - 1, -bs[b]
            p0 = -qy / -qx
        else:
            pe, je = self._after(ends[b], True)  # P_r
            ox, oy = self._offset(*self._block_start(b), pc, jc)
            qx, qy = -ox - 1, -oy
            p0 = self._min_slope_from(pc, jc, pe, je, qx, qy)
        while b > 0 and bs[b - 1] / bw[b - 1] > p0:
            b -= 1
            qx -= bw[b]
            qy -= bs[b]
            p0 = -qy / -qx if one else self._min_slope_from(pc, jc, pe, je, qx, qy)
        return p0

    # ------------------------------------------------------------------ updates

    def add(self, score, label) -> None:
        x = score if type(score) is float and score - score == 0.0 else check_score(score)
        y = label if type(label) is int and (label == 0 or label == 1) else check_label(label)
        if self._n >= MAX_PAIRS:
            raise ValueError(f"the python store holds at most {MAX_PAIRS} pairs")
        seen = self._seen
        if seen is not None:
            self._seen = None
            if seen[0] != x:
                seen = None
        groups = self._groups
        w = self._w.get(x)
        if w is None:
            lists = groups._lists
            count = len(lists)
            if count:
                pos = bisect_right(groups._maxes, x)
                if pos == count:
                    pos -= 1
                before = lists[pos]
            self._w[x] = 1
            self._s[x] = y
            if count:
                i = bisect_left(before, x)
                groups.add(x)
                self._cw[pos] = self._grow(self._cw[pos], i, 1)
                self._cs[pos] = self._grow(self._cs[pos], i, y)
                if len(lists) > count:  # sublist pos split: its first half stayed
                    self._recut(pos, pos + 1)
                    if i > len(before):
                        pos, i = pos + 1, i - len(before)
            else:
                groups.add(x)
                self._rebuild()
                pos = i = None
        else:
            self._w[x] = w + 1
            pos = bisect_left(groups._maxes, x)
            i = bisect_left(groups._lists[pos], x)
            self._cw[pos][i + 1 :] += 1
            if y:
                self._s[x] += 1
                self._cs[pos][i + 1 :] += 1
        self._n += 1
        if not self._fast_fix(x, y, 1, False, pos, i, seen):
            self._refit(x)

    def remove(self, score, label) -> None:
        x = score if type(score) is float and score - score == 0.0 else check_score(score)
        y = label if type(label) is int and (label == 0 or label == 1) else check_label(label)
        w = self._w.get(x)
        if w is None or (self._s[x] == 0 if y else self._s[x] == w):
            raise ValueError(f"pair ({score!r}, {label!r}) is not in the store")
        self._seen = None
        groups = self._groups
        lists = groups._lists
        pos = bisect_left(groups._maxes, x)
        before = lists[pos]
        i = bisect_left(before, x)
        if w == 1:
            count, size = len(lists), len(before)
            groups.remove(x)
            del self._w[x], self._s[x]
            if not lists:
                self._rebuild()
            else:
                self._cw[pos] = _shrink(self._cw[pos], i, 1)
                self._cs[pos] = _shrink(self._cs[pos], i, y)
                if not (len(lists) == count and lists[pos] is before and len(before) == size - 1):
                    lo = pos - 1 if pos else 0  # sublist pos joined its left one (0: its right)
                    self._recut(lo, lo + 2)
                    pos = i = None
        else:
            self._w[x] = w - 1
            self._cw[pos][i + 1 :] -= 1
            if y:
                self._s[x] -= 1
                self._cs[pos][i + 1 :] -= 1
        self._n -= 1
        if not self._fast_fix(x, y, -1, w == 1, pos, i):
            self._refit(x)

    def _fast_fix(self, x: float, y: int, dw: int, deleted: bool, pos, i, seen=None) -> bool:
        """After adding (dw = 1) or removing (dw = -1) the pair (x, y): if the block B = [l..r]
        holding x stays one block, update its totals and return True. (pos, i) is the point
        P'_{g-1} before x's group g (unnormalised: i may be 0), or None if unknown; ``seen``
        the last query's in-block scan of x if nothing changed since (adds only).

        B stays one block iff no point of it is strictly below the new chord from P_{l-1}
        to P'_r and its neighbours' means stay on their side (strictly: blocks are maximal).
        If the chord rises (add a 1, remove a 0) the points right of x's group g stay above
        it, so only P_{l-1}..P_{g-1} need a look, and only the next block can reach below;
        if it falls, the mirror image (P'_{g-1}..P'_r and the previous block).
        """
        ends, bw, bs = self._ends, self._bw, self._bs
        nb = len(ends)
        b = bisect_left(ends, x)
        if b == nb or (deleted and ends[b] == x):
            return False
        w = bw[b] + dw
        s = bs[b] + y * dw
        if w == 0:
            return False
        rises = (y == 1) == (dw == 1)
        if rises and b + 1 < nb and bs[b + 1] * w <= s * bw[b + 1]:
            return False
        if not rises and b > 0 and bs[b - 1] * w >= s * bw[b - 1]:
            return False
        if seen is not None:
            # The query of x scanned exactly these points against exactly this chord: a point
            # of P_{l-1}..P_{g-1} is below the chord to P_r + (1, 1) iff its slope to that
            # end exceeds the chord's (p1 > s / w); after adding a 0, a point P'_k = P_k +
            # (1, 0) right of x is below iff P_k's slope from (-1, 0) is below it (p0 < s / w),
            # and the points left of x were on or above a steeper chord. Exact: slopes of
            # fractions with denominators <= w (module docstring).
            below = seen[2] > s / w if rises else seen[1] < s / w
        else:
            if i is None:
                pos, i = self._after(x, False)
            elif i == 0:
                pos, i = (pos - 1, len(self._groups._lists[pos - 1])) if pos else (0, 0)
            ps, js = self._block_start(b)
            if rises:
                below = self._below_chord(ps, js, pos, i, w, s)
            else:
                pe, je = self._end(ends[b])
                below = self._below_chord(ps, js, pe, je, w, s, pos, i)
        if below:
            return False
        bw[b] = w
        bs[b] = s
        return True

    def _refit(self, x: float) -> None:
        """Re-run PAVA locally after the group at score x changed: the block holding x
        becomes the segments of its points' greatest convex minorant, which then merge
        with the neighbouring blocks as PAVA would. Every other block stays a block."""
        ends, bw, bs = self._ends, self._bw, self._bs
        nb = len(ends)
        b = bisect_left(ends, x)
        stack = []  # [count, ones, end score] of the new blocks
        if self._n:
            ps, js = self._block_start(b)
            pe, je = self._after(ends[b] if b < nb else x, True)
            if (pe, je) != (ps, js):
                stack = self._segments(ps, js, pe, je)
        left = b - 1
        right = b + 1 if b < nb else nb
        merged: list[list] = []
        for seg in stack:
            merged.append(seg)
            left = _settle(merged, left, bw, bs)
        while right < nb and (not merged or merged[-1][1] * bw[right] >= bs[right] * merged[-1][0]):
            if merged:
                top = merged[-1]
                top[0] += bw[right]
                top[1] += bs[right]
                top[2] = ends[right]
            else:
                merged.append([bw[right], bs[right], ends[right]])
            right += 1
            left = _settle(merged, left, bw, bs)
        ends[left + 1 : right] = [m[2] for m in merged]
        bw[left + 1 : right] = [m[0] for m in merged]
        bs[left + 1 : right] = [m[1] for m in merged]

    def _segments(self, ps, js, pe, je) -> list[list]:
        """Segments [count, ones, end score] of the greatest convex minorant of the points
        (ps, js)..(pe, je): from each vertex, the next is the farthest point of least slope."""
        pieces = list(self._pieces(ps, js, pe, je))
        X = np.concatenate([a + bx for a, _, bx, _ in pieces])
        Y = np.concatenate([b + by for _, b, _, by in pieces])
        # point k of the range ends group k - 1 of the range: find its score by chunk
        first = [ps] + list(range(ps + 1, pe + 1))
        lens = [len(a) for a, _, _, _ in pieces]
        starts = np.cumsum([0] + lens)
        out = []
        v = 0
        last = len(X) - 1
        while v < last:
            slopes = (Y[v + 1 :] - Y[v]) / (X[v + 1 :] - X[v])
            k = v + len(slopes) - int(np.argmin(slopes[::-1]))
            p = int(np.searchsorted(starts, k, side="right")) - 1
            pos = first[p]
            j = k - int(starts[p]) + (js if p == 0 else 1)
            out.append([int(X[k] - X[v]), int(Y[k] - Y[v]), self._groups._lists[pos][j - 1]])
            v = k
        return out

    # ------------------------------------------------------------------ checks

    def _check(self) -> None:
        """Recompute everything derived from the groups (chunk sums, blocks) from scratch
        and compare; raises AssertionError on any difference. For tests."""
        self._groups._check()
        lists = self._groups._lists
        assert len(self._cw) == len(lists) == len(self._cs)
        assert all(lst is b for lst, b in zip(lists, self._built, strict=True))
        assert set(self._w) == set(self._groups) == set(self._s)
        owners = {id(a if a.base is None else a.base) for a in self._cw + self._cs}
        assert len(owners) == 2 * len(lists), "chunk arrays share a buffer"
        longest = max(map(len, self._cw), default=0)
        assert len(self._u) == len(self._v) >= longest, "scratch shorter than a chunk"
        for lst, cw, cs in zip(lists, self._cw, self._cs, strict=True):
            want_w, want_s = self._chunk_arrays(lst)
            np.testing.assert_array_equal(cw, want_w)
            np.testing.assert_array_equal(cs, want_s)
        t, w, s = self._groups_arrays()
        assert self._n == int(w.sum())
        want = _blocks(t.tolist(), w, s)
        assert want == (self._ends, self._bw, self._bs), "blocks differ from PAVA"
        if self._seen is not None:  # the next add trusts it: it must be what a scan gives now
            seen, self._seen = self._seen, None
            self._pair(seen[0])
            assert self._seen == seen, "the last query's scan differs from a fresh one"


def _cut(counts: np.ndarray, lists) -> list[np.ndarray]:
    """The cumulative sums of ``counts`` (one per group of ``lists``, in order) cut into one
    array of length len(lst) + 1 per sublist, each starting at 0."""
    out, start = [], 0
    for lst in lists:
        a = np.zeros(len(lst) + 1)
        np.cumsum(counts[start : start + len(lst)], out=a[1:])
        start += len(lst)
        out.append(a)
    return out


def _blocks(scores: list, w, s) -> tuple[list, list, list]:
    """The PAVA blocks of the groups (``scores``, counts ``w``, ones ``s``): the score of
    each block's last group, its count and its number of ones."""
    ends, bw, bs, k = [], [], [], 0
    for groups, count, ones in pava(w, s):
        k += groups
        ends.append(scores[k - 1])
        bw.append(count)
        bs.append(ones)
    return ends, bw, bs


def _shrink(a: np.ndarray, i: int, dec: int) -> np.ndarray:
    """Chunk cumulative sums ``a`` after deleting group i (of ``dec`` ones), in place."""
    m = len(a)
    a[i + 1 : m - 1] = a[i + 2 :]
    if dec:
        a[i + 1 : m - 1] -= dec
    return a[: m - 1]


def _settle(stack: list[list], left: int, bw: list[int], bs: list[int]) -> int:
    """PAVA merges on the stack top, reaching into the old blocks left of it (from index
    ``left`` down) when the stack holds one block. Equal means merge: blocks are maximal."""
    while True:
        if len(stack) >= 2 and stack[-2][1] * stack[-1][0] >= stack[-1][1] * stack[-2][0]:
            top = stack.pop()
            stack[-1][0] += top[0]
            stack[-1][1] += top[1]
            stack[-1][2] = top[2]
        elif len(stack) == 1 and left >= 0 and bs[left] * stack[0][0] >= stack[0][1] * bw[left]:
            stack[0][0] += bw[left]
            stack[0][1] += bs[left]
            left -= 1
        else:
            return left
