"""streamcal: calibrated probabilities with a validity guarantee, online.

Venn-Abers predictors (Vovk & Petej 2014) for event streams: every event gets a pair
(p0, p1), one of which is perfectly calibrated under exchangeability, before its label
arrives.

Layers, each importing only those below it: ``core`` (exact algorithms), ``learner``
(river), ``monitoring`` (losses, calibration), ``stream`` (Kafka), ``cli``.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("streamcal-va")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"

# --- core ---
from streamcal.core import (  # noqa: E402
    MERGES,
    IsotonicCalibrator,
    ScoreStore,
    dir_predict,
    isotonic_calibrator,
    merge_log,
    merge_mean,
    merge_square,
    venn_abers,
    venn_abers_bruteforce,
)

# --- learner ---
from streamcal.learner import VennAbersClassifier, VennAbersInterval  # noqa: E402

# --- monitoring ---
from streamcal.monitoring import CalibrationTracker, PrometheusExporter, write_report  # noqa: E402

__all__ = [
    "__version__",
    # core
    "IsotonicCalibrator",
    "MERGES",
    "ScoreStore",
    "dir_predict",
    "isotonic_calibrator",
    "merge_log",
    "merge_mean",
    "merge_square",
    "venn_abers",
    "venn_abers_bruteforce",
    # learner
    "VennAbersClassifier",
    "VennAbersInterval",
    # monitoring
    "CalibrationTracker",
    "PrometheusExporter",
    "write_report",
]
