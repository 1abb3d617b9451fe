"""Property tests: both store backends and batch venn_abers against the brute-force definition;
the two backends against each other, bit for bit."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from streamcal.core import ScoreStore, venn_abers, venn_abers_bruteforce
from tests._backends import BACKENDS
from tests._helpers import examples

TOL = 1e-12

# few distinct values so ties are frequent; extremes test the ends of every range
GRID = [-1e300, -3.0, -0.0, 0.0, 0.125, 0.25, 0.5, 0.75, 1.0, 2.5, 1e300]
scores = st.one_of(st.sampled_from(GRID), st.floats(-4, 4, allow_nan=False, width=16))
labels = st.sampled_from([0, 1, True, False, np.int64(1), np.int8(0), np.bool_(True)])
QUERY_GRID = sorted(set(GRID) | {-1e301, -5.0, 0.1, 0.3, 0.6, 1.5, 3.0, 5.0, 1e301})


def brute(pairs, x):
    s = np.array([p[0] for p in pairs], dtype=float)
    y = np.array([int(p[1]) for p in pairs], dtype=np.int64)
    return venn_abers_bruteforce(s, y, x)


def bits(values) -> list[bytes]:
    """Exact float identity (tells -0.0 from 0.0), for the backends' bit-for-bit agreement."""
    return [np.float64(v).tobytes() for v in values]


def assert_valid(p0, p1):
    # Lemma 3 of the paper and the order of the pair
    assert 0.0 <= p0 < 1.0 and 0.0 < p1 <= 1.0 and p0 <= p1


class StoreMachine(RuleBasedStateMachine):
    """Random interleavings of add / remove / query, checked against brute force."""

    @initialize(
        chunk=st.sampled_from([3, 4, 7, 256]),
        start=st.lists(st.tuples(scores, labels), max_size=30),
    )
    def setup(self, chunk, start):
        self.pairs = [(float(s), int(y)) for s, y in start]
        s, y = [p[0] for p in self.pairs], [p[1] for p in self.pairs]
        self.stores = [ScoreStore.from_arrays(s, y, backend=b, _chunk=chunk) for b in BACKENDS]

    @rule(score=scores, label=labels)
    def add(self, score, label):
        for store in self.stores:
            store.add(score, label)
        self.pairs.append((float(score), int(label)))

    @rule(score=scores, label=labels)
    def query_then_add(self, score, label):
        """The prequential step: the add may reuse what the query just scanned."""
        self.query(float(score))
        self.add(score, label)

    @precondition(lambda self: self.pairs)
    @rule(i=st.integers(0, 10**6))
    def remove(self, i):
        s, y = self.pairs.pop(i % len(self.pairs))
        for store in self.stores:
            store.remove(s, y)

    @rule(x=st.one_of(st.sampled_from(QUERY_GRID), scores))
    def query(self, x):
        want = brute(self.pairs, x)
        answers = [store.query(x) for store in self.stores]
        for got in answers:
            assert abs(got[0] - want[0]) <= TOL and abs(got[1] - want[1]) <= TOL, (x, got, want)
            if self.pairs:
                assert_valid(*got)
        assert len({tuple(bits(got)) for got in answers}) == 1, (x, answers)

    @invariant()
    def agrees_on_grid(self):
        b0, b1 = venn_abers(
            [p[0] for p in self.pairs], [p[1] for p in self.pairs], np.array(QUERY_GRID)
        )
        seen = set()
        for store in self.stores:
            assert len(store) == len(self.pairs)
            store._check()
            p0, p1 = store.query_many(QUERY_GRID)
            np.testing.assert_allclose(p0, b0, rtol=0, atol=TOL)
            np.testing.assert_allclose(p1, b1, rtol=0, atol=TOL)
            seen.add((tuple(bits(p0)), tuple(bits(p1))))
        assert len(seen) == 1, "the backends differ"


