"""Learner: river-compatible Venn-Abers classifiers built on the core.

The names are loaded on first use, so that ``streamcal.learner.modes`` can be imported
without river (the command line's settings list the modes).
"""

from streamcal._lazy import lazy_names

_PUBLIC = {
    "CategoryChurnWarning": "streamcal.learner.churn",
    "FieldScore": "streamcal.learner.field_score",
    "MODES": "streamcal.learner.modes",
    "MulticlassPrediction": "streamcal.learner.multiclassifier",
    "OutcomeDependentDelayWarning": "streamcal.learner.label_delays",
    "Unlearned": "streamcal.learner.guard",
    "UnlearnedWarning": "streamcal.learner.guard",
    "VennAbersClassifier": "streamcal.learner.classifier",
    "VennAbersInterval": "streamcal.learner.interval",
    "VennAbersMultiClassifier": "streamcal.learner.multiclassifier",
}
__getattr__, __dir__ = lazy_names(globals(), _PUBLIC)

__all__ = [
    "CategoryChurnWarning",
    "FieldScore",
    "MODES",
    "MulticlassPrediction",
    "OutcomeDependentDelayWarning",
    "Unlearned",
    "UnlearnedWarning",
    "VennAbersClassifier",
    "VennAbersInterval",
    "VennAbersMultiClassifier",
]
