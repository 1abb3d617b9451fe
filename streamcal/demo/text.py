"""The demo's text: metric lines in a compact form, the summary, dead letters."""

from __future__ import annotations

import math

from streamcal.demo.datasets import EXCHANGEABLE

__all__ = ["Throughput", "change_text", "dead_letters_text", "metric_text", "summary_table",
           "summary_text"]  # fmt: skip


def _f(value, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:.{digits}f}"


def metric_text(line: dict) -> str:
    """One metric line in a compact human form.

    >>> metric_text({"labels": 500, "log_loss": 0.31, "raw_log_loss": 0.345,
    ...              "ece": 0.02, "raw_ece": 0.05, "mean_width": 0.03, "mean_p0": 0.43,
    ...              "frequency": 0.45, "mean_p1": 0.46, "events": 520})
    'labels    500/520 ev | log loss 0.310 (raw 0.345) | ECE 0.020 (raw 0.050) | width 0.030 | p0 0.430 <= freq 0.450 <= p1 0.460'
    """  # noqa: E501
    return (
        f"labels {line.get('labels', 0):6d}/{line.get('events', 0)} ev"
        f" | log loss {_f(line.get('log_loss'), 3)} (raw {_f(line.get('raw_log_loss'), 3)})"
        f" | ECE {_f(line.get('ece'), 3)} (raw {_f(line.get('raw_ece'), 3)})"
        f" | width {_f(line.get('mean_width'), 3)}"
        f" | p0 {_f(line.get('mean_p0'), 3)} <= freq {_f(line.get('frequency'), 3)}"
        f" <= p1 {_f(line.get('mean_p1'), 3)}"
    )


class Throughput:
    """Events processed over time, for a rate after start-up.

    A run's whole time includes its start-up (joining the consumer group, the first fetch,
    compiling the store's kernels at the first label), which on a short demo stream is most
    of it. ``mark(events)`` is called as the count grows (metric lines, progress); the
    steady rate is taken from the first mark to the last one, where the count last grew.

    >>> t = Throughput(clock=iter([10.0, 10.5, 11.0, 12.0]).__next__)
    >>> t.mark(100); t.mark(600); t.mark(1100); t.mark(1100)
    >>> t.steady()
    (1000.0, 1000, 1.0)
    >>> Throughput().steady() is None
    True
    """

    def __init__(self, clock=None):
        import time

        self._clock = clock or time.monotonic
        self.first: tuple[float, int] | None = None  # (time, events) at the first mark
        self.last: tuple[float, int] | None = None  # at the last mark where events grew

    def mark(self, events: int) -> None:
        now = self._clock()
        if self.first is None:
            self.first = self.last = (now, events)
        elif events > self.last[1]:
            self.last = (now, events)

    def steady(self) -> tuple[float, int, float] | None:
        """(events per second, events, seconds) from the first mark to the last, or None
        without two marks apart in time and count."""
        if self.first is None or self.last[1] <= self.first[1] or self.last[0] <= self.first[0]:
            return None
        n, dt = self.last[1] - self.first[1], self.last[0] - self.first[0]
        return n / dt, n, dt


def rate_text(events, elapsed: float, steady: tuple[float, int, float] | None) -> str:
    """The summary's last line: the rate after start-up, then the whole run's.

    >>> print(rate_text(1250, 4.3, (18000.0, 1200, 0.0667)))
    throughput: 18,000 events/s after start-up (1,200 events in 0.07 s); 4.3 s in all, start-up included
    >>> print(rate_text(1250, 4.3, None))
    throughput: 4.3 s in all, start-up included (291 events/s)
    """  # noqa: E501
    if steady is None:
        rate = (events or 0) / elapsed if elapsed > 0 else float("nan")
        return f"throughput: {elapsed:.1f} s in all, start-up included ({rate:,.0f} events/s)"
    rate, n, dt = steady
    return (
        f"throughput: {rate:,.0f} events/s after start-up ({n:,} events in {dt:.2f} s); "
        f"{elapsed:.1f} s in all, start-up included"
    )


