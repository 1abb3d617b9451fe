"""numba's ``njit`` when numba imports, else the identity: the kernels of the protector and of
the conformal alarm run the same functions compiled or as plain Python (numba is optional).

>>> COMPILED in (True, False)
True
"""

from __future__ import annotations

try:
    import numba

    jit = numba.njit(cache=True)
    COMPILED = True
except ImportError:  # numba is optional: run the same functions as plain Python

    def jit(f):
        return f

    COMPILED = False

__all__ = ["COMPILED", "jit"]
