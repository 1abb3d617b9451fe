"""The rank store's kernels: a treap over the distinct values, augmented with sums.

Plain Python over indexable rows, so that one text serves both backends: the numba one
compiles these functions over numpy arrays (``_compiled.py``), the python one runs them
as they are over lists (list indexing costs a third of numpy's scalar indexing).

Layout: node 0 is the nil node (count 0, sums 0), real nodes are 1 .. size, kept dense
(a deletion moves the last node into the freed slot). Node i's integers are
``I[i * N_INT : (i + 1) * N_INT]``: left, right and parent links, multiplicity, subtree
count; its floats ``F[i * N_FLOAT : ...]``: the value, the heap priority, the subtree's
sum of values and its *rank-weighted sum* sum_k k * v_(k) over the subtree's values in
order (k from 1). Node-major, so that a visit reads two cache lines, not nine (at 10^6
values a walk is bound by memory latency), and flat, so that the python backend holds
two lists, not one per node (which the garbage collector would keep scanning). ``meta`` holds
the root, the size and the state of the priorities' generator (``_priorities.py``). A
rotation keeps a subtree's multiset, hence its sums: only the two nodes rotated are
recomputed, and an update recomputes the nodes on one root path.
Expected depth is O(log n) for any order of inserts, the priorities being random.
"""

from __future__ import annotations

from streamcal.core.rank_store._priorities import C1, C2, GAMMA, MASK, UNIT

# columns of I
LEFT, RIGHT, PARENT, MULT, COUNT = 0, 1, 2, 3, 4
# columns of F
VALUE, PRIO, SUM, WSUM = 0, 1, 2, 3
N_INT, N_FLOAT = 5, 4


def pull(I, F, i):
    """Recompute node i's subtree count and sums from its children's."""
    ii = i * N_INT
    fi = i * N_FLOAT
    fa = I[ii + LEFT] * N_FLOAT
    fb = I[ii + RIGHT] * N_FLOAT
    m = I[ii + MULT]
    v = F[fi + VALUE]
    ca = I[I[ii + LEFT] * N_INT + COUNT]
    I[ii + COUNT] = ca + m + I[I[ii + RIGHT] * N_INT + COUNT]
    F[fi + SUM] = F[fa + SUM] + m * v + F[fb + SUM]
    # the node's m copies have local ranks ca + 1 .. ca + m; the right subtree's ranks
    # shift by ca + m
    F[fi + WSUM] = (F[fa + WSUM] + v * (m * ca + m * (m + 1) / 2) + F[fb + WSUM]
                    + (ca + m) * F[fb + SUM])  # fmt: skip


def draw(meta):
    """The next priority in [0, 1) from the state in meta[2] (splitmix64; the numba
    backend compiles its own, over uint64, with the same results)."""
    s = (meta[2] + GAMMA) & MASK
    meta[2] = s - 2**64 if s >= 2**63 else s
    z = ((s ^ (s >> 30)) * C1) & MASK
    z = ((z ^ (z >> 27)) * C2) & MASK
    return ((z ^ (z >> 31)) >> 11) * UNIT


def _pull_up(I, F, i):
    while i != 0:
        pull(I, F, i)
        i = I[i * N_INT + PARENT]


def _link(I, meta, g, old, new):
    """Make ``new`` the child of g where ``old`` was (g = 0: the root)."""
    if g == 0:
        meta[0] = new
    elif I[g * N_INT + LEFT] == old:
        I[g * N_INT + LEFT] = new
    else:
        I[g * N_INT + RIGHT] = new


def _rotate_up(I, F, meta, x):
    """Rotate node x above its parent."""
    p = I[x * N_INT + PARENT]
    g = I[p * N_INT + PARENT]
    if I[p * N_INT + LEFT] == x:
        b = I[x * N_INT + RIGHT]
        I[p * N_INT + LEFT] = b
        I[x * N_INT + RIGHT] = p
    else:
        b = I[x * N_INT + LEFT]
        I[p * N_INT + RIGHT] = b
        I[x * N_INT + LEFT] = p
    if b != 0:
        I[b * N_INT + PARENT] = p
    I[p * N_INT + PARENT] = x
    I[x * N_INT + PARENT] = g
    _link(I, meta, g, p, x)
    pull(I, F, p)
    pull(I, F, x)


def insert(I, F, meta, v):
    """Add one copy of value v; a new node (its priority drawn) needs a free slot at
    size + 1, which the caller provides. Returns 1 if a node was created, else 0."""
    p = 0
    i = meta[0]
    while i != 0:
        w = F[i * N_FLOAT + VALUE]
        if v == w:
            I[i * N_INT + MULT] += 1
            _pull_up(I, F, i)
            return 0
        p = i
        i = I[i * N_INT + LEFT] if v < w else I[i * N_INT + RIGHT]
    prio = draw(meta)
    n = meta[1] + 1
    meta[1] = n
    F[n * N_FLOAT + VALUE] = v
    F[n * N_FLOAT + PRIO] = prio
    I[n * N_INT + MULT] = 1
    I[n * N_INT + LEFT] = 0
    I[n * N_INT + RIGHT] = 0
    I[n * N_INT + PARENT] = p
    if p == 0:
        meta[0] = n
    elif v < F[p * N_FLOAT + VALUE]:
        I[p * N_INT + LEFT] = n
    else:
        I[p * N_INT + RIGHT] = n
    _pull_up(I, F, n)
    while I[n * N_INT + PARENT] != 0 and prio > F[I[n * N_INT + PARENT] * N_FLOAT + PRIO]:
        _rotate_up(I, F, meta, n)
    return 1


