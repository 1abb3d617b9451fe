"""The reference algorithms against definitions simple enough to check by hand."""

import itertools

import numpy as np
import pytest

from streamcal.core import isotonic_calibrator, venn_abers_bruteforce


def _isotonic_by_enumeration(w, s):
    """Least-squares increasing fit over groups by trying every partition into blocks.

    Exponential, for tiny inputs: among partitions into consecutive blocks whose block
    means increase, the isotonic fit is the one with the least squared error.
    """
    k = len(w)
    best = None
    for cuts in itertools.product([0, 1], repeat=k - 1):
        blocks, start = [], 0
        for i, c in enumerate(cuts, 1):
            if c:
                blocks.append((start, i))
                start = i
        blocks.append((start, k))
        means = [sum(s[a:b]) / sum(w[a:b]) for a, b in blocks]
        if any(m1 > m2 for m1, m2 in zip(means, means[1:], strict=False)):
            continue
        fit = np.concatenate([[m] * (b - a) for m, (a, b) in zip(means, blocks, strict=False)])
        # squared error of 0/1 labels around the group value
        err = float(np.sum(w * fit**2 - 2 * fit * s + s))
        if best is None or err < best[0] - 1e-12:
            best = (err, fit)
    return best[1]


@pytest.mark.parametrize("seed", range(200))
def test_pava_matches_enumeration(seed):
    rng = np.random.default_rng(seed)
    n = rng.integers(1, 9)
    scores = rng.integers(0, 5, size=n).astype(float)
    labels = rng.integers(0, 2, size=n)
    g = isotonic_calibrator(scores, labels)
    t, inv = np.unique(scores, return_inverse=True)
    w = np.bincount(inv)
    s = np.bincount(inv, weights=labels)
    np.testing.assert_allclose(g.values, _isotonic_by_enumeration(w, s), atol=1e-12)


def test_venn_abers_hand_example():
    # label 0: 0,1,[0],0,1 -> blocks {0},{1,0,0}=1/3,{1}; label 1: 0,1,[1],0,1 -> 2/3
    assert venn_abers_bruteforce([0.1, 0.2, 0.8, 0.9], [0, 1, 0, 1], 0.5) == (1 / 3, 2 / 3)


def test_venn_abers_extremes():
    assert venn_abers_bruteforce([0.1, 0.2], [1, 1], 0.0) == (0.0, 1.0)
    assert venn_abers_bruteforce([0.1, 0.2], [0, 0], 0.3) == (0.0, 1.0)
