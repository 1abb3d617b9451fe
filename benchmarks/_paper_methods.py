"""W, VA (Algorithm 1), SVA (Algorithm 2) and DIR (section 3) of Vovk & Petej (2014).

All calibration goes through streamcal's core. Each method returns, per test object,
the pair of probabilities the paper scores: the log-loss merge (for MLE) and the
square-loss merge (for RMSE). W and DIR output one probability, used for both.

The paper calibrates *in-sample* scores: the classifier is trained on the training
sequence and the calibration pairs are its scores on that same sequence (section 3:
"compute the score s(x_i) for each training observation"). There is no held-out
calibration set; VA compensates by retraining with the test object included.
"""

from __future__ import annotations

import numpy as np

from streamcal.core import dir_predict, merge_log, merge_square, venn_abers

METHODS = ("W", "VA", "SVA", "DIR")


def mle(p: np.ndarray, y: np.ndarray) -> float:
    """Mean log error, unclipped: ``inf`` as soon as one p is 0 or 1 on the wrong side.

    >>> mle(np.array([0.5, 1.0]), np.array([1, 1]))
    0.34657359027997264
    >>> mle(np.array([0.5, 1.0]), np.array([1, 0]))
    inf
    """
    with np.errstate(divide="ignore"):
        losses = -np.log(np.where(y == 1, p, 1.0 - p))
    return float(np.mean(losses))


def rmse(p: np.ndarray, y: np.ndarray) -> float:
    """Root mean square error.

    >>> rmse(np.array([0.5, 1.0]), np.array([1, 0]))
    0.7905694150420949
    """
    return float(np.sqrt(np.mean((y - p) ** 2)))


def base_methods(scorer, X_train, y_train, X_test) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """W, SVA and DIR from one fit of the scorer: method -> (p for MLE, p for RMSE).

    Also returns SVA's raw pair under ``"SVA_pair"`` for the Lemma 3 check and the
    (calibration, test) scores under ``"scores"``.
    """
    scorer.fit(X_train, y_train)
    cal = scorer.score(X_train)
    test = scorer.score(X_test)
    w = scorer.proba(X_test)
    p0, p1 = venn_abers(cal, y_train, test)
    d = dir_predict(cal, y_train, test)
    return {
        "W": (w, w),
        "SVA": (merge_log(p0, p1), merge_square(p0, p1)),
        "DIR": (d, d),
        "SVA_pair": (p0, p1),
        "scores": (cal, test),
    }


def va_pair(make_scorer, X_train, y_train, x) -> tuple[float, float]:
    """Algorithm 1 for one test object: (p0, p1) from two refits of the scoring classifier.

    ``make_scorer()`` returns a fresh scorer; for y in {0, 1} it is trained on the training
    sequence extended by (x, y), and p_y is the isotonic calibrator of the extended
    sequence's scores (test pair included, with label y) read at the test score.
    """
    X = np.vstack([X_train, x[None, :]])
    p = []
    for label in (0, 1):
        scorer = make_scorer().fit(X, np.append(y_train, label))
        s = scorer.score(X)
        # venn_abers puts the test score into the calibration set with each label in turn;
        # we keep the half that matches the label the scorer was trained with.
        pair = venn_abers(s[:-1], y_train, s[-1:])
        p.append(float(pair[label][0]))
    return p[0], p[1]


def va_method(make_scorer, X_train, y_train, X_test) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """VA for every test object: {"VA": (p for MLE, p for RMSE), "VA_pair": (p0, p1)}."""
    pairs = np.array([va_pair(make_scorer, X_train, y_train, x) for x in X_test]).reshape(-1, 2)
    p0, p1 = pairs[:, 0], pairs[:, 1]
    return {"VA": (merge_log(p0, p1), merge_square(p0, p1)), "VA_pair": (p0, p1)}


def lemma3_violations(p0: np.ndarray, p1: np.ndarray) -> int:
    """How many objects break Lemma 3: p0 < 1, p1 > 0, and both merges strictly inside (0, 1).

    >>> lemma3_violations(np.array([0.0, 0.2]), np.array([0.5, 0.3]))
    0
    >>> lemma3_violations(np.array([1.0]), np.array([1.0]))
    1
    """
    bad = (p0 >= 1) | (p1 <= 0)
    for p in (merge_log(p0, p1), merge_square(p0, p1)):
        bad |= (p <= 0) | (p >= 1)
    return int(np.count_nonzero(bad))
