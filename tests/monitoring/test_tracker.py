"""CalibrationTracker against direct numpy computations, river's metrics, and pickle."""

from __future__ import annotations

import copy
import json
import math
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from river import metrics

from streamcal.monitoring import SNAPSHOT_KEYS, CalibrationTracker, wilson_interval
from tests._helpers import examples

CONTRACT_KEYS = {
    "labels",
    "log_loss",
    "recent_log_loss",
    "square_loss",
    "recent_square_loss",
    "raw_log_loss",
    "recent_raw_log_loss",
    "raw_square_loss",
    "recent_raw_square_loss",
    "mean_width",
    "recent_mean_width",
    "ece",
    "raw_ece",
    "mean_p0",
    "frequency",
    "mean_p1",
}


def random_stream(rng, n, score_fraction=0.7):
    p0 = rng.uniform(0, 0.9, n)
    p1 = np.minimum(1.0, p0 + rng.uniform(0, 0.3, n))
    same = rng.random(n) < 0.05
    p1[same] = p0[same]  # some zero-width pairs
    y = (rng.random(n) < (p0 + p1) / 2).astype(int)
    score = rng.random(n)
    has_score = rng.random(n) < score_fraction
    return p0, p1, y, score, has_score


def feed(tracker, p0, p1, y, score, has_score):
    for a, b, c, s, h in zip(p0, p1, y, score, has_score, strict=True):
        tracker.update(float(a), float(b), int(c), score=float(s) if h else None)


def direct(p0, p1, y, score, has_score, window, bins):
    """The snapshot computed from scratch with numpy, by the textbook formulas."""
    eps = 1e-15

    def logloss(q, yy):
        q = np.clip(q, eps, 1 - eps)
        return float(np.mean(-(yy * np.log(q) + (1 - yy) * np.log(1 - q))))

    def ece(q, yy):
        idx = np.minimum(np.floor(q * bins), bins - 1).astype(int)
        total = 0.0
        for b in range(bins):
            m = idx == b
            if m.any():
                total += m.sum() * abs(q[m].mean() - yy[m].mean())
        return total / len(q)

    p = p1 / (1 - p0 + p1)
    r = slice(-window, None)
    s, ys = score[has_score], y[has_score]
    rs, rys = score[r][has_score[r]], y[r][has_score[r]]
    raw = len(s) > 0
    return {
        "labels": len(y),
        "raw_labels": int(has_score.sum()),
        "log_loss": logloss(p, y),
        "recent_log_loss": logloss(p[r], y[r]),
        "square_loss": float(np.mean((y - p) ** 2)),
        "recent_square_loss": float(np.mean((y[r] - p[r]) ** 2)),
        "raw_log_loss": logloss(s, ys) if raw else None,
        "recent_raw_log_loss": logloss(rs, rys) if len(rs) else None,
        "raw_square_loss": float(np.mean((ys - s) ** 2)) if raw else None,
        "recent_raw_square_loss": float(np.mean((rys - rs) ** 2)) if len(rs) else None,
        "mean_width": float(np.mean(p1 - p0)),
        "recent_mean_width": float(np.mean(p1[r] - p0[r])),
        "ece": ece(p, y),
        "raw_ece": ece(s, ys) if raw else None,
        "mean_p0": float(np.mean(p0)),
        "frequency": float(np.mean(y)),
        "mean_p1": float(np.mean(p1)),
    }


def assert_snapshot_close(got, want):
    assert set(got) == set(want)
    for k, v in want.items():
        if v is None:
            assert got[k] is None, k
        else:
            assert got[k] == pytest.approx(v, rel=1e-9, abs=1e-12), k


def test_snapshot_keys_cover_the_contract():
    s = CalibrationTracker().snapshot()
    assert CONTRACT_KEYS <= set(s)
    assert tuple(s) == SNAPSHOT_KEYS
    assert s["labels"] == 0
    assert all(v is None for k, v in s.items() if k not in ("labels", "raw_labels"))


@settings(max_examples=examples(40), deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 400),
    window=st.integers(1, 120),
    bins=st.integers(1, 15),
    score_fraction=st.sampled_from([0.0, 0.3, 1.0]),
)
def test_tracker_matches_direct_computation(seed, n, window, bins, score_fraction):
    rng = np.random.default_rng(seed)
    data = random_stream(rng, n, score_fraction)
    t = CalibrationTracker(window=window, bins=bins)
    feed(t, *data)
    assert_snapshot_close(t.snapshot(), direct(*data, window=window, bins=bins))


def test_long_stream_rolling_window_does_not_drift():
    rng = np.random.default_rng(1)
    data = random_stream(rng, 20_000)
    t = CalibrationTracker(window=500, bins=10)
    feed(t, *data)
    assert_snapshot_close(t.snapshot(), direct(*data, window=500, bins=10))


