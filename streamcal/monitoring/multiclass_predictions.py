"""Reading a multiclass predictions file joined with labels, into a metric log.

A multiclass prediction is the message ``streamcal run --task multiclass`` writes
(docs/processor.md): ``label`` (the *predicted* class, null before any class was known),
its top-label pair ``p0``, ``p1`` and ``p``, ``probabilities`` ({class: p}), optionally
``scores`` (the model's own {class: p}), ``intervals`` ({class: [p0, p1]}, one-vs-rest)
and ``category``; other keys (``id``, ``pairs``, ``scheme``, ...) are ignored. As
``label`` is taken, the true class is ``y``, in the line::

    {"id": "e42", "label": "refund", "p0": 0.61, "p1": 0.68, "p": 0.65,
     "probabilities": {"refund": 0.65, "billing": 0.35}, "y": "billing"}

or in a labels file (the labels topic's messages, ``{"id": "e42", "label": "billing"}``)
joined by ``id`` (``streamcal.monitoring.labels_file``). A class is a non-empty string or
an integer (its decimal string), as the processor reads labels.

``streamcal.monitoring.shapes.log_from_predictions`` feeds the lines, in order, to a
``MulticlassTracker`` as the processor does when their labels join, and returns the
metric log the processor would have written: the whole stream's lines, then the
per-category lines (with ``category``) and the per-class lines (with ``intervals``).
Predictions with a null ``label`` are not tracked, as in the processor. Bad input raises
``ValueError("PATH: line N: ...")``, for a binary line among multiclass ones too.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from streamcal.core.validate import class_label
from streamcal.monitoring.metric_log import check_category, is_number, prediction_lines

__all__ = ["TRUE_CLASS", "read_multiclass_predictions"]

TRUE_CLASS = "y"


def _vector(obj: dict, key: str, required: bool = False):
    v = obj.get(key)
    if v is None:
        if required:
            raise ValueError(
                f"missing field {key!r} (a multiclass prediction has it, as line 1 is one)"
            )
        return None
    if not isinstance(v, dict) or not all(is_number(q) for q in v.values()):
        raise ValueError(f"field {key!r} must be an object of class: probability, got {v!r}")
    return v


def _intervals(obj: dict):
    v = obj.get("intervals")
    if v is None:
        return None
    if not isinstance(v, dict) or not all(
        isinstance(pair, list) and len(pair) == 2 and all(is_number(q) for q in pair)
        for pair in v.values()
    ):
        raise ValueError(f"field 'intervals' must be an object of class: [p0, p1], got {v!r}")
    return v


def _record(obj: dict) -> dict:
    probabilities = _vector(obj, "probabilities", required=True)
    for k in ("p0", "p1"):
        if not is_number(obj.get(k)):
            raise ValueError(f"field {k!r} must be a number, got {obj.get(k)!r}")
    p = obj.get("p")
    if p is not None and not is_number(p):
        raise ValueError(f"field 'p' must be a number, got {p!r}")
    if TRUE_CLASS not in obj:
        raise ValueError(f"missing field {TRUE_CLASS!r} (the true class)")
    try:
        y = class_label(obj[TRUE_CLASS])
    except ValueError as exc:
        raise ValueError(f"field {TRUE_CLASS!r}: {exc}") from None
    label = obj.get("label")
    if label is not None:
        try:
            label = class_label(label)
        except ValueError as exc:
            raise ValueError(f"field 'label' (the predicted class): {exc}") from None
    category = check_category(obj.get("category"))
    return {
        "label": label,
        "p0": obj["p0"],
        "p1": obj["p1"],
        "p": p,
        "probabilities": probabilities,
        "y": y,
        "scores": _vector(obj, "scores"),
        "intervals": _intervals(obj),
        "category": category,
    }


def read_multiclass_predictions(
    path, progress: bool = False, labels=None
) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, {"label", "p0", "p1", "p", "probabilities", "y", "scores",
    "intervals", "category"})`` from a multiclass predictions file (the true class ``y``
    from the labels file ``labels`` if given: then only the predictions with a label).

    Types are checked here; ranges (all in [0, 1]) by the tracker.

    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "p.jsonl"
    >>> _ = f.write_text('{"label": "a", "p0": 0.5, "p1": 0.7, "probabilities": {"a": 0.6, '
    ...                  '"b": 0.4}, "y": 4}\\n{"p0": 0.2, "p1": 0.4, "label": 1}\\n')
    >>> [rec["y"] for _, rec in read_multiclass_predictions(f)]
    Traceback (most recent call last):
    ...
    ValueError: ...p.jsonl: line 2: missing field 'probabilities' (a multiclass prediction ...
    """
    p = os.fspath(path)
    for n, obj in prediction_lines(path, progress, labels, TRUE_CLASS, class_label):
        try:
            rec = _record(obj)
        except ValueError as exc:
            raise ValueError(f"{p}: line {n}: {exc}") from None
        yield n, rec
