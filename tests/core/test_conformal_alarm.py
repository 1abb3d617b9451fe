"""The conformal alarm against a brute-force twin (hypothesis), and its promise by simulation:
uniform p-values on exchangeable streams (Kolmogorov-Smirnov) and a false-alarm rate within
its binomial bound (Ville). The twin recomputes every count and rank from the whole history
and keeps the jumpers as dicts; only the tie-breaking draws are shared (reimplemented)."""

import math
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from streamcal.core._conformal_alarm_kernels import COMPILED
from streamcal.core._conformal_alarm_layout import LAST_P_LABEL, LAST_P_SCORE
from streamcal.core.conformal_alarm import (
    DEFAULT_LABEL_BETS,
    DEFAULT_SCORE_BETS,
    ConformalAlarm,
    alarm_batch,
)
from tests._helpers import examples


def xorshift32(x: int) -> int:
    x ^= (x << 13) % 2**32
    x ^= x >> 17
    x ^= (x << 5) % 2**32
    return x


def f(bet, p):
    kind, v = bet
    if kind == "linear":
        return 1 + v * (p - 0.5)
    q = p if kind == "low" else 1 - p
    return v * q ** (v - 1)


class Jumper:
    """A Composite Jumper, literally: capital per (rate, bet); the jump, then the bet."""

    def __init__(self, rates, bets):
        self.rates, self.bets = rates, bets
        self.w = {(J, e): (1 / len(rates) if e == 0 else 0.0)
                  for J in rates for e in range(len(bets))}  # fmt: skip
        self.log = 0.0

    def step(self, p):
        E = len(self.bets)
        for J in self.rates:
            total = sum(self.w[J, e] for e in range(E))
            for e in range(E):
                self.w[J, e] = (1 - J) * self.w[J, e] + J * total / E
        for (J, e), w in self.w.items():
            self.w[J, e] = w * f(self.bets[e], p)
        z = sum(self.w.values())  # the capital's factor: it summed to 1 before
        for key in self.w:
            self.w[key] /= z
        self.log += math.log(z)


class Twin:
    """The module docstring's definition, recomputed from scratch at every label."""

    def __init__(self, alpha=0.01, rates=(1e-2, 1e-3, 1e-4), label_bets=DEFAULT_LABEL_BETS,
                 score_bets=DEFAULT_SCORE_BETS, reserve_every=4, seed=1):  # fmt: skip
        self.threshold = math.log(1 / alpha)
        self.rates, self.score_bets, self.every = rates, score_bets, reserve_every
        self.labels = []
        self.bag = []  # (label, conformity) of the segment's bag and its ranked objects
        self.segment = 0
        self.label_part = Jumper(rates, label_bets)
        self.score_parts = {}  # label -> Jumper
        self.rng = seed
        self.path = []
        self.alarm_at = self.onset = None
        self.low, self.low_at = 0.0, 0

    def draw(self):
        self.rng = xorshift32(self.rng)
        return (self.rng - 0.5) / (2**32 - 1)

    def learn(self, y, c=None):
        self.labels.append(y)
        n = len(self.labels)
        counts = {k: self.labels.count(k) for k in set(self.labels)}
        alphas = [-counts[k] for k in self.labels]
        greater = sum(a > alphas[-1] for a in alphas)
        equal = sum(a == alphas[-1] for a in alphas)
        p_label = (greater + self.draw() * equal) / n
        self.label_part.step(p_label)
        p_score = -1.0
        if c is not None:
            self.segment += 1
            if not (self.every and self.segment % self.every == 0):
                same = [b for k, b in self.bag if k == y]
                below = sum(b < c for b in same)
                ties = sum(b == c for b in same)
                p_score = (below + self.draw() * (ties + 1)) / (len(same) + 1)
                part = self.score_parts.setdefault(y, Jumper(self.rates, self.score_bets))
                part.step(p_score)
                self.bag.append((y, c))
        log_score = sum(j.log for j in self.score_parts.values())
        a, b = self.label_part.log, log_score
        log_s = math.log((math.exp(a) + math.exp(b)) / 2)
        if log_s < self.low:
            self.low, self.low_at = log_s, n
        if self.alarm_at is None and log_s >= self.threshold:
            self.alarm_at, self.onset = n, self.low_at
        self.path.append((log_s, p_label, p_score))
        return log_s

    def restart(self, scores, labels):
        self.bag = list(zip(labels, scores, strict=True))
        self.segment = 0


