"""Vectorised scoring of many objects by a (scaled) logistic regression, for the "va" mode.

The "va" mode rescores its whole window with two model copies per prediction; object by
object that is ~2000 Python calls at window 1000. For ``LogisticRegression``, alone or
after one ``StandardScaler``, the same function is computed here with numpy over a
feature matrix: x scaled as ``(x - mean) / sqrt(var)`` (0 when var = 0), the logit summed
over the features present, the sigmoid clipped to 0 and 1 beyond |logit| > 30 as river
does. Only the rounding of the sums differs from river's ``predict_proba_one`` (last
bits); every score of one Venn-Abers computation comes from this one function, and equal
rows give equal scores, so the calibration is exact for it.
"""

from __future__ import annotations

import numpy as np
from river import compose, linear_model, optim, preprocessing

from streamcal.core.validate import NonFiniteScore

__all__ = ["FeatureMatrix", "linear_parts"]


def linear_parts(model):
    """(scaler or None, logistic regression) if ``model`` has the supported shape, else None.

    >>> from river import tree
    >>> linear_parts(preprocessing.StandardScaler() | linear_model.LogisticRegression())
    (StandardScaler (...), LogisticRegression (...))
    >>> linear_parts(tree.HoeffdingTreeClassifier()) is None
    True
    """
    steps = list(model.steps.values()) if isinstance(model, compose.Pipeline) else [model]
    *pre, last = steps
    if type(last) is not linear_model.LogisticRegression or type(last.loss) is not optim.losses.Log:
        return None
    if not pre:
        return None, last
    if len(pre) == 1 and type(pre[0]) is preprocessing.StandardScaler:
        scaler = pre[0]
        if scaler.with_std and scaler.window_size is None:
            return scaler, last
    return None


class FeatureMatrix:
    """A ring buffer of objects as rows of a float matrix (NaN = feature absent).

    >>> fm = FeatureMatrix(capacity=2)
    >>> [fm.append(x) for x in [{"a": 1.0}, {"a": 2.0, "b": 3.0}, {"b": 4.0}]]
    [0, 1, 0]
    >>> fm.columns, fm.rows().tolist()
    (['a', 'b'], [[nan, 4.0], [2.0, 3.0]])
    """

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.columns: list = []
        self._index: dict = {}
        self._data = np.full((capacity, 0), np.nan)
        self._next = 0
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def _grow(self, x) -> None:
        new = [k for k in x if k not in self._index]
        for k in new:
            self._index[k] = len(self.columns)
            self.columns.append(k)
        pad = np.full((self.capacity, len(new)), np.nan)
        self._data = np.hstack([self._data, pad])

    def row(self, x) -> np.ndarray:
        """``x`` as a row over the current columns (unknown features are dropped)."""
        r = np.full(len(self.columns), np.nan)
        index = self._index
        for k, v in x.items():
            j = index.get(k)
            if j is not None:
                r[j] = v
        return r

    def append(self, x) -> int:
        """Write ``x`` over the oldest row once full; return the row index used."""
        if any(k not in self._index for k in x):
            self._grow(x)
        i = self._next
        self._data[i] = self.row(x)
        self._next = (i + 1) % self.capacity
        self._size = min(self._size + 1, self.capacity)
        return i

    def with_row(self, x) -> tuple[list, np.ndarray]:
        """(columns, matrix): the held rows plus ``x`` last, its new features included."""
        new = [k for k in x if k not in self._index]
        columns = self.columns + new
        X = np.full((self._size + 1, len(columns)), np.nan)
        X[: self._size, : len(self.columns)] = self._data[: self._size]
        for j, k in enumerate(columns):
            if k in x:
                X[-1, j] = x[k]
        return columns, X

    def rows(self) -> np.ndarray:
        """The held rows (a view, in no particular order)."""
        return self._data[: self._size]

    def to_state(self) -> dict:
        """Plain data: the ring itself (column order and row slots matter to the floats)."""
        return {
            "capacity": self.capacity,
            "columns": list(self.columns),
            "data": self._data.copy(),
            "next": self._next,
            "size": self._size,
        }

    @classmethod
    def from_state(cls, state: dict) -> FeatureMatrix:
        self = cls(state["capacity"])
        self.columns = list(state["columns"])
        self._index = {k: j for j, k in enumerate(self.columns)}
        self._data = np.array(state["data"], dtype=np.float64)
        self._next, self._size = state["next"], state["size"]
        return self


def _sigmoid(z: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        p = 1.0 / (1.0 + np.exp(-z))
    return np.where(z < -30, 0.0, np.where(z > 30, 1.0, p))


def score_rows(parts, columns: list, X: np.ndarray) -> np.ndarray:
    """P(True) of each row of ``X`` (columns named by ``columns``) under ``parts``."""
    scaler, lr = parts
    weights = lr._weights
    w = np.array([weights[k] if k in weights else 0.0 for k in columns])
    if scaler is not None:
        means, var = scaler.means, scaler.vars
        m = np.array([means.get(k, 0.0) for k in columns])
        v = np.array([var.get(k, 0.0) for k in columns])
        sd = np.sqrt(v)
        with np.errstate(invalid="ignore", divide="ignore"):
            X = np.where(v > 0, (X - m) / np.where(v > 0, sd, 1.0), 0.0)
    with np.errstate(over="ignore", invalid="ignore"):  # not finite: check_finite says so
        terms = np.where(np.isnan(X), 0.0, X * w)
    z = np.zeros(len(X))
    for j in range(terms.shape[1]):  # fixed order: equal rows get bit-equal sums
        z += terms[:, j]
    z += lr.intercept
    return _sigmoid(z)


def check_finite(scores: np.ndarray) -> np.ndarray:
    if not np.isfinite(scores).all():
        bad = float(scores[~np.isfinite(scores)][0])
        raise NonFiniteScore(f"the wrapped model returned P(True) = {bad!r}, not a finite number")
    return scores
