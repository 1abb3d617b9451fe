"""The result of one Venn-Abers prediction: the pair (p0, p1), its merge, and the raw score."""

from __future__ import annotations

import dataclasses

__all__ = ["VennAbersInterval"]


@dataclasses.dataclass(frozen=True)
class VennAbersInterval:
    """A Venn-Abers prediction for one object, in the style of ``river.conf.Interval``.

    Under exchangeability one of ``p0`` and ``p1`` is a perfectly calibrated probability
    of label 1 (Vovk & Petej 2014, Theorem 1); the width ``|p1 - p0|`` says how much the
    calibration set could not decide.

    Parameters
    ----------
    p0
        Probability of label 1 if the object's label were 0.
    p1
        Probability of label 1 if the object's label were 1.
    p
        The chosen merge of ``(p0, p1)`` into one probability.
    score
        The wrapped model's raw P(True) for the object (0.5 when the model returned ``{}``).
    p_protected
        The protected probability (``VennAbersClassifier(protect=True)``): p recalibrated
        by the classifier's protector; None without protection.

    >>> iv = VennAbersInterval(p0=0.2, p1=0.4, p=1 / 3, score=0.9)
    >>> round(iv.width, 6), 0.3 in iv
    (0.2, True)
    >>> VennAbersInterval(p0=0.3, p1=0.25, p=0.26, score=0.5).lower  # possible in mode "va"
    0.25
    """

    p0: float
    p1: float
    p: float
    score: float
    p_protected: float | None = None

    @property
    def lower(self) -> float:
        """``min(p0, p1)``, named as in ``river.conf.Interval``.

        p0 <= p1 always holds for modes "pretrained" and "sva" (one scorer for both
        labels); mode "va" retrains the scorer per label, so there p0 > p1 can happen.
        """
        return min(self.p0, self.p1)

    @property
    def upper(self) -> float:
        """``max(p0, p1)``, named as in ``river.conf.Interval``."""
        return max(self.p0, self.p1)

    @property
    def width(self) -> float:
        """``upper - lower``: how much the calibration itself could not decide."""
        return self.upper - self.lower

    def __contains__(self, p: float) -> bool:
        return self.lower <= p <= self.upper
