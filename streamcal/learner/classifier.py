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
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from numbers import Integral
from types import MappingProxyType

from river import base, compose

from streamcal.core import SCALAR_MERGES
from streamcal.core.protector import check_probability
from streamcal.core.validate import check_features, check_label
from streamcal.learner.alarm import snapshot_period
from streamcal.learner.horizon import Horizon
from streamcal.learner.interval import VennAbersInterval
from streamcal.learner.labels import is_binary, take_label, take_labels
from streamcal.learner.minibatch import Batch
from streamcal.learner.minibatch import no_keywords as _no_keywords
from streamcal.learner.modes import DEFAULT_MODE, MODES
from streamcal.learner.mondrian import MondrianVennAbers
from streamcal.learner.pretrained import PretrainedVennAbers
from streamcal.learner.protection import Protection
from streamcal.learner.settings import (
    DEFAULT_MAX_CATEGORIES,
    DEFAULT_MERGE,
    DEFAULT_WINDOW,
    HORIZON_SETTINGS,
    ClassifierSettings,
)
from streamcal.learner.settings import FIELDS as SETTINGS
from streamcal.learner.sva import SimplifiedVennAbers
from streamcal.learner.turn_multiclass import carry_over
from streamcal.learner.va import VennAbers
from streamcal.learner.wrapper import VennAbersWrapper

__all__ = ["VennAbersClassifier", "MODES"]


