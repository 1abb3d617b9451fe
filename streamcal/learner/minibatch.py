"""Mini-batches the river way: pandas in, pandas out.

river's mini-batch classifiers (``river.base.MiniBatchClassifier``) take a
``pandas.DataFrame`` of features and a ``pandas.Series`` of labels (``learn_many``) and
answer with a ``DataFrame`` of class probabilities (``predict_proba_many``) or a
``Series`` of classes (``predict_many``), indexed as the features were. The Venn-Abers
classifiers follow that, with these rules:

* **Rows.** Each row is the dict ``river.stream.iter_pandas`` would give (every column),
  so a mini-batch means what the same rows one by one mean. A value that is not finite
  is refused (``ValueError`` naming the column and the row), as ``learn_one`` refuses
  it: pandas writes a missing value as NaN (or ``pd.NA``), which a model would learn as
  a number and break on; fill or drop missing values first. The whole batch is checked,
  features and labels, before any row is learned.
* **predict_proba_many** equals ``predict_proba_one`` on every row, on the same state.
  Where it can it scores the whole batch at once (``streamcal.learner.scoring.
  batch_scores``) and reads the calibration store in one pass (``ScoreStore.
  query_many``); rows whose batched score might not be exactly the one-by-one score *as
  far as the store can tell* (it lies within its error bound of a held score) are scored
  one by one, so the answers are exactly those of ``predict_proba_one``.
* **learn_many** gives the calibration set every row, in order, as ``learn_one`` would.
  The wrapped model learns as river's own ``learn_many`` does where it has one (a linear
  model takes one gradient step per mini-batch, not one per row), else row by row. In the
  default mode the model learns an object only once it has left the calibration set: it
  then learns each of your mini-batches with one ``learn_many`` call (the part of a batch
  that leaves at one refresh, when a refresh splits it). ``BatchRanges`` remembers which
  stream positions came in which batch until then.

pandas is river's optional dependency and so is it here: it is imported only by these
methods, which cannot have been given a DataFrame without it.

>>> import pandas as pd
>>> b = Batch(pd.DataFrame({"a": [1.0, 2.0], "b": [3, 4]}, index=[7, 9]))
>>> b.rows()
[{'a': 1.0, 'b': 3}, {'a': 2.0, 'b': 4}]
>>> b.labels(pd.Series([True, False]))
[True, False]
>>> b.labels([True])
Traceback (most recent call last):
...
ValueError: y has 1 labels for 2 rows
"""

from __future__ import annotations

import bisect

import numpy as np
from river import base, compose

from streamcal.core.validate import not_finite, short_repr
from streamcal.learner.scoring import _sorted_keys

__all__ = [
    "Batch",
    "BatchRanges",
    "learn_in_order",
    "learns_in_batches",
    "no_keywords",
    "pairs_row_by_row",
]


def _pandas():
    import pandas as pd

    return pd


