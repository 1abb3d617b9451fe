"""Reading metric logs and prediction files (JSON lines), with errors that name the line.

Two inputs, one JSON object per line:

* a **metric log**, written by the stream processor: each line has the fields of the
  metric schema (``streamcal.monitoring.schema``): ``CalibrationTracker.snapshot()``
  (required), the processor's counters (optional here) and optionally the reliability
  bins (``reliability``, ``raw_reliability``, see ``snapshot(reliability=True)``).
* a **predictions file joined with labels**: each line has at least ``p0``, ``p1`` (the
  Venn-Abers pair, in [0, 1]; p0 <= p1 except in full VA) and ``label`` (0/1 or false/true);
  optionally ``score`` (the raw model probability of 1) and ``p`` (the merged probability;
  default p1 / (1 - p0 + p1)), ``category`` (a Mondrian category: a string or a
  number) and ``p_protected`` (a protector's probability, see ``docs/alerts.md``: its
  losses are tracked); ``null`` means absent. Other keys (``id``, ``ts``, ...) are
  ignored. Lines are taken in stream order. Example::

      {"id": "e17", "p0": 0.21, "p1": 0.34, "label": 1, "score": 0.62, "category": "fr"}

A metric-log line that carries a label value (``"category": "fr"``) holds the statistics
of that category only (the fields the schema breaks down by it); ``split_labelled``
separates those lines from the whole stream's.

The label may also come from a separate **labels file** (``labels=``), the processor's
labels topic dumped, joined by ``id`` (``streamcal.monitoring.labels_file``). A
predictions file of a multiclass run (lines with ``probabilities``) is read by
``streamcal.monitoring.multiclass_predictions``; ``streamcal.monitoring.shapes`` tells
them apart.

``streamcal.monitoring.shapes.log_from_predictions`` runs a predictions file through its
tracker and returns the metric log it would have produced, so reports have one input shape.
Everything raises ``ValueError("PATH: line N: ...")`` on bad input.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from numbers import Real

import orjson

from streamcal.core.validate import binary_label
from streamcal.monitoring import histogram, schema
from streamcal.monitoring.labels_file import join_labels, read_labels

__all__ = [
    "PREDICTION_FIELDS",
    "check_metric_line",
    "detect_format",
    "iter_json_lines",
    "read_metric_log",
    "read_predictions",
    "split_labelled",
]

PREDICTION_FIELDS = ("p0", "p1", "label")
_BIN_KEYS = ("lo", "hi", "count", "mean_pred", "frequency")
# Progress bars only where they help: files above this many bytes.
_PROGRESS_BYTES = 4 << 20


def is_number(v) -> bool:
    """Whether a JSON value is a number (not a boolean)."""
    return isinstance(v, Real) and not isinstance(v, bool)


def check_category(category):
    """``category`` if it can be a Mondrian category of a predictions file (null, a string
    or an integer), else ``ValueError``."""
    if category is not None and (isinstance(category, bool) or not isinstance(category, str | int)):
        raise ValueError(f"field 'category' must be a string or an integer, got {category!r}")
    return category


def iter_json_lines(path, progress: bool = False) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, object)`` for each line of a JSON-lines file (1-based).

    Refuses an empty file, blank lines, invalid JSON (a last line without its newline is
    reported as truncated) and lines that are not JSON objects.

    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "x.jsonl"
    >>> _ = f.write_text('{"a": 1}\\n{"a": 2')
    >>> list(iter_json_lines(f))
    Traceback (most recent call last):
    ...
    ValueError: ...x.jsonl: line 2: truncated line (no newline at the end, not valid JSON): ...
    """
    path = os.fspath(path)
    size = os.path.getsize(path)
    if size == 0:
        raise ValueError(f"{path}: empty file (expected JSON lines)")
    bar = None
    if progress and size >= _PROGRESS_BYTES:
        from tqdm import tqdm

        bar = tqdm(total=size, unit="B", unit_scale=True, desc=os.path.basename(path))
    try:
        with open(path, "rb") as f:
            for n, raw in enumerate(f, 1):
                if bar is not None:
                    bar.update(len(raw))
                line = raw.strip()
                if not line:
                    raise ValueError(f"{path}: line {n}: empty line")
                try:
                    obj = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    what = (
                        "truncated line (no newline at the end, not valid JSON)"
                        if not raw.endswith(b"\n")
                        else "not valid JSON"
                    )
                    raise ValueError(f"{path}: line {n}: {what}: {exc}") from None
                if not isinstance(obj, dict):
                    raise ValueError(
                        f"{path}: line {n}: expected a JSON object, got {type(obj).__name__}"
                    )
                yield n, obj
    finally:
        if bar is not None:
            bar.close()