class VennAbersClassifier(VennAbersWrapper):
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

    # Classifiers pickled before protection existed (checkpoints) lack these: unprotected.
    protect: bool | dict = False
    _protection: Protection | None = None
    # The multiclass classifier answering once the stream showed it is multiclass (see
    # the module docstring); None: binary, as every classifier pickled before it existed.
    _multi = None

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
        settings = ClassifierSettings(
            mode=mode,
            merge=merge,
            window=window,
            refresh_every=refresh_every,
            by=by,
            min_category=min_category,
            fallback=fallback,
            max_categories=max_categories,
            protect=protect,
            label_horizon=label_horizon,
            label_default=label_default,
        )
        if label_default is not None and not is_binary(take_label(label_default)):
            raise ValueError(
                f"label_default must be a binary label (0/1, False/True), got "
                f"{label_default!r}: for other classes use VennAbersMultiClassifier"
            )
        protect_params = settings.protect_params
        if protect_params is not None and label_horizon is not None:
            protect_params["lookup"] = False  # the horizon keeps each prediction's p
        # river's clone and check_estimator read the settings back as attributes
        self.model = model
        self.mode = mode
        self.merge = merge
        self.window = window
        self.refresh_every = refresh_every
        self.by = by
        self.min_category = min_category
        self.fallback = fallback
        self.max_categories = max_categories
        self.protect = protect
        self.label_horizon = label_horizon
        self.label_default = label_default
        self._horizon = None if label_horizon is None else Horizon(label_horizon, label_default)
        self._multi = None
        self._state = _new_mode_state(model, settings)
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
        # and settings the multiclass side has (see _switch)
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
        st = self._state if self._multi is None else self._multi._state
        return list(st.categories) if self.by is not None else []

    @property
    def calibration_size(self) -> int:
        """Number of labelled objects in the calibration set right now (all categories')."""
        if self._multi is not None:
            return self._multi.calibration_size
        return self._state.calibration_size

    @property
    def evictions(self) -> int:
        """Categories dropped so far to stay within ``max_categories`` (0 without ``by``)."""
        st = self._state if self._multi is None else self._multi._state
        return getattr(st, "evictions", 0)

    # ------------------------------------------------------------------ front door
    def _learned_nothing(self) -> bool:
        st = self._state
        return getattr(st, "n_seen", getattr(st, "version", 0)) == 0

    def _take_multiclass(self, labels) -> None:
        """Turn multiclass for ``labels`` (taken by ``take_label``, not all binary): from
        scratch if nothing has been learned yet, else carrying the binary state over
        (``streamcal.learner.turn_multiclass``), which only integer classes may do; else
        ``ValueError``, changing nothing."""
        other = next(v for v in labels if not is_binary(v))
        learned = not self._learned_nothing()
        if learned:
            odd = next((v for v in labels if not is_binary(v) and not _is_integer(v)), None)
            if odd is not None:
                raise ValueError(
                    f"label {odd!r} is not an integer, but this classifier has learned the "
                    "binary labels 0/1 (False/True): integer classes 0, 1, 2... turn it "
                    "multiclass, other classes after binary labels are refused as a likely "
                    "mistake; for classes of other types whose first labels may be 0 and 1, "
                    "use VennAbersMultiClassifier"
                )
        self._switch(f"label {other!r}", carry=learned)

    def _switch(self, why: str, carry: bool = False) -> None:
        """Answer through a multiclass classifier from now on (``why``: what showed it);
        ``carry``: continuing what the binary side learned."""
        from streamcal.learner.multiclassifier import VennAbersMultiClassifier

        head = f"{why} makes this a multiclass stream, but"
        if self.protect not in (False, None):
            raise ValueError(
                f"{head} protect= is for binary labels (multiclass protection is not built "
                "yet): drop protect=, or give the labels as False/True"
            )
        if self.mode != "pretrained":
            raise ValueError(
                f"{head} mode {self.mode!r} is binary only (multiclass: 'pretrained'); "
                "see VennAbersMultiClassifier"
            )
        if self.fallback is not None:
            raise ValueError(f"{head} fallback={self.fallback!r} is binary only (the multiclass "
                             "side answers cold categories from the pooled set)")
        if not getattr(self.model, "_multiclass", False):
            model = self.model
            if isinstance(model, compose.Pipeline):  # the last step decides
                model = list(model.steps.values())[-1]
            raise ValueError(
                f"{head} the model {type(model).__name__} is binary only: wrap a "
                "multiclass model (GaussianNB, a Hoeffding tree...), or give the labels as "
                "False/True"
            )
        self._multi = VennAbersMultiClassifier(
            self.model,
            mode=self.mode,
            merge=self.merge,
            window=self.window,
            refresh_every=self.refresh_every,
            by=self.by,
            max_categories=self.max_categories,
            label_horizon=self.label_horizon,
            label_default=self.label_default,
        )
        self._multi.warn_unlearned = self._warn_unlearned
        if carry:
            st = self._state
            if st.guard.unlearned:  # reports of the binary side: taken before it goes
                self._take_reports(st.guard)
            self._multi._unlearned = self._unlearned
            carry_over(st, self._multi)
        self._multi._horizon, self._horizon = self._horizon, None  # its waiting labels too

    def _multiclass_model(self, x: dict) -> bool:
        """Whether, before any label, the wrapped model already predicts other classes than
        False/True for ``x``: then the classifier turns multiclass (True)."""
        if self._multi is not None or not self._learned_nothing():
            return False
        proba = self.model.predict_proba_one(dict(x))
        others = [c for c in proba if not _is_binary(c)]
        if not others:
            return False
        self._switch(f"the model's classes {sorted(proba, key=repr)!r}")
        return True

    @property
    def alarm(self) -> bool:
        """With ``protect``: True once the alarm's conformal test martingale (any
        category's, with ``by``) reached 1 / alpha (sticky); False without ``protect``."""
        return self._protection is not None and self._protection.alarm_at is not None

    @property
    def alarm_at(self) -> int | None:
        """With ``protect``: the number of labels learned when the alarm fired (None
        before, and without ``protect``)."""
        return None if self._protection is None else self._protection.alarm_at

    @property
    def log_martingale(self) -> float | None:
        """With ``protect``: ln of the alarm's test martingale against exchangeability
        (with ``by``, the largest over the categories); None without ``protect``."""
        return None if self._protection is None else self._protection.log_martingale

    @property
    def alarm_onset(self) -> int | None:
        """With ``protect``, once the alarm fired: the label count where the change is
        estimated to have begun (None before, and without ``protect``)."""
        return None if self._protection is None else self._protection.alarm.onset

    @property
    def protection_gain(self) -> float | None:
        """With ``protect``: what protection gained, the Venn-Abers p's cumulative log loss
        minus the protected p's (labels in order; summed over the categories). None
        without ``protect``; 0 with ``"recalibrate": False``."""
        return None if self._protection is None else self._protection.protection_gain

    @property
    def protectors(self) -> Mapping:
        """With ``protect``: the protector of each category (``None`` without ``by``),
        created at its first label; empty without ``protect``. A read-only view (no
        copy: looking up one category costs O(1) however many there are)."""
        if self._protection is None:
            return MappingProxyType({})
        return MappingProxyType(self._protection.protectors)

    @property
    def alarms(self) -> Mapping:
        """With ``protect``: the alarm (``streamcal.core.ConformalAlarm``) of each category
        (``None`` without ``by``), created at its first label; empty without ``protect``.
        A live read-only view."""
        if self._protection is None:
            return MappingProxyType({})
        return self._protection.alarm.alarms

    def _protect_category(self, x: dict, kwargs):
        """x's category for the protection, with ``by`` (callers skip the call without)."""
        return kwargs["category"] if "category" in kwargs else self._state.category(x)

    def predict_interval_one(self, x: dict, **kwargs) -> VennAbersInterval:
        """The Venn-Abers pair for ``x``, its merge and the raw model score.

        With ``by``, ``category=c`` gives the object's category instead of deriving it
        from ``x`` (e.g. a field of a record that is not a feature); ``learn_one`` then
        needs the same ``category=c``.

        Once multiclass (``task``), a ``MulticlassPrediction``.
        """
        if self._multi is not None:
            return self._multi.predict_interval_one(x, **kwargs)
        check_features(x)
        if self._horizon is not None:
            self._mature()
        st = self._state
        try:
            score, p0, p1 = st.predict(x, *self._category(kwargs)) if kwargs else st.predict(x)
        except ValueError:
            if self._multiclass_model(x):
                return self._multi.predict_interval_one(x, **kwargs)
            raise
        p = SCALAR_MERGES[self.merge](p0, p1)
        self._predicted(x, kwargs, p)
        prot = self._protection
        if prot is None:
            return VennAbersInterval(p0, p1, p, score)
        category = None if self.by is None else self._protect_category(x, kwargs)
        return VennAbersInterval(p0, p1, p, score, prot.give(category, x, p))

    def predict_proba_one(self, x: dict, **kwargs) -> dict:
        if self._multi is not None:
            return self._multi.predict_proba_one(x, **kwargs)
        check_features(x)
        if self._horizon is not None:
            self._mature()
        try:
            _, p0, p1 = self._state.predict(x, *self._category(kwargs))
        except ValueError:
            if self._multiclass_model(x):
                return self._multi.predict_proba_one(x, **kwargs)
            raise
        p = SCALAR_MERGES[self.merge](p0, p1)
        self._predicted(x, kwargs, p)
        prot = self._protection
        if prot is not None:
            category = None if self.by is None else self._protect_category(x, kwargs)
            p = prot.give(category, x, p)
        return {False: 1.0 - p, True: p}

    def predict_one(self, x: dict, **kwargs):
        """The class of highest probability in ``predict_proba_one`` (the protected one
        with ``protect``): True when p > 0.5 (False on a tie, river's first key)."""
        if self._multi is not None:
            return self._multi.predict_one(x, **kwargs)
        proba = self.predict_proba_one(x, **kwargs)
        if self._multi is not None:  # the model's classes turned it multiclass just now
            return max(proba, key=proba.get) if proba else None
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
            base = kwargs.pop("p", None)  # kwargs is this call's own dict
            category = None if self.by is None else self._protect_category(x, kwargs)
            copy = prot.observe(category, self._state, x, y, before=True)
        if prot is not None and prot.recalibrate:
            if base is not None and (type(base) is not float or not 0.0 <= base <= 1.0):
                base = check_probability(base)  # only if not plainly valid, as the protector
            if prot.lookup:
                remembered = prot.recall(category, x)  # forgotten, whether p= is given or not
                if base is None:
                    base = remembered
            if base is None:  # not given nor remembered: the p x gets now, before its label
                _, p0, p1 = self._state.predict(x, *self._category(kwargs))
                base = SCALAR_MERGES[self.merge](p0, p1)
        st = self._state
        if kwargs:
            st.learn(x, y, *self._category(kwargs))
        else:
            st.learn(x, y)
        if st.guard.unlearned and self._take_reports(st.guard):
            return  # this label was refused as a whole: the protector does not learn it
        if prot is not None:  # after the model's learn: a model error leaves all unchanged
            prot.learn(category, base, y)
            prot.observe(category, self._category_state(category), x, y, before=False,
                         copy=copy)  # fmt: skip

    def _category_state(self, category):
        """The mode state that scores ``category`` (the whole state without ``by``; None
        for a category not labelled yet)."""
        st = self._state
        return st if self.by is None else st.categories.get(category)

    # ------------------------------------------------------------------ mini-batches
    def predict_proba_many(self, X, **kwargs):
        """``predict_proba_one`` of every row of the ``pandas.DataFrame`` X, as a
        ``DataFrame`` indexed as X with columns ``False`` and ``True`` (the classes, once
        multiclass). The same numbers as row by row, computed with one batched scoring
        where the model has one and one store pass (``streamcal.learner.minibatch``)."""
        _no_keywords(kwargs)
        batch = Batch(X)
        if self._multi is None and len(batch) and self._learned_nothing():
            self._multiclass_model(batch.rows()[0])
        if self._multi is not None:
            return self._multi.predict_proba_many(X)
        return batch.proba_frame([False, True], _columns(self._probabilities(batch)))

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
        prot = self._protection
        if prot is not None:
            rows = batch.rows()
            if self.by is None:
                ps = [prot.give(None, x, p) for x, p in zip(rows, ps, strict=True)]
            else:
                category = self._state.category
                ps = [prot.give(category(x), x, p) for x, p in zip(rows, ps, strict=True)]
        return ps

    def predict_many(self, X, **kwargs):
        """``predict_one`` of every row of X, as a ``pandas.Series`` indexed as X."""
        _no_keywords(kwargs)
        batch = Batch(X)
        if self._multi is None and len(batch) and self._learned_nothing():
            self._multiclass_model(batch.rows()[0])
        if self._multi is not None:
            return self._multi.predict_many(X)
        return batch.series([p > 0.5 for p in self._probabilities(batch)])

    def learn_many(self, X, y, **kwargs) -> None:
        """``learn_one`` of every row of the ``pandas.DataFrame`` X with its label in ``y``
        (a ``Series``, by position): the calibration set takes every row in order; the
        model learns as river's ``learn_many`` does where it has one, else row by row
        (``streamcal.learner.minibatch``). Labels that are not all binary turn the
        classifier multiclass, as in ``learn_one``. Every label and every feature is
        checked before anything is learned: an error names the row, and leaves the
        classifier as it was."""
        _no_keywords(kwargs)
        batch = Batch(X)
        labels = batch.labels(y)
        if self._multi is None:
            try:
                labels = [check_label(v) for v in labels]
            except ValueError:
                labels = take_labels(labels, batch.frame.index)  # raises naming the row
                if all(is_binary(v) for v in labels):
                    labels = [int(v) for v in labels]
                else:
                    self._take_multiclass(labels)  # turns multiclass, or raises
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

    def to_state(self) -> dict:
        """The classifier as plain data: settings, the river model's own pickle, and the
        mode's state (numbers, arrays, feature dicts). ``from_state`` rebuilds it.

        >>> from river import linear_model
        >>> clf = VennAbersClassifier(linear_model.LogisticRegression(), window=3)
        >>> for i in range(5):
        ...     clf.learn_one({"a": float(i)}, i % 2)
        >>> copy = VennAbersClassifier.from_state(clf.to_state())
        >>> copy.predict_interval_one({"a": 2.5}) == clf.predict_interval_one({"a": 2.5})
        True

        Once multiclass, the ``VennAbersMultiClassifier`` state under ``"task":
        "multiclass"`` (a binary state has no ``task``: it is what it always was).
        """
        if self._multi is not None:
            return {"task": "multiclass", **self._multi.to_state()}
        self._settle()
        return {
            **self._settings_state(),
            "min_category": self.min_category,
            "fallback": self.fallback,
            "max_categories": self.max_categories,
            "protect": self.protect,
            "protection": None if self._protection is None else self._protection.to_state(),
            **self._horizon_state(),
            "model": self._model_state(),
            "mode_state": self._state.to_state(),
        }

    @classmethod
    def from_state(cls, state: dict, *, by=None) -> VennAbersClassifier:
        """The classifier ``to_state`` described (unpickles the model: trusted input only).

        A callable ``by`` is not plain data: pass it again as ``by=``.

        >>> from river import linear_model
        >>> clf = VennAbersClassifier(linear_model.LogisticRegression(), window=3, by="g")
        >>> for i in range(9):
        ...     clf.learn_one({"a": float(i), "g": i % 2}, i % 3 == 0)
        >>> copy = VennAbersClassifier.from_state(clf.to_state())
        >>> x = {"a": 2.5, "g": 1}
        >>> copy.predict_interval_one(x) == clf.predict_interval_one(x)
        True
        """
        if state.get("task") == "multiclass":
            from streamcal.learner.multiclassifier import VennAbersMultiClassifier

            multi = VennAbersMultiClassifier.from_state(state, by=by)
            clf = cls(
                multi.model,
                **cls._settings_from_state(state, by),
                max_categories=state["max_categories"],
                **cls._horizon_settings(state),
            )
            clf._horizon = None  # the multiclass side's answers (and waits)
            clf._multi = multi
            return clf
        settings = cls._settings_from_state(state, by)
        model = cls._model_from_state(state)
        clf = cls(
            model,
            **settings,
            min_category=state["min_category"],
            fallback=state["fallback"],
            max_categories=state["max_categories"],
            protect=state.get("protect", False),  # states saved before protection: off
            **cls._horizon_settings(state),
        )
        clf._state = _new_mode_state(model, clf.settings, state["mode_state"])
        if state.get("protection") is not None:
            bound = clf.max_categories if clf.by is not None else None
            clf._protection = Protection.from_state(
                state["protection"], max_categories=bound, lookup=clf._protection.lookup,
                mode=clf.mode, period=snapshot_period(clf.window),
            )
        clf._restore_horizon(state)
        return clf


