"""The settings of a Venn-Abers classifier: their defaults and their rules, in one place.

``VennAbersClassifier`` takes them as keyword arguments (river's ``clone`` and
``check_estimator`` need each one as an attribute), the processor takes them as flags
(``streamcal run --window ...``) and a checkpoint is bound to them. All three read the
defaults and check the values here, so a setting cannot mean two things or be refused
with two messages.

``protect`` (protected calibration) is one setting whose value carries its parameters:
False, True (the ``Protector`` defaults) or a dict of ``Protector`` parameters, plus
``"lookup"`` for the classifier's own book-keeping (see ``check_protect``).

Kept free of river (like ``streamcal.learner.modes``) so that the command line can check
its flags cheaply.

>>> s = ClassifierSettings(window=200, by="shop")
>>> s.mode, s.window, s.by, s.max_categories
('pretrained', 200, 'shop', 1000)
>>> ClassifierSettings(mode="va", refresh_every=10)
Traceback (most recent call last):
...
ValueError: refresh_every is not used by mode 'va', which rescores every time

``given`` is for sources where None means "not given" (flags, environment, TOML): the
defaults stand for the settings not given.

>>> ClassifierSettings.given(mode=None, window=50).window
50
>>> ClassifierSettings(protect={"alpha": 0.05}).protect_params
{'alpha': 0.05}
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from numbers import Integral

from streamcal.core.merge import MERGES
from streamcal.core.protector import Protector
from streamcal.learner.modes import DEFAULT_MODE, check_mode

__all__ = [
    "ClassifierSettings",
    "DEFAULT_ALARM_ALPHA",
    "DEFAULT_MAX_CATEGORIES",
    "DEFAULT_MERGE",
    "DEFAULT_MIN_CATEGORY",
    "DEFAULT_WINDOW",
    "REFRESH_WINDOWS",
    "FIELDS",
    "HORIZON_SETTINGS",
    "MONDRIAN_SETTINGS",
    "check_count",
    "check_fallback",
    "check_horizon",
    "check_merge",
    "check_min_category",
    "check_mondrian",
    "check_multiclass",
    "check_protect",
]

DEFAULT_WINDOW = 1000  # calibration pairs: enough for the isotonic fit, fast to forget
# The pretrained mode's refresh period by default, in windows, by task. A multiclass
# model's score (K probabilities) is often its dearest part (GaussianNB: 25 times its
# learn_one), so the multiclass classifier rescores half as often. Any schedule fixed by
# counts keeps the pretrained predictor valid (see ``streamcal.learner.pretrained``).
REFRESH_WINDOWS = {"binary": 1, "multiclass": 2, "regression": 1}
DEFAULT_MERGE = "log"  # minimax for log loss, the loss the metrics lead with
DEFAULT_MAX_CATEGORIES = 1000  # bounds the memory of Mondrian calibration and its metrics
# Below this many calibration pairs (or the window, if smaller) a Mondrian category is
# answered from the pooled set by default: fewer pairs make an interval too wide to use.
DEFAULT_MIN_CATEGORY = 100
# fallback: answers from the pooled set (the default where offered), or none ("off")
FALLBACKS = ("pooled", "off")
# The protector's level, as the processor's --alarm-alpha shows it
DEFAULT_ALARM_ALPHA = inspect.signature(Protector).parameters["alpha"].default

# The settings of Mondrian calibration: ``by``, and those that need it.
MONDRIAN_SETTINGS = ("by", "min_category", "fallback", "max_categories")


def check_protect(protect) -> dict | None:
    """The parameters of ``protect`` (True: the defaults, a dict: those), or None (off).

    A dict holds the alarm's level ``alpha`` (``streamcal.learner.alarm``), ``Protector``
    parameters (``pi``, ``eps``, ...; its ``burn_in`` is accepted and left out), and
    optionally ``"recalibrate"`` (default True; False: the alarm alone, p unchanged) and
    ``"lookup"`` (default True): whether the classifier remembers the base p of its
    recent predictions, to learn a late label with the p that was given for its object
    when ``learn_one`` is not told it (``streamcal.learner.protection``). A caller that
    always passes ``learn_one(x, y, p=...)``, as the stream processor does, sets it to
    False and saves the look-up's cost per prediction and its table in the state.

    >>> check_protect(False) is None, check_protect(True), check_protect({"alpha": 0.05})
    (True, {}, {'alpha': 0.05})
    >>> check_protect({"alpha": 2})
    Traceback (most recent call last):
    ...
    ValueError: protect: alpha must be in (0.0, 1.0), got 2
    >>> check_protect({"lookup": "no"})
    Traceback (most recent call last):
    ...
    ValueError: protect: lookup must be True or False, got 'no'
    >>> check_protect("yes")
    Traceback (most recent call last):
    ...
    ValueError: protect must be True, False or a dict of Protector parameters, got 'yes'
    """
    if protect is False or protect is None:
        return None
    if protect is True:
        return {}
    if not isinstance(protect, dict):
        raise ValueError(
            f"protect must be True, False or a dict of Protector parameters, got {protect!r}"
        )
    params = dict(protect)
    for key in ("lookup", "recalibrate"):
        flag = params.pop(key, True)
        if not isinstance(flag, bool):
            raise ValueError(f"protect: {key} must be True or False, got {flag!r}")
    try:
        Protector(**params)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"protect: {exc}") from None
    return dict(protect)


def check_horizon(label_horizon, label_default) -> None:
    """ValueError unless ``label_horizon`` is None or a positive integer (predictions) and
    ``label_default`` is None or, with a horizon, a hashable label.

    >>> check_horizon(None, 0)
    Traceback (most recent call last):
    ...
    ValueError: label_default=0 needs label_horizon: the default is given at the horizon
    """
    check_count("label_horizon", label_horizon, allow_none=True)
    if label_default is None:
        return
    if label_horizon is None:
        raise ValueError(
            f"label_default={label_default!r} needs label_horizon: the default is given at "
            "the horizon"
        )
    try:
        hash(label_default)
    except TypeError:
        raise TypeError(f"label_default must be a hashable label, got {label_default!r}") from None


def check_count(name: str, value, allow_none: bool = False) -> None:
    """ValueError unless ``value`` is a positive integer (or None, with ``allow_none``).

    >>> check_count("window", 0)
    Traceback (most recent call last):
    ...
    ValueError: window must be a positive integer, got 0
    """
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def check_merge(merge) -> None:
    """ValueError unless ``merge`` names a merge of (p0, p1)."""
    if merge not in MERGES:
        raise ValueError(f"merge must be one of {', '.join(MERGES)}; got {merge!r}")


def check_min_category(min_category) -> None:
    """ValueError unless ``min_category`` is None or a non-negative integer."""
    if min_category is not None and (
        isinstance(min_category, bool)
        or not isinstance(min_category, Integral)
        or (min_category < 0)
    ):
        raise ValueError(f"min_category must be a non-negative integer, got {min_category!r}")


def check_fallback(fallback) -> None:
    """ValueError unless ``fallback`` is None or one of ``FALLBACKS``."""
    if fallback not in (None, *FALLBACKS):
        raise ValueError(f"fallback must be 'pooled' or 'off', got {fallback!r}")


def check_mondrian(by, min_category, fallback, max_categories, *, offered: bool,
                   needs: str = "by and mode 'pretrained'") -> None:
    """The rules of the Mondrian settings, alone and together (the classifiers' and the
    regressor's): ``offered`` says whether the pooled fallback applies (``needs``: what
    it needs, for the message). ``TypeError`` for an unhashable ``by``.

    >>> check_mondrian(None, 5, None, 10, offered=False, needs="by")
    Traceback (most recent call last):
    ...
    ValueError: min_category=5 needs by
    """
    try:
        hash(by)
    except TypeError:
        raise TypeError(f"by must be a feature name or a function of x, got {by!r}") from None
    check_min_category(min_category)
    check_count("max_categories", max_categories)
    check_fallback(fallback)
    if fallback == "off" and min_category:
        raise ValueError(
            "min_category needs the pooled fallback: below min_category pairs a category "
            f"is answered from the pooled set (got min_category={min_category!r}, "
            "fallback='off')"
        )
    if fallback == "pooled" and not offered:
        raise ValueError(f"fallback='pooled' needs {needs}")
    if min_category and not offered:
        raise ValueError(f"min_category={min_category!r} needs {needs}")


def check_multiclass(mode=None, fallback=None, min_category=None) -> None:
    """ValueError unless the settings are a multiclass classifier's: mode "pretrained"
    (None: the default), neither ``fallback`` nor ``min_category`` (a multiclass
    classifier answers categories below the default minimum from the pooled set). The
    one place of these rules: ``VennAbersMultiClassifier``, the classifier's switch to
    multiclass and the processor's ``--task multiclass`` all ask it.

    >>> check_multiclass("sva")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: mode 'sva' is not offered for multiclass models (they take mode pretrained ...
    """
    if mode not in (None, "pretrained"):
        raise ValueError(
            f"mode {mode!r} is not offered for multiclass models (they take mode pretrained "
            f"only; mode {mode!r} is binary only)"
        )
    if fallback is not None or min_category is not None:
        name, value = (
            ("fallback", fallback) if fallback is not None else ("min_category", min_category)
        )
        raise ValueError(
            "multiclass takes neither fallback nor min_category (it answers categories "
            f"below the default minimum from the pooled set), got {name}={value!r}"
        )


@dataclass(frozen=True)
class ClassifierSettings:
    """Every setting of ``VennAbersClassifier`` except the model, checked on construction.

    See ``VennAbersClassifier`` for what each one does. ``ValueError`` (``TypeError`` for
    an unhashable ``by``) with a one-line message naming the setting if they are not
    valid, alone or together.
    """

    mode: str = DEFAULT_MODE
    merge: str = DEFAULT_MERGE
    window: int | None = DEFAULT_WINDOW
    refresh_every: int | None = None
    by: object = None  # a feature name, or a picklable function of x
    min_category: int | None = None  # None: see category_minimum
    fallback: str | None = None  # None: "pooled" where offered (see pooled)
    max_categories: int = DEFAULT_MAX_CATEGORIES
    # False, True or a dict (check_protect); a dict is unhashable: left out of the hash
    protect: bool | dict = field(default=False, hash=False)
    label_horizon: int | None = None  # predictions (streamcal.learner.horizon)
    label_default: object = None  # the label of a prediction matured without one

    def __post_init__(self):
        mode = check_mode(self.mode)
        check_merge(self.merge)
        check_count("window", self.window, allow_none=(mode == "sva"))
        check_count("refresh_every", self.refresh_every, allow_none=True)
        if mode == "va" and self.refresh_every is not None:
            raise ValueError("refresh_every is not used by mode 'va', which rescores every time")
        if mode == "sva" and self.window is None and self.refresh_every is not None:
            raise ValueError("refresh_every needs a finite window: rescoring all history is O(n)")
        self._check_mondrian()
        check_protect(self.protect)
        check_horizon(self.label_horizon, self.label_default)

    @property
    def protect_params(self) -> dict | None:
        """The parameters of ``protect`` (``check_protect``): a dict, or None if off."""
        return check_protect(self.protect)

    def _check_mondrian(self) -> None:
        check_mondrian(self.by, self.min_category, self.fallback, self.max_categories,
                       offered=self.by is not None and self.mode == "pretrained")  # fmt: skip

    @property
    def pooled(self) -> bool:
        """Whether a Mondrian classifier answers cold categories from the pooled set: with
        ``by`` in mode ``"pretrained"``, unless ``fallback="off"``.

        >>> ClassifierSettings(by="g").pooled, ClassifierSettings(by="g", mode="sva").pooled
        (True, False)
        """
        return self.by is not None and self.mode == "pretrained" and self.fallback != "off"

    @property
    def category_minimum(self) -> int:
        """The calibration pairs a category needs to answer on its own (below: pooled):
        ``min_category``, by default ``DEFAULT_MIN_CATEGORY`` or the window if smaller; 0
        without the pooled fallback.

        >>> ClassifierSettings(by="g").category_minimum
        100
        >>> ClassifierSettings(by="g", window=30).category_minimum
        30
        """
        if not self.pooled:
            return 0
        if self.min_category is not None:
            return self.min_category
        return min(DEFAULT_MIN_CATEGORY, self.window)

    @classmethod
    def given(cls, **values) -> ClassifierSettings:
        """The settings with the values that are not None; the defaults for the others."""
        return cls(**{k: v for k, v in values.items() if v is not None})

    @property
    def refresh_period(self) -> int | None:
        """Labels between two refreshes of the binary classifier: ``refresh_every``, for
        ``"pretrained"`` by default ``window`` (a whole new calibration set between two
        model updates)."""
        return self.refresh_period_for("binary")

    def refresh_period_for(self, task: str) -> int | None:
        """Labels between two refreshes for ``task`` ("binary" or "multiclass"):
        ``refresh_every``, for ``"pretrained"`` by default ``REFRESH_WINDOWS[task]``
        windows.

        >>> ClassifierSettings(window=100).refresh_period_for("multiclass")
        200
        """
        if self.mode == "pretrained" and self.refresh_every is None:
            return REFRESH_WINDOWS[task] * self.window
        return self.refresh_every

    def as_dict(self) -> dict:
        """The settings as keyword arguments of ``VennAbersClassifier``."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


# The horizon's settings are the library's: the processor counts its horizon in record
# time (--label-horizon), so they are not among the settings it passes on (FIELDS).
HORIZON_SETTINGS = ("label_horizon", "label_default")
FIELDS = tuple(f.name for f in dataclasses.fields(ClassifierSettings)
               if f.name not in HORIZON_SETTINGS)  # fmt: skip
