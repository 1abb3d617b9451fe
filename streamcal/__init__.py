"""streamcal: calibrated probabilities with a validity guarantee, online.

Venn-Abers predictors (Vovk & Petej 2014) for event streams: every event gets a pair
(p0, p1), one of which is perfectly calibrated under exchangeability, before its label
arrives.

Layers, each importing only those below it: ``core`` (exact algorithms), ``learner``
(river), ``monitoring`` (losses, calibration), ``stream`` (Kafka), ``demo`` (local
broker, demo stream), ``cli`` (docs/contracts.md).
"""

from importlib.metadata import PackageNotFoundError, version

from streamcal._lazy import lazy_names

try:
    __version__ = version("streamcal-va")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"

# The public names, loaded on first use (PEP 562): ``import streamcal`` stays cheap for
# processes that need one corner of it (the CLI's help, the producer process), while
# ``from streamcal import VennAbersClassifier`` works as usual.
_PUBLIC = {
    # --- core ---
    "ConformalAlarm": "streamcal.core",
    "IsotonicCalibrator": "streamcal.core",
    "MERGES": "streamcal.core",
    "Protector": "streamcal.core",
    "ScoreStore": "streamcal.core",
    "StoreBackendWarning": "streamcal.core",
    "dir_predict": "streamcal.core",
    "isotonic_calibrator": "streamcal.core",
    "merge_log": "streamcal.core",
    "merge_mean": "streamcal.core",
    "merge_square": "streamcal.core",
    "protect_batch": "streamcal.core",
    "RankStore": "streamcal.core",
    "venn_abers": "streamcal.core",
    "venn_abers_bruteforce": "streamcal.core",
    # --- learner ---
    "CategoryChurnWarning": "streamcal.learner",
    "ConformalPredictiveRegressor": "streamcal.learner",
    "FieldScore": "streamcal.learner",
    "VennAbersClassifier": "streamcal.learner",
    "VennAbersInterval": "streamcal.learner",
    "VennAbersMultiClassifier": "streamcal.learner",
    "MulticlassPrediction": "streamcal.learner",
    "OutcomeDependentDelayWarning": "streamcal.learner",
    "PredictiveDistribution": "streamcal.learner",
    "Unlearned": "streamcal.learner",
    "UnlearnedWarning": "streamcal.learner",
    # --- monitoring ---
    "CalibrationTracker": "streamcal.monitoring",
    "MetricLogWriter": "streamcal.monitoring",
    "PrometheusExporter": "streamcal.monitoring",
    "write_report": "streamcal.monitoring",
}
__getattr__, __dir__ = lazy_names(globals(), _PUBLIC)

__all__ = [
    "__version__",
    # core
    "ConformalAlarm",
    "IsotonicCalibrator",
    "MERGES",
    "Protector",
    "ScoreStore",
    "StoreBackendWarning",
    "dir_predict",
    "isotonic_calibrator",
    "merge_log",
    "merge_mean",
    "merge_square",
    "protect_batch",
    "RankStore",
    "venn_abers",
    "venn_abers_bruteforce",
    # learner
    "CategoryChurnWarning",
    "ConformalPredictiveRegressor",
    "FieldScore",
    "VennAbersClassifier",
    "VennAbersInterval",
    "VennAbersMultiClassifier",
    "MulticlassPrediction",
    "OutcomeDependentDelayWarning",
    "PredictiveDistribution",
    "Unlearned",
    "UnlearnedWarning",
    # monitoring
    "CalibrationTracker",
    "MetricLogWriter",
    "PrometheusExporter",
    "write_report",
]
