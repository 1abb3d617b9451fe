"""The report's input: metric logs (one, or one per instance of a ``--scope partition``
job) or a predictions file joined with labels, read into one metric log whose last line
the tables show, with its per-category, per-class and per-unit lines apart."""

from __future__ import annotations

import os
from dataclasses import dataclass

from streamcal.monitoring.event_rate import event_rate
from streamcal.monitoring.metric_log import (
    detect_format,
    read_metric_log,
    split_classes,
    split_labelled,
)
from streamcal.monitoring.pooled import latest_by_unit, pooled_log
from streamcal.monitoring.shapes import log_from_predictions, shape_of_file

__all__ = ["ReportInput", "read_input"]


@dataclass
class ReportInput:
    """What a report is drawn from."""

    log: list  # the metric lines of the whole stream (units pooled)
    kind: str  # what the input was, for the page
    source: str  # the input paths
    categories: list  # each category's newest line
    classes: list  # each class's newest line
    units: dict | None = None  # unit -> its newest line (metric logs only)

    @property
    def last(self) -> dict:
        """The line the tables show: the last one, with the run's event rate (a
        processor's line at stop reads 0 events/s)."""
        last = self.log[-1]
        return {**last, "events_per_s": event_rate(self.log)} if "events_per_s" in last else last


def _paths(input_path) -> list:
    """The input paths, without the empty logs of instances killed before their first line."""
    paths = list(input_path) if isinstance(input_path, list | tuple) else [input_path]
    if len(paths) > 1:
        paths = [p for p in paths if os.path.getsize(p) > 0] or paths[:1]
    if not paths:
        raise ValueError("no input given")
    return paths


def _check_format(paths: list, input_format: str, labels) -> str:
    """The format of ``paths`` (``input_format``, or detected for ``"auto"``); ValueError
    for inputs that do not go together."""
    if input_format == "auto":
        formats = {detect_format(p) for p in paths}
        input_format = formats.pop() if len(formats) == 1 else "mixed"
    if len(paths) > 1 and input_format != "metrics":
        raise ValueError("several inputs must all be metric logs (not predictions files)")
    if labels is not None and input_format != "predictions":
        raise ValueError("a labels file goes with a predictions file, not a metric log")
    if input_format not in ("metrics", "predictions"):
        raise ValueError(
            f'input_format must be "auto", "metrics" or "predictions", got {input_format!r}'
        )
    return input_format


def _from_metric_logs(paths: list, progress: bool) -> tuple:
    """(log, kind, by_class, by_category, units) of metric logs."""
    lines = [line for p in paths for line in read_metric_log(p, progress=progress)]
    if not lines:
        raise ValueError(f"{os.fspath(paths[0])}: no metric lines")
    lines, by_class = split_classes(lines)
    lines, by_category = split_labelled(lines)
    if not lines:
        raise ValueError(f"{os.fspath(paths[0])}: no metric-log line for the whole stream")
    units = latest_by_unit(lines)
    if len(units) > 1:
        log = pooled_log(lines)  # its last line pools every unit's newest
        kind = (
            f"{len(paths)} metric log(s), {len(lines)} lines of {len(units)} units; the "
            "tables show the units' newest lines pooled"
        )
    else:
        log = lines
        kind = f"a metric log of {len(lines)} lines; the tables show its last line"
    return log, kind, by_class, by_category, units


def _from_predictions(path, window: int, bins: int, progress: bool, top_k: int,
                      labels) -> tuple:  # fmt: skip
    """(log, kind, by_class, by_category, None) of a predictions file."""
    shape = shape_of_file(path)
    log = log_from_predictions(path, shape, window=window, bins=bins, progress=progress,
                               top_k=top_k, labels=labels)  # fmt: skip
    log, by_class = split_classes(log)
    log, by_category = split_labelled(log)
    n = log[-1]["labels"]
    kind = (
        f"{n} labelled {shape.predictions}"
        + ("" if labels is None else f" (labels from {os.fspath(labels)})")
        + f", tracked with window={window}, bins={bins}"
    )
    return log, kind, by_class, by_category, None


def read_input(input_path, input_format: str = "auto", *, window: int = 1000, bins: int = 10,
               progress: bool = False, top_k: int = 10, labels=None) -> ReportInput:  # fmt: skip
    """The ``ReportInput`` of ``input_path`` (see ``write_report``); ValueError naming what
    is wrong with it."""
    paths = _paths(input_path)
    if _check_format(paths, input_format, labels) == "metrics":
        log, kind, by_class, by_category, units = _from_metric_logs(paths, progress)
    else:
        log, kind, by_class, by_category, units = _from_predictions(
            paths[0], window, bins, progress, top_k, labels
        )
    source = ", ".join(os.fspath(p) for p in paths)
    return ReportInput(log, kind, source, list(by_category.values()), list(by_class.values()),
                       units)  # fmt: skip