def delete(I, F, meta, v):
    """Remove one copy of value v: 0 if it was not held (nothing changed), 1 if other
    copies remain, 2 if its node went."""
    i = meta[0]
    while i != 0 and F[i * N_FLOAT + VALUE] != v:
        i = I[i * N_INT + LEFT] if v < F[i * N_FLOAT + VALUE] else I[i * N_INT + RIGHT]
    if i == 0:
        return 0
    if I[i * N_INT + MULT] > 1:
        I[i * N_INT + MULT] -= 1
        _pull_up(I, F, i)
        return 1
    while I[i * N_INT + LEFT] != 0 or I[i * N_INT + RIGHT] != 0:  # rotate it down to a leaf
        a = I[i * N_INT + LEFT]
        b = I[i * N_INT + RIGHT]
        up = a if b == 0 or (a != 0 and F[a * N_FLOAT + PRIO] > F[b * N_FLOAT + PRIO]) else b
        _rotate_up(I, F, meta, up)
    p = I[i * N_INT + PARENT]
    _link(I, meta, p, i, 0)
    _pull_up(I, F, p)
    last = meta[1]
    if i != last:  # keep the nodes dense: the last one takes the freed slot
        for col in range(N_INT):
            I[i * N_INT + col] = I[last * N_INT + col]
        for col in range(N_FLOAT):
            F[i * N_FLOAT + col] = F[last * N_FLOAT + col]
        _link(I, meta, I[i * N_INT + PARENT], last, i)
        if I[i * N_INT + LEFT] != 0:
            I[I[i * N_INT + LEFT] * N_INT + PARENT] = i
        if I[i * N_INT + RIGHT] != 0:
            I[I[i * N_INT + RIGHT] * N_INT + PARENT] = i
    meta[1] = last - 1
    return 2


def locate(I, F, meta, v):
    """(count of values < v, their sum, count of values == v)."""
    below = 0
    s = 0.0
    equal = 0
    i = meta[0]
    while i != 0:
        w = F[i * N_FLOAT + VALUE]
        if w < v:
            a = I[i * N_INT + LEFT]
            below += I[a * N_INT + COUNT] + I[i * N_INT + MULT]
            s += F[a * N_FLOAT + SUM] + I[i * N_INT + MULT] * w
            i = I[i * N_INT + RIGHT]
        else:
            if w == v:
                equal = I[i * N_INT + MULT]
            i = I[i * N_INT + LEFT]
    return below, s, equal


def select(I, F, meta, k):
    """The value of rank k (0-based) in sorted order; the caller checks 0 <= k < n."""
    i = meta[0]
    while True:
        ca = I[I[i * N_INT + LEFT] * N_INT + COUNT]
        if k < ca:
            i = I[i * N_INT + LEFT]
        elif k < ca + I[i * N_INT + MULT]:
            return F[i * N_FLOAT + VALUE]
        else:
            k -= ca + I[i * N_INT + MULT]
            i = I[i * N_INT + RIGHT]


def build(I, F, meta, values, mults, prios):
    """Fill an empty store with sorted distinct values (the Cartesian tree of their
    priorities: the treap they define), in O(n) with a stack of the right spine."""
    n = len(values)
    stack = [0] * (n + 1)
    top = 0
    for j in range(n):
        i = j + 1
        F[i * N_FLOAT + VALUE] = values[j]
        F[i * N_FLOAT + PRIO] = prios[j]
        I[i * N_INT + MULT] = mults[j]
        I[i * N_INT + LEFT] = 0
        I[i * N_INT + RIGHT] = 0
        I[i * N_INT + PARENT] = 0
        last = 0
        while top > 0 and F[stack[top - 1] * N_FLOAT + PRIO] < prios[j]:
            top -= 1
            last = stack[top]
        if last != 0:
            I[i * N_INT + LEFT] = last
            I[last * N_INT + PARENT] = i
        if top > 0:
            I[stack[top - 1] * N_INT + RIGHT] = i
            I[i * N_INT + PARENT] = stack[top - 1]
        stack[top] = i
        top += 1
    meta[0] = stack[0] if n else 0
    meta[1] = n
    # children before parents: the reverse of a pre-order walk
    order = [0] * n
    k = 0
    top = 0
    if n:
        stack[0] = meta[0]
        top = 1
    while top > 0:
        top -= 1
        i = stack[top]
        order[k] = i
        k += 1
        for child in (I[i * N_INT + LEFT], I[i * N_INT + RIGHT]):
            if child != 0:
                stack[top] = child
                top += 1
    for j in range(k - 1, -1, -1):
        pull(I, F, order[j])


def inorder(I, F, meta, values, mults):
    """Write the distinct values and their multiplicities in order; returns how many."""
    stack = [0] * (meta[1] + 1)
    top = 0
    k = 0
    i = meta[0]
    while top > 0 or i != 0:
        while i != 0:
            stack[top] = i
            top += 1
            i = I[i * N_INT + LEFT]
        top -= 1
        i = stack[top]
        values[k] = F[i * N_FLOAT + VALUE]
        mults[k] = I[i * N_INT + MULT]
        k += 1
        i = I[i * N_INT + RIGHT]
    return k