def summary_table(line: dict) -> str:
    """The raw model against Venn-Abers, from a final metric line (and the protected p,
    when the line has it).

    >>> print(summary_table({"labels": 10, "log_loss": 0.3, "raw_log_loss": 0.4,
    ...     "square_loss": 0.1, "raw_square_loss": 0.12, "ece": 0.02, "raw_ece": 0.05,
    ...     "mean_width": 0.03}))
                                    raw model  Venn-Abers
    log loss                           0.4000      0.3000
    square loss                        0.1200      0.1000
    calibration error (ECE)            0.0500      0.0200
    mean interval width (p1 - p0)           -      0.0300
    >>> print(summary_table({"log_loss": 0.3, "raw_log_loss": 0.4, "protected_log_loss": 0.28,
    ...     "square_loss": 0.1, "raw_square_loss": 0.12, "protected_square_loss": 0.09}))
                                    raw model  Venn-Abers   protected
    log loss                           0.4000      0.3000      0.2800
    square loss                        0.1200      0.1000      0.0900
    calibration error (ECE)                 -           -
    mean interval width (p1 - p0)           -           -
    """
    rows = [
        ("log loss", "raw_log_loss", "log_loss"),
        ("square loss", "raw_square_loss", "square_loss"),
        ("calibration error (ECE)", "raw_ece", "ece"),
        ("mean interval width (p1 - p0)", None, "mean_width"),
    ]
    protected = {"log_loss": "protected_log_loss", "square_loss": "protected_square_loss"}
    shown = line.get("protected_log_loss") is not None
    out = [f"{'':30s}{'raw model':>11s}{'Venn-Abers':>12s}" + (f"{'protected':>12s}" * shown)]
    for label, raw, cal in rows:
        raw_v = _f(line.get(raw)) if raw else "-"
        row = f"{label:30s}{raw_v:>11s}{_f(line.get(cal)):>12s}"
        if shown and cal in protected:
            row += f"{_f(line.get(protected[cal])):>12s}"
        out.append(row)
    return "\n".join(out)


def change_text(dataset: str, alarm_at: int | None, change: tuple[int, int]) -> str:
    """When the alarm fired, against where the stream of ``dataset`` changes: ``change``
    is (the first event after the change, the label count of its first label).

    >>> change_text("drift", 2508, (2500, 2452))
    'the drift stream changes at event 2500 (its first label is label 2452 here): the alarm fired 56 labels after it, and not before'
    >>> change_text("drift", None, (2500, 2452))
    'the drift stream changes at event 2500 (its first label is label 2452 here): the alarm has not fired'
    >>> change_text("drift", 1000, (2500, 2452)).split(": ")[1]
    'the alarm fired 1452 labels before it (a false alarm)'
    """  # noqa: E501
    event, label = change
    head = f"the {dataset} stream changes at event {event} (its first label is label {label} here)"
    if alarm_at is None:
        return f"{head}: the alarm has not fired"
    if alarm_at >= label:
        return f"{head}: the alarm fired {alarm_at - label} labels after it, and not before"
    return f"{head}: the alarm fired {label - alarm_at} labels before it (a false alarm)"


def summary_text(
    line: dict,
    dataset: str,
    model: str,
    missing: int,
    elapsed: float,
    topics: dict,
    steady: tuple[float, int, float] | None = None,
    change: tuple[int, int] | None = None,
) -> str:
    """The summary printed at the end of a demo run, from its final metric line.

    ``missing`` is the number of labels never sent, ``elapsed`` the processing time (s),
    ``steady`` the rate after start-up (``Throughput.steady``), ``change`` where the
    data set changes (``change_text``); it ends on the rates.
    """
    from streamcal.monitoring.report import alarm_verdict, corollary1_verdict

    # The report's verdict, so that the summary and the report never disagree.
    note = corollary1_verdict(line)
    if dataset not in EXCHANGEABLE:
        note += f" (the {dataset} stream is not exchangeable: no guarantee)"
    alarm = alarm_verdict(line)
    return "\n".join(
        [
            "",
            f"summary: {dataset}, model {model}, {line.get('labels')} labelled events",
            summary_table(line),
            f"Corollary 1: mean p0 {_f(line.get('mean_p0'))} <= frequency of 1s "
            f"{_f(line.get('frequency'))} <= mean p1 {_f(line.get('mean_p1'))}: {note}",
            *([] if alarm is None else [f"calibration alarm: {alarm}"]),
            *([] if alarm is None or change is None
              else ["  " + change_text(dataset, line.get("alarm_at"), change)]),  # fmt: skip
            f"events {line.get('events')}, labels joined {line.get('labels')}, still waiting "
            f"{line.get('pending')} (labels never sent: {missing}), dead letters "
            f"{line.get('dead_letters')}",
            f"predictions: {topics['predictions']}, dead letters: {topics['dead_letters']}",
            rate_text(line.get("events", 0), elapsed, steady),
        ]
    )


def dead_letters_text(letters: list, n: int, topic: str, shown: int = 5) -> str:
    """The first ``shown`` of the dead ``letters`` read back (of ``n`` in ``topic``).

    >>> letter = {"source": {"topic": "t.events", "offset": 7}, "reason": "malformed JSON",
    ...           "value": "{not json"}
    >>> print(dead_letters_text([letter], 1, "t.dead-letters"))
    dead letters (1 of 1 read back from t.dead-letters):
      t.events@7: malformed JSON  <- '{not json'
    """
    out = [f"dead letters ({len(letters)} of {n} read back from {topic}):"]
    for d in letters[:shown]:
        original = d.get("value", d.get("value_base64"))
        out.append(
            f"  {d['source']['topic']}@{d['source']['offset']}: {d['reason']}  <- {original!r}"
        )
    if len(letters) > shown:
        out.append(f"  ... and {len(letters) - shown} more")
    return "\n".join(out)