StoreMachine.TestCase.settings = settings(
    max_examples=examples(60),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
TestStoreMachine = StoreMachine.TestCase


@settings(max_examples=examples(150), deadline=None)
@given(
    pairs=st.lists(st.tuples(scores, st.sampled_from([0, 1])), max_size=40),
    xs=st.lists(st.one_of(st.sampled_from(QUERY_GRID), scores), min_size=1, max_size=10),
)
def test_batch_matches_brute_force(pairs, xs):
    p0, p1 = venn_abers([p[0] for p in pairs], [p[1] for p in pairs], xs)
    for x, a, b in zip(xs, p0, p1, strict=True):
        want = brute(pairs, x)
        assert abs(a - want[0]) <= TOL and abs(b - want[1]) <= TOL
        if pairs:
            assert_valid(a, b)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=examples(40), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), regime=st.sampled_from(["steep", "flat", "noisy", "ties"]))
def test_larger_random_streams(backend, seed, regime):
    """Hundreds of pairs with tiny chunks: block splits, merges and walks along blocks."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(50, 400))
    if regime == "ties":
        s = rng.integers(0, 8, n) / 8.0
    else:
        s = np.round(rng.random(n), 3)
    true = {"steep": s**3, "flat": np.full(n, 0.4), "noisy": s, "ties": s}[regime]
    y = (rng.random(n) < true).astype(np.int64)
    store = ScoreStore(backend=backend, _chunk=int(rng.choice([3, 5, 16])))
    held = []
    for i in range(n):
        store.add(s[i], y[i])
        held.append(i)
        if rng.random() < 0.3:  # a sliding window: drop the oldest
            j = held.pop(0)
            store.remove(s[j], y[j])
    store._check()
    xs = np.concatenate([np.unique(s), rng.random(20), [-1.0, 2.0]])
    p0, p1 = store.query_many(xs)
    b0, b1 = venn_abers(s[held], y[held], xs)
    np.testing.assert_allclose(p0, b0, rtol=0, atol=TOL)
    np.testing.assert_allclose(p1, b1, rtol=0, atol=TOL)
    for k in rng.choice(len(xs), 8, replace=False):
        want = venn_abers_bruteforce(s[held], y[held], float(xs[k]))
        assert abs(p0[k] - want[0]) <= TOL and abs(p1[k] - want[1]) <= TOL


def _convex_block(n):
    """Groups (count, ones) of one PAVA block whose prefixes have long lower hulls: every
    primitive direction (a, b), 1 <= b <= a, by increasing a while the n counts last, in
    slope order (a strictly convex chain), then enough zeros to pull the whole block's mean
    below the chain's first slope."""
    dirs = []
    a = 1
    while n >= a:
        for b in range(1, a + 1):
            if math.gcd(a, b) == 1 and n >= a:
                dirs.append((a, b))
                n -= a
        a += 1
    dirs.sort(key=lambda d: d[1] / d[0])
    return dirs + [(sum(d[0] for d in dirs) * a, 0)]


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=examples(15), deadline=None)
@given(n=st.integers(1, 300), chunk=st.sampled_from([3, 16, 256]), seed=st.integers(0, 2**32 - 1))
def test_long_hulls_fit_the_scratch(backend, n, chunk, seed):
    """Queries inside the block and block re-fits build hulls of up to ~len(dirs) vertices
    in the scratch, which grows with the store (pairs added one at a time)."""
    dirs = _convex_block(n)
    if backend == "numba":
        from streamcal.core.store._kernels import hull_room

        assert len(dirs) <= hull_room(sum(a for a, _ in dirs[:-1]))
    s = np.repeat(np.arange(len(dirs), dtype=float), [a for a, _ in dirs])
    y = np.concatenate([[1] * b + [0] * (a - b) for a, b in dirs]).astype(np.int64)
    rng = np.random.default_rng(seed)
    store = ScoreStore(backend=backend, _chunk=chunk)
    for i in rng.permutation(len(s)):
        store.add(float(s[i]), int(y[i]))
    xs = np.concatenate([np.arange(len(dirs)) + 0.5, rng.uniform(-1, len(dirs), 5)])
    p0, p1 = store.query_many(xs)
    b0, b1 = venn_abers(s, y, xs)
    np.testing.assert_allclose(p0, b0, rtol=0, atol=TOL)
    np.testing.assert_allclose(p1, b1, rtol=0, atol=TOL)
