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

>>> stores = ResidualStores(bins=2, window=None, backend="python", seed=0)
>>> for i in range(2 * FIRST_FIT):
...     stores.add(None, float(i % 10), float(i % 10) / 10)  # larger yhat, larger residuals
>>> stores.edges
[4.5]
>>> store = stores.store(None, 8.0)
>>> len(store), store.select(0), store.select(-1)
(50, 0.5, 0.9)
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque

import numpy as np

from streamcal.core.rank_store import RankStore

__all__ = ["FIRST_FIT", "LAST_FIT", "ResidualStores"]

FIRST_FIT = 50  # labels per bin at the first fit of the edges
LAST_FIT = 3200  # labels per bin at the last one (6 doublings later)


class ResidualStores:
    """The residual stores by (key, bin of yhat), the bin edges and the window."""

    def __init__(self, bins: int, window: int | None, backend: str | None, seed: int):
        self.bins = bins
        self.window = window
        self.backend = backend
        self.seed = seed
        self.edges: list[float] = []
        self.n = 0  # residuals added, ever
        self._next_fit = FIRST_FIT * bins if bins > 1 else None
        self._stores: dict = {}
        # key -> (yhat, residual) of its residuals held, oldest first: kept while a refit
        # or the window needs them
        self._held: dict | None = {}
        self._empty = RankStore(backend=backend)

    def _bin(self, y_hat: float) -> int:
        return bisect_right(self.edges, y_hat) if self.edges else 0

    def store(self, key, y_hat: float) -> RankStore:
        """The store of the category of (key, yhat): read only (an empty one if none)."""
        return self._stores.get((key, self._bin(y_hat)), self._empty)

    def add(self, key, y_hat: float, residual: float) -> None:
        """Hold one more residual (and drop the oldest beyond the window)."""
        category = (key, self._bin(y_hat))
        store = self._stores.get(category)
        if store is None:
            store = self._stores[category] = RankStore(backend=self.backend, seed=self.seed)
        store.add(residual)
        self.n += 1
        if self._held is not None:
            held = self._held.get(key)
            if held is None:
                held = self._held[key] = deque()
            held.append((y_hat, residual))
            if self.window is not None and len(held) > self.window:
                old_y_hat, old_residual = held.popleft()
                old = (key, self._bin(old_y_hat))
                self._stores[old].remove(old_residual)
                if not len(self._stores[old]):
                    del self._stores[old]
        if self.n == self._next_fit:
            self._fit()

    def _fit(self) -> None:
        y_hats = np.array([h[0] for held in self._held.values() for h in held])
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
        """Number of residuals held by (key, bin)."""
        return {c: len(s) for c, s in self._stores.items()}

    def __len__(self) -> int:
        return sum(len(s) for s in self._stores.values())

    def __setstate__(self, state: dict) -> None:
        held = state.get("_held")
        if isinstance(held, deque):  # pickled before the window was per key: one deque
            by_key: dict = {}
            for key, y_hat, residual in held:
                by_key.setdefault(key, deque()).append((y_hat, residual))
            state = {**state, "_held": by_key}
        self.__dict__.update(state)
