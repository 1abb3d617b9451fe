"""FieldScore: calibrate (and protect) a score the event already carries, from any model.

Users often run their model elsewhere (a gradient-boosted model, a neural network's softmax)
and want its score calibrated on the stream. ``FieldScore("score")`` is a river classifier
whose P(True) is the object's field ``"score"`` and whose ``learn_one`` does nothing, so
``VennAbersClassifier(FieldScore("score"))`` calibrates that score.

What this assumes:

* **The upstream model does not learn from these labels** (at least not from the ones
  used here for calibration). Then the scoring function is fixed, no calibration or test
  object was ever learned by it, and the default mode (``"pretrained"``) is a valid
  inductive Venn-Abers predictor: Corollary 1 holds under exchangeability. If the
  upstream model is retrained on the labels it is later calibrated with, that no longer
  holds. (Modes ``"sva"`` and ``"va"`` give the same answers as ``"pretrained"`` here, the
  scorer never changing, at a higher cost.)
* **The raw score's own log loss means something only when the score is a probability**
  (``kind="probability"``, or a logit with ``kind="real"``). Venn-Abers itself only uses
  the order of the scores, so any real score is calibrated as well as its ranking allows.

Non-probability scores (``kind="real"``): any finite real number, passed through the
logistic function ``1 / (1 + e^-s)`` so that the score fits where a probability goes (the
raw-score columns of the metrics). The map is increasing, so Venn-Abers answers are those
of the raw scores, except that scores beyond about +-36 saturate to 0 or 1 in floating
point and tie; ties are pooled exactly, so validity is kept and only the resolution of such
extreme scores is lost. For a logit (a network's pre-softmax output, a boosted model's
margin) the result is the model's own probability.
"""

from __future__ import annotations

import math
from numbers import Real

from river import base

__all__ = ["FieldScore", "KINDS"]

KINDS = ("probability", "real")


class FieldScore(base.Classifier):
    """A river binary classifier whose P(True) is a field of the object; it never learns.

    Parameters
    ----------
    field
        The key of ``x`` holding the score.
    kind
        ``"probability"`` (default): the field is a probability of ``True``, a number in
        [0, 1]. ``"real"``: any finite real number (a logit, a margin), mapped to (0, 1)
        by the logistic function (see the module docstring).

    Examples
    --------

    >>> from streamcal import VennAbersClassifier
    >>> scorer = FieldScore("score")
    >>> scorer.predict_proba_one({"score": 0.8, "amount": 3.0})
    {False: 0.19999999999999996, True: 0.8}
    >>> FieldScore("margin", kind="real").predict_proba_one({"margin": 0.0})
    {False: 0.5, True: 0.5}
    >>> scorer.predict_proba_one({"score": 1.2})
    Traceback (most recent call last):
    ...
    ValueError: field 'score' must be a probability in [0, 1], got 1.2

    Calibrating an upstream model that is overconfident (it says 0.9 where 0.6 is true):

    >>> import random
    >>> rng = random.Random(0)
    >>> clf = VennAbersClassifier(FieldScore("score"), window=500)
    >>> for _ in range(2000):
    ...     x = {"score": rng.choice([0.1, 0.9])}
    ...     clf.learn_one(x, rng.random() < (0.6 if x["score"] == 0.9 else 0.4))
    >>> round(clf.predict_proba_one({"score": 0.9})[True], 1)
    0.6
    """

    def __init__(self, field: str = "score", kind: str = "probability"):
        try:
            hash(field)
        except TypeError:
            raise ValueError(f"field must be a feature name, got {field!r}") from None
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        self.field = field
        self.kind = kind

    @property
    def _multiclass(self) -> bool:
        return False

    @classmethod
    def _unit_test_params(cls):
        yield {"field": "score"}

    def score_one(self, x: dict) -> float:
        """P(True) for ``x``: its field, checked (and, for ``kind="real"``, squashed)."""
        try:
            s = x[self.field]
        except KeyError:
            raise ValueError(f"the object has no field {self.field!r}") from None
        if isinstance(s, bool) or not isinstance(s, Real) or not math.isfinite(s):
            raise ValueError(f"field {self.field!r} must be a finite real number, got {s!r}")
        s = float(s)
        if self.kind == "real":
            # Written so that neither branch overflows: e^-|s| <= 1.
            e = math.exp(-abs(s))
            return 1.0 / (1.0 + e) if s >= 0 else e / (1.0 + e)
        if not 0.0 <= s <= 1.0:
            raise ValueError(f"field {self.field!r} must be a probability in [0, 1], got {s!r}")
        return s

    def predict_proba_one(self, x: dict) -> dict[bool, float]:
        p = self.score_one(x)
        return {False: 1.0 - p, True: p}

    def score_many(self, batch):
        """``score_one`` of every row of ``batch`` (``streamcal.learner.minibatch.Batch``)
        as a float array, equal float for float; None if a row's field is missing or not
        valid (then row by row, for ``score_one``'s error naming it)."""
        import numpy as np

        frame = batch.frame
        if self.field not in frame.columns or frame[self.field].dtype.kind not in "iuf":
            return None
        s = frame[self.field].to_numpy(dtype=np.float64)
        if not np.isfinite(s).all():
            return None
        if self.kind == "real":
            # score_one's formula row by row (numpy's exp may differ in the last bit)
            out = []
            for v in s.tolist():
                e = math.exp(-abs(v))
                out.append(1.0 / (1.0 + e) if v >= 0 else e / (1.0 + e))
            return np.array(out)
        if ((s < 0.0) | (s > 1.0)).any():
            return None
        return s

    def learn_one(self, x: dict, y) -> None:
        """Nothing: the upstream model that made the score is not taught here."""
