"""An alarm that keeps its promise: conformal test martingales against exchangeability.

What the alarm promises
-----------------------
**If the labelled stream is exchangeable, the alarm fires with probability at most
alpha, ever** (however long the stream, however often it is looked at, whatever the
model). Exchangeability is the assumption every Venn-Abers guarantee rests on, so an
alarm is evidence that the guarantee no longer covers the stream.

The capital S = (S_label + S_score) / 2 of two bettors is a test martingale under
exchangeability (expected value 1 at the start, each factor of expectation 1 given the
past); by Ville's inequality, P(S ever >= 1 / alpha) <= alpha. ``alarm`` is that event.

The two parts
-------------
* **S_label** bets on the smoothed conformal p-values of the labels alone: the
  nonconformity of a label is minus its count among all labels so far (a rare label is
  strange), ties broken by an independent uniform draw. It sees changes of the class
  prior, and nothing else.
* **S_score** bets on label-conditional *inductive* conformal p-values: the caller gives,
  with each label, the conformity score c of the object for its label (for a binary
  model P(y = 1 | x) if y = 1 and -P(y = 1 | x) if y = 0; for a multiclass one P(y | x)),
  computed by a scorer that has seen neither this object nor any object of the current
  bag. c is ranked among the bag of the same label: a small p-value says the object fits
  its label worse than the earlier ones did. It sees concept changes that keep the prior.

The scorer may change (``restart``), for example when a pre-trained model learns a new
batch. Every ``reserve_every``-th scored label of a segment is **set aside**: never ranked,
never bet on, never in the segment's bag. At a restart the caller rescores the set-aside
objects that the new scorer has not learned and passes them as the new segment's bag.

Both parts bet with Composite Jumpers (Vovk, *Testing randomness online*, 2021): for each
jump rate J, capital over a few betting functions f on [0, 1] (f >= 0, integral 1), of which
a fraction J moves evenly over them before each bet; it starts on the first function
(f = 1 by default: no bet), so that a long quiet stretch costs little. The score part has
one jumper per label and S_score is their product, since a change can move the p-values of
one label down and of another up (a shift of the logit does).

Why the promise holds (the argument, checked)
---------------------------------------------
Take the stream exchangeable; by de Finetti, given its (unknown) law it is i.i.d., and it
is enough to prove the claims for i.i.d. labelled objects z_i = (x_i, y_i).

1. *The label part.* Minus the count of the label is a nonconformity measure of the full
   (transductive) kind: a function of the bag of labels so far and of the label. Smoothed
   conformal p-values of an exchangeable sequence are i.i.d. uniform (Vovk, Gammerman &
   Shafer, *Algorithmic Learning in a Random World*, Theorem 8.1); these depend only on the
   labels and their own draws.
2. *The score part, given all labels Y.* Given Y, the objects are independent with x_i
   drawn from P(x | y_i). Let D_j be everything segment j's p-values and the next scorer
   f_{j+1} depend on: the scored objects of segments <= j, their bags, the draws, and the
   objects f_{j+1} learned. The objects of segment j + 1 and the set-aside objects R_j of
   segment j are outside D_j (R_j by the set-aside rule and because the caller passes
   only objects f_{j+1} has not learned). So given (Y, D_j), within each label they are
   i.i.d. and f_{j+1} is fixed: ranking them in order after the bag R_j gives, for all but
   the bag, smoothed conformal p-values that are i.i.d. uniform, independent across labels
   (a Mondrian conformal predictor with the label as taxonomy) and independent of D_j. By
   induction over the segments, the score part's p-values are i.i.d. uniform given Y.
   This needs the segments, and which labels are set aside, to be fixed by counts, not
   by the data: they are.
3. *Together.* Given Y the score p-values are i.i.d. uniform, whatever Y and the label
   part's draws are; so all p-values of both parts are independent and uniform.
4. *Betting.* Each bet is a function of earlier p-values (and, in the score part, of the
   labels, given which its p-values are uniform), and each betting function integrates
   to 1 on [0, 1]; the jump only moves capital. So each factor has expectation 1 given
   all earlier p-values of both parts and all labels: S_label, each label's jumper,
   their product S_score and the mean S are test martingales in one filtration, and
   Ville's inequality holds.

What the caller must respect (else the promise is void): each label is learned once, in
the order of the stream; the score of an object comes from the segment's scorer, which
learned neither it nor the bag; a restart's bag holds only set-aside objects of earlier
segments that no scorer used for a p-value and the new one did not learn; the draws are
the alarm's own. Late labels are fine as long as their score is the current segment's.

What it does not promise: any bound on the delay. Any drift of the class prior, harmless
seasonality included, is a departure from exchangeability and alarms. A change that keeps
the prior and the distribution of the scores given the label is not seen.

The onset
---------
``onset`` estimates where the change began: the label count at which ln S was last at its
lowest before the alarm (reading the martingale back: the bettors gained from there on).

Examples
--------

An exchangeable stream, scored by a fixed scorer, then a change of the prior at label
600:

>>> import random
>>> rng = random.Random(1)
>>> alarm = ConformalAlarm(alpha=0.01)
>>> for i in range(1200):
...     y = int(rng.random() < (0.2 if i < 600 else 0.6))
...     s = rng.gauss(1.0 if y else -1.0, 1.0)
...     log_s = alarm.learn(y, s if y else -s)
>>> alarm.alarm, alarm.alarm_at, alarm.onset
(True, 705, 631)

The state is plain data:

>>> copy = ConformalAlarm.from_state(alarm.to_state())
>>> copy.learn(1, 0.3) == alarm.learn(1, 0.3)
True
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np

from streamcal.core import _conformal_alarm_layout as _L
from streamcal.core.protector import _check_grid, _check_real

__all__ = ["ConformalAlarm", "DEFAULT_LABEL_BETS", "DEFAULT_SCORE_BETS", "alarm_batch"]

STATE_FORMAT = 1  # version of to_state()'s layout; from_state refuses others

# (kind, parameter) pairs; kinds: "linear" 1 + e (p - 1/2), "low" kappa p^(kappa - 1),
# "high" kappa (1 - p)^(kappa - 1).
DEFAULT_LABEL_BETS = (("linear", 0.0), ("linear", -1.0), ("linear", -0.5),
                      ("linear", 0.5), ("linear", 1.0))  # fmt: skip
# The score part adds two bets on small p-values: a concept change makes a few objects fit
# their label far worse than any in the bag (benchmarks/drift.py: a 90-degree turn of the
# boundary is seen in 38 labels instead of 190, Agrawal 0 -> 2 with naive Bayes in 18
# instead of 184).
DEFAULT_SCORE_BETS = DEFAULT_LABEL_BETS + (("low", 0.5), ("low", 0.2))
_KINDS = {"linear": _L.LINEAR, "low": _L.LOW_TAIL, "high": _L.HIGH_TAIL}
_NAMES = {v: k for k, v in _KINDS.items()}
_FIRST_CAP = 64  # bag row length at the start; doubled when a row is full



def _check_bets(name: str, bets) -> tuple[tuple[str, float], ...]:
    try:
        bets = tuple(tuple(b) for b in bets)
    except TypeError:
        raise ValueError(f"{name} must be a sequence of (kind, parameter) pairs") from None
    if not bets:
        raise ValueError(f"{name} must hold at least one betting function")
    out = []
    for b in bets:
        if len(b) != 2 or b[0] not in _KINDS:
            raise ValueError(f"{name}: each bet is (kind, parameter), kind one of "
                             f"{', '.join(_KINDS)}; got {b!r}")  # fmt: skip
        kind, v = b
        if kind == "linear":
            v = _check_real(f"{name}: a linear bet's parameter", v, -2.0, 2.0, (True, True))
        else:
            v = _check_real(f"{name}: a tail bet's parameter", v, 0.0, 1.0, (False, True))
        out.append((kind, v))
    return tuple(out)


class ConformalAlarm:
    """A test martingale against exchangeability of a labelled stream (see the module).

    Parameters
    ----------
    alpha
        The alarm fires (and stays on) the first time S >= 1 / alpha: with probability at
        most alpha on an exchangeable stream.
    n_classes
        The labels known at the start (0 .. n_classes - 1); a larger label adds classes.
    jump_rates
        The Composite Jumper's rates: each owns an equal share of each part's capital.
    label_bets, score_bets
        The betting functions of each part, as (kind, parameter) pairs: ``("linear", e)``
        is 1 + e (p - 1/2) (e in [-2, 2]); ``("low", kappa)`` is kappa p^(kappa - 1) and
        ``("high", kappa)`` kappa (1 - p)^(kappa - 1) (kappa in (0, 1]), which bet on
        small and on large p-values. Capital starts evenly over them.
    reserve_every
        Every this many labels with a score since the last restart, one is set aside for
        the next segment's bag (0: none; then a restart's bag must come from elsewhere).
    seed
        The start of the tie-breaking draws (an integer in 1 .. 2^32 - 1).
    """

    def __init__(
        self,
        alpha: float = 0.01,
        n_classes: int = 2,
        jump_rates=(1e-2, 1e-3, 1e-4),
        label_bets=DEFAULT_LABEL_BETS,
        score_bets=DEFAULT_SCORE_BETS,
        reserve_every: int = 4,
        seed: int = 1,
    ):
        self.alpha = _check_real("alpha", alpha, 0.0, 1.0)
        _check_count("n_classes", n_classes, 1)
        self.jump_rates = _check_grid("jump_rates", jump_rates, positive=False)
        for j in self.jump_rates:
            if not 0.0 <= j <= 1.0:
                raise ValueError(f"jump_rates must be in [0, 1], got {j!r}")
        self.label_bets = _check_bets("label_bets", label_bets)
        self.score_bets = _check_bets("score_bets", score_bets)
        _check_count("reserve_every", reserve_every, 0)
        self.reserve_every = int(reserve_every)
        _check_count("seed", seed, 1)
        if seed > 0xFFFFFFFF:
            raise ValueError(f"seed must be in 1 .. 2^32 - 1, got {seed!r}")
        self.seed = int(seed)

        from streamcal.core import _conformal_alarm_kernels as kern  # numba on first use

        self._learn, self._run = kern.learn, kern.run
        R, EL, ES = len(self.jump_rates), len(self.label_bets), len(self.score_bets)
        head = [0.0] * _L.HEAD
        head[_L.N_RATES], head[_L.N_LABEL_BETS], head[_L.N_SCORE_BETS] = R, EL, ES
        head[_L.THRESHOLD] = math.log(1.0 / self.alpha)
        head[_L.ALARM_AT] = head[_L.ONSET] = -1.0
        head[_L.RNG] = float(self.seed)
        head[_L.RESERVE_EVERY] = self.reserve_every
        head[_L.BAG_CAP] = _FIRST_CAP
        head[_L.LAST_P_LABEL] = head[_L.LAST_P_SCORE] = -1.0
        k = list(head) + list(self.jump_rates)
        for bets in (self.label_bets, self.score_bets):
            k += [float(_KINDS[kind]) for kind, _ in bets] + [v for _, v in bets]
        self._counts = len(k) + R * EL  # where the label counts start
        k += _start(R, EL)
        self._k = np.array(k)
        self._K = 0
        self._bag = np.zeros((0, _FIRST_CAP))  # a view of the tail of _k (see _set_bag)
        self._grow_classes(int(n_classes))

    # --- the arrays -------------------------------------------------------------------

    @property
    def n_classes(self) -> int:
        """The number of labels known (0 .. n_classes - 1)."""
        return int(self._k[_L.N_CLASSES])

    def _parts(self) -> tuple[int, int, int]:
        """Where the label counts, the bag sizes and the score weights start in ``_k``."""
        counts, K = self._counts, self.n_classes
        return counts, counts + K, counts + 2 * K

    def _bags_start(self) -> int:
        return self._parts()[2] + self._K * len(self.jump_rates) * len(self.score_bets)

    def _grow_classes(self, K: int) -> None:
        old = self.n_classes
        counts, sizes, ws = self._parts()
        bag = np.concatenate([self._bag, np.zeros((K - old, self._bag.shape[1]))])
        k = self._k[: self._bags_start()]
        block = _start(len(self.jump_rates), len(self.score_bets))
        self._k = np.concatenate([k[:sizes], np.zeros(K - old), k[sizes:ws], np.zeros(K - old),
                                  k[ws:], block * (K - old)])  # fmt: skip
        self._k[_L.N_CLASSES] = K
        self._K = K  # read on every label: a Python int, not an array element
        self._set_bag(bag)

    def _set_bag(self, bag: np.ndarray) -> None:
        """Put the bags (K rows) at the tail of ``_k``; ``_bag`` is then a view of it."""
        start = self._bags_start()
        self._k = np.concatenate([self._k[:start], bag.ravel()])
        self._k[_L.BAG_CAP] = bag.shape[1]
        self._bag = self._k[start:].reshape(bag.shape)

    def _grow_bag(self) -> None:
        cap = 2 * self._bag.shape[1]
        bag = np.zeros((self._bag.shape[0], cap))
        bag[:, : self._bag.shape[1]] = self._bag
        self._set_bag(bag)

    # --- public API -------------------------------------------------------------------

    @property
    def n(self) -> int:
        """The number of labels learned."""
        return int(self._k[_L.N])

    @property
    def log_martingale(self) -> float:
        """ln S, S = (S_label + S_score) / 2: the evidence against exchangeability."""
        return float(self._k[_L.LOG_S])

    @property
    def log_label(self) -> float:
        """ln S_label, the label part's capital."""
        return float(self._k[_L.LOG_LABEL])

    @property
    def log_score(self) -> float:
        """ln S_score, the score part's capital."""
        return float(self._k[_L.LOG_SCORE])

    @property
    def alarm(self) -> bool:
        """True once S has reached 1 / alpha (sticky)."""
        return bool(self._k[_L.ALARM_AT] >= 0)

    @property
    def alarm_at(self) -> int | None:
        """The number of labels learned when the alarm fired; None before."""
        at = self._k[_L.ALARM_AT]
        return None if at < 0 else int(at)

    @property
    def onset(self) -> int | None:
        """Where the change is estimated to have begun (a label count; None before the
        alarm): the count at which ln S was last at its lowest before the alarm."""
        at = self._k[_L.ONSET]
        return None if at < 0 else int(at)

    @property
    def log_threshold(self) -> float:
        """ln(1 / alpha): the alarm fires when ``log_martingale`` reaches it."""
        return float(self._k[_L.THRESHOLD])

    @property
    def lowest(self) -> float:
        """The least ln S so far (0: the start)."""
        return float(self._k[_L.LOW])

    @property
    def lowest_at(self) -> int:
        """The label count at which ln S was last at its lowest so far (0: the start)."""
        return int(self._k[_L.LOW_AT])

    @property
    def set_aside(self) -> bool:
        """Whether the last label's score was set aside for the next segment's bag."""
        return bool(self._k[_L.SET_ASIDE])

    @property
    def segment_size(self) -> int:
        """Labels with a score since the last restart (set-aside ones included)."""
        return int(self._k[_L.SEGMENT])

    def learn(self, y, score=None) -> float:
        """Learn label ``y`` (an int 0 .. K - 1; a new one adds classes) with the object's
        conformity ``score`` for it, if there is one (None: the label part only). Returns
        ln S after it. ``ValueError`` on bad input, before anything changes."""
        if type(y) is not int or y < 0:
            y = _check_label(y)
        if y >= self._K:
            self._grow_classes(y + 1)
        if score is None:
            return float(self._learn(self._k, -1 - y, 0.0))
        if type(score) is not float or score - score != 0.0:  # also catches inf, nan
            score = _check_score(score)
        log_s = self._learn(self._k, y, score)
        while log_s != log_s:  # the bag row was full, nothing changed
            self._grow_bag()
            log_s = self._learn(self._k, y, score)
        return float(log_s)  # a numpy scalar when numba is absent

    def restart(self, scores=(), labels=()) -> None:
        """A new segment of the score part (a new scorer): its bag holds ``scores`` (the
        conformity scores, by the new scorer, of set-aside objects it has not learned)
        with their ``labels``. The capital carries on."""
        s = np.asarray(scores, dtype=np.float64).ravel()
        y = np.asarray(labels).ravel()
        if s.shape != y.shape:
            raise ValueError(f"scores and labels must have one length, got {s.shape} and "
                             f"{y.shape}")  # fmt: skip
        if s.size and not np.isfinite(s).all():
            raise ValueError("restart: scores must be finite")
        ys = [_check_label(v) for v in y.tolist()]
        if ys and max(ys) >= self.n_classes:
            self._grow_classes(max(ys) + 1)
        _, sizes, _ = self._parts()
        K = self.n_classes
        rows = [np.sort(s[np.asarray(ys, dtype=np.int64) == c]) for c in range(K)]
        cap = self._bag.shape[1]
        if max((len(r) for r in rows), default=0) >= cap:
            while max(len(r) for r in rows) >= cap:
                cap *= 2
            self._set_bag(np.zeros((K, cap)))
        for c, r in enumerate(rows):
            self._bag[c, : len(r)] = r
        self._k[sizes : sizes + K] = [len(r) for r in rows]
        self._k[_L.SEGMENT] = 0.0

    def run(self, ys, scores=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``learn`` over a sequence (``scores``: one per label, NaN or None for none).
        Returns (ln S after each, the label part's p-values, the score part's, -1 where
        there is none). Inputs are checked up front: nothing changes if any is bad."""
        ys = [_check_label(v) for v in np.asarray(ys).ravel().tolist()]
        if scores is None:
            cs = np.zeros(len(ys))
            has = np.zeros(len(ys), dtype=bool)
        else:
            cs = np.array([np.nan if v is None else v for v in scores], dtype=np.float64)
            if cs.shape != (len(ys),):
                raise ValueError(f"scores must be one per label, got {cs.shape}")
            if np.isinf(cs).any():
                raise ValueError("scores must be finite (NaN: no score)")
            has = ~np.isnan(cs)
            cs = np.where(has, cs, 0.0)
        if ys and max(ys) >= self.n_classes:
            self._grow_classes(max(ys) + 1)
        y = np.asarray(ys, dtype=np.int64)
        codes = np.where(has, y, -1 - y)
        n = len(ys)
        path, pl, ps = np.empty(n), np.empty(n), np.empty(n)
        done = 0
        while done < n:
            stop = done + self._run(self._k, codes[done:], cs[done:], path[done:], pl[done:],
                                    ps[done:])  # fmt: skip
            if stop < n:
                self._grow_bag()
            done = stop
        return path, pl, ps

    # --- state ------------------------------------------------------------------------

    def _params(self) -> dict:
        return {
            "alpha": self.alpha,
            "jump_rates": list(self.jump_rates),
            "label_bets": [list(b) for b in self.label_bets],
            "score_bets": [list(b) for b in self.score_bets],
            "reserve_every": self.reserve_every,
            "seed": self.seed,
        }

    def to_state(self) -> dict:
        """The alarm as plain data (floats, ints, lists); ``from_state`` rebuilds it."""
        k = self._k
        counts, sizes, ws = self._parts()
        K = self.n_classes
        w0 = counts - len(self.jump_rates) * len(self.label_bets)
        return {
            "format": STATE_FORMAT,
            **self._params(),
            "n_classes": K,
            "scalars": {name: float(k[i]) for name, i in _SCALARS.items()},
            "label_weights": [float(w) for w in k[w0:counts]],
            "score_weights": [float(w) for w in k[ws : self._bags_start()]],
            "counts": [int(c) for c in k[counts:sizes]],
            "bags": [self._bag[c, : int(k[sizes + c])].tolist() for c in range(K)],
        }

    @classmethod
    def from_state(cls, state: dict) -> ConformalAlarm:
        """The alarm ``to_state`` described."""
        if state.get("format") != STATE_FORMAT:
            raise ValueError(f"unknown conformal alarm state format {state.get('format')!r}")
        self = cls(**{name: state[name] for name in _PARAM_NAMES}, n_classes=state["n_classes"])
        k = self._k
        counts, sizes, ws = self._parts()
        w0 = counts - len(self.jump_rates) * len(self.label_bets)
        bags0 = self._bags_start()
        for name, lo, hi in (("label_weights", w0, counts), ("score_weights", ws, bags0)):
            if len(state[name]) != hi - lo:
                raise ValueError(f"expected {hi - lo} {name}, got {len(state[name])}")
            k[lo:hi] = state[name]
        k[counts:sizes] = state["counts"]
        for name, i in _SCALARS.items():
            k[i] = state["scalars"][name]
        bags = state["bags"]
        cap = _FIRST_CAP
        while max((len(b) for b in bags), default=0) >= cap:
            cap *= 2
        self._set_bag(np.zeros((self.n_classes, cap)))
        for c, b in enumerate(bags):
            self._bag[c, : len(b)] = b
        self._k[sizes : sizes + self.n_classes] = [len(b) for b in bags]
        return self

    def __getstate__(self) -> dict:  # pickles as plain data (the kernels are a module)
        return self.to_state()

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(ConformalAlarm.from_state(state).__dict__)

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and self.to_state() == other.to_state()

    def __repr__(self) -> str:
        return (f"ConformalAlarm(n={self.n}, log_martingale={self.log_martingale:.4g}, "
                f"alarm_at={self.alarm_at}, onset={self.onset})")  # fmt: skip


_PARAM_NAMES = ("alpha", "jump_rates", "label_bets", "score_bets", "reserve_every", "seed")


def _start(R: int, E: int) -> list:
    """A jumper's weights at the start: each rate's share on its first betting function."""
    w = [0.0] * (R * E)
    w[::E] = [1.0 / R] * R
    return w
_SCALARS = {
    "n": _L.N, "alarm_at": _L.ALARM_AT, "log_label": _L.LOG_LABEL, "log_score": _L.LOG_SCORE,
    "log_s": _L.LOG_S, "low": _L.LOW, "low_at": _L.LOW_AT, "onset": _L.ONSET, "rng": _L.RNG,
    "segment": _L.SEGMENT, "set_aside": _L.SET_ASIDE, "last_p_label": _L.LAST_P_LABEL,
    "last_p_score": _L.LAST_P_SCORE,
}  # fmt: skip


def _check_count(name: str, value, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


def _check_label(y) -> int:
    """A label as an int >= 0 (bools become 0/1), else ``ValueError`` naming it."""
    if isinstance(y, (bool, np.bool_)):
        return int(y)
    if isinstance(y, Integral) and y >= 0:
        return int(y)
    raise ValueError(f"label must be an integer >= 0 (a class index), got {y!r}")


def _check_score(s) -> float:
    if isinstance(s, (bool, np.bool_)) or not isinstance(s, Real) or not math.isfinite(s):
        raise ValueError(f"score must be a finite real number or None, got {s!r}")
    return float(s)


def alarm_batch(ys, scores=None, **params) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run a fresh ``ConformalAlarm(**params)`` over a labelled sequence with one scorer:
    (ln S after each label, the label part's p-values, the score part's).

    >>> path, p_label, p_score = alarm_batch([0, 1, 1, 0], [0.2, 0.9, 0.7, -0.1])
    >>> path.shape, bool(((0 < p_label) & (p_label < 1)).all()), float(p_score[3])
    ((4,), True, -1.0)
    """
    return ConformalAlarm(**params).run(ys, scores)
