"""Batch venn_abers: shapes, conventions, bad input, and agreement with the store."""

import numpy as np
import pytest

from streamcal.core import ScoreStore, venn_abers, venn_abers_bruteforce


def test_shape_follows_test_scores():
    p0, p1 = venn_abers([0.1, 0.9], [0, 1], np.full((2, 3), 0.5))
    assert p0.shape == p1.shape == (2, 3)
    p0, p1 = venn_abers([0.1, 0.9], [0, 1], 0.5)
    assert p0.shape == () and (float(p0), float(p1)) == venn_abers_bruteforce(
        [0.1, 0.9], [0, 1], 0.5
    )


def test_empty_calibration_and_extremes():
    p0, p1 = venn_abers([], [], [0.0, 1.0])
    assert p0.tolist() == [0.0, 0.0] and p1.tolist() == [1.0, 1.0]
    p0, p1 = venn_abers([0.5], [1], [0.0, 0.5, 1.0])
    assert p0[0] == 0.0 and p1[2] == 1.0
    assert (p0[1], p1[1]) == venn_abers_bruteforce([0.5], [1], 0.5)


def test_ties_are_pooled_not_mapped_to_neighbours():
    s = [0.2, 0.5, 0.5, 0.5, 0.8]
    y = [0, 1, 0, 1, 1]
    p0, p1 = venn_abers(s, y, [0.5])
    assert (p0[0], p1[0]) == venn_abers_bruteforce(s, y, 0.5)


@pytest.mark.parametrize(
    "cal, labels, test, match",
    [
        ([0.1, np.nan], [0, 1], [0.5], "nan"),
        ([0.1, 0.2], [0, 2], [0.5], "2"),
        ([0.1, 0.2], [0.0, 1.0], [0.5], "dtype"),
        ([0.1, 0.2], [0, 1], [np.inf], "inf"),
        ([0.1, 0.2], [0, 1, 1], [0.5], "length"),
    ],
)
def test_bad_input(cal, labels, test, match):
    with pytest.raises(ValueError, match=match):
        venn_abers(cal, labels, test)


def test_agrees_with_store_on_a_large_set():
    rng = np.random.default_rng(0)
    s = np.round(rng.random(20000), 3)
    y = (rng.random(20000) < s**2).astype(int)
    xs = np.concatenate([rng.random(500), np.unique(s)[:200], [-1.0, 2.0]])
    b0, b1 = venn_abers(s, y, xs)
    p0, p1 = ScoreStore.from_arrays(s, y).query_many(xs)
    np.testing.assert_allclose(b0, p0, atol=1e-12)
    np.testing.assert_allclose(b1, p1, atol=1e-12)
    assert np.all(b0 <= b1) and np.all(b0 < 1) and np.all(b1 > 0)
