"""Core: exact Venn-Abers calibration. Numbers in, numbers out: no I/O, no river, no Kafka.

The names are loaded on first use: the score store compiles with numba when it is
imported, and the command line's settings, which read the merges' names, must not pay
for that (``streamcal --help`` stays cold).
"""

from streamcal._lazy import lazy_names

_PUBLIC = {
    "batch": ("venn_abers",),
    "conformal_alarm": ("alarm_batch", "ConformalAlarm"),
    "isotonic": ("dir_predict", "isotonic_calibrator", "IsotonicCalibrator",
                 "venn_abers_bruteforce"),
    "merge": ("merge_log", "merge_mean", "merge_square", "MERGES", "SCALAR_MERGES"),
    "multiclass": ("couple", "OneVsOne", "OneVsRest", "SCHEMES", "TopLabel",
                   "venn_abers_multiclass"),
    "protector": ("protect_batch", "Protector"),
    "rank_store": ("RankStore",),
    "store": ("ScoreStore", "StoreBackendWarning"),
    "ties": ("group_ties",),
}  # fmt: skip
__getattr__, __dir__, __all__ = lazy_names(globals(), _PUBLIC)
