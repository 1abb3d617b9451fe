"""Scoring models for the stream processor: a few presets, ``module:function``, or
``score:FIELD``, the score that an upstream model already put in each event.

>>> make_model("gnb")
GaussianNB ()
>>> make_model("river.naive_bayes:GaussianNB")
GaussianNB ()
>>> make_model("score:churn_p")
FieldScore (
  field="churn_p"
  kind="probability"
)
>>> make_model("nope")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: model must be one of logreg, gnb, hoeffding, softmax, module:function or ...; got 'nope'

``score:FIELD`` calibrates (and protects) the probability of ``True`` that the feature
FIELD of each event holds (``streamcal.learner.FieldScore``). It assumes that the
upstream model does not learn from the labels given here: then the scoring function is
fixed, and the default mode ``pretrained`` is a valid inductive Venn-Abers predictor. The
raw score's log loss in the metrics means something only when the score is a
probability (a value outside [0, 1] makes the event a dead letter).

With ``--task multiclass``: ``gnb`` and ``hoeffding`` are multiclass models as they are,
``softmax`` is the multiclass counterpart of ``logreg`` (which, like ``score:FIELD``, is
binary only and refused there), and ``module:function`` must return a multiclass model.
"""

from __future__ import annotations

import functools
import importlib

__all__ = [
    "BINARY_ONLY",
    "DEFAULT_MODEL",
    "PRESETS",
    "called_model",
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


def _softmax():
    """scaled softmax regression, multiclass"""
    from river import linear_model, preprocessing

    return preprocessing.StandardScaler() | linear_model.SoftmaxRegression()


# name -> factory; the factory's docstring says what it is (for help texts).
PRESETS = {"logreg": _logreg, "gnb": _gnb, "hoeffding": _hoeffding, "softmax": _softmax}
# The presets of a binary model only (``--task multiclass`` refuses them).
BINARY_ONLY = ("logreg",)
DEFAULT_MODEL = "logreg"
SCORE_PREFIX = "score:"  # score:FIELD, a field of the event holding an upstream score


def describe_presets() -> str:
    """The presets for a help text: ``logreg (scaled logistic regression), ...``."""
    return ", ".join(f"{name} ({make.__doc__})" for name, make in PRESETS.items())


def check_model_spec(spec) -> str:
    """``spec`` if it names a preset or has the form ``module:function`` (not imported
    here) or ``score:FIELD``, else ``ValueError`` listing the presets."""
    if not isinstance(spec, str) or (spec not in PRESETS and ":" not in spec):
        raise ValueError(
            f"model must be one of {', '.join(PRESETS)}, module:function or score:FIELD; "
            f"got {spec!r}"
        )
    if spec.startswith(SCORE_PREFIX) and not spec[len(SCORE_PREFIX) :].strip():
        raise ValueError(f"model {spec!r}: score:FIELD needs the name of a field")
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
    if spec.startswith(SCORE_PREFIX):
        from streamcal.learner.field_score import FieldScore

        return functools.partial(FieldScore, spec[len(SCORE_PREFIX) :])
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
    return called_model(spec, find_model(spec), "predict_proba_one", "classifier")


def called_model(spec: str, func, predicts: str, kind: str):
    """``func()``, the model ``spec`` names, checked to have ``learn_one`` and the method
    ``predicts`` (a river ``kind``); ``ValueError`` with a one-line message if not."""
    try:
        model = func()
    except Exception as exc:
        raise ValueError(f"model {spec!r}: calling it failed: {exc!r}") from None
    if not (hasattr(model, predicts) and hasattr(model, "learn_one")):
        raise ValueError(f"model {spec!r} did not return a river {kind}: {model!r}")
    return model
