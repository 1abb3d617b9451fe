"""Root pytest configuration: the doctest modules that need numba are not collected where
numba cannot be imported (numba is optional; see .ci/without-numba)."""

try:
    import numba  # noqa: F401
except ImportError:
    collect_ignore = [
        "streamcal/core/store/_numba.py",
        "streamcal/core/store/_kernels.py",
        "streamcal/core/rank_store/_compiled.py",
    ]
