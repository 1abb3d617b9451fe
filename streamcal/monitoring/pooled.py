"""Metric lines of many units of calibration, added up to the whole stream's.

With ``streamcal run --scope partition`` every partition is a unit with its own
calibrator and its own metric lines (labels ``unit`` and ``instance``), spread over the
metric logs of several instances; a unit that moves between instances continues its
counts in another log. ``latest_by_unit`` keeps the newest line of each unit (the one
that has seen the most input), ``pool`` adds such lines up field by field as the metric
schema says (``MetricField.pooling``: counters summed, losses and means weighted by the
labels they are over, reliability bins added and the ECE recomputed from them, a
per-unit figure such as the label count at which a unit's alarm fired left out), and
``pooled_log`` turns interleaved lines into one series of pooled lines over time, for
the report's figures.

Means over the last window (``recent_*``) pool as label-weighted means of the units'
windows: an approximation of a window over the whole stream.

>>> a = {"unit": "0", "labels": 10, "events": 12, "log_loss": 0.5, "ts": 1.0}
>>> b = {"unit": "1", "labels": 30, "events": 31, "log_loss": 0.3, "ts": 2.0}
>>> p = pool([a, b])
>>> p["labels"], p["events"], round(p["log_loss"], 6), p["ts"]
(40, 43, 0.35, 2.0)
"""

from __future__ import annotations

from streamcal.monitoring import histogram, schema
from streamcal.monitoring.reliability import expected_calibration_error

__all__ = ["pool", "latest_by_unit", "pooled_log", "unit_key"]


def unit_key(line: dict) -> str:
    """The unit a line belongs to (``global`` for lines without one)."""
    return str(line.get("unit") or "global")


def _progress(line: dict) -> tuple:
    """How far a unit's line is into its input: a moved unit re-emits lines it already
    wrote (identical ones), so the newest is the one that has seen the most."""
    return (line.get("labels") or 0, line.get("events") or 0, line.get("ts") or 0.0)


def _keep_newest(latest: dict, line: dict) -> None:
    """Make ``line`` its unit's entry in ``latest`` if it has seen at least as much."""
    k = unit_key(line)
    if k not in latest or _progress(line) >= _progress(latest[k]):
        latest[k] = line


def latest_by_unit(lines) -> dict:
    """``{unit: line}``: the newest line of each unit."""
    out: dict = {}
    for line in lines:
        _keep_newest(out, line)
    return out


def _add_bins(tables):
    tables = [t for t in tables if t]
    if not tables:
        return None
    edges = [(b["lo"], b["hi"]) for b in tables[0]]
    if any([(b["lo"], b["hi"]) for b in t] != edges for t in tables):
        return None  # different binnings: not addable
    out = []
    for i, (lo, hi) in enumerate(edges):
        bins = [t[i] for t in tables if t[i]["count"]]
        c = sum(b["count"] for b in bins)
        out.append(
            {
                "lo": lo,
                "hi": hi,
                "count": c,
                "mean_pred": sum(b["count"] * b["mean_pred"] for b in bins) / c if c else None,
                "frequency": sum(b["count"] * b["frequency"] for b in bins) / c if c else None,
            }
        )
    return out


def pool(lines) -> dict:
    """One line for the units whose (latest) ``lines`` are given: each field of the schema
    pooled as ``MetricField.pooling`` says; None where no unit has a value, absent if it
    belongs to a feature (``MetricField.only_with``) that no unit has a value of."""
    lines = list(lines)
    out: dict = {}
    bins_of: dict = {}
    for f in schema.FIELDS:
        how = f.pooling
        values = [(ln.get(f.key), ln) for ln in lines if ln.get(f.key) is not None]
        if f.only_with and not values:
            continue  # a feature no unit uses (protection): left out, as in their lines
        if how == "bins":
            out[f.key] = bins_of[f.key] = _add_bins([v for v, _ in values])
        elif how == "histogram":
            out[f.key] = histogram.add([v for v, _ in values])
        elif how == "none" or (not values and not how.startswith("ece:")):
            out[f.key] = None
        elif how == "sum":
            out[f.key] = sum(v for v, _ in values)
        elif how == "max":
            out[f.key] = max(v for v, _ in values)
        elif how == "join":
            out[f.key] = ", ".join(sorted({str(v) for v, _ in values}))
        elif how.startswith("mean:"):
            weight = how.split(":", 1)[1]
            w = [(v, ln.get(weight) or 0) for v, ln in values]
            total = sum(x for _, x in w)
            out[f.key] = sum(v * x for v, x in w) / total if total else None
        else:  # "ece:<bins field>": filled in below, once the bins are added
            out[f.key] = None
    for f in schema.FIELDS:
        if f.pooling.startswith("ece:"):
            # Every bins field was pooled above (None where no unit has bins).
            table = bins_of.get(f.pooling.split(":", 1)[1])
            out[f.key] = expected_calibration_error(table) if table else None
    return out


def pooled_log(lines, points: int = 2000) -> list[dict]:
    """Pooled lines over time: the lines sorted by time, and after each (at most about
    ``points`` of them, evenly spread, the last always) the pool of every unit's newest
    line so far."""
    lines = sorted(lines, key=lambda ln: ln.get("ts") or 0.0)
    step = max(1, len(lines) // points)
    latest: dict = {}
    out = []
    for i, line in enumerate(lines):
        _keep_newest(latest, line)
        if i % step == 0 or i == len(lines) - 1:
            out.append(pool(latest.values()))
    return out
