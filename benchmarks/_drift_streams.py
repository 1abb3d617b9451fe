"""Streams and models for the alarm's figures in ``benchmarks/drift.py``.

* ``NULL_STREAMS``: exchangeable (i.i.d.) streams on which the models are sharp (labels
  nearly a function of x), where the old alarm fired; each is ``make(n, seed)``.
* ``CHANGES``: abrupt changes at label ``change``, each ``make(n, change, seed)``.
* ``MODELS``: logistic regression (scaled) and Gaussian naive Bayes.
"""

from __future__ import annotations

import math

import numpy as np
from river import linear_model, naive_bayes, preprocessing
from river.datasets import synth


def lr():
    return preprocessing.StandardScaler() | linear_model.LogisticRegression()


def gnb():
    return naive_bayes.GaussianNB()


MODELS = {"LR": lr, "GNB": gnb}


def _sigmoid(z):
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


def _dict(v) -> dict:
    return {f"x{j}": float(e) for j, e in enumerate(v)}


# --- exchangeable streams ------------------------------------------------------------------


def agrawal0(n, seed):
    """river's Agrawal, function 0 (the issue's first stream)."""
    yield from synth.Agrawal(classification_function=0, seed=seed).take(n)


def steep_logistic(n, seed):
    """P(y = 1 | x) = sigmoid(30 x0), x ~ N(0, I_2) (the issue's third stream)."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        x = rng.normal(size=2)
        yield _dict(x), bool(rng.random() < _sigmoid(30.0 * x[0]))


def sea(n, seed):
    """river's SEA (x0 + x1 <= 8), no label noise."""
    yield from synth.SEA(variant=0, noise=0.0, seed=seed).take(n)


def hyperplane(n, seed):
    """river's rotating hyperplane, frozen (no drift), no label noise, 4 features."""
    gen = synth.Hyperplane(seed=seed, n_features=4, n_drift_features=0, mag_change=0.0,
                           noise_percentage=0.0)  # fmt: skip
    yield from gen.take(n)


def sine(n, seed):
    """river's Sine, function 0 (y = x1 < sin x0), no noise."""
    yield from synth.Sine(classification_function=0, seed=seed).take(n)


def separated(n, seed):
    """Two far Gaussians: x | y ~ N(+-1.5, I_5), P(y = 1) = 0.3."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        y = bool(rng.random() < 0.3)
        yield _dict(rng.normal(1.5 if y else -1.5, 1.0, 5)), y


def circle(n, seed):
    """y = |x| < 1, x ~ N(0, I_2): a boundary no linear score gets right."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        x = rng.normal(size=2)
        yield _dict(x), bool(x @ x < 1.0)


def steep_imbalanced(n, seed):
    """P(y = 1 | x) = sigmoid(20 (x0 + x1) - 6), x ~ N(0, I_3): a rare, sharp class."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        x = rng.normal(size=3)
        yield _dict(x), bool(rng.random() < _sigmoid(20.0 * (x[0] + x[1]) - 6.0))


NULL_STREAMS = {
    "agrawal f0": agrawal0,
    "sigmoid(30 x0)": steep_logistic,
    "SEA": sea,
    "hyperplane": hyperplane,
    "sine": sine,
    "separated": separated,
    "circle": circle,
    "rare sharp class": steep_imbalanced,
}


# --- abrupt changes ------------------------------------------------------------------------


def label_shift(n, change, seed):
    """x | y ~ N(+-0.5, I_5); P(y = 1) goes from 0.2 to 0.7."""
    rng = np.random.default_rng(seed)
    for i in range(n):
        y = bool(rng.random() < (0.2 if i < change else 0.7))
        yield _dict(rng.normal(0.5 if y else -0.5, 1.0, 5)), y


def agrawal_0_2(n, change, seed):
    """river's Agrawal, function 0, then 2."""
    yield from synth.Agrawal(classification_function=0, seed=seed).take(change)
    yield from synth.Agrawal(classification_function=2, seed=seed + 1000).take(n - change)


def logit_shift(n, change, seed):
    """P(y = 1 | x) = sigmoid(w x + b), x ~ N(0, I_4), w = (2, -1, 1, 0.5); b from 0 to 1."""
    rng = np.random.default_rng(seed)
    w = np.array([2.0, -1.0, 1.0, 0.5])
    for i in range(n):
        x = rng.normal(size=4)
        b = 0.0 if i < change else 1.0
        yield _dict(x), bool(rng.random() < _sigmoid(float(w @ x) + b))


def turn(degrees):
    """The boundary P(y = 1 | x) = sigmoid(8 u x), x ~ N(0, I_2), turned by ``degrees``
    at the change; the class prior stays 1/2."""

    def make(n, change, seed):
        rng = np.random.default_rng(seed)
        t = math.radians(degrees)
        for i in range(n):
            x = rng.normal(size=2)
            u = (1.0, 0.0) if i < change else (math.cos(t), math.sin(t))
            yield _dict(x), bool(rng.random() < _sigmoid(8.0 * (u[0] * x[0] + u[1] * x[1])))

    make.__doc__ = f"A boundary turned by {degrees} degrees, the class prior kept."
    return make


CHANGES = {
    "label shift": label_shift,
    "Agrawal 0 -> 2": agrawal_0_2,
    "+1 logit": logit_shift,
    "turn 90°": turn(90),
}
DIAGNOSTIC_CHANGES = {"turn 30°": turn(30)}
