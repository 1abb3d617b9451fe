"""ScoreStore: the sorted (score, label) store that answers Venn-Abers queries.

PLACEHOLDER implementation (exact but O(n) per query); the fast incremental version
replaces the internals behind the same API.
"""

from __future__ import annotations

import numpy as np
from sortedcontainers import SortedDict

from streamcal.core._validate import check_arrays, check_label, check_score

__all__ = ["ScoreStore"]


class ScoreStore:
    """Multiset of (score, label) pairs answering (p0, p1) for a new score.

    >>> store = ScoreStore()
    >>> store.query(0.5)
    (0.0, 1.0)
    >>> for s, y in [(0.1, 0), (0.2, 1), (0.8, 0), (0.9, 1)]:
    ...     store.add(s, y)
    >>> store.query(0.5)
    (0.3333333333333333, 0.6666666666666666)
    >>> len(store)
    4
    """

    def __init__(self):
        self._groups = SortedDict()  # score -> [count, ones]
        self._n = 0

    @classmethod
    def from_arrays(cls, scores, labels) -> ScoreStore:
        s, y = check_arrays(scores, labels)
        store = cls()
        for si, yi in zip(s.tolist(), y.tolist(), strict=True):
            store.add(si, yi)
        return store

    def __len__(self) -> int:
        return self._n

    def add(self, score, label) -> None:
        score, label = check_score(score), check_label(label)
        g = self._groups.setdefault(score, [0, 0])
        g[0] += 1
        g[1] += label
        self._n += 1

    def remove(self, score, label) -> None:
        score, label = check_score(score), check_label(label)
        g = self._groups.get(score)
        if g is None or (g[1] if label else g[0] - g[1]) == 0:
            raise ValueError(f"pair ({score!r}, {label!r}) is not in the store")
        g[0] -= 1
        g[1] -= label
        self._n -= 1
        if g[0] == 0:
            del self._groups[score]

    def query(self, score) -> tuple[float, float]:
        from streamcal.core.isotonic import venn_abers_bruteforce

        score = check_score(score)
        t = np.array(self._groups.keys(), dtype=float)
        cw = np.array([g[0] for g in self._groups.values()], dtype=np.int64)
        cs = np.array([g[1] for g in self._groups.values()], dtype=np.int64)
        scores = np.repeat(t, cw)
        labels = (
            np.concatenate([np.repeat([1, 0], [o, c - o]) for c, o in zip(cw, cs, strict=False)])
            if len(t)
            else np.array([], dtype=np.int64)
        )
        return venn_abers_bruteforce(scores, labels.astype(np.int64), score)