def detect_format(path) -> str:
    """``"metrics"`` or ``"predictions"``, from the keys of the first line."""
    for n, obj in iter_json_lines(path):
        if "p0" in obj or "p1" in obj:
            return "predictions"
        if "labels" in obj or "log_loss" in obj:
            return "metrics"
        raise ValueError(
            f"{os.fspath(path)}: line {n}: neither a prediction (needs p0, p1, label) "
            f"nor a metric-log line (needs labels, log_loss, ...); keys: {sorted(obj)[:8]}"
        )
    raise AssertionError("unreachable: iter_json_lines refuses empty files")


def prediction_lines(path, progress: bool, labels, key: str, decode):
    """The ``(line_number, object)`` of a predictions file, or with a labels file
    ``labels``, of its predictions that have a label (set as ``key``, read by
    ``decode``)."""
    lines = iter_json_lines(path, progress)
    if labels is None:
        return lines
    return join_labels(lines, read_labels(iter_json_lines(labels), decode, labels), key, path)


def fed(records, update, path) -> Iterator[None]:
    """``update(record)`` for each ``(line_number, record)`` of the predictions file
    ``path``, yielding after each (for ``snapshot_log``); a ``ValueError`` names the file
    and the line."""
    p = os.fspath(path)
    for n, rec in records:
        try:
            update(rec)
        except ValueError as exc:
            raise ValueError(f"{p}: line {n}: {exc}") from None
        yield


def snapshot_log(fed, count, snapshot, points: int) -> list[dict]:
    """The snapshots ``snapshot(reliability)`` of a tracker while the iterator ``fed``
    updates it, one update per item: about ``points`` to ``2 * points`` of them, evenly
    spaced in ``count()`` (its labels), plus the final one with the reliability bins."""
    log: list[dict] = []
    every = 1
    for _ in fed:
        if count() % every == 0:
            log.append(snapshot(False))
            if len(log) >= 2 * points:
                log = log[1::2]  # keep multiples of the doubled step
                every *= 2
    final = snapshot(True)
    if log and log[-1]["labels"] == final["labels"]:
        log[-1] = final
    else:
        log.append(final)
    return log


def check_bins(where: str, key: str, bins) -> None:
    """ValueError naming ``where`` and ``key`` unless ``bins`` is null or a list of
    reliability bins (``ReliabilityBins.table()``)."""
    if bins is None:
        return
    if not isinstance(bins, list) or not bins:
        raise ValueError(f"{where}: {key} must be a non-empty list of bins or null")
    for i, b in enumerate(bins):
        if not isinstance(b, dict):
            raise ValueError(f"{where}: {key}[{i}] must be an object")
        for k in _BIN_KEYS:
            if k not in b:
                raise ValueError(f"{where}: {key}[{i}] is missing field {k!r}")
            v = b[k]
            if not (is_number(v) or (v is None and k in ("mean_pred", "frequency"))):
                raise ValueError(f"{where}: {key}[{i}].{k} must be a number, got {v!r}")


def check_metric_line(obj: dict, where: str = "metric-log line") -> dict:
    """Raise ValueError (prefixed by ``where``) unless ``obj`` is a valid metric-log line:
    every required field of the schema present (in a line with label values: every
    required field broken down by those labels), numbers (or null) where the schema has
    counters and gauges, counts where it has counters, bins where it has bins, strings
    for label values."""
    fields = schema.FIELDS
    labels = {label.key for label in schema.LABELS if obj.get(label.key) is not None}
    for f in fields:
        if f.required and labels <= set(f.labels) and f.key not in obj:
            raise ValueError(f"{where}: missing field {f.key!r}")
    for f in fields:
        v = obj.get(f.key)
        if f.kind == schema.BINS:
            check_bins(where, f.key, v)
        elif f.kind == schema.HISTOGRAM:
            histogram.check(where, f.key, v)
        elif v is None or not f.numeric:
            continue
        elif not is_number(v):
            raise ValueError(f"{where}: field {f.key!r} must be a number or null, got {v!r}")
        elif f.kind == schema.COUNTER and (not isinstance(v, int) or v < 0):
            raise ValueError(f"{where}: field {f.key!r} must be a count, got {v!r}")
    for label in schema.LABELS:
        v = obj.get(label.key)
        if v is not None and not isinstance(v, str):
            raise ValueError(f"{where}: label {label.key!r} must be a string, got {v!r}")
    return obj