class Batch:
    """A mini-batch of features (a ``pandas.DataFrame``), checked when made: its rows as
    dicts (read lazily), its numeric matrix, and frames and series shaped like it."""

    def __init__(self, X):
        try:
            pd = _pandas()
        except ImportError:  # nothing can be a DataFrame then
            pd = None
        if pd is None or not isinstance(X, pd.DataFrame):
            raise TypeError(f"X must be a pandas DataFrame, got {type(X).__name__}")
        self.frame = X
        self.columns = list(X.columns)
        self._rows: list | None = None
        self._check_finite()

    def _check_finite(self) -> None:
        """``ValueError`` naming the first value that is a number but not finite (the
        rule of ``streamcal.core.validate.check_features``, by column); on the way, the
        float matrix of a numeric frame (``matrix``)."""
        X = self.frame
        numeric = [dt.kind in "biuf" for dt in X.dtypes]
        self._matrix = None  # a column is not numeric
        if all(numeric):  # pd.NA of a nullable column as NaN: found below, named as it is
            m = X.to_numpy(dtype=np.float64, na_value=np.nan)
            if np.isfinite(m).all():
                self._matrix = m  # what matrix() would compute
                return
        for j, (name, is_number) in enumerate(zip(self.columns, numeric, strict=True)):
            column = X.iloc[:, j]
            if is_number:
                values = column.to_numpy(dtype=np.float64, na_value=np.nan)
                bad = np.flatnonzero(~np.isfinite(values))
                found = (bad[0], column.iloc[bad[0]]) if len(bad) else None
            else:
                found = next(((i, v) for i, v in enumerate(column.array)
                              if not_finite(v) is not None), None)  # fmt: skip
            if found is not None:
                i, v = (_plain(u) for u in found)
                raise ValueError(
                    f"feature {short_repr(name)} {not_finite(v) or 'is not finite'} (row "
                    f"{short_repr(_plain(X.index[i]))}); pandas writes a missing value as NaN "
                    "or pd.NA: fill or drop missing values first"
                )

    def __len__(self) -> int:
        return len(self.frame)

    def rows(self) -> list[dict]:
        """Every row as a dict of Python values (``iter_pandas``'s rows), its features in
        the canonical (sorted) order the models see (``streamcal.learner.scoring``): new
        dicts, which the classifier may keep without copying them."""
        if self._rows is None:
            X, cols = self.frame, self.columns
            keys = _sorted_keys(dict.fromkeys(cols))[0]
            if keys != cols:
                X, cols = X[keys], keys
            dtypes = set(X.dtypes)
            if len(dtypes) == 1 and next(iter(dtypes)).kind in "biuf":
                # one numeric dtype: one conversion, same values as the row by row one
                self._rows = [dict(zip(cols, r, strict=True)) for r in X.to_numpy().tolist()]
            else:
                self._rows = [dict(zip(cols, r, strict=True)) for r in X.itertuples(False, None)]
        return self._rows

    def row(self, i: int) -> dict:
        """Row ``i`` as ``rows()`` gives it (without converting the others)."""
        if self._rows is not None:
            return self._rows[i]
        return dict(zip(self.columns, self.frame.iloc[i].tolist(), strict=True))  # any order

    def matrix(self) -> np.ndarray | None:
        """The features as a float matrix, or None if a column is not numeric (or boolean):
        the batched scorers leave those to the model, row by row. (A value that is NaN or
        infinite was refused when the batch was made.)"""
        return self._matrix

    def labels(self, y) -> list:
        """The labels ``y`` (a ``Series``, or any sequence) as a list, one per row, in order
        (by position, as river's ``learn_many`` reads them)."""
        pd = _pandas()
        values = y.tolist() if isinstance(y, pd.Series | pd.Index | np.ndarray) else list(y)
        if len(values) != len(self):
            raise ValueError(f"y has {len(values)} labels for {len(self)} rows")
        return values

    def proba_frame(self, columns: list, values: list[list]):
        """A ``DataFrame`` of probabilities (``values``: one list per column), indexed as X."""
        pd = _pandas()
        data = dict(zip(columns, values, strict=True))
        return pd.DataFrame(data, index=self.frame.index, columns=columns, dtype=float)

    def series(self, values: list):
        """A ``Series`` of ``values``, indexed as X."""
        return _pandas().Series(values, index=self.frame.index, dtype=None if values else object)


def _plain(v):
    """A numpy scalar as its Python value, for messages (``6``, not ``np.int64(6)``)."""
    return v.item() if isinstance(v, np.generic) else v


def no_keywords(kwargs: dict) -> None:
    """TypeError for keywords given to a mini-batch method (river's wrappers take
    ``**kwargs``; these have none: a batch's categories come from ``by``)."""
    if kwargs:
        names = ", ".join(sorted(kwargs))
        raise TypeError(
            f"unexpected keyword argument(s) {names}: the mini-batch methods take none "
            "(with by=, each row's category comes from its features)"
        )


def pairs_row_by_row(predict, batch) -> tuple[np.ndarray, np.ndarray]:
    """(p0, p1) arrays of every row of ``batch`` from a mode's ``predict`` (which gives
    (score, p0, p1)), row by row: the modes without a batched path."""
    pairs = [predict(x)[1:] for x in batch.rows()]
    return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])


