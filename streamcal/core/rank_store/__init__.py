"""RankStore: an order-statistic multiset of real values, augmented with sums.

Answers, each in O(log n) expected time whatever the order of the values:

* ``rank(v)``: how many held values are below v, and how many equal it;
* ``select(k)``: the value of rank k (0-based) in sorted order;
* ``sum_below(v)``: the sum of the held values below v;
* ``crps(v)``: the continuous ranked probability score at v of the empirical
  distribution of the held values (mass 1/n on each), exactly;

with ``add`` and ``remove`` in O(log n) as well. It is the store of the conformal
predictive system (``streamcal.core.cps``), whose CDF value is a rank, quantile a select,
and CRPS the closed form below.

The structure is a treap over the distinct values (``_treap.py``), each node holding its
subtree's count, sum and rank-weighted sum sum_k k * v_(k). CRPS(F, y) = E|X - y| -
E|X - X'| / 2 for X, X' ~ F independent; with k values below y summing to S_<, all n
summing to S and rank-weighted sum W,

    E|X - y| = (y (2k - n) - 2 S_< + S) / n,    E|X - X'| / 2 = (2 W - (n + 1) S) / n^2,

so a query reads one root path. Sums are floats: answers equal the definition up to
rounding (the tests compare with ``math.fsum`` of the naive formulas).

Two backends with the same kernels and the same answers: ``numba`` (the kernels compiled,
over numpy arrays) and ``python`` (the same functions interpreted, over lists). The
choice follows ``ScoreStore``'s: ``backend=``, else ``STREAMCAL_STORE_BACKEND``, else
numba if it imports and works (else python, with one ``StoreBackendWarning``).

>>> store = RankStore(backend="python")
>>> for v in [3.0, 1.0, 2.0, 2.0]:
...     store.add(v)
>>> len(store), store.rank(2.0), store.select(3), store.sum_below(2.5)
(4, (1, 2), 3.0, 5.0)
>>> store.crps(2.0)  # E|X - 2| = 0.5, E|X - X'| / 2 = 0.375
0.125
>>> store.remove(2.0)
>>> store.to_arrays()
(array([1., 2., 3.]), array([1, 1, 1]))
>>> store.remove(5.0)
Traceback (most recent call last):
...
ValueError: value 5.0 is not in the store
"""

from __future__ import annotations

import math
import os
import warnings

import numpy as np

from streamcal.core.rank_store import _priorities as P
from streamcal.core.rank_store import _treap as T
from streamcal.errors import pre_release

__all__ = ["RANK_STATE_FORMAT", "RankStore"]

# 2: the nodes' priorities and sums and a splitmix64 state (1, a development version's
# before the first release, held a Mersenne Twister's state: refused)
RANK_STATE_FORMAT = 2
_MIN_CAP = 16
_compiled_kernels = None  # the compiled kernels module once loaded; False if numba does not work


def _kernels(name: str | None):
    """(backend name, kernels module) for a backend name (None: environment, else auto)."""
    from streamcal.core.store import BACKENDS, ENV_BACKEND, StoreBackendWarning

    if name is None:
        name = os.environ.get(ENV_BACKEND, "").strip().lower() or "auto"
    if name not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {name!r}")
    if name == "python":
        return "python", T
    global _compiled_kernels
    if name == "numba":
        from streamcal.core.rank_store import _compiled as C

        return "numba", C
    if _compiled_kernels is None:
        try:
            from streamcal.core.rank_store import _compiled as C

            probe = RankStore._empty("numba", C, 2)
            probe.add(1.0)
            probe.add(3.0)
            if probe.crps(2.0) != 0.5:
                raise RuntimeError(f"wrong answer from the compiled kernels: {probe.crps(2.0)}")
            _compiled_kernels = C
        except Exception as exc:  # ImportError, a compile or cache error: any is a reason
            _compiled_kernels = False
            reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
            warnings.warn(f"rank store backend: python, numba unavailable ({reason}); same "
                          "answers, several times the cost per event", StoreBackendWarning,
                          stacklevel=3)  # fmt: skip
    return ("numba", _compiled_kernels) if _compiled_kernels else ("python", T)


