"""Label delays per class, and a warning when they look outcome-dependent.

When a label's delay depends on its outcome (a chargeback comes in days, "no chargeback"
only when the dispute window closes), the labels that have arrived at any moment
over-represent the quick class. Learning them in arrival order biases the calibration set
and breaks the exchangeability that Venn-Abers validity and the alarm rest on, even on a
stationary stream. The fix is a label-maturity horizon (``label_horizon`` in the library,
``--label-horizon`` in the processor): labels are learned in event order once their event
is older than the horizon. This module only notices the symptom.

The statistic: per class, the geometric mean delay (the mean of ``log1p(delay)``, robust to
a few very late labels and scale-free). Once every class seen has ``min_labels`` labels
and two classes' geometric means differ by more than ``factor``, ``add`` returns a warning
text, once. Same-distribution delays stay well inside the factor: with 50 labels per class
the mean of ``log1p`` of a uniform delay moves by about 0.1-0.2 (a ratio of 1.1-1.2),
against the factor's default 4.

>>> delays = LabelDelays(min_labels=3, unit="predictions", advice="set label_horizon")
>>> [delays.add(y, d) for y, d in [(True, 40), (False, 3000), (True, 38), (False, 2900)]]
[None, None, None, None]
>>> print(delays.add(True, 41) or delays.add(False, 3100))  # doctest: +NORMALIZE_WHITESPACE
label delays depend on the outcome: labels of class True came after ~40 predictions, of
class False after ~3e+03 (74x apart); labels learned in arrival order over-represent the
quicker class and bias the calibration: set label_horizon
>>> delays.add(True, 40) is None  # said once
True
"""

from __future__ import annotations

import math

__all__ = ["LabelDelays", "OutcomeDependentDelayWarning"]


class OutcomeDependentDelayWarning(UserWarning):
    """The labels' delays differ by class: learning them in arrival order is biased."""


class LabelDelays:
    """Per-class label delays; ``add`` says, once, when they look outcome-dependent.

    Parameters
    ----------
    factor
        Ratio between two classes' geometric mean delays above which delays count as
        outcome-dependent.
    min_labels
        Labels each class needs before it is compared (and at least two classes).
    unit
        What a delay is counted in, for the message ("predictions", "s").
    advice
        What to do, ending the message (the setting of the library or of the processor).
    """

    __slots__ = ("factor", "min_labels", "unit", "advice", "said", "_n", "_sum")

    def __init__(
        self,
        factor: float = 4.0,
        min_labels: int = 50,
        unit: str = "s",
        advice: str = "set a label horizon of about the delay's high quantile",
    ):
        if not factor > 1.0:
            raise ValueError(f"factor must be > 1, got {factor!r}")
        if min_labels < 1:
            raise ValueError(f"min_labels must be >= 1, got {min_labels!r}")
        self.factor = float(factor)
        self.min_labels = int(min_labels)
        self.unit = unit
        self.advice = advice
        self.said = False  # the warning is given once: it names a property of the source
        self._n: dict = {}  # class -> labels seen
        self._sum: dict = {}  # class -> sum of log1p(delay)

    def add(self, y, delay: float) -> str | None:
        """Count a label of class ``y`` that came ``delay`` after its prediction; the
        warning text the first time the classes' delays differ by more than ``factor``."""
        self._n[y] = self._n.get(y, 0) + 1
        self._sum[y] = self._sum.get(y, 0.0) + math.log1p(max(float(delay), 0.0))
        if self.said or len(self._n) < 2 or min(self._n.values()) < self.min_labels:
            return None
        typical = self.typical()
        quick = min(typical, key=typical.get)
        slow = max(typical, key=typical.get)
        ratio = (typical[slow] + 1.0) / (typical[quick] + 1.0)
        if ratio <= self.factor:
            return None
        self.said = True
        return (
            f"label delays depend on the outcome: labels of class {quick!r} came after "
            f"~{typical[quick]:.2g} {self.unit}, of class {slow!r} after ~{typical[slow]:.2g} "
            f"({ratio:.0f}x apart); labels learned in arrival order over-represent the quicker "
            f"class and bias the calibration: {self.advice}"
        )

    def typical(self) -> dict:
        """Each class's geometric mean delay so far (``{}`` before any label)."""
        return {c: math.expm1(self._sum[c] / n) for c, n in self._n.items()}
