"""What the report concludes from a metric log's lines: Corollary 1's verdict, the alarm's,
where the alarm fired, and the numbers of ``summary.json``.

No matplotlib: the demo's text summary reads these too.
"""

from __future__ import annotations

import math

from streamcal.monitoring import schema

__all__ = [
    "SAMPLING_ERROR_SE",
    "alarm_moment",
    "alarm_onset",
    "alarm_verdict",
    "corollary1_verdict",
    "coverage_verdict",
    "has_values",
    "is_regression",
    "summary",
]

# How far the frequency of 1s may lie outside [mean p0, mean p1], in standard errors of the
# frequency, for Corollary 1 to "hold within sampling error": the one number behind the
# verdict (report, demo summary) and the grey bands of the figures, which the texts quote.
SAMPLING_ERROR_SE = 3


def has_values(log, key: str = "log_martingale") -> bool:
    """Whether any line of ``log`` has a value of ``key``: ``log_martingale`` for an
    alarm's state, ``protected_log_loss`` for protected probabilities (a predictions
    file may carry those alone)."""
    return any(line.get(key) is not None for line in log)

def alarm_moment(log) -> float | None:
    """Where the alarm fired on the labels axis: the ``alarm_at`` of the last line that has
    one (a single unit's log), else the labels of the first line with ``alarm`` 1 (units
    pooled: their label counts are their own), else None.

    >>> alarm_moment([{"labels": 10, "alarm": 0}, {"labels": 20, "alarm": 1, "alarm_at": 17}])
    17.0
    >>> alarm_moment([{"labels": 10, "alarm": 0}, {"labels": 20, "alarm": 1}])
    20.0
    """
    for line in reversed(log):
        if line.get("alarm_at") is not None:
            return float(line["alarm_at"])
    for line in log:
        if line.get("alarm") and line.get("labels") is not None:
            return float(line["labels"])
    return None


def alarm_onset(log) -> float | None:
    """Where the change began on the labels axis, as the alarm read it back: the
    ``alarm_onset`` of the last line that has one (None for units pooled: their label
    counts are their own).

    >>> alarm_onset([{"labels": 10}, {"labels": 20, "alarm_onset": 12}])
    12.0
    """
    for line in reversed(log):
        if line.get("alarm_onset") is not None:
            return float(line["alarm_onset"])
    return None


def corollary1_verdict(last: dict) -> str:
    """Where the frequency of 1s lies relative to [mean p0, mean p1], in standard errors of
    the frequency: outside by at most ``SAMPLING_ERROR_SE`` (3) it holds within sampling
    error, beyond that it is violated.

    >>> corollary1_verdict({"labels": 100, "mean_p0": 0.3, "frequency": 0.35, "mean_p1": 0.4})
    'holds: mean p0 <= frequency <= mean p1'
    >>> corollary1_verdict({"labels": 100, "mean_p0": 0.3, "frequency": 0.45, "mean_p1": 0.4})
    'holds within sampling error (at most 3 SE): frequency is 1.0 SE above mean p1'
    >>> corollary1_verdict({"labels": 10000, "mean_p0": 0.3, "frequency": 0.45, "mean_p1": 0.4})
    'violated: frequency is 10.0 SE above mean p1'
    """
    n, p0, f, p1 = (last.get(k) for k in ("labels", "mean_p0", "frequency", "mean_p1"))
    if not n or p0 is None or f is None or p1 is None:
        return "no labels yet"
    if p0 <= f <= p1:
        return "holds: mean p0 <= frequency <= mean p1"
    k, side = _distance(n, p0, f, p1)
    side = f"{side} mean p0" if side == "below" else f"{side} mean p1"
    return f"{_head(k)}: frequency is {k:.1f} SE {side}"


def _distance(n: int, lo: float, f: float, hi: float) -> tuple[float, str]:
    """How far the frequency ``f`` of n labels lies outside [lo, hi], in its standard
    errors, and on which side ("below" or "above")."""
    se = math.sqrt(max(f * (1 - f), 1.0 / n) / n)
    return ((lo - f) / se, "below") if f < lo else ((f - hi) / se, "above")


def _head(k: float) -> str:
    limit = SAMPLING_ERROR_SE
    return f"holds within sampling error (at most {limit} SE)" if k <= limit else "violated"


