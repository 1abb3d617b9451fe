"""streamcal: calibrated probabilities with a validity guarantee, online.

Venn-Abers predictors (Vovk & Petej 2014) for event streams: every event gets a pair
(p0, p1), one of which is perfectly calibrated under exchangeability, before its label
arrives.

Layers, each importing only those below it: ``core`` (exact algorithms), ``learner``
(river), ``monitoring`` (losses, calibration), ``stream`` (Kafka), ``demo`` (local
broker, demo stream), ``cli`` (docs/contracts.md). Every error streamcal raises derives
from ``StreamcalError`` (``streamcal.errors``).
"""

from importlib.metadata import PackageNotFoundError, version

from streamcal._lazy import lazy_names

try:
    __version__ = version("streamcal-va")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"

# The public names, loaded on first use (PEP 562): ``import streamcal`` stays cheap for
# processes that need one corner of it (the CLI's help, the producer process), while
# ``from streamcal import VennAbersClassifier`` works as usual. Each is listed once, under
# the package it comes from (and is public in: its ``__all__``).
_CORE = ("ConformalAlarm", "IsotonicCalibrator", "MERGES", "Protector", "ScoreStore",
         "StoreBackendWarning", "dir_predict", "isotonic_calibrator", "merge_log",
         "merge_mean", "merge_square", "protect_batch", "RankStore", "venn_abers",
         "venn_abers_bruteforce")  # fmt: skip
_LEARNER = ("CategoryChurnWarning", "ConformalPredictiveRegressor", "FieldScore",
            "VennAbersClassifier", "VennAbersInterval", "VennAbersMultiClassifier",
            "MulticlassPrediction", "OutcomeDependentDelayWarning", "PredictiveDistribution",
            "Unlearned", "UnlearnedWarning")  # fmt: skip
_MONITORING = ("CalibrationTracker", "MetricLogWriter", "PrometheusExporter", "write_report")
# The errors' tree, outside the layers.
_ERRORS = ("StreamcalError", "ConfigurationError", "DependencyError", "InputError",
           "InputLostError", "StateError", "BrokerError", "SupersededError")  # fmt: skip
_PUBLIC = {"core": _CORE, "learner": _LEARNER, "monitoring": _MONITORING, "errors": _ERRORS}
__getattr__, __dir__, _NAMES = lazy_names(globals(), _PUBLIC)

__all__ = ["__version__", *_NAMES]
