"""A labels file joined to a predictions file by event id.

The processor writes predictions and reads labels on separate topics; dumped to files
(one JSON object per line each), they are joined here as the processor joins them: by
``id``. A labels file has the labels topic's messages, ``{"id": "e42", "label": ...}``;
``label`` is read with the processor's rules for the task (``binary_label``,
``class_label``). Predictions whose id has no label are left out (not labelled yet), as
are labels without a prediction. Everything raises ``ValueError("PATH: line N: ...")``.
"""

from __future__ import annotations

import os

__all__ = ["binary_label", "class_label", "join_labels", "read_labels"]

# The labels topic's binary values: 1.0 == 1 == True hash alike, so floats and booleans
# find their key; "yes" and 0.5 do not.
_BINARY = {0: 0, 1: 1, "0": 0, "1": 1, "false": 0, "true": 1}


def binary_label(value) -> int:
    """0 or 1 from a binary label as the processor reads it (0/1, 0.0/1.0, true/false,
    "0"/"1"/"true"/"false"); ValueError otherwise.

    >>> binary_label(True), binary_label("0"), binary_label(1.0)
    (1, 0, 1)
    >>> binary_label(2)
    Traceback (most recent call last):
    ...
    ValueError: label is not binary (0/1, true/false or "0"/"1"/"true"/"false"): 2
    """
    if type(value) in (bool, int, float, str):
        y = _BINARY.get(value)
        if y is not None:
            return y
    raise ValueError(f'label is not binary (0/1, true/false or "0"/"1"/"true"/"false"): {value!r}')


def class_label(value) -> str:
    """A class from a multiclass label as the processor reads it: a non-empty string, or
    an integer as its decimal string (``4`` and ``"4"`` are one class, the key it has in
    the predictions' ``probabilities``); ValueError for anything else (a float, a
    boolean, null, ...: none names a class without a guess).

    >>> class_label(4), class_label("refund")
    ('4', 'refund')
    >>> class_label(4.0)
    Traceback (most recent call last):
    ...
    ValueError: label is not a class (a string or an integer): 4.0
    """
    if type(value) is str and value:
        return value
    if type(value) is int:
        return str(value)
    if value == "":
        raise ValueError("empty label (a class name must not be empty)")
    raise ValueError(f"label is not a class (a string or an integer): {value!r}")


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