def _is_binary(label) -> bool:
    """Whether ``label`` is a binary label (``check_label`` takes it)."""
    try:
        check_label(label)
    except ValueError:
        return False
    return True


def _is_integer(label) -> bool:
    """Whether a taken label is an integer class (not a bool)."""
    return isinstance(label, Integral) and not isinstance(label, bool)


def _columns(ps: list[float]) -> list[list[float]]:
    """The False and True columns of probabilities ``ps`` of True (as ``predict_proba_one``)."""
    return [[1.0 - p for p in ps], ps]


_MODE_CLASSES = {"pretrained": PretrainedVennAbers, "sva": SimplifiedVennAbers, "va": VennAbers}


def _new_mode_state(model, settings: ClassifierSettings, state: dict | None = None):
    """The mode object of ``settings`` scoring with ``model``: empty, or the one ``state``
    (its ``to_state()``) describes."""
    refresh = settings.refresh_period
    if settings.by is not None:
        mondrian = {
            "mode": settings.mode,
            "window": settings.window,
            "refresh_every": refresh,
            "by": settings.by,
            "min_category": settings.category_minimum,  # the defaults resolved
            "fallback": "pooled" if settings.pooled else None,
            "max_categories": settings.max_categories,
        }
        if state is None:
            return MondrianVennAbers(model, **mondrian)
        return MondrianVennAbers.from_state(state, model=model, **mondrian)
    if state is not None:
        return _MODE_CLASSES[settings.mode].from_state(state, model=model)
    if settings.mode == "pretrained":
        return PretrainedVennAbers(model, settings.window, refresh)
    if settings.mode == "sva":
        return SimplifiedVennAbers(model, settings.window, refresh)
    return VennAbers(model, settings.window)
