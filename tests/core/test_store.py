"""ScoreStore API, for every backend: conventions, bad input leaves the store unchanged,
pickling and state, bulk paths, backend choice."""

import copy
import pickle

import numpy as np
import pytest

from streamcal.core import ScoreStore, venn_abers, venn_abers_bruteforce
from streamcal.core.store import ENV_BACKEND, backend_class
from tests._backends import BACKENDS

GRID = np.array([-1.0, 0.0, 0.05, 0.1, 0.2, 0.25, 0.5, 0.7, 0.8, 0.9, 1.0, 2.0])


@pytest.fixture(params=BACKENDS, autouse=True)
def backend(request, monkeypatch):
    """Every test runs once per backend: ScoreStore() reads the choice from the environment."""
    monkeypatch.setenv(ENV_BACKEND, request.param)
    return request.param


def make_store(chunk=4):
    rng = np.random.default_rng(7)
    s = np.round(rng.random(60), 1)
    y = (rng.random(60) < s).astype(int)
    store = ScoreStore(_chunk=chunk)
    for si, yi in zip(s, y, strict=True):
        store.add(si, yi)
    store.remove(s[0], y[0])
    return store


def state(store):
    s, y = store.to_arrays()
    p0, p1 = store.query_many(GRID)
    return len(store), s.tolist(), y.tolist(), p0.tolist(), p1.tolist()


def test_conventions():
    store = ScoreStore()
    assert store.query(0.3) == (0.0, 1.0) and len(store) == 0
    store.add(0.5, 1)
    store.add(0.5, 0)
    p0, p1 = store.query(0.9)
    assert p1 == 1.0 and p0 == pytest.approx(1 / 3)  # above every score: p1 = 1
    p0, p1 = store.query(0.1)
    assert p0 == 0.0 and p1 == pytest.approx(2 / 3)  # below every score: p0 = 0
    assert store.query(0.5) == venn_abers_bruteforce([0.5, 0.5], [1, 0], 0.5)  # pooled


@pytest.mark.parametrize(
    "score",
    [float("nan"), float("inf"), -float("inf"), np.nan, np.float32("inf"), "0.5", None, True, 1j],
)
def test_bad_score_refused_and_store_unchanged(score):
    store = make_store()
    before = state(store)
    for call in (lambda: store.add(score, 1), lambda: store.remove(score, 0)):
        with pytest.raises(ValueError, match="score"):
            call()
        assert state(store) == before
    with pytest.raises(ValueError, match="score"):
        store.query(score)
    if not isinstance(score, bool):  # numpy turns [0.5, True] into floats, by design
        with pytest.raises(ValueError):
            store.query_many([0.5, score])
    assert state(store) == before


@pytest.mark.parametrize("label", [2, -1, 0.5, 1.0, "1", None, np.int64(3), np.float64(0.0)])
def test_bad_label_refused_and_store_unchanged(label):
    store = make_store()
    before = state(store)
    with pytest.raises(ValueError, match=repr(label).replace("(", r"\(").replace(")", r"\)")):
        store.add(0.5, label)
    assert state(store) == before
    with pytest.raises(ValueError, match="label"):
        store.remove(0.5, label)
    assert state(store) == before


@pytest.mark.parametrize("pair", [(0.33, 0), (0.33, 1), (-5.0, 1), (7.0, 0)])
def test_removing_absent_pair_refused_and_store_unchanged(pair):
    store = make_store()
    before = state(store)
    with pytest.raises(ValueError, match=repr(pair[0])):
        store.remove(*pair)
    assert state(store) == before


def test_removing_a_label_the_score_lacks_is_refused():
    store = ScoreStore()
    store.add(0.5, 1)
    store.add(0.5, 1)
    before = state(store)
    with pytest.raises(ValueError, match=r"\(0.5, 0\)"):
        store.remove(0.5, 0)
    assert state(store) == before
    store.remove(0.5, 1)
    store.remove(0.5, 1)
    with pytest.raises(ValueError):
        store.remove(0.5, 1)
    assert len(store) == 0 and store.query(0.5) == (0.0, 1.0)


def test_bad_bulk_input_refused_and_store_unchanged():
    store = make_store()
    before = state(store)
    with pytest.raises(ValueError, match="nan"):
        store.add_many([0.1, np.nan], [0, 1])
    with pytest.raises(ValueError, match="2"):
        store.add_many([0.1, 0.2], [0, 2])
    with pytest.raises(ValueError):
        store.add_many([0.1, 0.2], [0])
    assert state(store) == before
    with pytest.raises(ValueError, match="inf"):
        ScoreStore.from_arrays([0.1, np.inf], [0, 1])


