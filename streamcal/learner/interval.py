"""The result of one Venn-Abers prediction: the pair (p0, p1), its merge, and the raw score."""

from __future__ import annotations

import dataclasses

__all__ = ["VennAbersInterval"]


@dataclasses.dataclass(frozen=True)
class VennAbersInterval:
    """A Venn-Abers prediction for one object, in the style of ``river.conf.Interval``.

    Under exchangeability one of ``p0`` and ``p1`` is a perfectly calibrated probability
    of label 1 (Vovk & Petej 2014, Theorem 1); the width ``p1 - p0`` says how much the
    calibration set could not decide.

    Parameters
    ----------
    p0
        Probability of label 1 if the object's label were 0 (lower end).
    p1
        Probability of label 1 if the object's label were 1 (upper end).
    p
        The chosen merge of ``(p0, p1)`` into one probability.
    score
        The wrapped model's raw P(True) for the object (0.5 when the model returned ``{}``).

    >>> iv = VennAbersInterval(p0=0.2, p1=0.4, p=1 / 3, score=0.9)
    >>> round(iv.width, 6), 0.3 in iv
    (0.2, True)
    """

    p0: float
    p1: float
    p: float
    score: float

    @property
    def lower(self) -> float:
        """``p0``, named as in ``river.conf.Interval``."""
        return self.p0

    @property
    def upper(self) -> float:
        """``p1``, named as in ``river.conf.Interval``."""
        return self.p1

    @property
    def width(self) -> float:
        """``p1 - p0``: how uncertain the calibration itself is."""
        return self.p1 - self.p0

    def __contains__(self, p: float) -> bool:
        return self.p0 <= p <= self.p1