def test_loss_terms_equal_rivers_metrics():
    rng = np.random.default_rng(2)
    p0, p1, y, score, _ = random_stream(rng, 300)
    score[:3] = [0.0, 1.0, 1e-17]  # river clamps these; so must we
    t = CalibrationTracker()
    ll, mse, raw_ll, raw_mse = metrics.LogLoss(), metrics.MSE(), metrics.LogLoss(), metrics.MSE()
    for a, b, c, s in zip(p0, p1, y, score, strict=True):
        t.update(a, b, bool(c), score=s)
        p = b / (1 - a + b)
        ll.update(bool(c), p)
        mse.update(int(c), p)
        raw_ll.update(bool(c), s)
        raw_mse.update(int(c), s)
    snap = t.snapshot()
    assert snap["log_loss"] == pytest.approx(ll.get(), rel=1e-12)
    assert snap["square_loss"] == pytest.approx(mse.get(), rel=1e-12)
    assert snap["raw_log_loss"] == pytest.approx(raw_ll.get(), rel=1e-12)
    assert snap["raw_square_loss"] == pytest.approx(raw_mse.get(), rel=1e-12)


def test_explicit_p_is_used_instead_of_the_log_merge():
    t = CalibrationTracker()
    t.update(0.2, 0.4, 1, p=0.34)
    assert t.snapshot()["square_loss"] == pytest.approx((1 - 0.34) ** 2)
    assert t.reliability("p")[3]["mean_pred"] == pytest.approx(0.34)


def test_reliability_bins_against_numpy_histogram():
    rng = np.random.default_rng(3)
    p0, p1, y, score, has = random_stream(rng, 1000, 1.0)
    t = CalibrationTracker(bins=7)
    feed(t, p0, p1, y, score, has)
    table = t.reliability("score")
    counts, _ = np.histogram(score, bins=np.linspace(0, 1, 8))
    assert [b["count"] for b in table] == counts.tolist()
    ones, _ = np.histogram(score[y == 1], bins=np.linspace(0, 1, 8))
    for b, c, o in zip(table, counts, ones, strict=True):
        assert b["frequency"] == pytest.approx(o / c)
        assert b["lo"] <= b["mean_pred"] < b["hi"]
    with pytest.raises(ValueError, match="which"):
        t.reliability("raw")


def test_snapshot_with_reliability_is_json_ready():
    t = CalibrationTracker(bins=4)
    t.update(np.float64(0.1), np.float64(0.3), np.int64(1))
    snap = t.snapshot(reliability=True)
    assert len(snap["reliability"]) == 4 and snap["raw_reliability"] is None
    assert json.loads(json.dumps(snap)) == snap
    assert all(type(v) in (int, float, type(None)) for k, v in snap.items() if k in SNAPSHOT_KEYS)
    assert "reliability" not in t.snapshot()
    t.update(0.1, 0.3, 0, score=0.9)
    assert [b["count"] for b in t.snapshot(reliability=True)["raw_reliability"]] == [0, 0, 0, 1]


def test_pickle_and_deepcopy_preserve_exact_state():
    rng = np.random.default_rng(4)
    first, second = random_stream(rng, 700), random_stream(rng, 500)
    t = CalibrationTracker(window=100, bins=5)
    feed(t, *first)
    for clone in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t)):
        assert clone.snapshot(reliability=True) == t.snapshot(reliability=True)
        # Same future: the window contents came across, not just the current means.
        a, b = copy.deepcopy(t), clone
        feed(a, *second)
        feed(b, *second)
        assert a.snapshot(reliability=True) == b.snapshot(reliability=True)


@pytest.mark.parametrize(
    "args, kwargs",
    [
        ((1.5, 0.4, 1), {}),
        ((-0.1, 0.4, 1), {}),
        ((0.1, 1.2, 1), {}),
        ((math.nan, 0.4, 1), {}),
        ((0.1, 0.4, 1), {"score": 1.5}),
        ((0.1, 0.4, 1), {"score": math.nan}),
        ((0.1, 0.4, 1), {"p": -0.2}),
        (("0.1", 0.4, 1), {}),
        ((0.1, 0.4, 1), {"score": "0.5"}),
        ((0.1, 0.4, 2), {}),
        ((0.1, 0.4, 0.5), {}),
    ],
)
def test_bad_input_raises_and_leaves_state_unchanged(args, kwargs):
    t = CalibrationTracker(window=3)
    t.update(0.1, 0.3, 1, score=0.2)
    before = pickle.dumps(t)
    with pytest.raises(ValueError) as err:
        t.update(*args, **kwargs)
    bad = [repr(v) for v in (*args, *kwargs.values())]
    assert any(b in str(err.value) for b in bad)
    assert pickle.dumps(t) == before


