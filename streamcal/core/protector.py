"""Protected calibration: a forecast that recovers from a shift, and an alarm you can trust.

Vovk, Petej & Gammerman, *Protected probabilistic classification* (COPA 2021, PMLR 152;
arXiv 2107.01726), log-loss version. A bettor spreads its capital over a few monotone
recalibrations of a base forecast p (the Cox calibrators, below) plus a share ``pi`` that
never bets, and moves capital between calibrators at a few jump rates (fixed share). Its
capital-weighted mixture of the recalibrated forecasts is the *protected* probability; its
capital S is a test martingale for "p is the true probability of label 1".

Two exact facts follow, both tested:

* **Loss.** With labels in order, the protected cumulative log loss equals the base one
  (p clipped to ``[eps, 1 - eps]``) minus ``log S``, at every step. The passive share
  never bets, so ``S >= pi`` and protection costs at most ``ln(1 / pi)`` (ln 2) in total.
* **Alarm.** Each factor of S has expectation 1 when the label is drawn from p, so by
  Ville's inequality S reaches ``1 / alpha`` with probability at most ``alpha``, however
  long the stream and however often S is looked at.

The Cox calibrator ``f_{a,b}(p) = e^a p^b / (e^a p^b + (1 - p)^b)`` is computed as
``1 / (1 + e^-a o^b)`` with ``o = (1 - p) / p``: one square root and nine divisions.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np

from streamcal.core import _protector_layout as _K
from streamcal.core.validate import check_label

__all__ = ["Protector", "protect_batch"]

STATE_FORMAT = 1  # version of to_state()'s layout; from_state refuses others


def _check_real(name: str, value, low: float, high: float, closed: tuple = (False, False)):
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
    lo_ok = value >= low if closed[0] else value > low
    hi_ok = value <= high if closed[1] else value < high
    if not (lo_ok and hi_ok):
        lb, hb = "[" if closed[0] else "(", "]" if closed[1] else ")"
        raise ValueError(f"{name} must be in {lb}{low}, {high}{hb}, got {value!r}")
    return float(value)


def _check_grid(name: str, values, positive: bool) -> tuple[float, ...]:
    try:
        values = tuple(values)
    except TypeError:
        msg = f"{name} must be a non-empty sequence of numbers, got {values!r}"
        raise ValueError(msg) from None
    if not values:
        raise ValueError(f"{name} must be a non-empty sequence of numbers, got ()")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, Real) or not math.isfinite(v):
            raise ValueError(f"{name} must hold finite real numbers, got {v!r}")
        if positive and v <= 0:
            raise ValueError(f"{name} must hold positive numbers, got {v!r}")
    return tuple(float(v) for v in values)


def check_probability(p) -> float:
    """``p`` as a float if it is a finite number in [0, 1], else ``ValueError`` naming it.

    >>> check_probability(0.25)
    0.25
    >>> check_probability(1.5)
    Traceback (most recent call last):
    ...
    ValueError: p must be a finite probability in [0, 1], got 1.5
    """
    if type(p) is float and 0.0 <= p <= 1.0:  # fast path; also False for nan
        return p
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, Real):
        raise ValueError(f"p must be a finite probability in [0, 1], got {p!r}")
    value = float(p)
    if not 0.0 <= value <= 1.0:  # nan fails both comparisons
        raise ValueError(f"p must be a finite probability in [0, 1], got {p!r}")
    return value


class Protector:
    """Protect a stream of probability forecasts: a recalibrated forecast and a test martingale.

    ``predict(p)`` gives the protected probability for a base forecast ``p`` and changes
    nothing; ``learn(p, y)`` takes the label together with the base ``p`` that was given
    for that object (so a late label, after other labels, learns from the right forecast).

    Parameters
    ----------
    a_values, b_values
        The Cox calibrator grid ``f_{a,b}(p) = e^a p^b / (e^a p^b + (1 - p)^b)``: every
        pair (a, b), ``a`` outermost. The paper's grid (default) is a in {0, 1, -1}, b in
        {1, 1/2, 2}: 9 calibrators, the first the identity. Capital starts on the first one.
    jump_rates
        The fixed-share rates: each rate owns an equal part of the active capital, and
        after each label a fraction ``J`` of it is spread evenly over the calibrators, so
        that capital can move to a new best calibrator after a shift.
    pi
        The passive share: capital that always forecasts ``p`` itself. It bounds the
        price of protection: the protected cumulative log loss is at most ``ln(1 / pi)``
        above the base one.
    eps
        ``p`` is clipped to ``[eps, 1 - eps]`` before it enters (a forecast of exactly 0
        or 1 would make one label's loss infinite). 0.001 by default: the clip costs on
        sharp streams, where Venn-Abers p goes below 0.01 and is right to
        (``benchmarks/drift.py``, 16 sharp exchangeable streams: protected minus VA p log
        loss per label -0.0012 on average with 0.01, worst stream +0.0039; -0.0025 with
        0.001, worst +0.00007; no change below 0.001; after a label shift the same
        protected / VA p ratio, 0.80). The first release used 0.01.
    alpha
        Alarm level: ``alarm`` becomes True (and stays so) the first time ``log_martingale
        >= ln(1 / alpha)`` after the burn-in. Under the hypothesis that the labels are
        drawn from the forecasts, this happens with probability at most ``alpha``.
    burn_in
        The test martingale restarts (``log_martingale`` is set to 0) once ``burn_in``
        labels have been learned, and the alarm is armed only from then on. The weights
        are not restarted: the protected probability protects from the first label. Why:
        a Venn-Abers forecast over a small calibration set is genuinely not calibrated
        (the interval is wide), so an early alarm would be true but useless. Restarting
        (rather than only arming) keeps the alarm a test of the stream *after* the
        burn-in, still valid by Ville's inequality since every factor is a fair bet. The
        default, 1,000 labels, is the learner's default window; 0 disables it. Measured
        on 20 unchanging 6,000-label streams (Agrawal function 0, and a class prior of
        0.2) with the default classifier: alarms on 2 with no burn-in, 1 with 1,000 (at
        label 1,416) and 0 with 2,000. The default mode reaches its steady state after
        twice its window; a burn-in of ``2 * window`` avoids alarms from its start.

    Examples
    --------

    A forecast of 0.2 on a stream where label 1 comes 70% of the time:

    >>> import random
    >>> rng = random.Random(0)
    >>> prot = Protector(burn_in=0)
    >>> round(prot.predict(0.2), 12)  # nothing learned: p itself, to rounding
    0.2
    >>> path = [prot.learn(0.2, rng.random() < 0.7) for i in range(300)]  # ln S after each
    >>> round(prot.predict(0.2), 2), prot.alarm, prot.alarm_at  # the grid's best is 0.58
    (0.57, True, 33)
    >>> path[32] >= math.log(1 / prot.alpha) > path[31], path[-1] == prot.log_martingale
    (True, True)

    The state is plain data:

    >>> copy = Protector.from_state(prot.to_state())
    >>> copy.predict(0.3) == prot.predict(0.3)
    True

    Cost per event (predict + learn, ``benchmarks/drift.py``): 0.6 µs, the arithmetic
    compiled by numba (``streamcal.core._protector_kernels``) over one array that holds
    the parameters and the state, so that a call passes numba one array and a number; the
    authors' library took 1,552 µs in the same run. Without numba the same functions run
    uncompiled over a list (about 25 µs).
    """

    def __init__(
        self,
        a_values=(0.0, 1.0, -1.0),
        b_values=(1.0, 0.5, 2.0),
        jump_rates=(1e-2, 1e-3, 1e-4),
        pi: float = 0.5,
        eps: float = 0.001,
        alpha: float = 0.01,
        burn_in: int = 1000,
    ):
        self.a_values = _check_grid("a_values", a_values, positive=False)
        self.b_values = _check_grid("b_values", b_values, positive=True)
        self.jump_rates = _check_grid("jump_rates", jump_rates, positive=False)
        for j in self.jump_rates:
            if not 0.0 <= j <= 1.0:
                raise ValueError(f"jump_rates must be in [0, 1], got {j!r}")
        self.pi = _check_real("pi", pi, 0.0, 1.0)
        self.eps = _check_real("eps", eps, 0.0, 0.5)
        self.alpha = _check_real("alpha", alpha, 0.0, 1.0)
        if isinstance(burn_in, bool) or not isinstance(burn_in, Integral) or burn_in < 0:
            raise ValueError(f"burn_in must be a non-negative integer, got {burn_in!r}")
        self.burn_in = int(burn_in)

        from streamcal.core import _protector_kernels as kern  # numba loads on first use only

        self._predict, self._learn, self._run = kern.predict, kern.learn, kern.run
        # The parameters and the state in one array (see the kernels module): calibrator
        # (a, b) as e^-a and how to raise o to b; the identity gets p itself, exactly.
        pairs = [(a, b) for a in self.a_values for b in self.b_values]
        K, R = len(pairs), len(self.jump_rates)
        head = [0.0] * _K.HEAD
        head[_K.N_CAL], head[_K.N_RATES], head[_K.EPS] = K, R, self.eps
        head[_K.BURN_IN], head[_K.THRESHOLD] = self.burn_in, math.log(1.0 / self.alpha)
        head[_K.ALARM_AT], head[_K.PASSIVE] = -1.0, self.pi
        weights = [0.0] * (K * R)
        weights[::K] = [(1.0 - self.pi) / R] * R  # each rate's share starts on the first
        k = (
            head
            + [math.exp(-a) for a, _ in pairs]
            + [{1.0: 0, 0.5: 1, 2.0: 2}.get(b, 3) for _, b in pairs]
            + [b for _, b in pairs]
            + [float(a == 0.0 and b == 1.0) for a, b in pairs]
            + list(self.jump_rates)
            + weights
        )
        # Uncompiled, the same functions run 3x faster over a list of floats than over
        # an array, whose every element read makes a numpy scalar.
        self._k = np.array(k) if kern.COMPILED else k
        self._w0 = _K.HEAD + 4 * K + R  # where the weights start

    # --- public API ----------------------------------------------------------------------

    @property
    def n(self) -> int:
        """The number of labels learned."""
        return int(self._k[_K.N])

    @property
    def log_martingale(self) -> float:
        """ln S: the log of the test martingale's value (since the burn-in restart)."""
        return float(self._k[_K.LOG_S])

    @property
    def alarm_at(self) -> int | None:
        """The number of labels learned when the alarm fired; None before."""
        at = self._k[_K.ALARM_AT]
        return None if at < 0 else int(at)

    @property
    def alarm(self) -> bool:
        """True once the test martingale has reached ``1 / alpha`` after the burn-in (sticky)."""
        return bool(self._k[_K.ALARM_AT] >= 0)

    # predict and learn call the checks only for what is not plainly valid (a float in
    # [0, 1], an int 0 or 1: what the classifier passes for every event), because in the
    # processor's loop the two calls cost more than the compiled arithmetic.

    def predict(self, p) -> float:
        """The protected probability of label 1 for base forecast ``p``; no side effects."""
        if type(p) is not float or not 0.0 <= p <= 1.0:
            p = check_probability(p)
        return self._predict(self._k, p)

    def learn(self, p, y) -> float:
        """Learn label ``y`` of an object whose base forecast was ``p``; return ln S after it
        (``log_martingale``, given back because a caller watching the alarm reads it after
        every label).

        Invalid ``p`` or ``y`` raise ``ValueError`` before anything changes.
        """
        if type(p) is not float or not 0.0 <= p <= 1.0:
            p = check_probability(p)
        if type(y) is not int or not (y == 0 or y == 1):
            y = check_label(y)  # bools become ints: one compiled version of learn
        return self._learn(self._k, p, y)

    def run(self, ps, ys) -> tuple[np.ndarray, np.ndarray]:
        """Predict then learn each (p, y) in order; return (protected p's, log S after each).

        The same as calling ``predict(p)`` and ``learn(p, y)`` for each pair (the state
        moves on), with the inputs validated once up front: nothing changes if any is bad.
        """
        ps_arr, ys_arr = _check_batch(ps, ys)
        out, path = np.empty(len(ps_arr)), np.empty(len(ps_arr))
        self._run(self._k, ps_arr, ys_arr, out, path)
        return out, path

    def _params(self) -> dict:
        return {
            "a_values": list(self.a_values),
            "b_values": list(self.b_values),
            "jump_rates": list(self.jump_rates),
            "pi": self.pi,
            "eps": self.eps,
            "alpha": self.alpha,
            "burn_in": self.burn_in,
        }

    def to_state(self) -> dict:
        """The protector as plain data (floats, ints, lists); ``from_state`` rebuilds it."""
        k = self._k
        return {
            "format": STATE_FORMAT,
            **self._params(),
            "passive": float(k[_K.PASSIVE]),
            "weights": [float(w) for w in k[self._w0 :]],
            "log_martingale": float(k[_K.LOG_S]),
            "n": self.n,
            "alarm_at": self.alarm_at,
        }

    @classmethod
    def from_state(cls, state: dict) -> Protector:
        """The protector ``to_state`` described."""
        if state.get("format") != STATE_FORMAT:
            raise ValueError(f"unknown protector state format {state.get('format')!r}")
        self = cls(**{k: state[k] for k in _PARAM_NAMES})
        k = self._k
        weights = np.asarray(state["weights"], dtype=np.float64)
        if weights.shape != (len(k) - self._w0,):
            raise ValueError(f"expected {len(k) - self._w0} weights, got {weights.shape}")
        k[_K.PASSIVE] = state["passive"]
        k[_K.LOG_S] = state["log_martingale"]
        k[self._w0 :] = weights.tolist()
        k[_K.N] = int(state["n"])
        k[_K.ALARM_AT] = -1 if state["alarm_at"] is None else int(state["alarm_at"])
        return self

    def __getstate__(self) -> dict:  # pickles as plain data (the kernels are a module)
        return self.to_state()

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(Protector.from_state(state).__dict__)

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and self.to_state() == other.to_state()

    def __repr__(self) -> str:
        return (
            f"Protector(n={self.n}, log_martingale={self.log_martingale:.4g}, "
            f"alarm_at={self.alarm_at})"
        )


_PARAM_NAMES = ("a_values", "b_values", "jump_rates", "pi", "eps", "alpha", "burn_in")


def _check_batch(ps, ys) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(ps)
    y = np.asarray(ys)
    if p.ndim != 1 or y.ndim != 1 or p.shape != y.shape:
        raise ValueError(f"ps and ys must be 1-d of one length, got {p.shape} and {y.shape}")
    if p.dtype == bool or not np.issubdtype(p.dtype, np.number) or np.iscomplexobj(p):
        raise ValueError(f"ps must be real numbers, got dtype {p.dtype}")
    p = p.astype(np.float64, copy=False)
    bad = ~((p >= 0.0) & (p <= 1.0))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"p must be a finite probability in [0, 1], got {p[i]!r} at position {i}")
    if y.dtype != bool:
        if not np.issubdtype(y.dtype, np.integer) and y.size:
            raise ValueError(f"ys must be 0/1 integers or booleans, got dtype {y.dtype}")
        bad = (y != 0) & (y != 1)
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"label must be 0/1 or False/True, got {y[i]!r} at position {i}")
    return p, y.astype(np.int64)


def protect_batch(ps, ys, **params) -> tuple[np.ndarray, np.ndarray]:
    """Protect a whole labelled sequence (labels in order): (protected p's, log S path).

    ``params`` are ``Protector``'s. For replays and benchmarks.

    >>> prot_p, log_s = protect_batch([0.2] * 50, [1] * 50, burn_in=0)
    >>> round(float(prot_p[0]), 3), round(float(prot_p[-1]), 3), round(float(log_s[-1]), 1)
    (0.2, 0.572, 43.4)
    """
    return Protector(**params).run(ps, ys)
