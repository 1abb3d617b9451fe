"""MetricLogWriter: the metric log of a library loop, the file ``streamcal report`` reads.

The stream processor writes a metric log as it runs (``docs/processor.md``); a river loop
in a script or a notebook writes the same file with this: one ``update`` per labelled
prediction, a line every ``every`` labels (``CalibrationTracker.snapshot``), and on
``close`` the final line with the reliability bins, then one line per category (with
``category=``) and, for multiclass predictions, per class. ``write_report`` and
``streamcal report`` read it as they read the processor's.

A prediction is what ``predict_interval_one`` returned: a ``VennAbersInterval`` (binary:
p0, p1, p, the raw score and, with ``protect=``, the protected p), or a
``MulticlassPrediction`` (the top-label pair, every class's probability, the per-class
pairs and the model's scores), which makes the log a multiclass one. The alarm's state
(and protection's gain) is the tracker's to record, as the processor does:
``update_protection``.

>>> import tempfile, pathlib
>>> from streamcal.learner import VennAbersInterval
>>> path = pathlib.Path(tempfile.mkdtemp()) / "metrics.jsonl"
>>> with MetricLogWriter(path, every=2) as log:
...     for y in (0, 1, 1):
...         log.update(VennAbersInterval(p0=0.2, p1=0.6, p=0.43, score=0.7), y)
>>> from streamcal.monitoring import read_metric_log
>>> [line["labels"] for line in read_metric_log(path)]
[2, 3]
"""

from __future__ import annotations

import os

import orjson

from streamcal.monitoring.log_file import open_for_append
from streamcal.monitoring.multiclass_tracker import MulticlassTracker
from streamcal.monitoring.shapes import BINARY, Shape, shape_of_prediction
from streamcal.monitoring.tracker import CalibrationTracker

__all__ = ["MetricLogWriter"]


class MetricLogWriter:
    """Write a metric log of labelled predictions (see the module docstring).

    Parameters
    ----------
    path
        The JSON-lines file to write (truncated first, unless ``append``).
    every
        A line every this many labels (the processor's ``--metrics-every``).
    window, bins, top_k
        The tracker's (``CalibrationTracker``): labels behind the ``recent_*`` figures,
        reliability bins, categories charted one by one.
    append
        Add to an existing log instead of starting a new one.
    """

    def __init__(
        self,
        path,
        every: int = 1000,
        *,
        window: int = 1000,
        bins: int = 10,
        top_k: int = 10,
        append: bool = False,
    ):
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"every must be a positive integer, got {every!r}")
        self.path = os.fspath(path)
        self.every = every
        self._settings = {"window": window, "bins": bins, "top_k": top_k}
        self.tracker: CalibrationTracker | MulticlassTracker | None = None
        self.shape: Shape | None = None  # of the first prediction; every one has it
        # Appending: a last line cut off by a killed writer is dropped first.
        self._file = open_for_append(self.path) if append else open(self.path, "wb")  # noqa: SIM115

    def _tracker(self, shape: Shape):
        if self.tracker is None:
            self.tracker = shape.tracker_class(**self._settings)
            self.shape = shape
        elif shape is not self.shape:
            raise ValueError(
                f"a metric log is of {self.shape.name} or of {shape.name} predictions, not both"
            )
        return self.tracker

    @property
    def labels(self) -> int:
        """Labelled predictions so far."""
        return 0 if self.tracker is None else self.tracker.labels

    def update(self, prediction, y, category=None) -> None:
        """Add the labelled ``prediction`` (what ``predict_interval_one`` gave before the
        label ``y`` came), of ``category`` if given; a line every ``every`` labels.
        ValueError (nothing recorded) on bad input."""
        if self._file.closed:
            raise ValueError("the metric log is closed")
        shape = shape_of_prediction(prediction)
        if shape.check_label is not None:
            shape.check_label(y)
        shape.record(self._tracker(shape), prediction, y, category)
        if self.labels % self.every == 0:
            self._write(self.tracker.snapshot())

    def update_protection(self, log_martingale, alarm, alarm_at=None, alpha=0.01, category=None,
                          alarm_onset=None, protection_gain=None):  # fmt: skip
        """Record the alarm's state after a label (``clf.log_martingale``, ``clf.alarm``,
        ``clf.alarm_at``, the level, ``clf.alarm_onset``) and, with protection, what it
        gained (``clf.protection_gain``; binary only); the next line shows them
        (``CalibrationTracker.update_protection``)."""
        tracker = self.tracker if self.tracker is not None else self._tracker(BINARY)
        gain = {} if protection_gain is None else {"protection_gain": protection_gain}
        tracker.update_protection(log_martingale, alarm, alarm_at, alpha, category=category,
                                  alarm_onset=alarm_onset, **gain)  # fmt: skip

    def _write(self, line: dict) -> None:
        self._file.write(orjson.dumps(line) + b"\n")

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        """Write the final line (with the reliability bins), the per-category and
        per-class lines, and close the file. Closing twice does nothing."""
        if self._file.closed:
            return
        try:
            if self.tracker is not None and self.labels:
                self._write(self.tracker.snapshot(reliability=True))
                for line in self.tracker.category_snapshots() + self.tracker.class_snapshots():
                    self._write(line)
        finally:
            self._file.close()

    def __enter__(self) -> MetricLogWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