def read_metric_log(path, progress: bool = False) -> list[dict]:
    """All lines of a metric log, validated.

    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "m.jsonl"
    >>> _ = f.write_text('{"labels": 1, "log_loss": "high"}\\n')
    >>> read_metric_log(f)
    Traceback (most recent call last):
    ...
    ValueError: ...m.jsonl: line 1: missing field 'recent_log_loss'
    """
    p = os.fspath(path)
    return [check_metric_line(obj, f"{p}: line {n}") for n, obj in iter_json_lines(path, progress)]


def split_classes(log: list[dict]) -> tuple[list[dict], dict[str, dict]]:
    """(the lines without a class, in order; the last line of each class): the per-class
    lines of a multiclass run (``MulticlassTracker.class_snapshots``), named as
    ``split_labelled`` names categories (``"CLASS @ unit UNIT"`` with several units).

    >>> split_classes([{"labels": 2}, {"labels": 2, "class": "a"}, {"labels": 3, "class": "a"}])
    ([{'labels': 2}], {'a': {'labels': 3, 'class': 'a'}})
    """
    return _split_by(log, schema.CLASS)


def split_labelled(log: list[dict]) -> tuple[list[dict], dict[str, dict]]:
    """(the lines without a category, in order; the last line of each category).

    Lines of a processor also carry ``unit`` and ``instance``: a line without a category
    is its unit's whole stream. With category lines of several units, each unit's
    category is its own row, named ``"CATEGORY @ unit UNIT"``.

    >>> whole, by_category = split_labelled([{"labels": 1}, {"labels": 1, "category": "a"},
    ...                                      {"labels": 2}, {"labels": 2, "category": "a"}])
    >>> whole, by_category
    ([{'labels': 1}, {'labels': 2}], {'a': {'labels': 2, 'category': 'a'}})
    """
    return _split_by(log, schema.CATEGORY)


def _split_by(log: list[dict], label: str) -> tuple[list[dict], dict[str, dict]]:
    """(the lines without ``label``, in order; the last line of each value of ``label``,
    named ``"VALUE @ unit UNIT"`` when lines of several units carry it)."""
    whole, rows = [], {}
    for line in log:
        value = line.get(label)
        if value is None:
            whole.append(line)
        else:
            rows[(line.get("unit"), value)] = line
    if len({unit for unit, _ in rows}) <= 1:
        return whole, {value: line for (_, value), line in rows.items()}
    named = {}
    for (unit, value), line in rows.items():
        name = f"{value} @ unit {unit}"
        named[name] = {**line, label: name}
    return whole, named


def read_predictions(path, progress: bool = False, labels=None) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, {"p0", "p1", "label", "score", "p", "category"})`` from a
    predictions file (and ``"p_protected"`` when the file has one); with a labels file
    ``labels``, of its predictions that have a label there.

    Types are checked here; ranges (all in [0, 1]) by the tracker.
    """
    p = os.fspath(path)
    for n, obj in prediction_lines(path, progress, labels, "label", binary_label):
        if "probabilities" in obj:
            raise ValueError(
                f"{p}: line {n}: a multiclass prediction (it has 'probabilities') in a "
                "predictions file whose first line is binary"
            )
        for k in PREDICTION_FIELDS:
            if k not in obj or obj[k] is None:
                raise ValueError(f"{p}: line {n}: missing field {k!r}")
        for k in ("p0", "p1", "score", "p", "p_protected"):
            v = obj.get(k)
            if v is not None and not is_number(v):
                raise ValueError(f"{p}: line {n}: field {k!r} must be a number, got {v!r}")
        try:
            category = check_category(obj.get("category"))
        except ValueError as exc:
            raise ValueError(f"{p}: line {n}: {exc}") from None
        label = obj["label"]
        if label not in (0, 1) or isinstance(label, float):
            raise ValueError(
                f"{p}: line {n}: field 'label' must be 0/1 or false/true, got {label!r}"
            )
        rec = {
            "p0": obj["p0"],
            "p1": obj["p1"],
            "label": int(label),
            "score": obj.get("score"),
            "p": obj.get("p"),
            "category": category,
        }
        if obj.get("p_protected") is not None:  # else the record is as it was before
            rec["p_protected"] = obj["p_protected"]
        yield n, rec
