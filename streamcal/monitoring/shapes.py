"""The shapes of predictions the monitoring layer reads, one entry a task, and the one
reader that turns a predictions file of any shape into the metric log its run wrote.

A ``Shape`` is what monitoring needs of a task (``streamcal.stream.tasks`` holds the rest
and names its shape): the tracker, the schema feature of the tracker's own fields, how a
line of a predictions file is read and given to the tracker, and how a library
prediction (``predict_interval_one``'s) is (``MetricLogWriter``). A line or a prediction
is of the shape whose marker it carries (``probabilities``, ``proba``: multiclass), else
binary.

Every tracker offers one protocol: ``update_protection``, ``labels`` (the predictions
tracked), ``snapshot(reliability)``, ``category_snapshots()``, ``class_snapshots()``
(per-class lines; none but multiclass), ``to_state`` / ``from_state``.

A new shape (regression) is a ``Shape`` below, in ``SHAPES``, with a marker of its own.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from streamcal.core.validate import check_label
from streamcal.monitoring import schema
from streamcal.monitoring.metric_log import fed, iter_json_lines, read_predictions, snapshot_log
from streamcal.monitoring.multiclass_predictions import read_multiclass_predictions
from streamcal.monitoring.multiclass_tracker import MulticlassTracker
from streamcal.monitoring.tracker import CalibrationTracker

__all__ = ["BINARY", "MULTICLASS", "SHAPES", "Shape", "log_from_predictions", "shape_of_file",
           "shape_of_line", "shape_of_prediction"]  # fmt: skip


@dataclass(frozen=True)
class Shape:
    """What the monitoring layer needs of a task's predictions (see the module docstring)."""

    name: str
    tracker_class: type
    feature: str | None  # the schema's optional feature of the tracker's own fields
    line_marker: str | None  # the key a predictions-file line of this shape has
    prediction_marker: str | None  # the attribute a library prediction of it has
    read: Callable  # (path, progress, labels) -> iterator of (line number, record)
    update: Callable  # (tracker, record): track one record of ``read``
    record: Callable  # (tracker, prediction, y, category): track a library prediction
    predictions: str  # what a report calls them: "N labelled PREDICTIONS"
    a_prediction: str  # one of them, in "no A_PREDICTION has a label in LABELS"
    nothing_tracked: str  # why a file without a labels file tracked nothing
    tracked: Callable | None = None  # record -> whether it is tracked (None: all)
    check_label: Callable | None = None  # y -> ValueError before a tracker is made for it


def _update_binary(tracker, rec: dict) -> None:
    tracker.update(
        rec["p0"], rec["p1"], rec["label"], score=rec["score"], p=rec["p"],
        category=rec["category"], p_protected=rec.get("p_protected"),
    )  # fmt: skip


def _check_binary(y) -> None:
    try:
        check_label(y)
    except ValueError:
        raise ValueError(
            f"a binary prediction with label {y!r}: on a multiclass stream, a "
            "VennAbersClassifier's prediction before its first label is binary (it "
            "could not know yet); record from clf.task == 'multiclass' on"
        ) from None


def _record_binary(tracker, prediction, y, category) -> None:
    tracker.update(
        prediction.p0, prediction.p1, y, score=prediction.score, p=prediction.p,
        category=category, p_protected=getattr(prediction, "p_protected", None),
    )  # fmt: skip


def _update_multiclass(tracker, rec: dict) -> None:
    tracker.update(
        rec["label"], rec["p0"], rec["p1"], rec["p"], rec["probabilities"], rec["y"],
        scores=rec["scores"], intervals=rec["intervals"], category=rec["category"],
    )  # fmt: skip


def _record_multiclass(tracker, prediction, y, category) -> None:
    # per-class pairs: one-vs-rest's (one-vs-one's are of pairs of classes)
    pairs = prediction.intervals
    pairs = pairs if pairs and set(pairs) <= set(prediction.proba) else None
    tracker.update(
        prediction.label, prediction.p0, prediction.p1, prediction.p, prediction.proba, y,
        scores=prediction.scores, intervals=pairs, category=category,
    )  # fmt: skip