def learns_in_batches(model) -> bool:
    """Whether ``model`` has river's ``learn_many`` all the way through: a mini-batch
    classifier, or a pipeline of mini-batch transformers ending in one.

    >>> from river import linear_model, preprocessing, tree
    >>> learns_in_batches(preprocessing.StandardScaler() | linear_model.LogisticRegression())
    True
    >>> learns_in_batches(tree.HoeffdingTreeClassifier())
    False
    """
    if isinstance(model, compose.Pipeline):
        *steps, last = model.steps.values()
        batch_steps = (base.MiniBatchTransformer, base.MiniBatchSupervisedTransformer)
        return all(isinstance(t, batch_steps) for t in steps) and learns_in_batches(last)
    return isinstance(model, base.MiniBatchClassifier)


class BatchRanges:
    """The stream positions (1-based counts of labels) that came in mini-batches and that
    the model has not learned yet: per batch, its first and last position and how many of
    its objects are still to learn.

    >>> r = BatchRanges()
    >>> r.add(first=3, n=4)
    >>> r.batch_of(2), r.batch_of(3), r.batch_of(6), r.batch_of(7)
    (None, 3, 3, None)
    >>> r.learned(3, 4)
    >>> r.batch_of(4), len(r)
    (None, 0)
    """

    def __init__(self):
        self.first: list[int] = []
        self.last: list[int] = []
        self.left: list[int] = []

    def __len__(self) -> int:
        return len(self.first)

    def add(self, first: int, n: int) -> None:
        if n > 0:
            self.first.append(first)
            self.last.append(first + n - 1)
            self.left.append(n)

    def batch_of(self, position: int) -> int | None:
        """The first position of the batch ``position`` came in, or None."""
        i = bisect.bisect_right(self.first, position) - 1
        if i >= 0 and position <= self.last[i]:
            return self.first[i]
        return None

    def learned(self, batch: int, k: int) -> None:
        """``k`` objects of ``batch`` have been learned; a batch learned whole is forgotten."""
        i = bisect.bisect_left(self.first, batch)
        self.left[i] -= k
        if self.left[i] <= 0:
            del self.first[i], self.last[i], self.left[i]

    def copy(self) -> BatchRanges:
        return BatchRanges.from_state(self.to_state())

    def forget(self, positions) -> None:
        """The objects at ``positions`` have left (learned or not): as ``learned``, one by one.

        >>> r = BatchRanges()
        >>> r.add(first=1, n=3)
        >>> r.forget([1, 2, 7]); len(r), r.forget([3]), len(r)
        (1, None, 0)
        """
        for p in positions:
            batch = self.batch_of(p)
            if batch is not None:
                self.learned(batch, 1)

    def to_state(self) -> list:
        return [list(t) for t in zip(self.first, self.last, self.left, strict=True)]

    @classmethod
    def from_state(cls, state) -> BatchRanges:
        self = cls()
        for first, last, left in state:
            self.first.append(first)
            self.last.append(last)
            self.left.append(left)
        return self


def learn_in_order(model, items, ranges: BatchRanges | None) -> None:
    """The model learns ``items`` — ``(position, features, label)`` in stream order — one
    by one, except that consecutive items of one mini-batch (``ranges``) are learned with
    one ``learn_many`` call.

    >>> from river import naive_bayes
    >>> m = naive_bayes.GaussianNB()
    >>> r = BatchRanges()
    >>> r.add(first=2, n=2)
    >>> learn_in_order(m, [(1, {"a": 1.0}, "u"), (2, {"a": 2.0}, "v"), (3, {"a": 3.0}, "v")], r)
    >>> dict(m.class_counts), len(r)
    ({'u': 1, 'v': 2}, 0)
    """
    if not ranges:
        for _, x, y in items:
            model.learn_one(x, y)
        return
    i, n = 0, len(items)
    while i < n:
        batch = ranges.batch_of(items[i][0])
        if batch is None:
            model.learn_one(items[i][1], items[i][2])
            i += 1
            continue
        j = i + 1
        while j < n and ranges.batch_of(items[j][0]) == batch:
            j += 1
        run = items[i:j]
        pd = _pandas()
        X = pd.DataFrame([x for _, x, _ in run])
        model.learn_many(X, pd.Series([y for _, _, y in run]))
        ranges.learned(batch, j - i)
        i = j
