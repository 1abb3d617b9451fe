"""VennAbersClassifier: wrap a river classifier, get calibrated probabilities online.

One front door for binary and multiclass streams, as river's own classifiers take both.
The classifier starts binary (labels ``False``/``True`` or 0/1: its path, cost and state
are the binary ones) and turns multiclass when the stream shows it is, before it has
learned anything: at a first label that is not binary (a string, 7, ...), at a
mini-batch whose labels are not all binary, or when the wrapped model already predicts
other classes. It then answers through a ``VennAbersMultiClassifier`` with the same
settings (one-vs-rest scheme). Two classes named by strings (``"spam"``/``"ham"``) take
that path too: nothing says which of them is ``True``. Integer classes 0..K-1 whose first
labels are 0 and 1 turn multiclass at the first integer outside {0, 1}, keeping what was
learned (``streamcal.learner.turn_multiclass`` says how, and why that keeps validity).
What labels are taken is ``streamcal.learner.labels``'s rule (a missing label is refused,
0.0/1.0 are 0/1). What cannot be done fails loudly, before anything changes: a label that
is not an integer after binary ones, settings the multiclass side does not have
(``protect=``, modes "sva" and "va", the pooled fallback), and a model that is binary only.

This module holds the class, its settings and the one-object entry points; the rest of it
lives by concern, as mixins: the switch to multiclass (``streamcal.learner.
turn_multiclass``), the protection (``streamcal.learner.protection``), the mini-batches
(``streamcal.learner.binary_batches``) and the state round trip
(``streamcal.learner.binary_state``); what it shares with ``VennAbersMultiClassifier``
is ``streamcal.learner.wrapper``'s.
"""

from __future__ import annotations

from collections.abc import Iterator

from river import base

from streamcal.core import SCALAR_MERGES
from streamcal.core.validate import check_features, check_label
from streamcal.learner.alarm import snapshot_period
from streamcal.learner.binary_batches import BinaryBatches
from streamcal.learner.binary_state import BinaryState, new_mode_state
from streamcal.learner.horizon import Horizon
from streamcal.learner.interval import VennAbersInterval
from streamcal.learner.labels import is_binary, take_label, top_class
from streamcal.learner.modes import DEFAULT_MODE, MODES
from streamcal.learner.protection import Protected, Protection
from streamcal.learner.settings import (
    DEFAULT_MAX_CATEGORIES,
    DEFAULT_MERGE,
    DEFAULT_WINDOW,
    HORIZON_SETTINGS,
    ClassifierSettings,
)
from streamcal.learner.settings import FIELDS as SETTINGS
from streamcal.learner.turn_multiclass import TurnsMulticlass
from streamcal.learner.wrapper import VennAbersWrapper

__all__ = ["VennAbersClassifier", "MODES"]


