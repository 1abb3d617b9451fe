"""The numba ScoreStore backend: compiled kernels (``_kernels.py``) over a chunked sorted
list of tie-pooled groups with per-chunk lower hulls, plus the PAVA blocks.

The distinct scores are kept as tie-pooled groups in a chunked sorted list, each chunk
(and each run of chunks) with the lower convex hull of its own cumulative sum diagram, plus
the PAVA blocks of the whole set. A query reads one block (only hull vertices where it
covers whole chunks) and an update checks, or if needed re-fits, only the block it lands
in. Counts are int64 and slopes are compared by cross-multiplication, so every answer is an
exact fraction divided once. The kernels compile once and are cached on disk.
"""

from __future__ import annotations

import numba
import numpy as np

from streamcal.core.isotonic import pava
from streamcal.core.store import ScoreStore
from streamcal.core.store import _kernels as K
from streamcal.core.validate import check_label, check_score, check_test_scores

__all__ = ["NumbaStore"]

_MIN_CHUNKS = 8
_MIN_PAIRS = 64  # pairs the hull scratch of a new store serves before it grows
_ENTRIES: dict = {}


def _entries(S):
    """Compiled entry points of the per-event kernels (query_one, add, remove) for S's types.

    Calling them directly skips numba's type dispatch (~0.5 µs a call, a few % of an
    event). The argument types are fixed by construction (C-contiguous arrays of fixed
    dtypes, a float score, an int label), so they are resolved once per process.
    """
    key = numba.typeof(S)
    entries = _ENTRIES.get(key)
    if entries is None:
        entries = (
            K.query_one.compile((key, numba.types.float64)),
            K.add.compile((key, numba.types.float64, numba.types.int64)),
            K.remove.compile((key, numba.types.float64, numba.types.int64)),
        )
        _ENTRIES[key] = entries
    return entries