BINARY = Shape(
    name="binary",
    tracker_class=CalibrationTracker,
    feature=None,
    line_marker=None,
    prediction_marker=None,
    read=read_predictions,
    update=_update_binary,
    record=_record_binary,
    check_label=_check_binary,
    predictions="predictions",
    a_prediction="prediction",
    nothing_tracked="no prediction",
)
MULTICLASS = Shape(
    name="multiclass",
    tracker_class=MulticlassTracker,
    feature=schema.MULTICLASS,
    line_marker="probabilities",
    prediction_marker="proba",
    read=read_multiclass_predictions,
    update=_update_multiclass,
    record=_record_multiclass,
    predictions="multiclass predictions",
    a_prediction="prediction of a class",
    nothing_tracked="every 'label' (predicted class) is null",
    # No class known yet (a null predicted class): nothing was predicted, as in the processor.
    tracked=lambda rec: rec["label"] is not None,
)
SHAPES = {shape.name: shape for shape in (BINARY, MULTICLASS)}
# The shape of what carries no marker of another.
_PLAIN = BINARY


def shape_of_line(obj: dict) -> Shape:
    """The shape of the predictions-file line ``obj``.

    >>> shape_of_line({"p0": 0.1, "p1": 0.3, "label": 1}).name
    'binary'
    >>> shape_of_line({"label": "a", "p0": 0.5, "p1": 0.7, "probabilities": {"a": 0.6}}).name
    'multiclass'
    """
    for shape in SHAPES.values():
        if shape.line_marker is not None and shape.line_marker in obj:
            return shape
    return _PLAIN


def shape_of_file(path) -> Shape:
    """The shape of the predictions file ``path``: its first line's (every other line must
    then have the same shape)."""
    for _, obj in iter_json_lines(path):
        return shape_of_line(obj)
    raise AssertionError("unreachable: iter_json_lines refuses empty files")


def shape_of_prediction(prediction) -> Shape:
    """The shape of a library prediction (``predict_interval_one``'s)."""
    for shape in SHAPES.values():
        if shape.prediction_marker is not None and hasattr(prediction, shape.prediction_marker):
            return shape
    return _PLAIN


def log_from_predictions(path, shape: Shape | None = None, *, window: int = 1000,
                         bins: int = 10, points: int = 1000, progress: bool = False,
                         top_k: int = 10, labels=None) -> list[dict]:  # fmt: skip
    """The metric log the tracker of ``shape`` (None: the shape of the first line) fed with
    the predictions file ``path`` (joined with the labels file ``labels``, if given) would
    write, as its run wrote it.

    About ``points`` to ``2 * points`` snapshots, evenly spaced in labels, plus the final
    one, which carries the reliability bins; then, if predictions carried a ``category``,
    one line per category of the tracker's top ``top_k`` and ``"(other)"``; then the
    per-class lines of a multiclass file.

    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "p.jsonl"
    >>> _ = f.write_text('{"p0": 0.2, "p1": 0.4, "label": 1}\\n'
    ...                  '{"p0": 0.5, "p1": 1.3, "label": 0}\\n')
    >>> log_from_predictions(f)
    Traceback (most recent call last):
    ...
    ValueError: ...p.jsonl: line 2: need p0, p1, p and score in [0, 1] ...
    """
    shape = shape or shape_of_file(path)
    tracker = shape.tracker_class(window=window, bins=bins, top_k=top_k)
    records = shape.read(path, progress, labels)
    if shape.tracked is not None:
        records = ((n, rec) for n, rec in records if shape.tracked(rec))
    update = shape.update
    log = snapshot_log(
        fed(records, lambda rec: update(tracker, rec), path),
        lambda: tracker.labels, tracker.snapshot, points,
    )  # fmt: skip
    if not tracker.labels:
        p = os.fspath(path)
        if labels is None:
            raise ValueError(f"{p}: nothing to track: {shape.nothing_tracked}")
        raise ValueError(f"{p}: no {shape.a_prediction} has a label in {os.fspath(labels)}")
    return log + tracker.category_snapshots() + tracker.class_snapshots()
