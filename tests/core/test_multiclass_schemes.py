"""The multiclass schemes: every store is exact on its own pairs, and the coupled
probabilities equal venn-abers 1.5.4's ``predict_proba_prefitted_va``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcal.core import venn_abers_bruteforce
from streamcal.core.multiclass import (
    OneVsOne,
    OneVsRest,
    TopLabel,
    couple,
    scheme_class,
    venn_abers_multiclass,
)
from tests._helpers import examples

SCHEMES = [TopLabel, OneVsRest, OneVsOne]


def own_pairs(scheme, S, y, k):
    """What each store must hold, straight from the scheme's definition."""
    out = {}
    if scheme is TopLabel:
        top = [int(np.argmax(row)) for row in S]  # argmax: the first on ties
        out["top"] = (
            [row[t] for row, t in zip(S, top, strict=True)],
            [int(t == c) for t, c in zip(top, y, strict=True)],
        )
    elif scheme is OneVsRest:
        for c in range(k):
            out[c] = ([row[c] for row in S], [int(v == c) for v in y])
    else:
        for i in range(k):
            for j in range(i + 1, k):
                rows = [(r, v) for r, v in zip(S, y, strict=True) if v in (i, j)]
                out[(i, j)] = (
                    [r[j] / (r[i] + r[j]) if r[i] + r[j] > 0 else 0.5 for r, _ in rows],
                    [int(v == j) for _, v in rows],
                )
    return out


# Scores on a coarse grid: ties (within a store and across objects) are frequent.
score_rows = st.integers(2, 4).flatmap(
    lambda k: st.tuples(
        st.just(k),
        st.lists(
            st.tuples(st.lists(st.integers(0, 4), min_size=k, max_size=k), st.integers(0, k - 1)),
            min_size=0,
            max_size=25,
        ),
        st.lists(st.integers(0, 4), min_size=k, max_size=k),
        st.integers(0, 25),
    )
)


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda c: c.scheme)
@settings(max_examples=examples(60), deadline=None)
@given(data=score_rows)
def test_every_store_equals_the_bruteforce_oracle_on_its_own_pairs(scheme, data):
    k, objects, test_row, n_removed = data
    S = [[v / 4 for v in row] for row, _ in objects]
    y = [c for _, c in objects]
    test = [v / 4 for v in test_row]
    online = scheme(k, backend="python")
    for row, c in zip(S, y, strict=True):
        online.add(row, c)
    removed = min(n_removed, len(S))  # remove the oldest: the store must forget exactly them
    for row, c in zip(S[:removed], y[:removed], strict=True):
        online.remove(row, c)
    S, y = S[removed:], y[removed:]
    expected = own_pairs(scheme, S, y, k)
    assert set(online.stores) == set(expected)
    for key, (scores, labels) in expected.items():
        store = online.stores[key]
        assert sorted(zip(*store.to_arrays(), strict=True)) == sorted(
            zip(scores, labels, strict=True)
        )
        if scheme is TopLabel:
            t = test[int(np.argmax(test))]
        elif scheme is OneVsRest:
            t = test[key]
        else:
            i, j = key
            t = test[j] / (test[i] + test[j]) if test[i] + test[j] > 0 else 0.5
        assert store.query(t) == venn_abers_bruteforce(scores, labels, t)
    if scheme is OneVsRest:  # its own walk over the stores, in class order
        assert online.intervals(test) == [
            venn_abers_bruteforce(*expected[c], test[c]) for c in range(k)
        ]


def softmax_data(n, k, seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k)) + 1.5 * np.eye(k)[y]
    p = np.exp(logits)
    return p / p.sum(axis=1, keepdims=True), y


@pytest.mark.parametrize("k", [3, 5, 7])
@pytest.mark.parametrize("scheme", ["one-vs-rest", "one-vs-one"])
def test_probabilities_equal_venn_abers_prefitted(scheme, k):
    va = pytest.importorskip("venn_abers.venn_abers")
    p_cal, y_cal = softmax_data(300, k, seed=k)
    p_test, _ = softmax_data(50, k, seed=100 + k)
    p_test[0] = p_cal[3]  # a test score equal to a calibration score (ties)
    tpe = scheme.replace("-", "_")
    expected, _ = va.predict_proba_prefitted_va(p_cal, y_cal, p_test, va_tpe=tpe)
    online = scheme_class(scheme).from_arrays(p_cal, y_cal, n_classes=k)
    got = np.array([online.proba(row) for row in p_test])
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)
    batch = venn_abers_multiclass(p_cal, y_cal, p_test, scheme)
    np.testing.assert_allclose(batch, got, rtol=1e-12, atol=1e-15)


def test_online_adds_equal_the_bulk_build_and_state_round_trips():
    p, y = softmax_data(200, 4, seed=1)
    for cls in SCHEMES:
        online = cls(4)
        for row, c in zip(p, y, strict=True):
            online.add(row, c)
        bulk = cls.from_arrays(p, y, n_classes=4)
        copy = cls.from_state(online.to_state())
        assert len(online) == len(bulk) == len(copy) == 200
        for key in online.stores:
            for store in (bulk.stores[key], copy.stores[key]):
                assert store.query(0.3) == online.stores[key].query(0.3)


def test_couple_recovers_probabilities_that_are_consistent():
    # p_{i|ij} = p_i / (p_i + p_j) exactly: coupling gives p back.
    p = np.array([0.5, 0.3, 0.2])
    q = p[:, None] / (p[:, None] + p[None, :])
    np.testing.assert_allclose(couple(q), p)
    np.testing.assert_allclose(couple(np.stack([q, q])), [p, p])  # batch


def test_bad_inputs_are_refused():
    top = TopLabel(3)
    with pytest.raises(ValueError, match="class index"):
        top.add([0.2, 0.3, 0.5], 3)
    with pytest.raises(ValueError, match="4 scores for 3 classes"):
        top.add([0.2, 0.3, 0.4, 0.1], 0)
    ovr = OneVsRest.from_arrays([[0.2, 0.8]], [1], n_classes=2)
    for bad in (lambda: ovr.add([0.5, 0.5], 2), lambda: ovr.remove([0.2, 0.8, 0.0], 1)):
        with pytest.raises(ValueError):
            bad()
    with pytest.raises(ValueError, match="not in the store"):
        ovr.remove([0.2, 0.7], 1)
    with pytest.raises(ValueError, match="scheme must be one of"):
        scheme_class("all-pairs")
