"""Core: exact Venn-Abers calibration. Numbers in, numbers out: no I/O, no river, no Kafka."""

from streamcal.core.batch import venn_abers
from streamcal.core.conformal_alarm import ConformalAlarm, alarm_batch
from streamcal.core.isotonic import (
    IsotonicCalibrator,
    dir_predict,
    isotonic_calibrator,
    venn_abers_bruteforce,
)
from streamcal.core.merge import MERGES, SCALAR_MERGES, merge_log, merge_mean, merge_square
from streamcal.core.multiclass import (
    SCHEMES,
    OneVsOne,
    OneVsRest,
    TopLabel,
    couple,
    venn_abers_multiclass,
)
from streamcal.core.protector import Protector, protect_batch
from streamcal.core.store import ScoreStore, StoreBackendWarning
from streamcal.core.ties import group_ties

__all__ = [
    "ConformalAlarm",
    "IsotonicCalibrator",
    "MERGES",
    "OneVsOne",
    "OneVsRest",
    "SCALAR_MERGES",
    "Protector",
    "SCHEMES",
    "alarm_batch",
    "ScoreStore",
    "StoreBackendWarning",
    "TopLabel",
    "couple",
    "dir_predict",
    "group_ties",
    "isotonic_calibrator",
    "merge_log",
    "merge_mean",
    "merge_square",
    "protect_batch",
    "venn_abers",
    "venn_abers_bruteforce",
    "venn_abers_multiclass",
]
