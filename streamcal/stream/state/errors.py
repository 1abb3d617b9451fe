"""The errors of the state package: one module, so that every part of it can raise them
without importing another part (the checkpoint framing and the state format used to
import each other for ``CheckpointError``)."""

from __future__ import annotations

from streamcal.errors import StateError

__all__ = ["CheckpointError", "DamagedStore", "StoreError", "storage_error", "what_to_do"]


class CheckpointError(StateError):
    """A checkpoint that cannot be trusted or read: one-line message."""


class StoreError(StateError, OSError):
    """A store that cannot be opened or written: the message names its directory and
    what to do."""

    exit_status = 1  # a disk that fails while running, as a broker would (at start: 2)


class DamagedStore(StoreError):
    """A store that opened emptier or older than the checkpoint last committed to it
    (``streamcal.stream.state.marker``): refused, never taken for the unit's state."""

    exit_status = 2  # refused, as a checkpoint that cannot be trusted


def what_to_do(text: str) -> str:
    """The advice for a storage error whose message is ``text`` (RocksDB's, or an
    ``OSError``'s): the directory is read-only, the disk full, or something else.

    >>> what_to_do("IO error: No space left on device: While appending to file: x.log")
    'free space on its disk or give another --state-dir'
    >>> what_to_do("[Errno 30] Read-only file system: '/srv/state'")
    'make it writable by this user or give another --state-dir'
    """
    low = text.lower()
    if "no space left" in low or "disk quota" in low:
        return "free space on its disk or give another --state-dir"
    if "read-only" in low or "permission denied" in low or "operation not permitted" in low:
        return "make it writable by this user or give another --state-dir"
    return "check the directory and its disk, or give another --state-dir"


def storage_error(what: str, path, exc: BaseException) -> StoreError:
    """The ``StoreError`` of a disk or store that refused: ``cannot {what} {path!r}``, the
    error's text and what to do."""
    return StoreError(f"cannot {what} {str(path)!r}: {exc}; {what_to_do(str(exc))}")
