"""Learner: river-compatible Venn-Abers classifiers and a conformal predictive regressor
built on the core.

The names are loaded on first use, so that ``streamcal.learner.modes`` can be imported
without river (the command line's settings list the modes).
"""

from streamcal._lazy import lazy_names

_PUBLIC = {
    "churn": ("CategoryChurnWarning",),
    "classifier": ("VennAbersClassifier",),
    "field_score": ("FieldScore",),
    "guard": ("Unlearned", "UnlearnedWarning"),
    "interval": ("VennAbersInterval",),
    "label_delays": ("OutcomeDependentDelayWarning",),
    "modes": ("MODES",),
    "multiclassifier": ("MulticlassPrediction", "VennAbersMultiClassifier"),
    "predictive_distribution": ("PredictiveDistribution",),
    "regressor": ("ConformalPredictiveRegressor",),
}
__getattr__, __dir__, __all__ = lazy_names(globals(), _PUBLIC)