@pytest.mark.parametrize("kwargs", [{"window": 0}, {"window": 2.5}, {"bins": 0}, {"bins": True}])
def test_bad_parameters(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        CalibrationTracker(**kwargs)


def test_corollary_1_band_on_an_exchangeable_stream():
    """Venn-Abers pairs from core bracket the frequency of ones (Corollary 1)."""
    from streamcal.core import venn_abers

    rng = np.random.default_rng(5)
    n_cal, n_test = 300, 400
    s = rng.random(n_cal + n_test)
    y = (rng.random(n_cal + n_test) < s**2).astype(int)
    p0, p1 = venn_abers(s[:n_cal], y[:n_cal], s[n_cal:])
    t = CalibrationTracker()
    feed(t, p0, p1, y[n_cal:], s[n_cal:], np.ones(n_test, bool))
    snap = t.snapshot()
    lo, hi = wilson_interval(int(y[n_cal:].sum()), n_test, z=3)
    assert snap["mean_p0"] <= hi and lo <= snap["mean_p1"]
    assert snap["mean_p0"] <= snap["mean_p1"]


def test_full_va_pairs_with_p0_above_p1_are_tracked():
    # Algorithm 1 retrains the scorer per hypothetical label, so p0 > p1 can happen;
    # the tracker must record it (the stream processor must not die on it).
    t = CalibrationTracker(window=10)
    t.update(0.25, 0.2, 1)
    snap = t.snapshot()
    assert snap["labels"] == 1
    assert snap["mean_width"] == pytest.approx(-0.05)
    assert snap["log_loss"] == pytest.approx(-math.log(0.2 / (1 - 0.25 + 0.2)))


# Batched folding: update() holds labels back and folds them before any read. A tracker
# with BATCH = 1 folds each label as it comes, as the tracker did before batching.

reads = st.sampled_from(["snapshot", "reliability", "state", "pickle", "deepcopy", "none"])


def _read(t, how):
    if how == "snapshot":
        return t.snapshot(reliability=True)
    if how == "reliability":
        return t.reliability("p"), t.reliability("score")
    if how == "state":
        return CalibrationTracker.from_state(t.to_state())
    if how == "pickle":
        return pickle.loads(pickle.dumps(t))
    if how == "deepcopy":
        return copy.deepcopy(t)
    return None


@settings(max_examples=examples(30), deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.lists(st.tuples(st.integers(1, 700), reads), min_size=1, max_size=4),
    st.sampled_from([1, 7, 1000]),
    st.booleans(),
)
def test_batched_folding_gives_the_values_of_folding_each_label(seed, chunks, window, cats):
    import streamcal.monitoring.tracker as tm

    rng = np.random.default_rng(seed)
    held, eager = CalibrationTracker(window=window), CalibrationTracker(window=window)
    saved = tm.BATCH
    for n, how in chunks:
        p0, p1, y, score, has_score = random_stream(rng, n)
        prot = rng.random(n) < 0.5
        cat = rng.integers(0, 3, n)
        for i in range(n):
            kw = {"score": float(score[i]) if has_score[i] else None,
                  "p_protected": float(p1[i]) if prot[i] else None}  # fmt: skip
            if cats and cat[i] == 0:  # a label with a category folds the held ones first
                kw["category"] = "c"
            held.update(float(p0[i]), float(p1[i]), int(y[i]), **kw)
            tm.BATCH = 1
            try:
                eager.update(float(p0[i]), float(p1[i]), int(y[i]), **kw)
            finally:
                tm.BATCH = saved
        assert held.labels == eager.labels  # counted at once, before folding
        copy_ = _read(held, how)
        if isinstance(copy_, CalibrationTracker):  # a copy folded everything, and resumes
            assert copy_.snapshot(reliability=True) == eager.snapshot(reliability=True)
            held = copy_
        else:
            assert held.snapshot(reliability=True) == eager.snapshot(reliability=True)
        assert held.category_snapshots() == eager.category_snapshots()
    assert held.to_state() == eager.to_state()


def test_labels_held_back_survive_a_rejected_update():
    t = CalibrationTracker(window=5)
    t.update(0.2, 0.4, 1, score=0.3)
    t.update(0.5, 0.6, 0)
    assert len(t._pending) == 2  # held back: the test below would pass without batching
    with pytest.raises(ValueError):
        t.update(0.2, 1.4, 1)
    ref = CalibrationTracker(window=5)
    for args, kw in [((0.2, 0.4, 1), {"score": 0.3}), ((0.5, 0.6, 0), {})]:
        ref.update(*args, **kw)
        ref.snapshot()  # folds each label at once
    assert t.snapshot(reliability=True) == ref.snapshot(reliability=True)


def test_a_state_shares_nothing_with_the_tracker_or_its_copies():
    t = CalibrationTracker(window=4, bins=2)
    for i in range(6):
        t.update(0.1 * i, 0.1 * i + 0.3, i % 2, score=0.4)
    state = t.to_state()
    a, b = CalibrationTracker.from_state(state), CalibrationTracker.from_state(state)
    before = json.dumps(state)
    want = b.snapshot(reliability=True)
    for tr in (t, a):
        tr.update(0.9, 0.95, 1, score=0.9)
        tr.snapshot()
    assert json.dumps(state) == before and b.snapshot(reliability=True) == want