@pytest.mark.parametrize("chunk", [3, 256])
@pytest.mark.parametrize("roundtrip", [pickle.loads, copy.deepcopy])
def test_pickle_and_deepcopy_preserve_answers(chunk, roundtrip):
    store = make_store(chunk)
    if roundtrip is pickle.loads:
        clone = pickle.loads(pickle.dumps(store))
    else:
        clone = copy.deepcopy(store)
    assert state(clone) == state(store)
    # the clone is independent and keeps working exactly
    clone.add(0.55, 1)
    clone.remove(0.55, 1)
    assert state(clone) == state(store)
    clone.add(0.55, 1)
    assert state(store) != state(clone)
    s, y = clone.to_arrays()
    p0, p1 = clone.query_many(GRID)
    b0, b1 = venn_abers(s, y, GRID)
    np.testing.assert_allclose(p0, b0, atol=1e-12)
    np.testing.assert_allclose(p1, b1, atol=1e-12)


def test_empty_store_pickles():
    clone = pickle.loads(pickle.dumps(ScoreStore()))
    assert len(clone) == 0 and clone.query(0.0) == (0.0, 1.0)
    clone.add(1.0, 1)
    assert clone.query(1.0) == (0.5, 1.0)


def test_bulk_paths_agree_with_one_by_one():
    rng = np.random.default_rng(3)
    s = np.round(rng.random(3000), 2)
    y = (rng.random(3000) < s).astype(np.int64)
    one = make_store()
    one.clear()
    for si, yi in zip(s[:500].tolist(), y[:500].tolist(), strict=True):
        one.add(si, yi)
    bulk = ScoreStore.from_arrays(s[:200], y[:200])
    bulk.add_many(s[200:490], y[200:490])  # large batch: rebuild
    bulk.add_many(s[490:500], y[490:500])  # small batch: one by one
    assert state(one) == state(bulk)
    xs = rng.random(200)
    p0, p1 = bulk.query_many(xs.reshape(10, 20))
    assert p0.shape == (10, 20)
    b0, b1 = venn_abers(s[:500], y[:500], xs)
    np.testing.assert_allclose(p0.ravel(), b0, atol=1e-12)
    np.testing.assert_allclose(p1.ravel(), b1, atol=1e-12)
    assert [bulk.query(x) for x in xs[:5]] == list(zip(b0[:5], b1[:5], strict=True))


def test_to_arrays_and_clear():
    store = ScoreStore.from_arrays([0.3, 0.1, 0.3, 0.3], [True, False, False, True])
    s, y = store.to_arrays()
    assert s.tolist() == [0.1, 0.3, 0.3, 0.3] and y.tolist() == [0, 0, 1, 1]
    store.clear()
    assert len(store) == 0 and store.to_arrays()[0].size == 0
    assert store.query(0.3) == (0.0, 1.0)


def test_numpy_and_python_inputs_are_the_same_pairs():
    a, b = ScoreStore(), ScoreStore()
    for s, y in [(0.25, 1), (0.5, 0), (0.25, 0)]:
        a.add(s, y)
    b.add(np.float32(0.25), np.bool_(True))
    b.add(np.float64(0.5), np.int8(0))
    b.add(0.25, False)
    assert state(a) == state(b)
    b.remove(np.float16(0.25), np.uint8(1))
    a.remove(0.25, 1)
    assert state(a) == state(b)


@pytest.mark.slow  # about 5 s on the python backend
def test_many_chunks_and_growth():
    """Enough distinct scores to split chunks many times and grow every array."""
    rng = np.random.default_rng(11)
    s = rng.random(5000)
    y = (rng.random(5000) < 0.5 + 0.3 * np.sin(6 * s)).astype(int)
    store = ScoreStore(_chunk=8)
    for si, yi in zip(s.tolist(), y.tolist(), strict=True):
        store.add(si, yi)
    for si, yi in zip(s[::2].tolist(), y[::2].tolist(), strict=True):
        store.remove(si, yi)
    xs = rng.random(300)
    p0, p1 = store.query_many(xs)
    b0, b1 = venn_abers(s[1::2], y[1::2], xs)
    np.testing.assert_allclose(p0, b0, atol=1e-12)
    np.testing.assert_allclose(p1, b1, atol=1e-12)