def is_regression(last: dict) -> bool:
    """Whether ``last`` is a regression run's line (``--task regression``: its interval's
    nominal coverage is set once a label came)."""
    return last.get("interval_coverage") is not None


def coverage_verdict(last: dict) -> str:
    """Where a regression run's interval coverage lies relative to the nominal one, in
    standard errors of the coverage (``SAMPLING_ERROR_SE`` as for Corollary 1). A
    conformal interval covers with at least its probability: below by more is a
    violation; above is a wider interval than claimed (its ends are ranks of the
    residuals held, which round outwards), said but not a violation.

    >>> coverage_verdict({"labels": 1000, "interval_coverage": 0.9, "coverage": 0.9})
    'holds: coverage 0.9 = nominal 0.9'
    >>> coverage_verdict({"labels": 1000, "interval_coverage": 0.9, "coverage": 0.88})
    'holds within sampling error (at most 3 SE): coverage 0.88 is 1.9 SE below nominal 0.9'
    >>> coverage_verdict({"labels": 10000, "interval_coverage": 0.9, "coverage": 0.85})
    'violated: coverage 0.85 is 14.0 SE below nominal 0.9'
    >>> coverage_verdict({"labels": 10000, "interval_coverage": 0.9, "coverage": 0.95})
    'conservative: coverage 0.95 is 22.9 SE above nominal 0.9 (intervals wider than claimed)'
    """
    n, c, f = (last.get(k) for k in ("labels", "interval_coverage", "coverage"))
    if not n or c is None or f is None:
        return "no labels yet"
    if f == c:
        return f"holds: coverage {f:.3g} = nominal {c:g}"
    k, side = _distance(n, c, f, c)
    text = f"coverage {f:.3g} is {k:.1f} SE {side} nominal {c:g}"
    if side == "above" and k > SAMPLING_ERROR_SE:
        return f"conservative: {text} (intervals wider than claimed)"
    return f"{_head(k)}: {text}"


def alarm_verdict(last: dict) -> str | None:
    """What the alarm says (None without the alarm).

    >>> alarm_verdict({"alarm": 1, "alarm_at": 695, "alarm_alpha": 0.01, "log_martingale": 9.0})
    'fired at label 695: the stream is not exchangeable (false-alarm probability at most 0.01)'
    >>> alarm_verdict({"alarm": 1, "alarm_at": 695, "alarm_onset": 650, "log_martingale": 9.0})
    'fired at label 695: the stream is not exchangeable; the change began near label 650'
    >>> alarm_verdict({"alarm": 0, "alarm_alpha": 0.01, "log_martingale": 1.5})
    'not fired: log S = 1.5, alarm level ln(1/alpha) = 4.61'
    """
    if last.get("log_martingale") is None and last.get("alarm") is None:
        return None
    alpha = last.get("alarm_alpha")
    if last.get("alarm"):
        at = last.get("alarm_at")
        where = f"at label {at}" if at is not None else "in some unit"
        bound = f" (false-alarm probability at most {alpha:g})" if alpha else ""
        onset = last.get("alarm_onset")
        began = f"; the change began near label {onset}" if onset is not None else ""
        return f"fired {where}: the stream is not exchangeable{bound}{began}"
    level = f", alarm level ln(1/alpha) = {math.log(1 / alpha):.3g}" if alpha else ""
    return f"not fired: log S = {last['log_martingale']:.3g}{level}"



def summary(last: dict, categories: list[dict] = ()) -> dict:
    """The numbers the page shows, by metric-log key (from the last line), plus the verdict;
    with per-category lines, ``categories``: each one's numbers and verdict."""
    out = {
        f.key: last[f.key]
        for f in schema.FIELDS
        # A feature's fields (protection, the alarm) only where it was used: else the
        # summary is as it was before them.
        if f.title and f.key in last and (last[f.key] is not None or not f.only_with)
    }
    if is_regression(last):  # Corollary 1 of the claim "it covers" is the coverage's
        out["coverage_verdict"] = coverage_verdict(last)
    else:
        out["corollary1"] = corollary1_verdict(last)
    if alarm_verdict(last) is not None:
        out["calibration_alarm"] = alarm_verdict(last)
    if categories:
        out["categories"] = [{**r, "corollary1": corollary1_verdict(r)} for r in categories]
    return out

