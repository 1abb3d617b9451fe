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

__all__ = ["PRESETS", "make_model"]


def _logreg():
    from river import linear_model, preprocessing

    return preprocessing.StandardScaler() | linear_model.LogisticRegression()


def _gnb():
    from river import naive_bayes

    return naive_bayes.GaussianNB()


def _hoeffding():
    from river import tree

    return tree.HoeffdingTreeClassifier()


PRESETS = {
    "logreg": _logreg,  # scaled logistic regression
    "gnb": _gnb,  # Gaussian naive Bayes
    "hoeffding": _hoeffding,  # Hoeffding tree
}


def make_model(spec: str):
    """A fresh river classifier from a preset name or ``module:function`` (called with no
    arguments). Raises ``ValueError`` with a one-line message if it cannot be made."""
    if spec in PRESETS:
        return PRESETS[spec]()
    if ":" not in spec:
        raise ValueError(
            f"model must be one of {', '.join(PRESETS)} or module:function; got {spec!r}"
        )
    module_name, _, func_name = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"model {spec!r}: cannot import {module_name!r}: {exc}") from None
    func = getattr(module, func_name, None)
    if not callable(func):
        raise ValueError(f"model {spec!r}: {module_name} has no callable {func_name!r}")
    try:
        model = func()
    except Exception as exc:
        raise ValueError(f"model {spec!r}: calling it failed: {exc!r}") from None
    if not (hasattr(model, "predict_proba_one") and hasattr(model, "learn_one")):
        raise ValueError(f"model {spec!r} did not return a river classifier: {model!r}")
    return model
