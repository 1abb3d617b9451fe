"""The binary classifier's mini-batches: river's ``predict_proba_many``,
``predict_many`` and ``learn_many`` on ``VennAbersClassifier``.

The rules are ``streamcal.learner.minibatch``'s: pandas in, pandas out, the same numbers
as row by row, everything checked before anything is learned. What is binary here: the
probability of ``True`` is computed for the whole batch at once (one batched scoring
where the model has one, one store pass), protected row by row with ``protect``; labels
that are not all binary turn the classifier multiclass, as in ``learn_one``, and a
classifier turned multiclass hands the batch to its multiclass side.
"""

from __future__ import annotations

from streamcal.core import SCALAR_MERGES
from streamcal.core.validate import check_label
from streamcal.learner.labels import is_binary, take_labels
from streamcal.learner.minibatch import Batch, no_keywords

__all__ = ["BinaryBatches"]


class BinaryBatches:
    """The mini-batch methods of ``VennAbersClassifier`` (a mixin: the state, the
    protection, the horizon and the switch to multiclass are the classifier's)."""

    def predict_proba_many(self, X, **kwargs):
        """``predict_proba_one`` of every row of the ``pandas.DataFrame`` X, as a
        ``DataFrame`` indexed as X with columns ``False`` and ``True`` (the classes, once
        multiclass). The same numbers as row by row, computed with one batched scoring
        where the model has one and one store pass (``streamcal.learner.minibatch``)."""
        batch = self._predicted_batch(X, kwargs)
        if self._multi is not None:
            return self._multi.predict_proba_many(X)
        ps = self._probabilities(batch)
        return batch.proba_frame([False, True], [[1.0 - p for p in ps], ps])

    def predict_many(self, X, **kwargs):
        """``predict_one`` of every row of X, as a ``pandas.Series`` indexed as X."""
        batch = self._predicted_batch(X, kwargs)
        if self._multi is not None:
            return self._multi.predict_many(X)
        return batch.series([p > 0.5 for p in self._probabilities(batch)])

    def _predicted_batch(self, X, kwargs) -> Batch:
        """X as a ``Batch`` to predict; before any label, the model's classes may turn the
        classifier multiclass (as at ``predict_proba_one``)."""
        no_keywords(kwargs)
        batch = Batch(X)
        if self._multi is None and len(batch) and self._learned_nothing():
            self._multiclass_model(batch.rows()[0])
        return batch

    def _probabilities(self, batch) -> list[float]:
        """The probability of True for every row (protected with ``protect``)."""
        if self._horizon is not None:  # a batch is predicted with what matured before it
            self._mature()
        p0, p1 = self._state.pairs_many(batch)
        merge = SCALAR_MERGES[self.merge]
        ps = [merge(a, b) for a, b in zip(p0.tolist(), p1.tolist(), strict=True)]
        if self._horizon is not None or self.watch_delays:
            for x, p in zip(batch.rows(), ps, strict=True):
                self._predicted(x, {}, p)
        if self._protection is not None:
            ps = self._protected_many(batch.rows(), ps)
        return ps

    def learn_many(self, X, y, **kwargs) -> None:
        """``learn_one`` of every row of the ``pandas.DataFrame`` X with its label in ``y``
        (a ``Series``, by position): the calibration set takes every row in order; the
        model learns as river's ``learn_many`` does where it has one, else row by row
        (``streamcal.learner.minibatch``). Labels that are not all binary turn the
        classifier multiclass, as in ``learn_one``. Every label and every feature is
        checked before anything is learned: an error names the row, and leaves the
        classifier as it was."""
        no_keywords(kwargs)
        batch = Batch(X)
        labels = batch.labels(y)
        if self._multi is None:
            labels = self._binary_labels(batch, labels)
        if self._multi is not None:
            return self._multi._learn_batch(batch, labels)
        rows = batch.rows()
        st = self._state
        if self._horizon is not None:  # every row waits for its prediction to mature
            for x, y in zip(rows, labels, strict=True):
                self.learn_one(x, y)
            return
        if self._protection is None:
            st.learn_many(rows, labels, batch=batch)
            if st.guard.unlearned:
                self._take_reports(st.guard)
            return
        # With protection every row is learn_one's (its base p, its protector's label);
        # in the default mode the model still learns the batch as one (begin_batch).
        if hasattr(st, "begin_batch"):
            st.begin_batch(len(rows))
        for x, y in zip(rows, labels, strict=True):
            self.learn_one(x, y)

    def _binary_labels(self, batch, labels: list) -> list:
        """``labels`` as 0/1; labels that are not all binary turn the classifier
        multiclass (returned as taken), or raise naming the row."""
        try:
            return [check_label(v) for v in labels]
        except ValueError:
            labels = take_labels(labels, batch.frame.index)  # raises naming the row
            if all(is_binary(v) for v in labels):
                return [int(v) for v in labels]
            self._take_multiclass(labels)  # turns multiclass, or raises
            return labels