def _check_value(v) -> float:
    if type(v) is not float:
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise TypeError(f"a value must be a real number, got {type(v).__name__}")
        v = float(v)
    if v - v != 0.0:
        raise ValueError(f"a value must be finite, got {v!r}")
    return v


class RankStore:
    """Multiset of finite floats answering ranks, selects, sums and CRPS (module docstring).

    ``seed`` seeds the treap's priorities: the shape, hence the rounding of the sums, is
    a function of it and of the sequence of updates, so a replay answers bit for bit alike.
    The generator (``_priorities.py``) is one 64-bit word, so a store restored from its
    pickle or ``to_state()`` goes on bit for bit as well, and an empty store pickles to a
    few hundred bytes.
    """

    def __init__(self, *, backend: str | None = None, seed: int = 0):
        name, kernels = _kernels(backend)
        self._setup(name, kernels, _MIN_CAP, P.seed_state(seed))

    @classmethod
    def _empty(cls, name, kernels, cap) -> RankStore:
        self = object.__new__(cls)
        self._setup(name, kernels, cap, 0)
        return self

    def _setup(self, name, kernels, cap, rng: int) -> None:
        self.backend = name
        self._k = kernels
        # the kernels' counts mirrored in Python ints: reading numpy scalars per event costs
        self._n = 0  # values held
        self._nodes = 0  # distinct values held
        self._cap = cap  # node slots, the nil node's included
        if name == "numba":
            self._I = np.zeros(cap * T.N_INT, np.int64)
            self._F = np.zeros(cap * T.N_FLOAT, np.float64)
            self._meta = np.array([0, 0, rng], np.int64)
        else:
            self._I = [0] * (cap * T.N_INT)
            self._F = [0.0] * (cap * T.N_FLOAT)
            self._meta = [0, 0, rng]  # root, size, the priorities' generator

    def _grow(self, need: int) -> None:
        cap = len(self._F) // T.N_FLOAT
        new = max(2 * cap, need + 1)
        if self.backend == "numba":
            I = np.zeros(new * T.N_INT, np.int64)
            F = np.zeros(new * T.N_FLOAT, np.float64)
            I[: len(self._I)] = self._I
            F[: len(self._F)] = self._F
            self._I, self._F = I, F
        else:
            self._I.extend([0] * ((new - cap) * T.N_INT))
            self._F.extend([0.0] * ((new - cap) * T.N_FLOAT))
        self._cap = new

    # ------------------------------------------------------------------ updates

    def add(self, v) -> None:
        """Add one copy of v (a finite real; ``ValueError``/``TypeError`` otherwise)."""
        v = _check_value(v)
        if self._nodes + 2 > self._cap:
            self._grow(self._nodes + 2)
        self._nodes += self._k.insert(self._I, self._F, self._meta, v)
        self._n += 1

    def add_many(self, values) -> None:
        """Add many values; all are checked before any is added."""
        vs = [_check_value(v) for v in np.asarray(values, np.float64).ravel().tolist()]
        for v in vs:
            self.add(v)

    def remove(self, v) -> None:
        """Remove one copy of v; ``ValueError`` (store unchanged) if it is not held."""
        v = _check_value(v)
        done = self._k.delete(self._I, self._F, self._meta, v)
        if not done:
            raise ValueError(f"value {v!r} is not in the store")
        self._n -= 1
        self._nodes -= done == 2

    def clear(self) -> None:
        """Remove every value."""
        self._setup(self.backend, self._k, _MIN_CAP, int(self._meta[2]))

    # ------------------------------------------------------------------ queries

    def __len__(self) -> int:
        return self._n

    @property
    def total(self) -> float:
        """The sum of the held values."""
        return float(self._F[self._meta[0] * T.N_FLOAT + T.SUM])

    def rank(self, v) -> tuple[int, int]:
        """(number of held values < v, number == v)."""
        below, _, equal = self._k.locate(self._I, self._F, self._meta, _check_value(v))
        return int(below), int(equal)

    def sum_below(self, v) -> float:
        """The sum of the held values < v."""
        return float(self._k.locate(self._I, self._F, self._meta, _check_value(v))[1])

    def select(self, k: int) -> float:
        """The value of rank k in sorted order (0-based; negative k counts from the top)."""
        n = len(self)
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise TypeError(f"k must be an integer, got {type(k).__name__}")
        k = int(k) + n if k < 0 else int(k)
        if not 0 <= k < n:
            raise IndexError(f"rank {k} is out of range for a store of {n} values")
        return float(self._k.select(self._I, self._F, self._meta, k))

    def crps(self, v) -> float:
        """CRPS at v of the empirical distribution of the held values (nan when empty)."""
        v = _check_value(v)
        n = len(self)
        if n == 0:
            return math.nan
        below, s_below, _ = self._k.locate(self._I, self._F, self._meta, v)
        root = self._meta[0]
        s = float(self._F[root * T.N_FLOAT + T.SUM])
        w = float(self._F[root * T.N_FLOAT + T.WSUM])
        return max((v * (2 * below - n) - 2 * s_below + s) / n - (2 * w - (n + 1) * s) / n**2,
                   0.0)  # fmt: skip

    # ------------------------------------------------------------------ state

    def to_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct values held, sorted, and their counts."""
        size = int(self._meta[1])
        values = np.zeros(size, np.float64)
        mults = np.zeros(size, np.int64)
        if self.backend == "numba":
            self._k.inorder(self._I, self._F, self._meta, values, mults)
        else:
            vs, ms = [0.0] * size, [0] * size
            self._k.inorder(self._I, self._F, self._meta, vs, ms)
            values[:], mults[:] = vs, ms
        return values, mults

    @classmethod
    def from_arrays(cls, values, counts=None, *, backend: str | None = None,
                    seed: int = 0) -> RankStore:  # fmt: skip
        """A store holding ``values`` (each ``counts`` times), built in O(n log n)."""
        v = np.asarray(values, np.float64).ravel()
        c = np.ones(len(v), np.int64) if counts is None else np.asarray(counts).ravel()
        if len(c) != len(v):
            raise ValueError(f"{len(v)} values but {len(c)} counts")
        if len(v) and not np.isfinite(v).all():
            raise ValueError("values must be finite")
        if len(c) and not (np.issubdtype(c.dtype, np.integer) and (c >= 1).all()):
            raise ValueError("counts must be integers >= 1")
        distinct, inverse = np.unique(v, return_inverse=True)
        mults = np.bincount(inverse, weights=c, minlength=len(distinct)).astype(np.int64)
        store = cls(backend=backend, seed=seed)
        prios, store._meta[2] = P.draws(int(store._meta[2]), len(distinct))
        store._build(distinct, mults, prios)
        return store

    def _build(self, distinct, mults, prios) -> None:
        """Fill this empty store with the treap of sorted distinct values and priorities."""
        self._grow(len(distinct) + 1)
        if self.backend == "numba":
            self._k.build(self._I, self._F, self._meta, distinct, mults, prios)
        else:
            self._k.build(self._I, self._F, self._meta, distinct.tolist(), mults.tolist(),
                          prios.tolist())  # fmt: skip
        self._n, self._nodes = int(mults.sum()), len(distinct)

    def to_state(self) -> dict:
        """The store as plain data (the same for both backends): its nodes in order, each
        with its value, count, priority and subtree sums, and the generator's state."""
        I = np.asarray(self._I, np.int64)
        F = np.asarray(self._F, np.float64)
        order, stack, i = [], [], int(self._meta[0])
        while stack or i:  # in order, iteratively: a treap may be deeper than recursion
            while i:
                stack.append(i)
                i = int(I[i * T.N_INT + T.LEFT])
            i = stack.pop()
            order.append(i)
            i = int(I[i * T.N_INT + T.RIGHT])
        f = np.array(order, np.int64) * T.N_FLOAT
        return {"format": RANK_STATE_FORMAT, "values": F[f + T.VALUE],
                "counts": I[np.array(order, np.int64) * T.N_INT + T.MULT],
                "prios": F[f + T.PRIO], "sums": F[f + T.SUM], "wsums": F[f + T.WSUM],
                "rng": int(self._meta[2])}  # fmt: skip

    @classmethod
    def from_state(cls, state, *, backend: str | None = None) -> RankStore:
        """A store from ``to_state()``'s output; ``ValueError`` if it is not one.

        The same values, priorities (hence tree) and sums: it goes on bit for bit as the
        one saved would."""
        fmt = state.get("format") if isinstance(state, dict) else None
        if fmt == 1:
            _refuse_pre_release("state")
        if fmt != RANK_STATE_FORMAT:
            raise ValueError(f"rank store state must be a dict with format {RANK_STATE_FORMAT}")
        values, counts, prios, sums, wsums = _node_columns(state)
        store = cls._empty(*_kernels(backend), _MIN_CAP)
        store._build(values, counts, prios)
        store._meta[2] = P.signed(int(state["rng"]))
        # the sums as saved, not as rebuilt: rotations leave an ancestor's sum rounded
        # as it was added up, which a fresh sum of the same tree need not equal
        for j, (s, w) in enumerate(zip(sums.tolist(), wsums.tolist(), strict=True), 1):
            store._F[j * T.N_FLOAT + T.SUM] = s
            store._F[j * T.N_FLOAT + T.WSUM] = w
        return store

    def __reduce__(self):
        # the nodes as they are, not the values: the same tree answers with the same
        # rounding, so a restored store continues bit for bit as the original would
        # (meta holds the priorities' generator)
        size = int(self._meta[1]) + 1
        nodes = (np.asarray(self._I[: size * T.N_INT], np.int64),
                 np.asarray(self._F[: size * T.N_FLOAT], np.float64),
                 np.asarray(self._meta, np.int64))  # fmt: skip
        return _restore, (nodes, self.backend)

    def __repr__(self) -> str:
        return f"RankStore(n={len(self)}, backend={self.backend!r})"


