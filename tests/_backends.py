"""The score store backends usable in this environment (numba may be missing or blocked)."""

from streamcal.core.store import backend_class


def _usable(name: str) -> bool:
    try:
        backend_class(name)
    except ImportError:
        return False
    return True


BACKENDS = [name for name in ("numba", "python") if _usable(name)]
