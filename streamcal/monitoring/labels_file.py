"""A labels file joined to a predictions file by event id.

The processor writes predictions and reads labels on separate topics; dumped to files
(one JSON object per line each), they are joined here as the processor joins them: by
``id``. A labels file has the labels topic's messages, ``{"id": "e42", "label": ...}``;
``label`` is read with the processor's rules for the task (``binary_label``,
``class_label`` of ``streamcal.core.validate``). Predictions whose id has no label are
left out (not labelled yet), as are labels without a prediction. Everything raises
``ValueError("PATH: line N: ...")``.
"""

from __future__ import annotations

import os

__all__ = ["join_labels", "read_labels"]


def _event_id(obj: dict, where: str) -> str:
    eid = obj.get("id")
    if type(eid) is int:
        return str(eid)
    if type(eid) is not str or not eid:
        raise ValueError(
            f"{where}: field 'id' must be a non-empty string or an integer, got {eid!r}"
        )
    return eid


def read_labels(lines, decode, path) -> dict[str, object]:
    """``{id: label}`` of the ``(line_number, object)`` ``lines`` of the labels file
    ``path``, each label read by ``decode`` (``binary_label`` or ``class_label``); a
    second label for an id is an error (the processor dead-letters it).

    >>> from streamcal.core.validate import class_label
    >>> read_labels([(1, {"id": "e1", "label": 4}), (2, {"id": 7, "label": "b"})],
    ...             class_label, "labels.jsonl")
    {'e1': '4', '7': 'b'}
    >>> read_labels([(1, {"id": "e1", "label": 2.5})], class_label, "labels.jsonl")
    Traceback (most recent call last):
    ...
    ValueError: labels.jsonl: line 1: label is not a class (a string or an integer): 2.5
    """
    p = os.fspath(path)
    labels, seen = {}, {}
    for n, obj in lines:
        where = f"{p}: line {n}"
        eid = _event_id(obj, where)
        if "label" not in obj:
            raise ValueError(f"{where}: missing field 'label'")
        if eid in seen:
            raise ValueError(
                f"{where}: a second label for id {eid!r} (the first is on line {seen[eid]})"
            )
        try:
            labels[eid] = decode(obj["label"])
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        seen[eid] = n
    return labels


def join_labels(lines, labels: dict, key: str, path):
    """Yield the ``(line_number, object)`` of ``lines`` (a predictions file's) whose
    ``id`` has a label, with the label set as ``key``; the others are left out."""
    p = os.fspath(path)
    for n, obj in lines:
        eid = _event_id(obj, f"{p}: line {n}")
        if eid in labels:
            yield n, {**obj, key: labels[eid]}
