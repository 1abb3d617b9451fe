"""The treap kernels (``_treap.py``) compiled with numba, cached on disk.

The same function texts as the python backend runs: each is rebuilt over a shared globals
table in which its callees are the compiled ones, so that the compiled ``insert`` calls
the compiled ``pull``.
"""

from __future__ import annotations

import types

import numba
import numpy as np

from streamcal.core.rank_store import _treap
from streamcal.core.rank_store._priorities import C1, C2, GAMMA, UNIT

_G, _C1, _C2 = np.uint64(GAMMA), np.uint64(C1), np.uint64(C2)


@numba.njit(cache=True)
def _draw(meta):
    # _treap.draw over uint64, which wraps as the Python one masks; the int64 <-> uint64
    # casts keep the bits
    s = np.uint64(meta[2]) + _G
    meta[2] = np.int64(s)
    z = (s ^ (s >> np.uint64(30))) * _C1
    z = (z ^ (z >> np.uint64(27))) * _C2
    return np.float64((z ^ (z >> np.uint64(31))) >> np.uint64(11)) * UNIT


_NAMES = ("pull", "_pull_up", "_link", "_rotate_up", "insert", "delete", "locate", "select",
          "build", "inorder")  # fmt: skip
_table = dict(vars(_treap))
_table["draw"] = _draw
for _name in _NAMES:
    _f = getattr(_treap, _name)
    _table[_name] = numba.njit(cache=True)(types.FunctionType(_f.__code__, _table, _name))

pull, build, inorder = _table["pull"], _table["build"], _table["inorder"]

# The per-event kernels as compiled entry points for the store's fixed array types:
# calling them skips numba's type dispatch (about 1 µs a call, a few % of an event).
_ints = numba.types.Array(numba.types.int64, 1, "C")
_floats = numba.types.Array(numba.types.float64, 1, "C")
_f8 = numba.types.float64
insert = _table["insert"].compile((_ints, _floats, _ints, _f8))
delete = _table["delete"].compile((_ints, _floats, _ints, _f8))
locate = _table["locate"].compile((_ints, _floats, _ints, _f8))
select = _table["select"].compile((_ints, _floats, _ints, numba.types.int64))