def test_the_environment_picks_the_backend(backend):
    assert ScoreStore().backend == backend
    assert ScoreStore.from_arrays([0.5], [1]).backend == backend
    assert type(ScoreStore(backend="python")).__name__ == "PythonStore"
    with pytest.raises(ValueError, match="backend must be one of"):
        ScoreStore(backend="fast")


@pytest.mark.parametrize("other", BACKENDS)
def test_state_and_pickles_load_in_every_backend(backend, other):
    store = make_store(chunk=8)
    moved = ScoreStore.from_state(store.to_state(), backend=other)
    assert moved.backend == other and state(moved) == state(store)
    clone = pickle.loads(pickle.dumps(store))
    assert clone.backend == backend and state(clone) == state(store)


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"format": 2, "scores": [], "counts": [], "ones": []}, "format 2; this streamcal reads"),
        ({"scores": [0.1], "counts": [1], "ones": [0]}, "'format'"),
        ({"format": 1, "scores": [0.2, 0.1], "counts": [1, 1], "ones": [0, 0]}, "increasing"),
        ({"format": 1, "scores": [0.1], "counts": [1], "ones": [2]}, "ones <= counts"),
        ({"format": 1, "scores": [0.1], "counts": [1.5], "ones": [0]}, "integers"),
        ({"format": 1, "scores": [0.1, 0.2], "counts": [1], "ones": [0]}, "same length"),
        ({"format": 1, "scores": [np.nan], "counts": [1], "ones": [0]}, "finite"),
    ],
)
def test_bad_state_is_refused_in_one_line(bad, message):
    with pytest.raises(ValueError, match=message) as info:
        ScoreStore.from_state(bad)
    assert "\n" not in str(info.value)


def test_python_store_structure_stays_consistent():
    """_check recomputes the chunk sums and the blocks from scratch (hypothesis tests call it
    after every step; this one drives many sublist splits and joins)."""
    rng = np.random.default_rng(5)
    store = backend_class("python")(_chunk=4)
    held = []
    for i in range(1500):
        x, y = float(np.round(rng.random(), 2)), int(rng.random() < 0.3)
        store.add(x, y)
        held.append((x, y))
        if rng.random() < 0.45:
            store.remove(*held.pop(int(rng.integers(len(held)))))
        if i % 100 == 0:
            store._check()
    store._check()


def test_python_store_query_then_add_stays_exact():
    """An add right after a query of the same score reuses the query's scan of the block
    (``_seen``); _check re-derives the blocks by PAVA from scratch after each such add."""
    rng = np.random.default_rng(11)
    for chunk, regime in [(4, "steep"), (16, "flat"), (4, "ties"), (256, "steep")]:
        store = backend_class("python")(_chunk=chunk)
        held = []
        for i in range(600):
            x = float(rng.integers(0, 12) / 12) if regime == "ties" else float(rng.random())
            y = int(rng.random() < (0.4 if regime == "flat" else x**3))
            store.query(x)
            store.add(x, y)
            held.append((x, y))
            if rng.random() < 0.3:
                store.remove(*held.pop(0))
            if i % 7 == 0:
                store._check()
        store._check()


# what each backend keeps incrementally, and a corruption of it that _check must catch
CORRUPTIONS = {
    "numba": [
        lambda st: st._block_sums.__setitem__((0, 1), st._block_sums[0, 1] + 1),
        lambda st: st._hulls.__setitem__((st._order[0], 1, 1), st._hulls[st._order[0], 1, 1] + 1),
        lambda st: st._sums.__setitem__((st._order[0], 1, 2), st._sums[st._order[0], 1, 2] + 1),
    ],
    "python": [
        lambda st: st._bs.__setitem__(0, st._bs[0] + 1),
        lambda st: st._cs[0].__setitem__(2, st._cs[0][2] + 1),
        lambda st: (st.query(0.25), setattr(st, "_seen", (*st._seen[:2], st._seen[2] + 0.25))),
    ],
}


def test_check_catches_corrupted_incremental_state(backend):
    """_check (called by the hypothesis state machine after every step) recomputes from
    scratch: it passes on a sound store and fails on each corrupted derived structure."""
    for corrupt in CORRUPTIONS[backend]:
        store = make_store()
        store._check()
        corrupt(store)
        with pytest.raises(AssertionError):
            store._check()
