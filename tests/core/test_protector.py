"""The Protector against its two exact promises (the loss identity, Ville's inequality), an
independent re-implementation of the design note's computation, and its own API rules."""

import json
import math
import os
import pickle
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcal.core import Protector, protect_batch
from tests._helpers import examples

probabilities = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
streams = st.lists(st.tuples(probabilities, st.booleans()), min_size=1, max_size=300)


def loss(r: float, y) -> float:
    """Log loss of forecast r (of label 1) on label y."""
    return -math.log(r if y else 1.0 - r)


def clip(p: float, eps: float = 0.001) -> float:
    return min(max(p, eps), 1.0 - eps)


class BruteForce:
    """The design note's pseudo-code, literally: dicts of weights, the Cox formula as written."""

    def __init__(self, a=(0, 1, -1), b=(1, 0.5, 2), rates=(1e-2, 1e-3, 1e-4), pi=0.5, eps=0.001):
        self.cals = [(ai, bi) for ai in a for bi in b]
        self.rates, self.eps = rates, eps
        self.P = pi
        self.W = {(J, k): ((1 - pi) / len(rates) if k == self.cals[0] else 0.0)
                  for J in rates for k in self.cals}  # fmt: skip
        self.log_s = 0.0

    def f(self, k, p):
        a, b = k
        return math.exp(a) * p**b / (math.exp(a) * p**b + (1 - p) ** b)

    def predict(self, p):
        p = clip(p, self.eps)
        return self.P * p + sum(w * self.f(k, p) for (J, k), w in self.W.items())

    def learn(self, p, y):
        p = clip(p, self.eps)

        def bet(r):
            return r if y else 1 - r

        self.P *= bet(p)
        for J, k in self.W:
            self.W[J, k] *= bet(self.f(k, p))
        z = self.P + sum(self.W.values())
        self.P /= z
        for key in self.W:
            self.W[key] /= z
        self.log_s += math.log(z) - math.log(bet(p))
        for J in self.rates:
            total = sum(self.W[J, k] for k in self.cals)
            for k in self.cals:
                self.W[J, k] = (1 - J) * self.W[J, k] + J * total / len(self.cals)


@settings(max_examples=examples(200), deadline=None)
@given(streams)
def test_protected_loss_is_base_loss_minus_log_s_and_at_most_ln2_above(pairs):
    prot = Protector(burn_in=0)
    base = protected = 0.0
    for p, y in pairs:
        protected += loss(prot.predict(p), y)
        base += loss(clip(p), y)
        log_s = prot.learn(p, y)
        assert log_s == prot.log_martingale  # learn returns ln S after the label
        assert protected == pytest.approx(base - log_s, rel=1e-9, abs=1e-9)
        assert protected <= base + math.log(2) + 1e-9


@settings(max_examples=examples(50), deadline=None)
@given(streams, st.integers(min_value=1, max_value=50))
def test_after_the_burn_in_the_identity_holds_from_the_restart(pairs, burn_in):
    prot = Protector(burn_in=burn_in)
    base = protected = 0.0
    for i, (p, y) in enumerate(pairs, start=1):
        q = prot.predict(p)
        prot.learn(p, y)
        if i > burn_in:  # log S counts from the restart at label burn_in
            protected += loss(q, y)
            base += loss(clip(p), y)
        else:
            assert prot.alarm_at is None
        if i >= burn_in:
            assert protected == pytest.approx(base - prot.log_martingale, rel=1e-9, abs=1e-9)


def test_ville_under_the_null_alarms_in_at_most_alpha_of_runs():
    # Labels drawn from the forecasts themselves: the alarm is a false alarm. 600 runs of
    # 1,500 labels with varied (and varying) forecasts; alpha = 0.1 so the bound is tight
    # enough to bite: the rate must be below alpha + 3 standard errors. (About 1 s; 20 s
    # without numba.)
    rng = np.random.default_rng(7)
    runs, n, alpha = 600, 1500, 0.1
    alarms = 0
    for _ in range(runs):
        ps = rng.beta(0.5, 0.5, size=n) if rng.random() < 0.5 else np.full(n, rng.random())
        ys = rng.random(n) < ps
        prot = Protector(alpha=alpha, burn_in=0)
        prot.run(ps, ys)
        alarms += prot.alarm
    assert alarms / runs <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / runs)


