"""The waiting bounds in time: how much label delay the bytes given to waiting predictions
hold at the rate events come, said in the log at start and whenever a bound is reached.

A bound in bytes is what the disk can give; what an operator has to know is whether it
covers the delay of the labels. At ``r`` events per second and ``b`` bytes per waiting
prediction, ``--pending-max-bytes`` ``B`` holds ``B / (r * b)`` seconds of delay. Beyond
it the oldest prediction is pushed out before its label comes (counted as ``evicted``,
and its label, when it comes, as ``labels_lost``).

>>> delay_held(16 * 2**30, bytes_per_prediction=231, events_per_s=1000.0) / 3600
20.65...
>>> describe(20 * 3600.0), describe(90.0), describe(3 * 86400.0), size_text(16 * 2**30)
('20.0 h', '1.5 min', '3.0 days', '16 GiB')
"""

from __future__ import annotations

import logging
import time

__all__ = ["BoundWatch", "delay_held", "describe", "size_text"]

log = logging.getLogger(__name__)

_REPEAT_S = 300.0  # a unit's bound is reported again at most this often


def delay_held(max_bytes: int, bytes_per_prediction: float, events_per_s: float) -> float:
    """Seconds of label delay that ``max_bytes`` of waiting predictions hold."""
    return max_bytes / (bytes_per_prediction * events_per_s)


def size_text(n: int) -> str:
    """A bound in bytes for a message: ``16 GiB``, ``512 MiB``, ``2 KiB``."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):g} {unit}"
    return f"{n} bytes"


def describe(seconds: float) -> str:
    """A delay for a log line, in the largest unit that keeps it at least 1."""
    for unit, size in (("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.1f} s"


class BoundWatch:
    """Log, per unit, the delay the bounds hold (once the rate is known) and each time a
    bound pushed something out (at most every few minutes). Fed the metric lines."""

    def __init__(self, config):
        self.config = config
        self._told: dict = {}  # unit -> (time, evicted, labels_lost) of its last report

    def start(self) -> None:
        """Say the bounds in bytes, at the start of a run (the delay they hold is said once
        the event rate is known: ``observe``)."""
        cfg = self.config
        log.info(
            "waiting bounds: predictions %s (--pending-max-bytes), labels %s "
            "(--label-wait-max-bytes); the label delay they hold is logged once the event "
            "rate is known", size_text(cfg.pending_max_bytes), size_text(cfg.label_wait_max_bytes),
            extra={"event": "bounds", "pending_max_bytes": cfg.pending_max_bytes,
                   "label_wait_max_bytes": cfg.label_wait_max_bytes},
        )  # fmt: skip

    def observe(self, line: dict) -> None:
        """Look at a unit's metric line (its counters, sizes and event rate)."""
        unit = line["unit"]
        rate, waiting = line.get("events_per_s") or 0.0, line.get("pending") or 0
        lost = (line.get("evicted") or 0, line.get("labels_lost") or 0)
        told = self._told.get(unit)
        if told is None:
            if rate > 0 and waiting:
                self._told[unit] = (time.monotonic(), *lost)
                self._report(unit, line, rate, waiting, reached=any(lost))
            return
        if lost > told[1:] and time.monotonic() - told[0] >= _REPEAT_S:
            self._told[unit] = (time.monotonic(), *lost)
            self._report(unit, line, rate, waiting, reached=True)

    def _report(self, unit, line: dict, rate: float, waiting: int, reached: bool) -> None:
        cfg = self.config
        per = (line.get("pending_bytes") or 0) / waiting
        held = delay_held(cfg.pending_max_bytes, per, rate) if rate > 0 and per > 0 else None
        what = (f"--pending-max-bytes {size_text(cfg.pending_max_bytes)} holds "
                f"{describe(held)} of label delay at {rate:,.0f} events/s and {per:,.0f} "
                f"bytes per waiting prediction" if held is not None else "")  # fmt: skip
        extra = {"event": "bounds", "unit": unit, "delay_held_s": held, "events_per_s": rate,
                 "bytes_per_prediction": per}  # fmt: skip
        wait, flag = _longest_wait(cfg)
        if reached:
            log.warning(
                "unit %s: a waiting bound was reached (%d predictions evicted, %d labels "
                "lost so far); %s. Give it more disk (--pending-max-bytes, "
                "--label-wait-max-bytes) or wait less (%s)",
                unit, line.get("evicted") or 0, line.get("labels_lost") or 0, what, flag,
                extra={**extra, "evicted": line.get("evicted"),
                       "labels_lost": line.get("labels_lost")},
            )  # fmt: skip
        elif held is not None and held < wait:
            log.warning(
                "unit %s: %s, less than %s (%s): labels later than that will find their "
                "prediction pushed out", unit, what, flag, describe(wait), extra=extra,
            )  # fmt: skip
        elif held is not None:
            log.info("unit %s: %s (%s %s)", unit, what, flag, describe(wait),
                     extra=extra)  # fmt: skip


def _longest_wait(cfg) -> tuple[float, str]:
    """How long an event may wait for its label, and the flag that says so: the label
    horizon's, unless an event unlabelled at it waits on for a late label."""
    if cfg.label_horizon is None or (cfg.late_labels == "learn" and cfg.label_default is None):
        return cfg.pending_ttl, "--pending-ttl"
    return cfg.label_horizon, "--label-horizon"
