"""The treap's priorities: splitmix64, whose whole state is one 64-bit word.

A store draws one priority in [0, 1) for each node it creates. The priorities only need to
be independent-looking and reproducible: the shape of the treap, hence the rounding of its
sums, is a function of them, so a store restored with its generator's state goes on bit
for bit as the original would. Python's ``random.Random`` (a Mersenne Twister) did that
with 625 words of state, 3.7 kB of every pickled store, most of an empty one's; splitmix64
(Steele, Lea and Flood, "Fast splittable pseudorandom number generators", 2014) does it
with one word: the state advances by a constant and the output is the state mixed.

The kernels keep the state in ``meta[2]`` as a signed 64-bit integer (the numba backend's
``int64``; the python backend holds the same number): ``draw`` in ``_treap.py`` (Python
ints) and in ``_compiled.py`` (numba ``uint64``) give the same floats. The i-th draw
depends only on the state and i, so ``draws`` makes n of them at once with numpy.

>>> prios, state = draws(seed_state(0), 3)
>>> prios.tolist() == [after(seed_state(0), i) for i in range(3)]
True
>>> draws(state, 1)[0].tolist() == [after(seed_state(0), 3)]  # goes on from there
True
"""

from __future__ import annotations

import numpy as np

GAMMA = 0x9E3779B97F4A7C15  # the increment: 2^64 / the golden ratio, odd
C1 = 0xBF58476D1CE4E5B9
C2 = 0x94D049BB133111EB
MASK = 2**64 - 1
UNIT = 2.0**-53  # the top 53 bits of a draw as a float in [0, 1), exactly


def signed(word: int) -> int:
    """A 64-bit word as the signed integer an int64 holds."""
    word &= MASK
    return word - 2**64 if word >= 2**63 else word


def seed_state(seed: int) -> int:
    """The state for a store's ``seed`` (any integer: its low 64 bits)."""
    return signed(seed)


def mix(word: int) -> float:
    """The priority of one state word (splitmix64's output function)."""
    z = ((word ^ (word >> 30)) * C1) & MASK
    z = ((z ^ (z >> 27)) * C2) & MASK
    return ((z ^ (z >> 31)) >> 11) * UNIT


def after(state: int, i: int) -> float:
    """The (i + 1)-th priority drawn from ``state`` (i from 0)."""
    return mix((state + (i + 1) * GAMMA) & MASK)


def draws(state: int, n: int) -> tuple[np.ndarray, int]:
    """n priorities drawn from ``state`` at once, and the state after them."""
    s = np.uint64(state & MASK) + np.arange(1, n + 1, dtype=np.uint64) * np.uint64(GAMMA)
    z = (s ^ (s >> np.uint64(30))) * np.uint64(C1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(C2)
    z = (z ^ (z >> np.uint64(31))) >> np.uint64(11)
    return z.astype(np.float64) * UNIT, signed(state + n * GAMMA)