def test_the_alarm_fires_on_a_miscalibrated_forecast_and_stays_on():
    rng = np.random.default_rng(1)
    ps = np.full(3000, 0.2)
    ys = rng.random(3000) < np.where(np.arange(3000) < 1500, 0.2, 0.7)  # shift at 1,500
    prot = Protector(burn_in=1000)
    prot.run(ps, ys)
    assert prot.alarm and 1500 < prot.alarm_at < 1600
    prot.run(np.full(2000, 0.5), rng.random(2000) < 0.5)  # calibrated again: still on
    assert prot.alarm and 1500 < prot.alarm_at < 1600


def test_no_alarm_during_the_burn_in_and_log_s_restarts_there():
    prot = Protector(burn_in=100)
    prot.run([0.05] * 99, [1] * 99)  # wildly wrong, but inside the burn-in
    assert prot.log_martingale > math.log(100) and not prot.alarm
    prot.learn(0.05, 1)
    assert prot.n == 100 and prot.log_martingale == 0.0 and not prot.alarm
    prot.run([0.05] * 20, [1] * 20)
    assert prot.alarm and prot.alarm_at > 100


def test_matches_a_brute_force_reimplementation_with_late_labels():
    rng = np.random.default_rng(3)
    for _ in range(5):
        prot, brute = Protector(burn_in=0), BruteForce()
        pending = []
        for _ in range(400):
            p = float(rng.choice([0.0, 1.0, rng.random()], p=[0.05, 0.05, 0.9]))
            assert prot.predict(p) == pytest.approx(brute.predict(p), rel=1e-12, abs=1e-15)
            pending.append((p, bool(rng.random() < 0.5)))
            if len(pending) > 5 or rng.random() < 0.5:  # labels out of order
                p_old, y = pending.pop(int(rng.integers(len(pending))))
                prot.learn(p_old, y)
                brute.learn(p_old, y)
                assert prot.log_martingale == pytest.approx(brute.log_s, rel=1e-9, abs=1e-9)


def test_other_grids_match_the_brute_force_too():
    grid = {"a_values": (0.0, 0.5), "b_values": (1.0, 1.5, 0.25), "jump_rates": (0.05,)}
    prot, brute = Protector(burn_in=0, pi=0.3, eps=0.001, **grid), BruteForce(
        a=grid["a_values"], b=grid["b_values"], rates=grid["jump_rates"], pi=0.3, eps=0.001
    )
    rng = np.random.default_rng(4)
    for _ in range(300):
        p, y = float(rng.random()), bool(rng.random() < 0.3)
        assert prot.predict(p) == pytest.approx(brute.predict(p), rel=1e-12)
        prot.learn(p, y)
        brute.learn(p, y)
    assert prot.log_martingale == pytest.approx(brute.log_s, rel=1e-9)


def test_predict_is_pure():
    prot = Protector(burn_in=0)
    prot.run([0.3, 0.8, 0.1], [1, 0, 1])
    before = prot.to_state()
    first = prot.predict(0.4)
    assert [prot.predict(0.4) for _ in range(3)] == [first] * 3
    assert prot.to_state() == before


def test_state_is_plain_data_and_round_trips_to_identical_predictions():
    rng = np.random.default_rng(5)
    prot = Protector(burn_in=10, alpha=0.05)
    prot.run(rng.random(500), rng.random(500) < 0.8)
    state = json.loads(json.dumps(prot.to_state()))  # plain data survives JSON
    ps, ys = rng.random(100), rng.random(100) < 0.5
    want = Protector.from_state(prot.to_state()).run(ps, ys)
    for copy in (Protector.from_state(state), pickle.loads(pickle.dumps(prot))):
        assert copy == prot and (copy.n, copy.alarm_at) == (prot.n, prot.alarm_at)
        got = copy.run(ps, ys)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_state_from_another_format_is_refused():
    state = Protector().to_state()
    with pytest.raises(ValueError, match="format"):
        Protector.from_state({**state, "format": 99})
    with pytest.raises(ValueError, match="weights"):
        Protector.from_state({**state, "weights": state["weights"][:-1]})


@pytest.mark.parametrize("p", [float("nan"), float("inf"), -0.1, 1.5, "0.5", None, True])
def test_bad_p_is_named_and_changes_nothing(p):
    prot = Protector(burn_in=0)
    prot.learn(0.3, 1)
    before = prot.to_state()
    for call in (lambda: prot.predict(p), lambda: prot.learn(p, 1)):
        with pytest.raises(ValueError, match=re.escape(repr(p))):
            call()
    assert prot.to_state() == before


