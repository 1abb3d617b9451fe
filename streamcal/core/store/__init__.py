"""ScoreStore: the sorted (score, label) store that answers Venn-Abers queries exactly.

Every answer equals the definition (two isotonic fits with the test point added, ties
pooled) over the pairs held at that moment; no backend ever approximates.

Two backends with the same interface and the same answers, bit for bit:

* ``numba`` (``_numba.py`` + ``_kernels.py``): compiled kernels over a chunked sorted list
  with per-chunk lower hulls; the fast one, the default when numba imports and works.
* ``python`` (``_python.py``): a ``sortedcontainers.SortedList`` of the groups with
  numpy-vectorised scans of one PAVA block; runs wherever numpy runs.

``ScoreStore()`` picks one: ``backend=`` if given, else the ``STREAMCAL_STORE_BACKEND``
environment variable, else ``"auto"`` (numba if it imports and works, else python). When
``"auto"`` falls back to python it says so once, as a ``StoreBackendWarning`` (a
``RuntimeWarning``) that a user can filter like any warning::

    warnings.filterwarnings("ignore", category=StoreBackendWarning)

The state is the tie-pooled groups as plain arrays (``to_state`` / ``from_state``), so a
store pickled or checkpointed by one backend loads in the other.

Speed (``benchmarks/store.py``, median µs per query + add, 2-core machine shared with
other jobs; python / numba): see the table in README.md ("The score store").
"""

from __future__ import annotations

import logging
import os
import warnings

import numpy as np

from streamcal.core.ties import group_ties, ungroup
from streamcal.core.validate import check_arrays

__all__ = ["BACKENDS", "STATE_FORMAT", "ScoreStore", "StoreBackendWarning", "backend_class"]

BACKENDS = ("auto", "numba", "python")
ENV_BACKEND = "STREAMCAL_STORE_BACKEND"
STATE_FORMAT = 1  # version of to_state()'s layout; from_state refuses newer ones

_log = logging.getLogger(__name__)
_auto: type | None = None


class StoreBackendWarning(RuntimeWarning):
    """The automatic choice of the score store fell back to pure Python (numba missing or
    not working): answers are the same, each event costs more. Issued once per process."""


def backend_class(name: str | None = None) -> type[ScoreStore]:
    """The store class for a backend name (None: the environment variable, else "auto").

    >>> backend_class("python").backend
    'python'
    >>> backend_class("fast")
    Traceback (most recent call last):
    ...
    ValueError: backend must be one of auto, numba, python, got 'fast'
    """
    if name is None:
        name = os.environ.get(ENV_BACKEND, "").strip().lower() or "auto"
    if name == "python":
        from streamcal.core.store._python import PythonStore

        return PythonStore
    if name == "numba":
        from streamcal.core.store._numba import NumbaStore

        return NumbaStore
    if name == "auto":
        return _auto_class()
    source = f" (from {ENV_BACKEND})" if name == os.environ.get(ENV_BACKEND) else ""
    raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {name!r}{source}")


def _auto_class() -> type[ScoreStore]:
    global _auto
    if _auto is None:
        try:
            from streamcal.core.store._numba import NumbaStore

            probe = NumbaStore._from_groups(np.array([0.5]), np.array([2]), np.array([1]))
            probe.add(0.25, 0)
            if probe.query(0.5) != (1 / 3, 2 / 3):
                raise RuntimeError(f"wrong answer from the compiled kernels: {probe.query(0.5)}")
            _auto = NumbaStore
            _log.info("score store backend: numba (compiled kernels import and work)")
        except Exception as exc:  # ImportError, a compile or cache error: any is a reason
            from streamcal.core.store._python import PythonStore

            _auto = PythonStore
            reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
            # A warning, not a log line: a library user filters it by its category.
            message = (
                f"score store backend: python (sortedcontainers), numba unavailable ({reason}); "
                "same answers, several times the cost per event: pip install "
                "'streamcal-va[fast]' adds numba"
            )
            warnings.warn(message, StoreBackendWarning, stacklevel=2)
    return _auto


