"""The settings of a Venn-Abers classifier: their defaults and their rules, in one place.

``VennAbersClassifier`` takes them as keyword arguments (river's ``clone`` and
``check_estimator`` need each one as an attribute), the processor takes them as flags
(``streamcal run --window ...``), a checkpoint is bound to them, and an old checkpoint is
upgraded by filling in their defaults. All four read the defaults and check the values
here, so a setting cannot mean two things or be refused with two messages.

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
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from numbers import Integral

from streamcal.core.merge import MERGES
from streamcal.learner.modes import DEFAULT_MODE, check_mode

__all__ = [
    "ClassifierSettings",
    "DEFAULT_MAX_CATEGORIES",
    "DEFAULT_MERGE",
    "DEFAULT_WINDOW",
    "FIELDS",
    "MONDRIAN_SETTINGS",
]

DEFAULT_WINDOW = 1000  # calibration pairs: enough for the isotonic fit, fast to forget
DEFAULT_MERGE = "log"  # minimax for log loss, the loss the metrics lead with
DEFAULT_MAX_CATEGORIES = 1000  # bounds the memory of Mondrian calibration and its metrics

# The settings that came with Mondrian calibration (absent from older checkpoints).
MONDRIAN_SETTINGS = ("by", "min_category", "fallback", "max_categories")


def _check_positive(name: str, value, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


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
    min_category: int = 0
    fallback: str | None = None
    max_categories: int = DEFAULT_MAX_CATEGORIES

    def __post_init__(self):
        mode = check_mode(self.mode)
        if self.merge not in MERGES:
            raise ValueError(f"merge must be one of {', '.join(MERGES)}; got {self.merge!r}")
        _check_positive("window", self.window, allow_none=(mode == "sva"))
        _check_positive("refresh_every", self.refresh_every, allow_none=True)
        if mode == "va" and self.refresh_every is not None:
            raise ValueError("refresh_every is not used by mode 'va', which rescores every time")
        if mode == "sva" and self.window is None and self.refresh_every is not None:
            raise ValueError("refresh_every needs a finite window: rescoring all history is O(n)")
        self._check_mondrian()

    def _check_mondrian(self) -> None:
        by, min_category, fallback = self.by, self.min_category, self.fallback
        try:
            hash(by)
        except TypeError:
            raise TypeError(f"by must be a feature name or a function of x, got {by!r}") from None
        if (
            isinstance(min_category, bool)
            or not isinstance(min_category, Integral)
            or (min_category < 0)
        ):
            raise ValueError(f"min_category must be a non-negative integer, got {min_category!r}")
        _check_positive("max_categories", self.max_categories)
        if fallback not in (None, "pooled"):
            raise ValueError(f"fallback must be None or 'pooled', got {fallback!r}")
        if (fallback is None) != (min_category == 0):
            raise ValueError(
                "min_category and fallback='pooled' go together: below min_category pairs a "
                f"category is answered from the pooled set (got min_category={min_category!r}, "
                f"fallback={fallback!r})"
            )
        if fallback is not None and (by is None or self.mode != "pretrained"):
            raise ValueError("fallback='pooled' needs by and mode 'pretrained'")

    @classmethod
    def given(cls, **values) -> ClassifierSettings:
        """The settings with the values that are not None; the defaults for the others."""
        return cls(**{k: v for k, v in values.items() if v is not None})

    @property
    def refresh_period(self) -> int | None:
        """Labels between two refreshes: ``refresh_every``, for ``"pretrained"`` by default
        ``window`` (a whole new calibration set between two model updates)."""
        if self.mode == "pretrained" and self.refresh_every is None:
            return self.window
        return self.refresh_every

    def as_dict(self) -> dict:
        """The settings as keyword arguments of ``VennAbersClassifier``."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


FIELDS = tuple(f.name for f in dataclasses.fields(ClassifierSettings))