# A stream of operations: ("learn", label, score or None) and ("restart", bag).
scores = st.one_of(st.none(), st.sampled_from([-1.0, -0.5, 0.0, 0.25, 0.5, 1.0]),
                   st.floats(-3, 3, allow_nan=False))  # fmt: skip
learn_op = st.tuples(st.just("learn"), st.integers(0, 3), scores)
restart_op = st.tuples(st.just("restart"),
                       st.lists(st.tuples(st.integers(0, 3), st.floats(-3, 3)), max_size=12))
ops = st.lists(st.one_of(learn_op, learn_op, learn_op, restart_op), min_size=1, max_size=120)


@settings(max_examples=examples(150), deadline=None)
@given(ops, st.sampled_from([0, 1, 3, 4]), st.integers(1, 2**32 - 1))
def test_incremental_equals_the_brute_force_twin(operations, every, seed):
    alarm = ConformalAlarm(alpha=0.05, reserve_every=every, seed=seed)
    twin = Twin(alpha=0.05, reserve_every=every, seed=seed)
    for op in operations:
        if op[0] == "restart":
            alarm.restart([c for _, c in op[1]], [y for y, _ in op[1]])
            twin.restart([c for _, c in op[1]], [y for y, _ in op[1]])
            continue
        _, y, c = op
        got = alarm.learn(y, c)
        want = twin.learn(y, c)
        assert got == pytest.approx(want, rel=1e-9, abs=1e-9)
        assert alarm.set_aside == (c is not None and twin.path[-1][2] == -1.0)
    assert alarm.alarm_at == twin.alarm_at and alarm.onset == twin.onset
    assert alarm.n == len(twin.labels)


@settings(max_examples=examples(60), deadline=None)
@given(ops, st.integers(0, 119))
def test_state_round_trip_mid_stream_and_run_equal_learn(operations, cut):
    a = ConformalAlarm(alpha=0.2)
    for i, op in enumerate(operations):
        if i == cut:
            a = pickle.loads(pickle.dumps(ConformalAlarm.from_state(a.to_state())))
        if op[0] == "restart":
            a.restart([c for _, c in op[1]], [y for y, _ in op[1]])
        else:
            a.learn(op[1], op[2])
    learned = [op for op in operations if op[0] == "learn"]
    b = ConformalAlarm(alpha=0.2, reserve_every=0)
    c = ConformalAlarm(alpha=0.2, reserve_every=0)
    path, _, _ = b.run([op[1] for op in learned], [op[2] for op in learned])
    one = [c.learn(op[1], op[2]) for op in learned]
    assert path.tolist() == one and b == c


def test_bad_input_is_refused_with_one_line_and_changes_nothing():
    a = ConformalAlarm()
    a.learn(1, 0.5)
    before = a.to_state()
    for y, s in [(-1, 0.5), (1.5, 0.5), ("a", 0.5), (1, float("nan")), (1, "x"), (1, math.inf)]:
        with pytest.raises(ValueError, match="label|score"):
            a.learn(y, s)
    with pytest.raises(ValueError, match="finite"):
        a.run([0, 1], [0.1, math.inf])
    with pytest.raises(ValueError, match="one length"):
        a.restart([0.1], [0, 1])
    with pytest.raises(ValueError, match="alpha"):
        ConformalAlarm(alpha=1.5)
    with pytest.raises(ValueError, match="kind"):
        ConformalAlarm(score_bets=[("square", 1.0)])
    with pytest.raises(ValueError, match="tail bet"):
        ConformalAlarm(score_bets=[("low", 0.0)])
    assert a.to_state() == before


