"""Scoring models for the stream processor: a few presets, or ``module:function``.

>>> make_model("gnb")
GaussianNB ()
>>> make_model("river.naive_bayes:GaussianNB")
GaussianNB ()
>>> make_model("nope")
Traceback (most recent call last):
...
ValueError: model must be one of logreg, gnb, hoeffding or module:function; got 'nope'
"""

from __future__ import annotations

import importlib

__all__ = [
    "DEFAULT_MODEL",
    "PRESETS",
    "check_model_spec",
    "describe_presets",
    "find_model",
    "make_model",
]


def _logreg():
    """scaled logistic regression"""
    from river import linear_model, preprocessing

    return preprocessing.StandardScaler() | linear_model.LogisticRegression()


def _gnb():
    """Gaussian naive Bayes"""
    from river import naive_bayes

    return naive_bayes.GaussianNB()


def _hoeffding():
    """Hoeffding tree"""
    from river import tree

    return tree.HoeffdingTreeClassifier()


# name -> factory; the factory's docstring says what it is (for help texts).
PRESETS = {"logreg": _logreg, "gnb": _gnb, "hoeffding": _hoeffding}
DEFAULT_MODEL = "logreg"


def describe_presets() -> str:
    """The presets for a help text: ``logreg (scaled logistic regression), ...``."""
    return ", ".join(f"{name} ({make.__doc__})" for name, make in PRESETS.items())


def check_model_spec(spec) -> str:
    """``spec`` if it names a preset or has the form ``module:function`` (not imported
    here), else ``ValueError`` listing the presets."""
    if not isinstance(spec, str) or (spec not in PRESETS and ":" not in spec):
        raise ValueError(
            f"model must be one of {', '.join(PRESETS)} or module:function; got {spec!r}"
        )
    return spec


def find_model(spec: str):
    """The factory that ``spec`` names (a preset's, or ``module:function`` imported), not
    called: what can be checked of a model without making one. ``ValueError`` (one line)
    if there is none.

    >>> find_model("logreg").__doc__
    'scaled logistic regression'
    >>> find_model("math:no_such_function")
    Traceback (most recent call last):
    ...
    ValueError: model 'math:no_such_function': math has no callable 'no_such_function'
    """
    if check_model_spec(spec) in PRESETS:
        return PRESETS[spec]
    module_name, _, func_name = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"model {spec!r}: cannot import {module_name!r}: {exc}") from None
    func = getattr(module, func_name, None)
    if not callable(func):
        raise ValueError(f"model {spec!r}: {module_name} has no callable {func_name!r}")
    return func


def make_model(spec: str):
    """A fresh river classifier from a preset name or ``module:function`` (called with no
    arguments). Raises ``ValueError`` with a one-line message if it cannot be made."""
    func = find_model(spec)
    try:
        model = func()
    except Exception as exc:
        raise ValueError(f"model {spec!r}: calling it failed: {exc!r}") from None
    if not (hasattr(model, "predict_proba_one") and hasattr(model, "learn_one")):
        raise ValueError(f"model {spec!r} did not return a river classifier: {model!r}")
    return model
