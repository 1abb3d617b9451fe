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

pull, insert, delete, locate, select, build, inorder = (
    _table[n] for n in ("pull", "insert", "delete", "locate", "select", "build", "inorder")
)
