"""The C heap of the processor's process: few malloc arenas, and freed memory given back.

RocksDB allocates every block it reads, every memtable entry and every compaction buffer
with malloc, from its own threads (the loop's reads, the flushes and compactions in the
background), as the Kafka clients' threads do. glibc gives each thread that contends an
arena of its own (up to 8 per core), whose freed memory mostly stays in the process: RSS
climbed with the process's history. With two arenas (``MALLOC_ARENA_MAX=2``, set here
with ``mallopt`` before the stores' threads start) a run with 10^5 waiting (labels 1-3
days late, ``benchmarks/pending_memory.py``) peaked at 454 MiB instead of 592; a
``malloc_trim`` every ``TRIM_EVERY`` seconds, at a checkpoint (11 ms at the median),
gives back what is free. docs/processor.md has the figures.

Elsewhere than glibc (musl, macOS) both are no-ops.

>>> heap = NativeHeap()
>>> heap.limit_arenas() in (True, False)
True
>>> heap.maybe_trim(now=0.0) in (True, False), heap.maybe_trim(now=1.0)
(True, False)
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import time

__all__ = ["ARENAS", "NativeHeap", "TRIM_EVERY"]

ARENAS = 2
TRIM_EVERY = 10.0  # seconds between trims
_M_ARENA_MAX = -8  # glibc's malloc.h


def _libc():
    """glibc, or None (another C library: its malloc has neither call)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.gnu_get_libc_version  # noqa: B018 - only glibc has it
        libc.malloc_trim  # noqa: B018
        return libc
    except (OSError, AttributeError):
        return None


class NativeHeap:
    """glibc's malloc, tuned for a long-running processor (see the module docstring)."""

    def __init__(self):
        self.libc = _libc()
        self.last_trim = float("-inf")
        self.trims = 0
        self.trim_seconds = 0.0  # spent in malloc_trim

    def limit_arenas(self, arenas: int = ARENAS) -> bool:
        """At most ``arenas`` malloc arenas from now on, unless ``MALLOC_ARENA_MAX`` is set
        (the operator's choice wins); True if set here."""
        if self.libc is None or "MALLOC_ARENA_MAX" in os.environ:
            return False
        return bool(self.libc.mallopt(_M_ARENA_MAX, arenas))

    def maybe_trim(self, now: float) -> bool:
        """Give freed heap memory back to the system if ``TRIM_EVERY`` seconds have passed
        since the last time (``now``: a monotonic clock); True if it trimmed."""
        if self.libc is None or now - self.last_trim < TRIM_EVERY:
            return False
        self.last_trim = now
        t = time.perf_counter()
        self.libc.malloc_trim(0)
        self.trim_seconds += time.perf_counter() - t
        self.trims += 1
        return True