class VennAbersClassifier(TurnsMulticlass, Protected, BinaryBatches, BinaryState, VennAbersWrapper):
    """Venn-Abers calibration of a river binary classifier, online and prequential.

    Each prediction is a pair (p0, p1), one of which is a perfectly calibrated probability
    of ``True`` when the stream is exchangeable (Vovk & Petej 2014); ``predict_proba_one``
    returns their merge. Use it in the usual loop: ``predict_proba_one(x)``, then
    ``learn_one(x, y)`` when the label comes (labels: ``bool`` or 0/1).

    Parameters
    ----------
    model
        A river binary classifier, or a pipeline ending in one. Its score is its
        ``predict_proba_one(x)[True]`` (0.5 while it returns ``{}``).
    mode
        How the model and the calibration set share the labelled stream:

        * ``"pretrained"`` (default) -- the paper's pre-trained Venn-Abers predictor,
          sliding: the newest labelled objects (``window`` to ``window + refresh_every -
          1`` of them) form the calibration set, and the model learns an object only once
          it is older than that, in batches every ``refresh_every`` labels, after which
          the set is rescored. Calibration and test objects are never learned by the
          scoring model, so this is a Venn predictor: **valid**. Cost per event close to
          the bare model's: one score (shared by ``predict_proba_one`` and the next
          ``learn_one`` of the same object), one store query and one insertion;
          amortised one ``learn_one`` and ``window / refresh_every`` rescorings. The
          price: the model lags ``window`` to ``window + refresh_every`` labels behind.
          See ``streamcal.learner.pretrained``.
        * ``"sva"`` -- Algorithm 2 online: the model learns each object at once and its
          in-sample score is stored once; every ``refresh_every`` labels (if set) the
          window is rescored. **No guarantee**: in-sample scores, and stale scores from
          an online model that changes its scale, can be badly biased (with
          ``window=None`` the benchmark shows it on an imbalanced stream). Cost per event:
          one ``learn_one``, one extra score (the object after learning it), one store
          insertion and removal; no cheaper than ``"pretrained"`` in practice.
        * ``"va"`` -- Algorithm 1 over the last ``window`` labelled objects: for each
          hypothetical label a copy of the model learns the test object and rescores it and
          the window. A Venn predictor (exactly so when the model's learning does not
          depend on order, see ``streamcal.learner.va``): **valid**, but O(window) model
          scores per prediction.

        The default is ``"pretrained"`` because it is the only mode that is both valid
        and about as cheap per event as SVA, which is not valid for online models.
    merge
        How (p0, p1) becomes one probability: ``"log"`` (minimax for log loss, default),
        ``"square"`` (minimax for square loss) or ``"mean"``.
    window
        Size of the calibration set: the number of most recent labelled pairs kept, which
        is also how fast calibration forgets on a drifting stream. ``None`` means no limit
        (``"sva"`` only).
    refresh_every
        ``"pretrained"``: every this many labels the model learns the calibration objects
        beyond the newest ``window`` and the set is rescored (``None``: every ``window``
        labels).
        ``"sva"``: rescore the window every this many labels (``None``: never).
        Must be ``None`` for ``"va"``, which rescores at every prediction.
    by
        Mondrian calibration (``streamcal.learner.mondrian``): a feature name, or a
        function of ``x`` returning a hashable category. Every category then has its own
        calibration set, with the window and refresh rules above applied to its own
        labels, so the guarantee holds inside each category; the model is shared. Under
        ``"pretrained"`` the model learns in batches of ``refresh_every`` labels per
        category (or, as categories are evicted, of ``calibration_size`` objects), so it
        lags further behind. A function must be picklable (not a lambda) for the
        classifier to be.
    min_category, fallback
        ``"pretrained"`` with ``by``, by default: a category without pairs (never
        labelled, or evicted) or with fewer than ``min_category`` calibration pairs
        (default 100, or ``window`` if smaller) is answered from the pooled calibration
        set (every pair the model has not learned: all categories' and those waiting for
        it), so cold categories are calibrated as without ``by``.
        **Such an answer has only the pooled guarantee (calibrated on average over the
        objects so answered); the per-category guarantee holds for the answers of a
        category from its own set, once it has ``min_category`` pairs.**
        ``fallback="off"`` answers every category from its own set only (without pairs:
        the (0, 1) pair), as modes "sva" and "va" do.
    max_categories
        At most this many categories keep calibration sets; the least recently labelled
        one is dropped when a new one comes (``evictions`` counts them). Memory stays
        bounded however many values the key has; a key that churns (most evicted
        categories had fewer than ``min_category`` pairs) brings one
        ``CategoryChurnWarning`` naming it.
    protect
        Protected calibration (``streamcal.core.Protector``; Vovk, Petej & Gammerman
        2021): ``True`` (or a dict of ``Protector`` parameters, e.g. ``{"alpha": 0.001}``)
        makes ``predict_proba_one`` return the *protected* probability, a recalibration
        of the Venn-Abers p learned online whose cumulative log loss is at most ln 2
        above p's and which recovers from a shift in tens of labels
        (``protection_gain``: the log loss it saved), and sets ``alarm`` when a
        conformal test martingale against exchangeability crosses ``1 / alpha``: on an
        exchangeable stream that happens with probability at most alpha (per category),
        whatever the model (``streamcal.learner.alarm``; ``alarm_onset`` estimates
        where the change began). ``{"recalibrate": False}`` keeps the alarm alone: p
        stays the Venn-Abers p. ``predict_interval_one`` gives both p and ``p_protected``.
        With ``by``, each category has its own protector. A label learns with the base p
        given for its object: pass it as ``learn_one(x, y, p=...)`` if you kept it,
        otherwise it is looked up (see ``streamcal.learner.protection``); a caller that
        always passes it adds ``"lookup": False`` to the dict, so that predictions
        remember nothing (faster, smaller state). Default ``False``: p keeps its
        guarantee under exchangeability and outputs do not change.
    label_horizon, label_default
        A label-maturity horizon (``streamcal.learner.horizon``), for labels whose delay
        depends on the outcome (learned in arrival order, they bias the calibration):
        ``learn_one(x, y)`` gives y to the waiting prediction of x, and prediction i is
        learned, in prediction order, when prediction i + H is asked for; with
        ``label_default`` if it has no label by then (implicit negatives), else dropped.
        A label later than that is counted in ``late_labels``, not learned. Choose H as a
        high quantile of the label delay, in predictions. Memory: O(H) feature dicts.
        Default None: labels are learned as they come.

    Examples
    --------

    >>> from river import datasets, linear_model, metrics, preprocessing
    >>> from streamcal import VennAbersClassifier

    >>> bare = preprocessing.StandardScaler() | linear_model.LogisticRegression()
    >>> model = VennAbersClassifier(bare.clone(), window=200)
    >>> bare_loss, calibrated_loss = metrics.LogLoss(), metrics.LogLoss()
    >>> for x, y in datasets.Phishing():
    ...     bare_loss.update(y, bare.predict_proba_one(x))
    ...     calibrated_loss.update(y, model.predict_proba_one(x))
    ...     bare.learn_one(x, y)
    ...     model.learn_one(x, y)
    >>> round(bare_loss.get(), 3), round(calibrated_loss.get(), 3)
    (0.33, 0.309)

    The wrapped model learns each object only after it has served in the calibration
    set, so it lags the bare one by ``window`` to ``window + refresh_every`` labels; the
    calibration more than makes up for it here.

    ``predict_interval_one`` also gives the pair itself:

    >>> iv = model.predict_interval_one(x)
    >>> iv.p0 <= iv.p <= iv.p1
    True

    Mondrian: with ``by``, each value of the feature ``https`` has its own calibration set
    (``x`` reaches the model unchanged; drop the category first with ``compose.Discard``
    if the model cannot take it):

    >>> mondrian = VennAbersClassifier(bare.clone(), window=200, by="https")
    >>> for x, y in datasets.Phishing():
    ...     mondrian.learn_one(x, y)
    >>> mondrian.calibration_size, mondrian.evictions  # three categories, none evicted
    (655, 0)

    Protection: ``predict_proba_one`` then returns the protected p, and the alarm says
    whether the stream has stayed exchangeable, the assumption of p's guarantee (here it
    has: the test martingale is below 1):

    >>> guarded = VennAbersClassifier(bare.clone(), window=200, protect=True)
    >>> for x, y in datasets.Phishing():
    ...     iv = guarded.predict_interval_one(x)
    ...     guarded.learn_one(x, y)
    >>> round(iv.p, 3), round(iv.p_protected, 3), guarded.alarm, round(guarded.log_martingale, 2)
    (0.03, 0.03, False, -0.84)
    >>> round(guarded.protection_gain, 2)  # the log loss protection saved, in nats
    -0.35

    A horizon: only positives are labelled, 5 predictions later; every prediction
    older than 20 is learned, as False if no label came:

    >>> matured = VennAbersClassifier(bare.clone(), window=200, label_horizon=20,
    ...                               label_default=False)
    >>> seen = []
    >>> for x, y in datasets.Phishing():
    ...     p = matured.predict_proba_one(x)[True]
    ...     seen.append((x, y))
    ...     if len(seen) > 5 and seen[-6][1]:  # the label of the object 5 back, if True
    ...         matured.learn_one(*seen[-6])
    >>> matured.waiting, matured.late_labels
    (20, 0)

    """

    def __init__(
        self,
        model: base.Classifier,
        mode: str = DEFAULT_MODE,
        merge: str = DEFAULT_MERGE,
        window: int | None = DEFAULT_WINDOW,
        refresh_every: int | None = None,
        by=None,
        min_category: int | None = None,
        fallback: str | None = None,
        max_categories: int = DEFAULT_MAX_CATEGORIES,
        protect: bool | dict = False,
        label_horizon: int | None = None,
        label_default=None,
    ):
        self._check_model(model, "river binary classifier (or a pipeline ending in one)")
        if not hasattr(model, "predict_proba_one"):
            raise TypeError(f"model must have predict_proba_one, got {model!r}")
        settings = self._keep_settings(
            model, mode=mode, merge=merge, window=window, refresh_every=refresh_every, by=by,
            min_category=min_category, fallback=fallback, max_categories=max_categories,
            protect=protect, label_horizon=label_horizon, label_default=label_default,
        )  # fmt: skip
        if label_default is not None and not is_binary(take_label(label_default)):
            raise ValueError(
                f"label_default must be a binary label (0/1, False/True), got "
                f"{label_default!r}: for other classes use VennAbersMultiClassifier"
            )
        protect_params = settings.protect_params
        if protect_params is not None and label_horizon is not None:
            protect_params["lookup"] = False  # the horizon keeps each prediction's p
        self._horizon = None if label_horizon is None else Horizon(label_horizon, label_default)
        self._multi = None
        self._state = new_mode_state(model, settings)
        self._protection = (
            None
            if protect_params is None
            else Protection(protect_params, max_categories if by is not None else None,
                            mode, snapshot_period(window))  # fmt: skip
        )

    @property
    def settings(self) -> ClassifierSettings:
        """The classifier's settings (all but the model) as one checked object."""
        names = (*SETTINGS, *HORIZON_SETTINGS)
        return ClassifierSettings(**{name: getattr(self, name) for name in names})

    @property
    def _multiclass(self) -> bool:
        # river's meaning: it takes multiclass streams, which it does with a model that does
        # and settings the multiclass side has (see _check_multiclass)
        return (
            bool(getattr(self.model, "_multiclass", False))
            and self.mode == "pretrained"
            and self.protect in (False, None)
            and self.fallback is None
        )

    @classmethod
    def _unit_test_params(cls) -> Iterator[dict]:
        from river import linear_model, preprocessing

        yield {"model": preprocessing.StandardScaler() | linear_model.LogisticRegression()}

    @property
    def task(self) -> str:
        """``"binary"``, or ``"multiclass"`` once the stream showed it is (see the module
        docstring)."""
        return "binary" if self._multi is None else "multiclass"

    @property
    def classes(self) -> list:
        """The classes seen so far, in order of first appearance (multiclass); ``[False,
        True]`` while binary. A new ``list``, as ``VennAbersMultiClassifier.classes``."""
        return [False, True] if self._multi is None else self._multi.classes

    @property
    def unlearned(self):
        """See ``VennAbersWrapper.unlearned`` (once multiclass, the multiclass side's)."""
        return super().unlearned if self._multi is None else self._multi.unlearned

    _warn_unlearned = True

    @property
    def warn_unlearned(self) -> bool:
        """See ``VennAbersWrapper.warn_unlearned`` (once multiclass, the multiclass side's)."""
        return self._warn_unlearned if self._multi is None else self._multi.warn_unlearned

    @warn_unlearned.setter
    def warn_unlearned(self, on: bool) -> None:
        self._warn_unlearned = on
        if self._multi is not None:
            self._multi.warn_unlearned = on

    @property
    def categories(self) -> list:
        """With ``by``: the categories that have a calibration set, least recently labelled
        first (None is the category of objects without the feature ``by``); else ``[]``."""
        st = self._answering()._state
        return list(st.categories) if self.by is not None else []

    @property
    def evictions(self) -> int:
        """Categories dropped so far to stay within ``max_categories`` (0 without ``by``)."""
        st = self._answering()._state
        return getattr(st, "evictions", 0)

    def predict_interval_one(self, x: dict, **kwargs) -> VennAbersInterval:
        """The Venn-Abers pair for ``x``, its merge and the raw model score.

        With ``by``, ``category=c`` gives the object's category instead of deriving it
        from ``x`` (e.g. a field of a record that is not a feature); ``learn_one`` then
        needs the same ``category=c``.

        Once multiclass (``task``), a ``MulticlassPrediction``.
        """
        if self._multi is None:
            numbers = self._numbers(x, kwargs)
            if numbers is not None:
                return VennAbersInterval(*numbers)
        return self._multi.predict_interval_one(x, **kwargs)

    def predict_numbers_one(self, x: dict, **kwargs) -> tuple | None:
        """``predict_interval_one``'s numbers as one tuple, without the interval object:
        ``(p0, p1, p, score, p_protected, calibration_size)`` (p_protected None without
        ``protect``; the calibration size after the prediction), for a caller that predicts
        every event (the stream processor). None once multiclass (or if the model's
        classes turned it so just now): ask ``predict_interval_one`` then.

        >>> from river import linear_model
        >>> clf = VennAbersClassifier(linear_model.LogisticRegression(), mode="sva")
        >>> clf.learn_one({"a": 1.0}, 1)
        >>> *pair, size = clf.predict_numbers_one({"a": 2.0})
        >>> tuple(pair) == tuple(vars(clf.predict_interval_one({"a": 2.0})).values()), size
        (True, 1)
        """
        if self._multi is not None:
            return None
        numbers = self._numbers(x, kwargs)
        return None if numbers is None else (*numbers, self._state.calibration_size)

    def _numbers(self, x: dict, kwargs) -> tuple | None:
        """(p0, p1, p, score, p_protected) of a binary prediction; None if the model's
        classes turned the classifier multiclass just now."""
        pair = self._pair(x, kwargs)
        if pair is None:
            return None
        score, p0, p1, p = pair
        return p0, p1, p, score, None if self._protection is None else self._protected(x, kwargs, p)

    def predict_proba_one(self, x: dict, **kwargs) -> dict:
        if self._multi is None:
            pair = self._pair(x, kwargs)
            if pair is not None:
                p = pair[3]
                if self._protection is not None:
                    p = self._protected(x, kwargs, p)
                return {False: 1.0 - p, True: p}
        return self._multi.predict_proba_one(x, **kwargs)

    def _pair(self, x: dict, kwargs) -> tuple | None:
        """(score, p0, p1, their merge p) for ``x``, the base p of a binary prediction; None
        if the model's classes turned the classifier multiclass just now."""
        check_features(x)
        if self._horizon is not None:
            self._mature()
        st = self._state
        try:
            score, p0, p1 = st.predict(x, *self._category(kwargs)) if kwargs else st.predict(x)
        except ValueError:
            if self._multiclass_model(x):
                return None
            raise
        p = SCALAR_MERGES[self.merge](p0, p1)
        self._predicted(x, kwargs, p)
        return score, p0, p1, p

    def predict_one(self, x: dict, **kwargs):
        """The class of highest probability in ``predict_proba_one`` (the protected one
        with ``protect``): True when p > 0.5 (False on a tie, river's first key)."""
        if self._multi is not None:
            return self._multi.predict_one(x, **kwargs)
        proba = self.predict_proba_one(x, **kwargs)
        if self._multi is not None:  # the model's classes turned it multiclass just now
            return top_class(proba)
        return proba[True] > 0.5

    def learn_one(self, x: dict, y, **kwargs) -> None:
        """Learn label ``y`` of ``x``. With ``by``, ``category=`` as for the prediction.
        With ``protect``, ``p=`` may give the base p that was predicted for ``x`` (the
        stream processor keeps it); without ``protect`` it is not used.

        A label that is not binary turns the classifier multiclass (see the module
        docstring); a missing label (None, NaN, ``pd.NA``) is refused (``ValueError``), and
        so is a feature that is not finite (NaN, an infinity) or missing.

        Learning cannot leave the model broken (``streamcal.learner.guard``): an object
        whose learning leaves the model's output non-finite (a feature of 1e300, say) is
        undone and not learned; it is reported in ``unlearned`` and as an
        ``UnlearnedWarning``. In the default mode the model learns an object later, at a
        refresh, so the report may come at another label's ``learn_one``."""
        if self._multi is not None:
            kwargs.pop("p", None)
            return self._multi.learn_one(x, y, **kwargs)
        label = y  # as given: a waiting label may yet turn the classifier multiclass
        try:
            y = check_label(y)
        except ValueError:
            y = take_label(y)  # raises for a label that is no class
            if not is_binary(y):
                check_features(x)  # before the switch: a refusal changes nothing
                self._take_multiclass([y])  # turns multiclass, or raises
                kwargs.pop("p", None)
                return self._multi.learn_one(x, y, **kwargs)
            y = int(y)
        check_features(x)
        if self._waits(x, label, kwargs):
            return
        prot = self._protection
        if prot is not None:
            before = self._before_learning(x, y, kwargs)  # takes p= out of kwargs
        st = self._state
        if kwargs:
            st.learn(x, y, *self._category(kwargs))
        else:
            st.learn(x, y)
        if st.guard.unlearned and self._take_reports(st.guard):
            return  # this label was refused as a whole: the protector does not learn it
        if prot is not None:  # after the model's learn: a model error leaves all unchanged
            self._after_learning(x, y, before)
