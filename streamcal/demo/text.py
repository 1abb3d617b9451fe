"""The demo's text: metric lines in a compact form, the summary, dead letters."""

from __future__ import annotations

import math

from streamcal.demo.datasets import EXCHANGEABLE

__all__ = ["dead_letters_text", "metric_text", "summary_table", "summary_text"]


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


def summary_text(
    line: dict, dataset: str, model: str, missing: int, elapsed: float, topics: dict
) -> str:
    """The summary printed at the end of a demo run, from its final metric line.

    ``missing`` is the number of labels never sent, ``elapsed`` the processing time (s).
    """
    from streamcal.monitoring.report import alarm_verdict, corollary1_verdict

    # The report's verdict, so that the summary and the report never disagree.
    note = corollary1_verdict(line)
    if dataset not in EXCHANGEABLE:
        note += f" (the {dataset} stream is not exchangeable: no guarantee)"
    rate = line.get("events", 0) / elapsed if elapsed > 0 else float("nan")
    alarm = alarm_verdict(line)
    return "\n".join(
        [
            "",
            f"summary: {dataset}, model {model}, {line.get('labels')} labelled events",
            summary_table(line),
            f"Corollary 1: mean p0 {_f(line.get('mean_p0'))} <= frequency of 1s "
            f"{_f(line.get('frequency'))} <= mean p1 {_f(line.get('mean_p1'))}: {note}",
            *([] if alarm is None else [f"calibration alarm: {alarm}"]),
            f"events {line.get('events')}, labels joined {line.get('labels')}, still waiting "
            f"{line.get('pending')} (labels never sent: {missing}), dead letters "
            f"{line.get('dead_letters')}, {elapsed:.1f} s ({rate:.0f} events/s)",
            f"predictions: {topics['predictions']}, dead letters: {topics['dead_letters']}",
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
