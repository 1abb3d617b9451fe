"""The regressor's calibration: normalised residuals in one ``RankStore`` per category,
a category being (the user's ``by`` key, the bin of the prediction yhat).

**Bins of yhat** (Mondrian conformal predictive systems, Vovk et al. 2020): the residuals
of a model are often larger where it predicts larger values (a delivery predicted at two
days misses by more than one predicted at two hours); one pool of residuals gives every
object the same spread, one per bin of yhat gives each its own. The bin edges are the
(1/b, ..., (b-1)/b) quantiles of the yhat of the residuals held. They are fitted when
the labels reach ``FIRST_FIT`` per bin, and fitted again at each doubling of the labels
until ``LAST_FIT`` per bin (a model that learns moves its predictions; a refit rebuilds
the stores, O(n log n), at doubling counts, so O(log n) per label on average), then fixed.
Before the first fit every residual is in one pool. The guarantee: once the edges are
fixed, they are a function of earlier labels only (the schedule is by counts), and a
bin's later residuals are exchangeable under exchangeability of the stream (with a model
that no longer learns), so each bin's distribution is calibrated for its objects, as a
Mondrian CPS. Before that, the edges are refitted on the predictions held (not on their
residuals): the guarantee holds only approximately, which the tests measure.

**Window**: the residuals of the newest ``window`` labels of each ``by`` key are held
(over its bins; without ``by``, of the stream), the older ones removed: a model that
learns or a stream that drifts forgets, and each key keeps as many residuals as the
classifiers' Mondrian categories keep calibration pairs, however rare it is.

**Categories kept and the pooled store** (with ``by``; the classifiers' rules,
``streamcal.learner.mondrian``): at most ``max_categories`` keys hold residuals, the
least recently labelled one evicted (all its stores) when a new one comes. With
``pooled``, every residual is also held by the pooled store, per bin of yhat, under the
same window (the newest ``window`` residuals of the stream): a key that holds fewer than
``min_category`` residuals in the bin of yhat (none: never labelled, or evicted) is
answered from the pooled store of that bin. The choice is by counts only, never by the
labels; a pooled answer has the marginal guarantee only (over the objects so answered,
as without ``by``), an answer from the key's own store the per-category one.

>>> stores = ResidualStores(bins=2, window=None, backend="python", seed=0)
>>> for i in range(2 * FIRST_FIT):
...     stores.add(None, float(i % 10), float(i % 10) / 10)  # larger yhat, larger residuals
>>> stores.edges
[4.5]
>>> store = stores.store(None, 8.0)
>>> len(store), store.select(0), store.select(-1)
(50, 0.5, 0.9)
>>> keyed = ResidualStores(1, window=5, backend="python", seed=0, max_categories=2,
...                        pooled=True, min_category=3)
>>> for key in "aabbbc":
...     gone = keyed.add(key, 0.0, float(ord(key)))
>>> gone, list(keyed.sizes), len(keyed.store("b", 0.0)), len(keyed.store("c", 0.0))
(('a', 2), ['b', 'c'], 3, 5)
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict, deque

import numpy as np

from streamcal.core.rank_store import RankStore
from streamcal.errors import pre_release

__all__ = ["FIRST_FIT", "LAST_FIT", "POOLED", "ResidualStores"]

FIRST_FIT = 50  # labels per bin at the first fit of the edges
LAST_FIT = 3200  # labels per bin at the last one (6 doublings later)


class POOLED:
    """The key of the pooled store (a class: no user key equals it, and a pickle keeps it)."""


class ResidualStores:
    """The residual stores by (key, bin of yhat), the bin edges, the window, the keys kept
    (``max_categories``, None: all) and the pooled store (``pooled``)."""

    evictions = 0  # keys dropped to stay within max_categories

    def __init__(self, bins: int, window: int | None, backend: str | None, seed: int,
                 max_categories: int | None = None, pooled: bool = False,
                 min_category: int = 0):  # fmt: skip
        self.bins = bins
        self.window = window
        self.backend = backend
        self.seed = seed
        self.max_categories = max_categories
        self.pooled = pooled
        self.min_category = min_category
        self.edges: list[float] = []
        self.n = 0  # residuals added, ever
        self._next_fit = FIRST_FIT * bins if bins > 1 else None
        self._stores: dict = {}
        # key -> residuals it holds, least recently labelled first (not the pooled one)
        self.sizes: OrderedDict = OrderedDict()
        # key -> (yhat, residual) of its residuals held, oldest first: kept while a refit
        # or the window needs them
        self._held: dict | None = {}
        self._empty = RankStore(backend=backend)

    def _bin(self, y_hat: float) -> int:
        return bisect_right(self.edges, y_hat) if self.edges else 0

    def store(self, key, y_hat: float) -> RankStore:
        """The store that answers for (key, yhat): the key's own in the bin of yhat, or the
        pooled one's if the key holds fewer than ``min_category`` there (with ``pooled``);
        read only (an empty one if none)."""
        b = self._bin(y_hat)
        own = self._stores.get((key, b))
        if self._pools(own):
            return self._stores.get((POOLED, b), self._empty)
        return self._empty if own is None else own

    def _pools(self, own) -> bool:
        return self.pooled and (own is None or len(own) < self.min_category)

    def answers_pooled(self, key, y_hat: float) -> bool:
        """Whether ``store(key, y_hat)`` is the pooled store (the marginal guarantee only)."""
        return self._pools(self._stores.get((key, self._bin(y_hat))))

    def add(self, key, y_hat: float, residual: float):
        """Hold one more residual (and drop the oldest beyond the window); (key, residuals
        it held) of the key evicted to make room for ``key``, or None."""
        gone = None
        if key in self.sizes:
            self.sizes.move_to_end(key)
        else:
            if self.max_categories is not None and len(self.sizes) >= self.max_categories:
                gone = self._evict()
            self.sizes[key] = 0
        self.sizes[key] += self._hold(key, y_hat, residual)
        if self.pooled:
            self._hold(POOLED, y_hat, residual)
        self.n += 1
        if self.n == self._next_fit:
            self._fit()
        return gone

    def _hold(self, key, y_hat: float, residual: float) -> int:
        """Add the residual to the key's store; the change of the residuals it holds."""
        category = (key, self._bin(y_hat))
        store = self._stores.get(category)
        if store is None:
            store = self._stores[category] = RankStore(backend=self.backend, seed=self.seed)
        store.add(residual)
        if self._held is None:
            return 1
        held = self._held.get(key)
        if held is None:
            held = self._held[key] = deque()
        held.append((y_hat, residual))
        if self.window is None or len(held) <= self.window:
            return 1
        old_y_hat, old_residual = held.popleft()
        old = (key, self._bin(old_y_hat))
        self._stores[old].remove(old_residual)
        if not len(self._stores[old]):
            del self._stores[old]
        return 0

    def _evict(self) -> tuple:
        """Drop the least recently labelled key, all its stores and history."""
        key, size = self.sizes.popitem(last=False)
        for b in range(len(self.edges) + 1):
            self._stores.pop((key, b), None)
        if self._held is not None:
            self._held.pop(key, None)
        self.evictions += 1
        return key, size

    def _fit(self) -> None:
        # the edges are the categories' (as without the pooled store)
        y_hats = np.array([h[0] for key, held in self._held.items() if key is not POOLED
                           for h in held])  # fmt: skip
        qs = np.arange(1, self.bins) / self.bins
        self.edges = np.unique(np.quantile(y_hats, qs)).tolist()
        groups: dict = {}
        for key, held in self._held.items():
            for y_hat, residual in held:
                groups.setdefault((key, self._bin(y_hat)), []).append(residual)
        self._stores = {c: RankStore.from_arrays(r, backend=self.backend, seed=self.seed)
                        for c, r in groups.items()}  # fmt: skip
        nxt = 2 * self.n
        self._next_fit = nxt if nxt <= LAST_FIT * self.bins else None
        if self._next_fit is None and self.window is None:
            self._held = None  # the edges are final: nothing will read the history again

    @property
    def categories(self) -> dict:
        """Number of residuals held by (key, bin) (the pooled store's aside)."""
        return {c: len(s) for c, s in self._stores.items() if c[0] is not POOLED}

    def __len__(self) -> int:
        """Residuals held by the keys (the pooled store holds them again)."""
        return sum(self.categories.values())

    def __setstate__(self, state: dict) -> None:
        if "sizes" not in state:  # one window, keys not bounded: only before the first release
            raise ValueError(pre_release("residual stores pickled without bounded keys"))
        self.__dict__.update(state)