@pytest.mark.parametrize("y", [2, -1, 0.5, 1.0, "1", None])
def test_bad_label_changes_nothing(y):
    prot = Protector(burn_in=0)
    before = prot.to_state()
    with pytest.raises(ValueError, match="label"):
        prot.learn(0.3, y)
    assert prot.to_state() == before


def test_labels_may_be_bool_int_or_numpy():
    a, b, c, d = Protector(), Protector(), Protector(), Protector()
    a.learn(0.3, True)
    b.learn(0.3, 1)
    c.learn(np.float64(0.3), np.int64(1))
    d.learn(np.float32(0.25), np.bool_(True))
    assert a == b == c != d
    d2 = Protector()
    d2.learn(0.25, 1)
    assert d == d2


def test_probabilities_may_be_any_real_number_in_0_1():
    # Plain floats skip the check's call; ints and numpy scalars go through it, to the same.
    prot = Protector(burn_in=0)
    prot.learn(0.3, 1)
    assert prot.predict(1) == prot.predict(1.0)
    assert prot.predict(np.float64(0.4)) == prot.predict(0.4)
    assert prot.predict(np.float32(0.5)) == prot.predict(float(np.float32(0.5)))


def test_batch_equals_online_and_bad_batches_change_nothing():
    rng = np.random.default_rng(6)
    ps, ys = rng.random(3000) ** 3, rng.random(3000) < 0.4
    online = Protector(burn_in=500)
    out, path = [], []
    for p, y in zip(ps.tolist(), ys.tolist(), strict=True):
        out.append(online.predict(p))
        online.learn(p, y)
        path.append(online.log_martingale)
    batch = Protector(burn_in=500)
    got_out, got_path = batch.run(ps, ys)
    assert got_out.tolist() == out and got_path.tolist() == path
    assert batch == online and batch.alarm_at == online.alarm_at
    assert np.array_equal(protect_batch(ps, ys, burn_in=500)[0], got_out)
    before = batch.to_state()
    for bad_ps, bad_ys in (([0.5, np.nan], [0, 1]), ([0.5, 0.5], [0, 2]), ([0.5], [0, 1])):
        with pytest.raises(ValueError):
            batch.run(bad_ps, bad_ys)
    assert batch.to_state() == before


@pytest.mark.parametrize(
    "kwargs",
    [
        {"pi": 0.0}, {"pi": 1.0}, {"pi": float("nan")}, {"eps": 0.0}, {"eps": 0.5},
        {"alpha": 0.0}, {"alpha": 1.0}, {"alpha": "0.1"}, {"burn_in": -1}, {"burn_in": 1.5},
        {"burn_in": True}, {"jump_rates": ()}, {"jump_rates": (1.5,)}, {"b_values": (0.0,)},
        {"a_values": (float("inf"),)}, {"a_values": 3},
    ],
)  # fmt: skip
def test_bad_parameters_are_refused(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        Protector(**kwargs)


def test_same_answers_without_numba():
    # The same kernels run as plain Python when numba does not import (CI's run without it).
    root = Path(__file__).resolve().parents[2]
    code = textwrap.dedent(
        """
        import json, sys
        import numpy as np
        from streamcal.core import Protector, _protector_kernels
        assert not _protector_kernels.COMPILED
        rng = np.random.default_rng(8)
        prot = Protector(burn_in=50)
        out, path = prot.run(rng.random(300), rng.random(300) < 0.3)
        assert prot.learn(0.4, 1) == prot.log_martingale
        print(json.dumps([out.tolist(), path.tolist(), prot.to_state()]))
        """
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root / ".ci" / "without-numba"),
                                                       str(root)]))  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True, timeout=120)  # fmt: skip
    out, path, state = json.loads(proc.stdout)
    rng = np.random.default_rng(8)
    prot = Protector(burn_in=50)
    want_out, want_path = prot.run(rng.random(300), rng.random(300) < 0.3)
    prot.learn(0.4, 1)
    np.testing.assert_allclose(out, want_out, rtol=1e-12)
    np.testing.assert_allclose(path, want_path, rtol=1e-9, atol=1e-12)
    assert state["alarm_at"] == prot.alarm_at and state["n"] == prot.n