def _node_columns(state: dict) -> tuple:
    """A format-2 state's columns, checked: ``ValueError`` unless they make a treap."""
    try:
        cols = [np.asarray(state[k]).ravel() for k in ("values", "counts", "prios", "sums",
                                                       "wsums")]  # fmt: skip
        int(state["rng"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"rank store state is malformed: {exc}") from None
    values, counts, prios, sums, wsums = cols
    floats = (values, prios, sums, wsums)
    if len({len(c) for c in cols}) != 1 or not all(c.dtype.kind in "fiu" for c in floats):
        raise ValueError("rank store state is malformed: columns of unequal lengths or types")
    if counts.dtype.kind not in "iu" or not (counts >= 1).all():
        raise ValueError("rank store state is malformed: counts must be integers >= 1")
    finite = all(np.isfinite(c).all() for c in floats)
    if not (finite and (np.diff(values) > 0).all() and ((prios >= 0) & (prios < 1)).all()):
        raise ValueError("rank store state is malformed: values must be finite and "
                         "increasing, priorities in [0, 1)")  # fmt: skip
    values, prios, sums, wsums = (c.astype(np.float64) for c in floats)
    return values, counts.astype(np.int64), prios, sums, wsums


def _refuse_pre_release(what: str):
    raise ValueError(pre_release(f"a rank store {what} of format 1 (a Mersenne Twister's)"))


def _restore(nodes, backend: str, *pre_release) -> RankStore:
    """A pickled store. One pickled before the splitmix64 generator (meta without its
    state, and a Mersenne Twister's passed after the backend) is refused."""
    if pre_release:
        _refuse_pre_release("pickle")
    try:
        name, kernels = _kernels(backend)
    except ImportError:
        name, kernels = _kernels("auto")
    I, F, meta = nodes
    size = len(F) // T.N_FLOAT
    if len(I) != size * T.N_INT or len(meta) != 3 or not 0 <= meta[1] < size:
        raise ValueError("rank store pickle is malformed")
    store = RankStore._empty(name, kernels, size + 1)
    if name == "numba":
        store._I[: len(I)] = I
        store._F[: len(F)] = F
        store._meta[:] = meta
    else:
        store._I[: len(I)] = I.tolist()
        store._F[: len(F)] = F.tolist()
        store._meta[:] = meta.tolist()
    store._nodes = int(meta[1])
    store._n = int(I[int(meta[0]) * T.N_INT + T.COUNT])
    return store
