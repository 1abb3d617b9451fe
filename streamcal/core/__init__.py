"""Core: exact Venn-Abers calibration. Numbers in, numbers out: no I/O, no river, no Kafka.

The names are loaded on first use: the score store compiles with numba when it is
imported, and the command line's settings, which read the merges' names, must not pay
for that (``streamcal --help`` stays cold).
"""

from streamcal._lazy import lazy_names

_PUBLIC = {
    "alarm_batch": "streamcal.core.conformal_alarm",
    "ConformalAlarm": "streamcal.core.conformal_alarm",
    "couple": "streamcal.core.multiclass",
    "dir_predict": "streamcal.core.isotonic",
    "group_ties": "streamcal.core.ties",
    "isotonic_calibrator": "streamcal.core.isotonic",
    "IsotonicCalibrator": "streamcal.core.isotonic",
    "merge_log": "streamcal.core.merge",
    "merge_mean": "streamcal.core.merge",
    "merge_square": "streamcal.core.merge",
    "MERGES": "streamcal.core.merge",
    "OneVsOne": "streamcal.core.multiclass",
    "OneVsRest": "streamcal.core.multiclass",
    "protect_batch": "streamcal.core.protector",
    "RankStore": "streamcal.core.rank_store",
    "Protector": "streamcal.core.protector",
    "SCALAR_MERGES": "streamcal.core.merge",
    "SCHEMES": "streamcal.core.multiclass",
    "ScoreStore": "streamcal.core.store",
    "StoreBackendWarning": "streamcal.core.store",
    "TopLabel": "streamcal.core.multiclass",
    "venn_abers": "streamcal.core.batch",
    "venn_abers_bruteforce": "streamcal.core.isotonic",
    "venn_abers_multiclass": "streamcal.core.multiclass",
}
__getattr__, __dir__ = lazy_names(globals(), _PUBLIC)

__all__ = list(_PUBLIC)