class NumbaStore(ScoreStore):
    """ScoreStore on the numba kernels (see the module docstring); built by ``ScoreStore``."""

    backend = "numba"

    def __init__(self, *, backend=None, _chunk=None):
        # _chunk: groups per chunk, a tuning knob (tests use tiny chunks to exercise splits)
        self._chunk = K.CAP if _chunk is None else int(_chunk)
        self._alloc(_MIN_CHUNKS, 16)

    # ------------------------------------------------------------------ state

    def _alloc(self, n_chunks: int, n_blocks: int, n_supers: int = _MIN_CHUNKS) -> None:
        cap = self._chunk
        self._scores = np.zeros((n_chunks, cap), np.float64)
        self._sums = np.zeros((n_chunks, 2, cap + 1), np.int64)
        self._hulls = np.zeros((n_chunks, 3, K.HC), np.int64)
        self._lengths = np.zeros((n_chunks, 2), np.int64)
        self._order = np.zeros(n_chunks, np.int64)
        self._firsts = np.zeros(n_chunks, np.float64)
        self._free_ids = np.zeros(n_chunks, np.int64)
        self._ranges = np.zeros((3 * n_chunks, 7), np.int64)  # a scan's work list, not state
        self._block_ends = np.zeros(n_blocks, np.float64)
        self._block_sums = np.zeros((n_blocks, 2), np.int64)
        self._meta = np.zeros(K.META_SIZE, np.int64)
        self._supers = np.zeros((n_supers + 1, 2), np.int64)
        self._super_info = np.full((n_supers, 3), -1, np.int64)
        self._super_hulls = np.zeros((n_supers, 2, K.HMAX), np.int64)
        self._super_where = np.zeros((n_supers, K.HMAX), np.int64)
        self._free_supers = np.zeros(n_supers, np.int64)
        self._set_scratch(_MIN_PAIRS)
        self._pack()

    def _set_scratch(self, pairs: int) -> None:
        # hull scratch for stores of up to `pairs` pairs (see K.hull_room); the caller packs
        room = K.hull_room(pairs)
        self._scratch = np.zeros((room, 2), np.int64)
        self._scratch_scores = np.zeros(room, np.float64)
        self._meta[K.M_HCAP] = pairs

    def _pack(self) -> None:
        # one object for the kernels (cheaper to pass than seventeen arrays)
        self._S = K.new_state(*(getattr(self, "_" + name) for name in K.STATE_FIELDS))
        self._query_one, self._add, self._remove = _entries(self._S)

    @staticmethod
    def _grown(a: np.ndarray, new: int, fill=0) -> np.ndarray:
        b = np.full((new,) + a.shape[1:], fill, a.dtype)
        b[: a.shape[0]] = a
        return b

    def _ensure_room(self) -> None:
        """Make sure one add can take a new chunk id and a new super-chunk id."""
        meta = self._meta
        n = self._scores.shape[0]
        if meta[K.M_NIDS] == n and meta[K.M_NFREE] == 0:
            new = n + max(n // 2, _MIN_CHUNKS)
            for name in (
                "_scores",
                "_sums",
                "_hulls",
                "_lengths",
                "_order",
                "_firsts",
                "_free_ids",
            ):
                setattr(self, name, self._grown(getattr(self, name), new))
            self._ranges = np.zeros((3 * new, 7), np.int64)
            self._pack()
        n = self._super_info.shape[0]
        if meta[K.M_NSIDS] == n and meta[K.M_NSFREE] == 0:
            new = n + max(n // 2, _MIN_CHUNKS)
            self._supers = self._grown(self._supers, new + 1)
            self._super_info = self._grown(self._super_info, new, -1)
            self._super_hulls = self._grown(self._super_hulls, new)
            self._super_where = self._grown(self._super_where, new)
            self._free_supers = self._grown(self._free_supers, new)
            self._pack()
        if meta[K.M_N] >= meta[K.M_HCAP]:
            self._set_scratch(2 * int(meta[K.M_N]))
            self._pack()

    def _grow_blocks(self, needed: int) -> None:
        new = max(needed, 2 * self._block_ends.shape[0])
        self._block_ends = self._grown(self._block_ends, new)
        self._block_sums = self._grown(self._block_sums, new)
        self._pack()

    def _fix_blocks(self, code: int, x: float) -> None:
        while code < 0:  # the block arrays were too small: nothing was changed, grow and redo
            self._grow_blocks(-code)
            code = K.fix_blocks(self._S, x)

    @classmethod
    def _from_groups(cls, t, w, s, chunk=None) -> NumbaStore:
        store = cls.__new__(cls)
        store._chunk = K.CAP if chunk is None else int(chunk)
        t = np.ascontiguousarray(t, np.float64)
        w = np.ascontiguousarray(w, np.int64)
        s = np.ascontiguousarray(s, np.int64)
        k = len(t)
        fill = max(store._chunk // 2, 1)
        nch = -(-k // fill)
        nsup = -(-nch // K.SUPER)
        store._alloc(max(nch + nch // 8, _MIN_CHUNKS), 16, max(nsup + nsup // 2, _MIN_CHUNKS))
        if k:
            pad = nch * fill - k
            tt = np.concatenate([t, np.full(pad, t[-1])]).reshape(nch, fill)
            ww = np.concatenate([w, np.zeros(pad, np.int64)]).reshape(nch, fill)
            ss = np.concatenate([s, np.zeros(pad, np.int64)]).reshape(nch, fill)
            store._scores[:nch, :fill] = tt
            np.cumsum(ww, axis=1, out=store._sums[:nch, 0, 1 : fill + 1])
            np.cumsum(ss, axis=1, out=store._sums[:nch, 1, 1 : fill + 1])
            store._lengths[:nch, 0] = fill
            store._lengths[nch - 1, 0] = k - (nch - 1) * fill
            store._order[:nch] = np.arange(nch)
            store._firsts[:nch] = tt[:, 0]
            store._supers[:nsup, 0] = np.arange(nsup) * K.SUPER
            store._supers[:nsup, 1] = np.arange(nsup)
            store._supers[nsup, 0] = nch
            meta = store._meta
            meta[K.M_M] = nch
            meta[K.M_NIDS] = nch
            meta[K.M_NS] = nsup
            meta[K.M_NSIDS] = nsup
            meta[K.M_N] = int(w.sum())
            meta[K.M_K] = k
            # PAVA's stack can hold every group before merging: run it in scratch arrays
            bt = np.empty(k, np.float64)
            bws = np.empty((k, 2), np.int64)
            nb = K.pava_blocks(t, w, s, bt, bws)
            store._block_ends = np.zeros(max(2 * nb, 16), np.float64)
            store._block_sums = np.zeros((max(2 * nb, 16), 2), np.int64)
            store._block_ends[:nb] = bt[:nb]
            store._block_sums[:nb] = bws[:nb]
            meta[K.M_NB] = nb
            store._set_scratch(max(2 * int(meta[K.M_N]), _MIN_PAIRS))
            store._pack()
            K.build_hulls(store._S)
        return store

    def _groups_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        k = int(self._meta[K.M_K])
        t = np.empty(k, np.float64)
        w = np.empty(k, np.int64)
        s = np.empty(k, np.int64)
        K.groups(self._S, t, w, s)
        return t, w, s

    # ------------------------------------------------------------------ public API

    def __len__(self) -> int:
        return int(self._meta[K.M_N])

    def add(self, score, label) -> None:
        """Add one (score, label) pair; ``ValueError`` (store unchanged) on bad input."""
        # fast path for the common types; anything else goes through the full checks
        x = score if type(score) is float and score - score == 0.0 else check_score(score)
        y = label if type(label) is int and (label == 0 or label == 1) else check_label(label)
        code = self._add(self._S, x, y)
        if code == K.NEED_ROOM:
            self._ensure_room()
            code = self._add(self._S, x, y)
        if code:
            self._fix_blocks(code, x)

    def remove(self, score, label) -> None:
        """Remove one held pair; ``ValueError`` (store unchanged) if it is not held."""
        x = score if type(score) is float and score - score == 0.0 else check_score(score)
        y = label if type(label) is int and (label == 0 or label == 1) else check_label(label)
        code = self._remove(self._S, x, y)
        if code == K.ERR_NOT_HELD:
            raise ValueError(f"pair ({score!r}, {label!r}) is not in the store")
        if code:
            self._fix_blocks(code, x)

    def query(self, score) -> tuple[float, float]:
        """(p0, p1) for one test score, as Python floats."""
        x = score if type(score) is float and score - score == 0.0 else check_score(score)
        return self._query_one(self._S, x)

    def query_many(self, scores) -> tuple[np.ndarray, np.ndarray]:
        """(p0, p1) arrays for many test scores, in one call into the kernels."""
        x = check_test_scores(scores)
        flat = np.ascontiguousarray(x.ravel())
        p0 = np.empty(flat.shape[0])
        p1 = np.empty(flat.shape[0])
        K.query_many(self._S, flat, p0, p1)
        return p0.reshape(x.shape), p1.reshape(x.shape)

    def clear(self) -> None:
        """Remove every pair."""
        self._alloc(_MIN_CHUNKS, 16)

    def _chunk_size(self) -> int:
        return self._chunk

    def _check(self) -> None:
        """Recompute what the kernels maintain incrementally and compare; AssertionError on
        any difference. For tests (as sortedcontainers' ``_check``).

        Checks: chunk order and first scores, cumulative sums against the groups, every
        chunk hull against one built from scratch, every fresh super-chunk's totals and
        hull against a refresh, and the blocks: the fit they define (each block's mean on
        its groups) equals PAVA's from scratch. Blocks of equal means may stay apart here
        (the kernels merge only on a strict violation), so the fit is compared, not the
        partition.
        """
        meta = self._meta
        m, k, n = int(meta[K.M_M]), int(meta[K.M_K]), int(meta[K.M_N])
        ords = self._order[:m]
        assert len(set(ords.tolist())) == m, "a chunk id is used twice"
        t, w, s = self._groups_arrays()
        assert len(t) == k and int(w.sum()) == n and (w >= 1).all() and (s >= 0).all()
        assert (s <= w).all() and (np.diff(t) > 0).all(), "groups out of order or invalid"
        for pos, cid in enumerate(ords.tolist()):
            size = int(self._lengths[cid, 0])
            assert 0 < size < self._scores.shape[1] and self._firsts[pos] == self._scores[cid, 0]
            assert self._sums[cid, 0, 0] == 0 and self._sums[cid, 1, 0] == 0
        # chunk hulls: recompute each from scratch in copies and compare
        hv, cm = self._hulls.copy(), self._lengths.copy()
        for cid in ords.tolist():
            K._chunk_hull(self._sums, hv, cm, cid, 0)
            h = int(cm[cid, 1])
            assert self._lengths[cid, 1] == h, (
                f"chunk {cid}: hull length {self._lengths[cid, 1]} != {h}"
            )
            np.testing.assert_array_equal(self._hulls[cid, :, :h], hv[cid, :, :h])
        # super-chunks: partition the chunks; fresh ones hold what a refresh computes
        ns = int(meta[K.M_NS])
        assert self._supers[0, 0] == 0 and self._supers[ns, 0] == m
        assert (np.diff(self._supers[: ns + 1, 0]) > 0).all(), "an empty or misordered super-chunk"
        si, sh, sw = self._super_info.copy(), self._super_hulls.copy(), self._super_where.copy()
        arrays = {name: getattr(self, "_" + name) for name in K.STATE_FIELDS}
        arrays.update(super_info=si, super_hulls=sh, super_where=sw)
        copy = K.new_state(*(arrays[name] for name in K.STATE_FIELDS))  # refreshes write here
        for g in range(ns):
            sid = int(self._supers[g, 1])
            if self._super_info[sid, 2] >= 0:
                K._refresh_super(copy, g)
                np.testing.assert_array_equal(self._super_info[sid], si[sid])
                h = int(si[sid, 2])
                np.testing.assert_array_equal(self._super_hulls[sid, :, :h], sh[sid, :, :h])
                np.testing.assert_array_equal(self._super_where[sid, :h], sw[sid, :h])
        # blocks: ends increasing, totals adding up, and the fit equal to PAVA's
        nb = int(meta[K.M_NB])
        ends, bws = self._block_ends[:nb], self._block_sums[:nb]
        assert (np.diff(ends) > 0).all() and int(bws[:, 0].sum()) == n
        got = np.repeat(np.arange(nb), np.diff(np.searchsorted(t, ends, side="right"), prepend=0))
        assert len(got) == k, "block ends are not group scores"
        fit_num, fit_den = bws[got, 1], bws[got, 0]
        want_num, want_den = np.empty(k, np.int64), np.empty(k, np.int64)
        i = 0
        for groups, count, ones in pava(w, s):
            want_num[i : i + groups] = ones
            want_den[i : i + groups] = count
            i += groups
        assert (fit_num * want_den == want_num * fit_den).all(), "blocks differ from PAVA's fit"
