"""The protector's arithmetic (``streamcal.core.protector``), compiled by numba when it imports.

One code path: the same functions run compiled or, without numba, as plain Python over the
same array (slower, and still exact).

The protector lives in one float64 array ``k`` (its layout: ``_protector_layout``).

Calibrator i is ``1 / (1 + c[i] * o**b[i])`` with ``o = (1 - p) / p`` and ``c[i] = e^-a``;
``code[i]`` says how to take the power without ``**`` for the paper's exponents (0: b = 1,
1: b = 1/2, 2: b = 2, 3: other), and ``ident[i]`` marks the identity, which returns p itself.
"""

from __future__ import annotations

import math

from streamcal.core._jit import COMPILED  # noqa: F401 - read by the caller and the tests
from streamcal.core._jit import jit as _jit
from streamcal.core._protector_layout import (
    ALARM_AT,
    BURN_IN,
    EPS,
    HEAD,
    LOG_S,
    N_CAL,
    N_RATES,
    PASSIVE,
    THRESHOLD,
    N,
)  # fmt: skip


@_jit
def _calibrated(k, i, p, o, root):
    """Calibrator i's forecast for the clipped p (o and root: (1 - p) / p and its root)."""
    K = int(k[N_CAL])
    if k[HEAD + 3 * K + i] != 0.0:  # the identity
        return p
    m = k[HEAD + K + i]
    if m == 0.0:
        ob = o
    elif m == 1.0:
        ob = root
    elif m == 2.0:
        ob = o * o
    else:
        ob = o ** k[HEAD + 2 * K + i]
    return 1.0 / (1.0 + k[HEAD + i] * ob)


@_jit
def _clip(k, p):
    eps = k[EPS]
    return eps if p < eps else (1.0 - eps if p > 1.0 - eps else p)


@_jit
def predict(k, p):
    """The protected forecast for p: the weights' mixture of the calibrators' forecasts."""
    p = _clip(k, p)
    K, R = int(k[N_CAL]), int(k[N_RATES])
    w0 = HEAD + 4 * K + R
    o = (1.0 - p) / p
    root = math.sqrt(o)
    s = k[PASSIVE] * p
    for i in range(K):
        w = 0.0
        for r in range(R):
            w += k[w0 + r * K + i]
        s += w * _calibrated(k, i, p, o, root)
    return s


@_jit
def learn(k, p, y):
    """Bet on label y of base forecast p: reweight, renormalise, share, update ln S; then
    count the label, restart ln S at the burn-in and set the alarm. Returns ln S."""
    p = _clip(k, p)
    K, R = int(k[N_CAL]), int(k[N_RATES])
    w0 = HEAD + 4 * K + R
    o = (1.0 - p) / p
    root = math.sqrt(o)
    P = k[PASSIVE] * (p if y else 1.0 - p)  # each forecast's probability of the label
    Z = P
    for i in range(K):
        q = _calibrated(k, i, p, o, root)
        if not y:
            q = 1.0 - q
        for r in range(R):
            w = k[w0 + r * K + i] * q
            k[w0 + r * K + i] = w
            Z += w
    inv = 1.0 / Z
    k[PASSIVE] = P * inv
    for r in range(R):  # fixed share within each jump rate's row
        lo = w0 + r * K
        total = 0.0
        for i in range(K):
            total += k[lo + i]
        J = k[HEAD + 4 * K + r]
        keep = (1.0 - J) * inv
        spread = J * total * inv / K
        for i in range(K):
            k[lo + i] = k[lo + i] * keep + spread
    k[LOG_S] += math.log(Z / (p if y else 1.0 - p))
    n = k[N] + 1.0
    k[N] = n
    if n == k[BURN_IN]:
        k[LOG_S] = 0.0  # restart: the alarm tests the stream from here on
    elif k[ALARM_AT] < 0.0 and n > k[BURN_IN] and k[LOG_S] >= k[THRESHOLD]:
        k[ALARM_AT] = n
    return k[LOG_S]


@_jit
def run(k, ps, ys, out, path):
    """predict + learn over a sequence, as ``Protector.predict`` and ``Protector.learn``
    do one at a time: the protected p's into ``out``, ln S after each label into ``path``."""
    for j in range(ps.shape[0]):
        out[j] = predict(k, ps[j])
        path[j] = learn(k, ps[j], ys[j])
