"""RankStore against the naive definitions: ranks, selects, sums and the CRPS of the
empirical distribution, under random sequences of adds and removes, in both backends."""

import math
import pickle
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcal.core.rank_store import RankStore
from tests._backends import BACKENDS

# few distinct values, so that ties and repeated removes are common
_values = st.one_of(st.integers(-4, 4).map(float),
                    st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False))  # fmt: skip
_ops = st.lists(st.tuples(st.sampled_from(["add", "add", "remove"]), _values), max_size=120)


def naive_crps(held, y):
    n = len(held)
    first = math.fsum(abs(v - y) for v in held) / n
    pairs = math.fsum(abs(a - b) for a in held for b in held) / (2 * n * n)
    return first - pairs


def check_against(store, held, probes):
    s = sorted(held)
    assert len(store) == len(s)
    assert store._nodes == int(store._meta[1]) == len(set(s))  # the Python mirror of the size
    scale = 1.0 + max((abs(v) for v in s), default=0.0)
    for y in probes:
        below = sum(v < y for v in s)
        assert store.rank(y) == (below, s.count(y))
        assert store.sum_below(y) == pytest.approx(math.fsum(v for v in s if v < y),
                                                   abs=1e-9 * scale * max(len(s), 1))  # fmt: skip
        if s:
            assert store.crps(y) == pytest.approx(naive_crps(s, y), abs=1e-9 * scale * len(s))
        else:
            assert math.isnan(store.crps(y))
    for k in range(len(s)):
        assert store.select(k) == s[k]
    values, counts = store.to_arrays()
    assert np.repeat(values, counts).tolist() == s


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=60, deadline=None)
@given(ops=_ops, probes=st.lists(_values, min_size=1, max_size=6))
def test_matches_the_naive_definitions(backend, ops, probes):
    store = RankStore(backend=backend)
    held = []
    for op, v in ops:
        if op == "add":
            store.add(v)
            held.append(v)
        elif v in held:
            store.remove(v)
            held.remove(v)
        else:
            with pytest.raises(ValueError, match="not in the store"):
                store.remove(v)
    check_against(store, held, probes + held[:3])


@settings(max_examples=30, deadline=None)
@given(ops=_ops, probes=st.lists(_values, min_size=1, max_size=4))
def test_backends_agree_bit_for_bit(ops, probes):
    stores = [RankStore(backend=b, seed=3) for b in BACKENDS]
    held = []
    for op, v in ops:
        if op == "remove" and v not in held:
            continue
        for store in stores:
            (store.add if op == "add" else store.remove)(v)
        held.append(v) if op == "add" else held.remove(v)
    for y in probes:
        assert len({(s.rank(y), s.sum_below(y), s.crps(y) if held else 0.0) for s in stores}) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_long_window_stays_exact(backend):
    # thousands of adds and removes: the dense node layout and the rotations hold up
    rng = random.Random(7)
    store, held = RankStore(backend=backend), []
    for i in range(4000):
        v = round(rng.gauss(0, 10), 1)
        store.add(v)
        held.append(v)
        if i >= 500:
            store.remove(held.pop(0))
    check_against(store, held, [-3.0, 0.0, 0.05, 12.5])


@pytest.mark.parametrize("backend", BACKENDS)
def test_built_and_pickled_stores_answer_alike(backend):
    rng = random.Random(1)
    held = [float(rng.randint(-20, 20)) for _ in range(300)]
    built = RankStore.from_arrays(held, backend=backend)
    check_against(built, held, [-5.0, 0.5, 3.0])
    back = pickle.loads(pickle.dumps(built))
    check_against(back, held, [-5.0, 0.5, 3.0])
    back.add(100.0)  # a restored store keeps working
    assert back.select(-1) == 100.0
    values, _ = RankStore.from_state(built.to_state(), backend="python").to_arrays()
    assert values.tolist() == sorted(set(held))


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_input_changes_nothing(backend):
    store = RankStore(backend=backend)
    store.add(1.0)
    for bad, error in [(math.nan, ValueError), (math.inf, ValueError), ("1", TypeError),
                       (True, TypeError)]:  # fmt: skip
        with pytest.raises(error):
            store.add(bad)
    with pytest.raises(IndexError, match="out of range"):
        store.select(1)
    with pytest.raises(ValueError, match="counts"):
        RankStore.from_arrays([1.0, 2.0], [1, 0])
    with pytest.raises(ValueError, match="backend must be one of"):
        RankStore(backend="fast")
    with pytest.raises(ValueError, match="format"):
        RankStore.from_state({"format": 9})
    assert store.to_arrays()[0].tolist() == [1.0] and len(store) == 1
