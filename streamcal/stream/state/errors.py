"""The errors of the state package: one module, so that every part of it can raise them
without importing another part (the checkpoint framing and the state format used to
import each other for ``CheckpointError``)."""

from __future__ import annotations

__all__ = ["CheckpointError"]


class CheckpointError(Exception):
    """A checkpoint that cannot be trusted or read: one-line message."""