class ScoreStore:
    """Multiset of (score, label) pairs answering (p0, p1) for a new score.

    ``query(x)`` returns the Venn-Abers pair: p0 (p1) is the isotonic fit at ``x`` after
    adding ``(x, 0)`` (``(x, 1)``) to the pairs held, equal scores pooled. An empty store
    answers ``(0.0, 1.0)``; a score above every held score gets p1 = 1, below every held
    score p0 = 0. ``ScoreStore(backend=...)`` returns an instance of the chosen backend's
    subclass (see the module docstring).

    >>> store = ScoreStore(backend="python")
    >>> store.query(0.5)
    (0.0, 1.0)
    >>> for s, y in [(0.1, 0), (0.2, 1), (0.8, 0), (0.9, 1)]:
    ...     store.add(s, y)
    >>> store.query(0.5)
    (0.3333333333333333, 0.6666666666666666)
    >>> len(store)
    4
    >>> store.remove(0.9, 1)
    >>> p0, p1 = store.query_many([0.5, 1.0])
    >>> p0.tolist(), p1.tolist()
    ([0.3333333333333333, 0.3333333333333333], [0.6666666666666666, 1.0])
    >>> store.remove(0.9, 1)
    Traceback (most recent call last):
    ...
    ValueError: pair (0.9, 1) is not in the store

    Bulk building sorts once; the state is plain arrays, the same for every backend:

    >>> big = ScoreStore.from_arrays([0.3, 0.1, 0.3], [1, 0, 0])
    >>> big.to_arrays()
    (array([0.1, 0.3, 0.3]), array([0, 0, 1]))
    >>> state = big.to_state()
    >>> state["format"], state["scores"].tolist(), state["counts"].tolist()
    (1, [0.1, 0.3], [1, 2])
    >>> ScoreStore.from_state(state, backend="python").query(0.2)
    (0.0, 0.6666666666666666)
    """

    backend = "interface"

    def __new__(cls, *, backend: str | None = None, _chunk: int | None = None):
        if cls is ScoreStore:
            cls = backend_class(backend)
        return object.__new__(cls)

    # ---------------------------------------------------------- backends implement

    @classmethod
    def _from_groups(cls, t, w, s, chunk=None) -> ScoreStore:
        """A store holding the groups (sorted distinct scores, counts, ones), validated."""
        raise NotImplementedError

    def _groups_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The groups held, in score order: (scores, counts, ones)."""
        raise NotImplementedError

    def add(self, score, label) -> None:
        """Add one (score, label) pair; ``ValueError`` (store unchanged) on bad input."""
        raise NotImplementedError

    def remove(self, score, label) -> None:
        """Remove one held pair; ``ValueError`` (store unchanged) if it is not held."""
        raise NotImplementedError

    def query(self, score) -> tuple[float, float]:
        """(p0, p1) for one test score, as Python floats."""
        raise NotImplementedError

    def query_many(self, scores) -> tuple[np.ndarray, np.ndarray]:
        """(p0, p1) arrays for many test scores (any shape)."""
        raise NotImplementedError

    def clear(self) -> None:
        """Remove every pair."""
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError

    # ---------------------------------------------------------- shared

    @classmethod
    def _resolve(cls, backend: str | None) -> type[ScoreStore]:
        return backend_class(backend) if cls is ScoreStore else cls

    @classmethod
    def from_arrays(
        cls, scores, labels, *, backend: str | None = None, _chunk: int | None = None
    ) -> ScoreStore:
        """A store holding the given pairs, built in O(n log n) (one sort)."""
        return cls._resolve(backend)._from_groups(*group_ties(scores, labels), _chunk)

    def add_many(self, scores, labels) -> None:
        """Add many pairs at once; all are checked before any is added."""
        s, y = check_arrays(scores, labels)
        if len(s) <= 64 and len(s) * 64 <= len(self):
            for si, yi in zip(s.tolist(), y.tolist(), strict=True):
                self.add(si, yi)
            return
        held_s, held_y = self.to_arrays()
        merged = type(self).from_arrays(
            np.concatenate([held_s, s]), np.concatenate([held_y, y]), _chunk=self._chunk_size()
        )
        self.__dict__.update(merged.__dict__)

    def _chunk_size(self) -> int | None:
        return None

    def to_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """All pairs held, sorted by score (label 0 before 1 within a score)."""
        return ungroup(*self._groups_arrays())

    def to_state(self) -> dict:
        """The store as plain data: the tie-pooled groups and a format version.

        The same for every backend; ``from_state`` reads it back in either.
        """
        t, w, s = self._groups_arrays()
        return {"format": STATE_FORMAT, "scores": t, "counts": w, "ones": s}

    @classmethod
    def from_state(cls, state, *, backend: str | None = None) -> ScoreStore:
        """A store from ``to_state()``'s output; ``ValueError`` if it is not one.

        >>> ScoreStore.from_state({"format": 2, "scores": [], "counts": [], "ones": []})
        Traceback (most recent call last):
        ...
        ValueError: score store state has format 2; this streamcal reads up to 1
        """
        t, w, s = _check_state(state)
        return cls._resolve(backend)._from_groups(t, w, s)

    def __reduce__(self):
        # plain arrays and the backend's name: loads in either backend
        return _restore, (self.to_state(), self.backend)

    def __repr__(self) -> str:
        return f"ScoreStore(n={len(self)}, backend={self.backend!r})"


def _restore(state, backend: str) -> ScoreStore:
    """Unpickle: the backend that wrote the store if it works here, else "auto"."""
    try:
        cls = backend_class(backend)
    except ImportError:
        cls = backend_class("auto")
    return cls.from_state(state)


def _check_state(state) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate a state dict; return (scores, counts, ones) as float64 / int64 arrays."""
    if not isinstance(state, dict) or "format" not in state:
        raise ValueError("score store state must be a dict with a 'format' key")
    version = state["format"]
    if not isinstance(version, (int, np.integer)) or isinstance(version, bool) or version < 1:
        raise ValueError(f"score store state has an invalid format {version!r}")
    if version > STATE_FORMAT:
        raise ValueError(
            f"score store state has format {version}; this streamcal reads up to {STATE_FORMAT}"
        )
    try:
        t = np.asarray(state["scores"], np.float64)
        w = np.asarray(state["counts"])
        s = np.asarray(state["ones"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"score store state is malformed: {exc}") from None
    if not (t.ndim == w.ndim == s.ndim == 1 and len(t) == len(w) == len(s)):
        raise ValueError("score store state: scores, counts and ones must be 1-d, same length")
    if len(t) and not (np.issubdtype(w.dtype, np.integer) and np.issubdtype(s.dtype, np.integer)):
        raise ValueError("score store state: counts and ones must be integers")
    w = w.astype(np.int64)
    s = s.astype(np.int64)
    if not np.isfinite(t).all() or (len(t) > 1 and not (np.diff(t) > 0).all()):
        raise ValueError("score store state: scores must be finite and strictly increasing")
    if (w < 1).any() or (s < 0).any() or (s > w).any():
        raise ValueError("score store state: need counts >= 1 and 0 <= ones <= counts")
    return t, w, s
