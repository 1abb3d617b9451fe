"""RankStore saved and restored: a store from its pickle or its ``to_state()`` goes on bit
for bit as the original does (same tree, same answers, same rounding), in either backend;
the priorities' generator draws alike in both kernels and in bulk; pickles and states
of a development version before the first release (a Mersenne Twister's state) are
refused with one line."""

import math
import pickle
import random

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcal.core.rank_store import RankStore, _restore
from streamcal.core.rank_store import _priorities as P
from streamcal.core.rank_store import _treap as T
from tests._backends import BACKENDS
from tests.core.test_rank_store import _ops, _values

# values of many magnitudes, so that the sums round and a rebuilt tree's sums would differ
_mixed = st.one_of(_values, st.floats(-1e9, 1e9, allow_nan=False, allow_infinity=False),
                   st.floats(-1e-3, 1e-3, allow_nan=False, allow_infinity=False))  # fmt: skip
_mixed_ops = st.lists(st.tuples(st.sampled_from(["add", "add", "remove"]), _mixed),
                      max_size=150)  # fmt: skip


def apply(store, ops, held) -> None:
    """The ops on the store and on ``held``, skipping removes of values not held."""
    for op, v in ops:
        if op == "add" or v in held:
            (store.add if op == "add" else store.remove)(v)
            (held.append if op == "add" else held.remove)(v)


def answers(store, probes) -> tuple:
    """Every answer, as exact values (nan as a string, so that equal stores compare equal)."""
    n = len(store)
    per_probe = [(store.rank(y), store.sum_below(y), repr(store.crps(y))) for y in probes]
    selects = [store.select(k) for k in range(n)]
    return n, store.total, per_probe, selects


def same_tree(a, b) -> None:
    sa, sb = a.to_state(), b.to_state()
    assert sa.keys() == sb.keys()
    for key in sa:
        assert np.array_equal(sa[key], sb[key]), key


def restored(store, how, backend):
    if how == "pickle":
        return pickle.loads(pickle.dumps(store, protocol=5))
    return RankStore.from_state(store.to_state(), backend=backend)


@settings(max_examples=80, deadline=None)
@given(ops=_mixed_ops, split=st.integers(0, 150), seed=st.integers(0, 2**70),
       backend=st.sampled_from(BACKENDS), other=st.sampled_from(BACKENDS),
       probes=st.lists(_values, min_size=1, max_size=5))  # fmt: skip
def test_a_restored_store_goes_on_bit_for_bit(ops, split, seed, backend, other, probes):
    original = RankStore(backend=backend, seed=seed)
    held = []
    apply(original, ops[:split], held)
    copies = [restored(original, "pickle", backend), restored(original, "state", backend),
              restored(original, "state", other)]  # fmt: skip
    for copy in copies:
        apply(copy, ops[split:], list(held))
    apply(original, ops[split:], held)
    want = answers(original, probes + held[:3])
    for copy in copies:
        assert answers(copy, probes + held[:3]) == want
        same_tree(copy, original)


@settings(max_examples=30, deadline=None)
@given(ops=_ops, seed=st.integers(0, 2**64 - 1))
def test_the_backends_grow_the_same_tree(ops, seed):
    stores = [RankStore(backend=b, seed=seed) for b in BACKENDS]
    for store in stores:
        apply(store, ops, [])
    for store in stores[1:]:
        same_tree(store, stores[0])


@pytest.mark.parametrize("state", [0, 1, -1, 2**63 - 1, -(2**63), 12345678901234567])
def test_the_draws_agree_one_by_one_and_in_bulk(state):
    bulk, after = P.draws(state, 50)
    meta = [0, 0, state]
    one_by_one = [T.draw(meta) for _ in range(50)]
    assert bulk.tolist() == one_by_one == [P.after(state, i) for i in range(50)]
    assert meta[2] == after and -(2**63) <= after < 2**63
    assert all(0.0 <= p < 1.0 for p in one_by_one) and len(set(one_by_one)) == 50
    if "numba" in BACKENDS:
        from streamcal.core.rank_store._compiled import _draw

        m = np.array([0, 0, state], np.int64)
        assert [_draw(m) for _ in range(50)] == one_by_one and m[2] == after


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_empty_store_pickles_small(backend):
    # the Mersenne Twister's state made it 4 kB; a by= regressor holds thousands of stores
    assert len(pickle.dumps(RankStore(backend=backend, seed=7), protocol=5)) < 600


def _old_pickle(store, mersenne) -> bytes:
    """The bytes the store's pickle had before the splitmix64 generator: the same nodes,
    meta without the generator, and a Mersenne Twister's state."""
    nodes = store.__reduce__()[1][0]

    class Old:
        def __reduce__(self):
            return _restore, ((nodes[0], nodes[1], nodes[2][:2]), store.backend, mersenne)

    return pickle.dumps(Old(), protocol=5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_pre_release_pickles_and_states_are_refused_in_one_line(backend):
    store = RankStore.from_arrays([1.0, 2.0, 2.0], backend=backend)
    mersenne = random.Random(11).getstate()
    values, counts = store.to_arrays()
    old_state = {"format": 1, "values": values, "counts": counts,
                 "rng": orjson.loads(orjson.dumps(mersenne))}  # fmt: skip
    for load in (lambda: pickle.loads(_old_pickle(store, mersenne)),
                 lambda: RankStore.from_state(old_state, backend=backend)):  # fmt: skip
        with pytest.raises(ValueError, match="format 1.*before the first release") as err:
            load()
        assert "\n" not in str(err.value)


@pytest.mark.parametrize("change, match", [
    (lambda s: s.pop("rng"), "malformed"),
    (lambda s: s.update(values=s["values"][::-1]), "increasing"),
    (lambda s: s.update(prios=s["prios"] + 1.0), r"\[0, 1\)"),
    (lambda s: s.update(sums=s["sums"][:-1]), "unequal"),
    (lambda s: s.update(counts=s["counts"] * 0), "counts"),
    (lambda s: s.update(sums=s["sums"] * math.inf), "finite"),
])  # fmt: skip
def test_a_malformed_state_is_refused(change, match):
    state = RankStore.from_arrays([1.0, 2.0, 2.0, 5.0], backend="python").to_state()
    change(state)
    with pytest.raises(ValueError, match=match):
        RankStore.from_state(state, backend="python")