def test_many_classes_and_big_bags_grow_as_needed():
    rng = np.random.default_rng(0)
    ys = rng.integers(0, 7, 3000)
    a = ConformalAlarm(reserve_every=0)
    path, p_label, p_score = a.run(ys, rng.normal(size=3000))
    assert a.n_classes == 7 and max(len(b) for b in a.to_state()["bags"]) > 64
    assert ((0 < p_score) & (p_score < 1)).all() and np.isfinite(path).all()


# --- validity by simulation -----------------------------------------------------------


def exchangeable_run(rng, n, segment, every=4, alpha=0.1, k=2, ties=False, seed=1):
    """An i.i.d. stream scored by a scorer that changes every ``segment`` labels; at each
    change the set-aside objects are rescored (here: a new random monotone transform, as
    a retrained model would give) and passed as the new bag. Returns (alarm, p-values)."""
    a = ConformalAlarm(alpha=alpha, reserve_every=every, seed=seed)
    prior = rng.dirichlet(np.ones(k))
    ys = rng.choice(k, size=n, p=prior)
    xs = rng.normal(ys, 1.0)  # the object: one number whose law depends on the label
    if ties:
        xs = np.round(xs * 2) / 2
    pl, ps, aside = [], [], []
    weight = 1.0
    for i in range(n):
        if i and i % segment == 0:
            weight = rng.uniform(0.2, 3.0)  # the new scorer
            a.restart([weight * xs[j] * (1 if ys[j] else -1) for j in aside],
                      [int(ys[j]) for j in aside])  # fmt: skip
            aside = []
        c = weight * xs[i] * (1 if ys[i] else -1)
        a.learn(int(ys[i]), float(c))
        pl.append(a._k[LAST_P_LABEL])
        if a.set_aside:
            aside.append(i)
        else:
            ps.append(a._k[LAST_P_SCORE])
    return a, np.array(pl), np.array(ps)


@pytest.mark.parametrize("ties", [False, True])
def test_p_values_are_uniform_on_an_exchangeable_stream(ties):
    rng = np.random.default_rng(11 + ties)
    _, pl, ps = exchangeable_run(rng, 6000, segment=500, k=3, ties=ties)
    assert stats.kstest(pl, "uniform").pvalue > 0.001
    assert stats.kstest(ps, "uniform").pvalue > 0.001
    # and independent of the previous one (a lag-1 correlation near 0)
    assert abs(np.corrcoef(ps[:-1], ps[1:])[0, 1]) < 0.05
    assert abs(np.corrcoef(pl[:-1], pl[1:])[0, 1]) < 0.05


def test_a_shifted_stream_gives_p_values_that_are_not_uniform():
    """The KS test above could fail: a change of the prior makes the label's p-values
    not uniform, and the alarm fires after the change."""
    rng = np.random.default_rng(3)
    ys = np.r_[rng.random(1500) < 0.2, rng.random(1500) < 0.7].astype(int)
    path, pl, _ = alarm_batch(ys, alpha=0.01)
    assert stats.kstest(pl[1500:], "uniform").pvalue < 1e-6
    assert np.argmax(path >= math.log(100)) > 1500


def binomial_bound(runs: int, alpha: float) -> int:
    return int(stats.binom.ppf(0.99, runs, alpha))


@pytest.mark.parametrize("runs", [300])
def test_false_alarm_rate_within_its_binomial_bound_fast(runs):
    rng = np.random.default_rng(5)
    alarms = sum(exchangeable_run(rng, 400, segment=100, alpha=0.1, seed=r + 1)[0].alarm
                 for r in range(runs))  # fmt: skip
    assert alarms <= binomial_bound(runs, 0.1)


@pytest.mark.slow
@pytest.mark.skipif(not COMPILED, reason="minutes uncompiled; the twin checks that arithmetic")
@pytest.mark.parametrize("ties,k", [(False, 2), (True, 2), (False, 4)])
def test_false_alarm_rate_within_its_binomial_bound(ties, k):
    runs = 2000
    rng = np.random.default_rng(7 + k + ties)
    alarms = sum(exchangeable_run(rng, 1500, segment=300, alpha=0.1, k=k, ties=ties,
                                  seed=r + 1)[0].alarm for r in range(runs))  # fmt: skip
    assert alarms <= binomial_bound(runs, 0.1), f"{alarms} false alarms in {runs} runs"
