"""VennAbersMultiClassifier: calibrated class probabilities for river multiclass models."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from river import base

from streamcal.core import SCALAR_MERGES
from streamcal.core.multiclass import scheme_class
from streamcal.core.validate import check_features
from streamcal.learner.alarm import Alarm
from streamcal.learner.alarm_view import AlarmView
from streamcal.learner.horizon import Horizon
from streamcal.learner.labels import take_label, take_labels, top_class
from streamcal.learner.minibatch import Batch
from streamcal.learner.minibatch import no_keywords as _no_keywords
from streamcal.learner.modes import DEFAULT_MODE
from streamcal.learner.multiclass import Classes, MulticlassMondrian, MulticlassPretrained
from streamcal.learner.settings import (
    DEFAULT_MAX_CATEGORIES,
    DEFAULT_MERGE,
    DEFAULT_WINDOW,
    check_multiclass,
)
from streamcal.learner.wrapper import VennAbersWrapper

__all__ = ["DEFAULT_SCHEME", "MulticlassPrediction", "VennAbersMultiClassifier"]

DEFAULT_SCHEME = "one-vs-rest"  # a guaranteed (p0, p1) per class, at K stores (see below)


@dataclasses.dataclass(frozen=True)
class MulticlassPrediction:
    """A multiclass Venn-Abers prediction for one object: plain data.

    Parameters
    ----------
    label
        The class the top-label pair is about: the model's highest-scoring class (the
        first seen on ties). ``predict_one`` returns the class of highest probability in
        ``proba``, which is this one unless the calibration puts another class above it.
    p0, p1
        The top-label pair: Venn-Abers probabilities that ``label`` is right. Under
        exchangeability one of them is calibrated: over many predictions, the mean of
        p0 <= accuracy <= the mean of p1, within sampling error (3 standard errors).
    p
        Their merge: ``proba[label]``.
    proba
        A probability for every class seen so far, summing to 1 (see the classifier).
    intervals
        The scheme's pairs: one-vs-rest, ``{class: (p0, p1)}`` of "the label is that
        class"; one-vs-one, ``{(a, b): (p0, p1)}`` of "the label is b, given a or b"
        (a before b in order of first appearance); top-label, ``{}``.
    scores
        The wrapped model's probability of each class (0 for one it does not return).
    """

    label: object
    p0: float
    p1: float
    p: float
    proba: dict
    intervals: dict
    scores: dict

    def as_dict(self) -> dict:
        """The prediction as a dict (``dataclasses.asdict``)."""
        return dataclasses.asdict(self)


class VennAbersMultiClassifier(AlarmView, VennAbersWrapper):
    """Venn-Abers calibration of a river multiclass classifier, online and prequential.

    The usual loop: ``predict_proba_one(x)``, then ``learn_one(x, y)`` when the label
    comes. Labels are any hashable values; a class may first appear at any time.

    A sibling of ``VennAbersClassifier`` rather than one class for both: the binary
    classifier's outputs (``{False, True}``, one pair), its state and its speed stay as
    they are, and a multiclass prediction has another shape (``MulticlassPrediction``).

    What ``predict_proba_one`` returns: the predicted class (the model's top class) gets
    the **top-label** probability, the merge of a Venn-Abers pair for "the predicted class
    is right" (Johansson, Lofstrom & Bostrom 2021), so the number most consumers act on
    carries the Venn guarantee. The other classes share the rest in the proportions of
    the scheme's vector (one-vs-rest: normalised per-class merges; one-vs-one: coupled
    pairwise merges; top-label: the model's own probabilities). A normalised one-vs-rest
    or coupled vector alone does not make its largest entry calibrated, hence this
    combination. ``predict_one`` returns the class of highest probability in that vector
    (river's rule), which is the model's top class unless the calibration puts another
    class above it: so ``predict_one`` is as accurate as the calibrated probabilities,
    which in the default mode come from a model that lags the stream (see
    ``VennAbersClassifier``).

    ``VennAbersClassifier`` turns into this class by itself on a multiclass stream (its
    ``task`` says so, also after 0 and 1 came first: ``streamcal.learner.turn_multiclass``);
    use this class directly for another ``scheme`` or the alarm. Labels follow
    ``streamcal.learner.labels`` in both classes: a missing one (None, NaN, ``pd.NA``) is
    refused, 0.0/1.0 are 0/1.

    Parameters
    ----------
    model
        A river multiclass classifier (or a pipeline ending in one). Its scores are its
        ``predict_proba_one(x)``; a class it does not return has score 0.
    scheme
        ``"one-vs-rest"`` (default): K stores, each a Venn-Abers predictor of "the label
        is k", so every class has its own guaranteed (p0, p1); a label costs K + 1 store
        insertions and a prediction K + 1 queries. ``"one-vs-one"``: K(K-1)/2 stores of
        pairs (a label updates K - 1, a prediction reads all), coupled as venn-abers
        does; the pairs are conditional ("given a or b") and less useful to act on, and
        it costs more. ``"top-label"``: the top-label store only, cheapest; no per-class
        pairs. The default gives a guaranteed pair for every class at a cost linear in K.
    mode
        Only ``"pretrained"`` (the valid default of ``VennAbersClassifier``, see there):
        the model learns an object only after it has left the calibration set. ``"sva"``
        and ``"va"`` are refused: "sva" has no guarantee, and "va" would retrain and
        rescore the window once per hypothetical label, K times, for every prediction.
    merge, window
        As in ``VennAbersClassifier`` (the merge applies to every pair).
    refresh_every
        As in ``VennAbersClassifier``, but by default ``2 * window``, not ``window``: the
        calibration set is rescored once per ``refresh_every`` labels, and a multiclass
        model's score (K probabilities) is often its dearest part (GaussianNB: 25 times
        its ``learn_one``), so the default halves that rescoring. Any count-based
        schedule keeps the predictor valid; the calibration set then holds ``window``
        to ``3 * window - 1`` labels.
    by, max_categories
        Mondrian calibration as in ``VennAbersClassifier``: a feature name or a function
        of ``x``; every category has its own stores, the model is shared. The pooled
        fallback is not offered.
    alarm_alpha
        A level in (0, 1) turns the alarm on (``streamcal.learner.alarm``): ``alarm``
        becomes True when a conformal test martingale against exchangeability reaches
        ``1 / alarm_alpha``, which on an exchangeable stream happens with probability at
        most ``alarm_alpha`` (per category with ``by``), whatever the model. Its label
        part ranks each label by how rare it is so far; its score part ranks the model's
        probability of the true class among earlier objects of that class, scored by the
        same frozen model (the calibration set's scores: no extra cost). There is no
        protected probability for multiclass models. Default None: off.
    label_horizon, label_default
        A label-maturity horizon, in predictions, as in ``VennAbersClassifier``
        (``streamcal.learner.horizon``); ``label_default`` is a class.

    Examples
    --------

    >>> from river import datasets, evaluate, metrics, naive_bayes
    >>> from streamcal import VennAbersMultiClassifier

    River's prequential loop (predict each object, then learn it) gives the log loss of
    the bare model and of the calibrated one:

    >>> def log_loss(model):
    ...     return round(evaluate.progressive_val_score(
    ...         datasets.ImageSegments(), model, metrics.CrossEntropy()).get(), 2)
    >>> model = VennAbersMultiClassifier(naive_bayes.GaussianNB(), window=300)
    >>> log_loss(naive_bayes.GaussianNB()), log_loss(model)
    (2.98, 0.65)

    ``predict_interval_one`` gives the top-label pair and the per-class pairs:

    >>> *_, (x, y) = datasets.ImageSegments()
    >>> pred = model.predict_interval_one(x)
    >>> pred.label, pred.p0 <= pred.p <= pred.p1, sorted(pred.intervals) == sorted(pred.proba)
    ('window', True, True)
    """

    def __init__(
        self,
        model: base.Classifier,
        scheme: str = DEFAULT_SCHEME,
        mode: str = DEFAULT_MODE,
        merge: str = DEFAULT_MERGE,
        window: int = DEFAULT_WINDOW,
        refresh_every: int | None = None,
        by=None,
        max_categories: int = DEFAULT_MAX_CATEGORIES,
        alarm_alpha: float | None = None,
        label_horizon: int | None = None,
        label_default=None,
    ):
        self._check_model(model, "river classifier")
        scheme_class(scheme)  # checks the name
        settings = self._keep_settings(
            model, mode=mode, merge=merge, window=window, refresh_every=refresh_every, by=by,
            max_categories=max_categories, label_horizon=label_horizon,
            label_default=label_default,
        )  # fmt: skip
        if label_default is not None:
            take_label(label_default)  # a class, not a missing label
        check_multiclass(mode)
        self.scheme = scheme
        self.alarm_alpha = alarm_alpha
        self._horizon = None if label_horizon is None else Horizon(label_horizon, label_default)
        self._alarm = None
        if alarm_alpha is not None:
            try:
                self._alarm = Alarm({"alpha": alarm_alpha},
                                    max_categories=None if by is None else max_categories)
            except ValueError as exc:
                raise ValueError(f"alarm_alpha: {exc}") from None
        self._classes = Classes()
        self._state = self._new_state(settings.refresh_period_for("multiclass"))

    def _new_state(self, period: int, state: dict | None = None):
        """The mode object, refreshing every ``period`` labels (kept by it: ``refresh_every``)."""
        common = {"scheme": self.scheme, "classes": self._classes}
        if self.by is None:
            if state is not None:
                return MulticlassPretrained.from_state(state, model=self.model, **common)
            return MulticlassPretrained(self.model, self.window, period, **common)
        mondrian = {
            "mode": "pretrained",
            "window": self.window,
            "refresh_every": period,
            "by": self.by,
            "max_categories": self.max_categories,
            **common,
        }
        if state is not None:
            return MulticlassMondrian.from_state(state, model=self.model, **mondrian)
        return MulticlassMondrian(self.model, **mondrian)

    @property
    def _multiclass(self) -> bool:
        return True

    @property
    def classes(self) -> list:
        """The classes seen so far, in order of first appearance: a new ``list`` (as on
        ``VennAbersClassifier``)."""
        return list(self._classes.labels)

    def admits(self, label, max_classes: int) -> bool:
        """Whether learning ``label`` keeps the classes within ``max_classes``: it is known
        already, or there is room for one more (without copying ``classes``).

        >>> from river import naive_bayes
        >>> clf = VennAbersMultiClassifier(naive_bayes.GaussianNB())
        >>> clf.learn_one({"x": 1.0}, "a")
        >>> clf.admits("a", 1), clf.admits("b", 1), clf.admits("b", 2)
        (True, False, True)
        """
        classes = self._classes
        return label in classes or len(classes) < max_classes

    @classmethod
    def _unit_test_params(cls) -> Iterator[dict]:
        from river import naive_bayes

        yield {"model": naive_bayes.GaussianNB(), "window": 50}

    def _vector(self, s, stores) -> tuple[int, float, float, list[float]]:
        """(predicted index, top-label p0, p1, probability of every class)."""
        k_all = len(self._classes)
        k, p0, p1 = stores.top.query(s)
        if k_all <= 1:
            return k, p0, p1, [1.0] * k_all
        merge = SCALAR_MERGES[self.merge]
        p_top = merge(p0, p1)
        if stores.rest is not None:
            shape = stores.rest.proba(s, self.merge)
        else:
            shape = list(s) + [0.0] * (k_all - len(s))
        shape[k] = 0.0  # summed without it: sum - shape[k] would cancel digits away
        rest = sum(shape)
        if rest > 0:
            f = (1.0 - p_top) / rest
            shape = [v * f for v in shape]
        else:  # nothing to share by: spread evenly
            shape = [(1.0 - p_top) / (k_all - 1)] * k_all
        shape[k] = p_top
        return k, p0, p1, shape

    def predict_proba_one(self, x: dict, **kwargs) -> dict:
        check_features(x)
        if self._horizon is not None:
            self._mature()
        s, stores = self._state.predict(x, *self._category(kwargs))
        self._predicted(x, kwargs)
        return dict(zip(self._classes.labels, self._vector(s, stores)[3], strict=True))

    def predict_one(self, x: dict, **kwargs):
        """The class of highest probability in ``predict_proba_one`` (the first seen on
        ties), None before any class is known."""
        return top_class(self.predict_proba_one(x, **kwargs))

    def predict_interval_one(self, x: dict, **kwargs) -> MulticlassPrediction | None:
        """The ``MulticlassPrediction`` for ``x`` (None before any class is known)."""
        check_features(x)
        if self._horizon is not None:
            self._mature()
        s, stores = self._state.predict(x, *self._category(kwargs))
        self._predicted(x, kwargs)
        labels = self._classes.labels
        if not labels:
            return None
        k, p0, p1, proba = self._vector(s, stores)
        intervals = {}
        if stores.scheme == "one-vs-rest":
            intervals = dict(zip(labels, stores.rest.intervals(s), strict=True))
        elif stores.scheme == "one-vs-one":
            pairs = stores.rest.intervals(s)
            intervals = {(labels[i], labels[j]): pair for (i, j), pair in pairs.items()}
        scores = list(s) + [0.0] * (len(labels) - len(s))
        return MulticlassPrediction(
            label=labels[k],
            p0=p0,
            p1=p1,
            p=proba[k],
            proba=dict(zip(labels, proba, strict=True)),
            intervals=intervals,
            scores=dict(zip(labels, scores, strict=True)),
        )

    @property
    def categories(self) -> list:
        """With ``by``: the categories that have calibration stores, least recently
        labelled first (None is the category of objects without the feature ``by``);
        else ``[]``."""
        return list(self._state.categories) if self.by is not None else []

    def learn_one(self, x: dict, y, **kwargs) -> None:
        """Learn class ``y`` of ``x`` (with ``by``, ``category=`` as for the prediction).
        A feature that is not finite is refused (``ValueError``); an object whose learning
        would leave the model's output non-finite is not learned (reported in
        ``unlearned`` and as an ``UnlearnedWarning``, see ``VennAbersClassifier``)."""
        y = take_label(y)
        check_features(x)
        if self._waits(x, y, kwargs):
            return
        label = self._classes.index(y)
        st = self._state
        st.learn(x, label, *self._category(kwargs))
        if st.guard.unlearned:
            self._take_reports(st.guard)  # pretrained: never this label, taken at once
        if self._alarm is not None:
            if self.by is None:
                c, st = None, self._state
            else:
                c = kwargs["category"] if "category" in kwargs else self._state.category(x)
                st = self._state.categories[c]
            self._alarm.learn(c, st, x, label)

    # ------------------------------------------------------------------ mini-batches
    def predict_proba_many(self, X, **kwargs):
        """``predict_proba_one`` of every row of the ``pandas.DataFrame`` X, as a
        ``DataFrame`` indexed as X, one column per class known after the batch (0 for a
        class a row's answer did not have yet). Row by row: a multiclass model's K
        probabilities have no batched form equal to its ``predict_proba_one``."""
        _no_keywords(kwargs)
        batch = Batch(X)
        probas = self._probas(batch)
        labels = list(self._classes.labels)
        return batch.proba_frame(labels, [[p.get(c, 0.0) for p in probas] for c in labels])

    def _probas(self, batch) -> list[dict]:
        if self._horizon is not None:  # a batch is predicted with what matured before it
            self._mature()
        labels = self._classes.labels
        out = []
        for x in batch.rows():
            s, stores = self._state.predict(x)
            self._predicted(x, {})
            out.append(dict(zip(labels, self._vector(s, stores)[3], strict=True)))
        return out

    def predict_many(self, X, **kwargs):
        """``predict_one`` of every row of X, as a ``pandas.Series`` indexed as X."""
        _no_keywords(kwargs)
        batch = Batch(X)
        return batch.series([top_class(p) for p in self._probas(batch)])

    def learn_many(self, X, y, **kwargs) -> None:
        """``learn_one`` of every row of X with its label in ``y`` (by position): the
        calibration sets take every row in order; the model learns as river's
        ``learn_many`` does where it has one, else row by row
        (``streamcal.learner.minibatch``). Every label is checked before anything is
        learned."""
        _no_keywords(kwargs)
        batch = Batch(X)
        self._learn_batch(batch, batch.labels(y))

    def _learn_batch(self, batch, labels: list) -> None:
        labels = take_labels(labels, batch.frame.index)
        if self._horizon is not None:  # every row waits for its prediction to mature
            for x, y in zip(batch.rows(), labels, strict=True):
                self.learn_one(x, y)
            return
        indices = [self._classes.index(y) for y in labels]
        st = self._state
        st.learn_many(batch.rows(), indices, batch=batch)
        if st.guard.unlearned:
            self._take_reports(st.guard)

    def to_state(self) -> dict:
        """The classifier as plain data: settings, the classes in order, the river model's
        own pickle and the mode's state. ``from_state`` rebuilds it.

        >>> from river import naive_bayes
        >>> clf = VennAbersMultiClassifier(naive_bayes.GaussianNB(), window=3)
        >>> for i in range(8):
        ...     clf.learn_one({"a": float(i % 3)}, "xyz"[i % 3])
        >>> copy = VennAbersMultiClassifier.from_state(clf.to_state())
        >>> copy.predict_interval_one({"a": 1.0}) == clf.predict_interval_one({"a": 1.0})
        True
        """
        return {
            "scheme": self.scheme,
            **self._settings_state(),
            "max_categories": self.max_categories,
            "classes": list(self._classes.labels),
            "refresh_period": self._state.refresh_every,
            "alarm_alpha": self.alarm_alpha,
            "alarm": None if self._alarm is None else self._alarm.to_state(),
            **self._horizon_state(),
            "model": self._model_state(),
            "mode_state": self._state.to_state(),
        }

    @classmethod
    def from_state(cls, state: dict, *, by=None) -> VennAbersMultiClassifier:
        """The classifier ``to_state`` described (unpickles the model: trusted input only).
        A callable ``by`` is not plain data: pass it again as ``by=``."""
        settings = cls._settings_from_state(state, by)
        clf = cls(
            cls._model_from_state(state),
            scheme=state["scheme"],
            **settings,
            max_categories=state["max_categories"],
            alarm_alpha=state["alarm_alpha"],
            **cls._horizon_settings(state),
        )
        if state.get("alarm") is not None:
            bound = None if clf.by is None else clf.max_categories
            clf._alarm = Alarm.from_state(state["alarm"], bound)
        clf._classes = Classes(state["classes"])
        clf._state = clf._new_state(state["refresh_period"], state["mode_state"])
        clf._restore_horizon(state)
        return clf

