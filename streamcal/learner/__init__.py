"""Learner: river-compatible Venn-Abers classifiers and a conformal predictive regressor
built on the core.

The names are loaded on first use, so that ``streamcal.learner.modes`` can be imported
without river (the command line's settings list the modes).
"""

from streamcal._lazy import lazy_names

_PUBLIC = {
    "CategoryChurnWarning": "streamcal.learner.churn",
    "ConformalPredictiveRegressor": "streamcal.learner.regressor",
    "FieldScore": "streamcal.learner.field_score",
    "MODES": "streamcal.learner.modes",
    "MulticlassPrediction": "streamcal.learner.multiclassifier",
    "OutcomeDependentDelayWarning": "streamcal.learner.label_delays",
    "PredictiveDistribution": "streamcal.learner.predictive_distribution",
    "Unlearned": "streamcal.learner.guard",
    "UnlearnedWarning": "streamcal.learner.guard",
    "VennAbersClassifier": "streamcal.learner.classifier",
    "VennAbersInterval": "streamcal.learner.interval",
    "VennAbersMultiClassifier": "streamcal.learner.multiclassifier",
}
__getattr__, __dir__ = lazy_names(globals(), _PUBLIC)

__all__ = list(_PUBLIC)
