"""The treap kernels (``_treap.py``) compiled with numba, cached on disk.

The same function texts as the python backend runs: each is rebuilt over a shared globals
table in which its callees are the compiled ones, so that the compiled ``insert`` calls
the compiled ``pull``.
"""

from __future__ import annotations

import types

import numba

from streamcal.core.rank_store import _treap

_NAMES = ("pull", "_pull_up", "_link", "_rotate_up", "insert", "delete", "locate", "select",
          "build", "inorder")  # fmt: skip
_table = dict(vars(_treap))
for _name in _NAMES:
    _f = getattr(_treap, _name)
    _table[_name] = numba.njit(cache=True)(types.FunctionType(_f.__code__, _table, _name))

pull, build, inorder = _table["pull"], _table["build"], _table["inorder"]

# The per-event kernels as compiled entry points for the store's fixed array types:
# calling them skips numba's type dispatch (about 1 µs a call, a few % of an event).
_ints = numba.types.Array(numba.types.int64, 1, "C")
_floats = numba.types.Array(numba.types.float64, 1, "C")
_f8 = numba.types.float64
insert = _table["insert"].compile((_ints, _floats, _ints, _f8, _f8))
delete = _table["delete"].compile((_ints, _floats, _ints, _f8))
locate = _table["locate"].compile((_ints, _floats, _ints, _f8))
select = _table["select"].compile((_ints, _floats, _ints, numba.types.int64))
