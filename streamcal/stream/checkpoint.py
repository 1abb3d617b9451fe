"""Atomic, authenticated checkpoints of the processor's state.

A checkpoint file is ``MAGIC`` (format and version), an HMAC-SHA256 tag over magic +
payload, then the payload (a pickle). The tag is checked with ``hmac.compare_digest``
*before* anything is unpickled: unpickling runs code, so a checkpoint written by someone
without the key (tampered, or from another deployment) is refused, never loaded.
Writes go to a temporary file in the state directory, are fsynced, then renamed over
the final name (``os.replace``), so a crash leaves either the old or the new checkpoint.

>>> import tempfile
>>> d = tempfile.mkdtemp()
>>> store = CheckpointStore(d, key=b"0123456789abcdef", keep=2)
>>> store.load() is None
True
>>> _ = store.save({"offsets": {("events", 0): 42}})
>>> store.load()
{'offsets': {('events', 0): 42}}
>>> CheckpointStore(d, key=b"another key, 16+ bytes").load()
Traceback (most recent call last):
...
streamcal.stream.checkpoint.CheckpointError: checkpoint ... failed authentication ...
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pickle
import re
import tempfile
from pathlib import Path

__all__ = ["CheckpointStore", "CheckpointError", "MAGIC"]

MAGIC = b"STREAMCAL-CHECKPOINT v1\n"
_TAG = hashlib.sha256().digest_size
_NAME = re.compile(r"^checkpoint-(\d{12})\.ckpt$")


class CheckpointError(Exception):
    """A checkpoint that cannot be trusted or read: one-line message."""


class CheckpointStore:
    """Numbered checkpoint files in ``directory``; the newest ``keep`` are kept."""

    def __init__(self, directory, key: bytes, keep: int = 3):
        if not key:
            raise ValueError("a checkpoint key is required")
        self.directory = Path(directory)
        self.key = bytes(key)
        self.keep = max(1, int(keep))

    def _files(self) -> list[tuple[int, Path]]:
        if not self.directory.is_dir():
            return []
        out = []
        for p in self.directory.iterdir():
            m = _NAME.match(p.name)
            if m:
                out.append((int(m.group(1)), p))
        return sorted(out)

    def _tag(self, payload: bytes) -> bytes:
        return hmac.new(self.key, MAGIC + payload, hashlib.sha256).digest()

    def save(self, state) -> Path:
        """Write ``state`` as the next checkpoint and delete all but the newest ``keep``."""
        self.directory.mkdir(parents=True, exist_ok=True)
        files = self._files()
        seq = files[-1][0] + 1 if files else 1
        payload = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
        final = self.directory / f"checkpoint-{seq:012d}.ckpt"
        fd, tmp = tempfile.mkstemp(prefix=".tmp-checkpoint-", dir=self.directory)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(MAGIC)
                fh.write(self._tag(payload))
                fh.write(payload)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, final)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        _fsync_dir(self.directory)
        for _, old in files[: max(0, len(files) + 1 - self.keep)]:
            old.unlink(missing_ok=True)
        return final

    def load(self):
        """The newest checkpoint's state, or None if there is none.

        Raises ``CheckpointError`` if the newest checkpoint fails authentication: an older
        one is not silently used instead, because that would replay and re-count input.
        """
        files = self._files()
        for tmp in self.directory.glob(".tmp-checkpoint-*") if self.directory.is_dir() else ():
            tmp.unlink(missing_ok=True)  # left by a crash during a write
        if not files:
            return None
        path = files[-1][1]
        data = path.read_bytes()
        if not data.startswith(MAGIC):
            raise CheckpointError(
                f"checkpoint {str(path)!r} is not a streamcal v1 checkpoint (bad header); "
                "refusing it"
            )
        tag = data[len(MAGIC) : len(MAGIC) + _TAG]
        payload = data[len(MAGIC) + _TAG :]
        if len(tag) != _TAG or not hmac.compare_digest(tag, self._tag(payload)):
            raise CheckpointError(
                f"checkpoint {str(path)!r} failed authentication (tampered, or written with "
                "another key); refusing to load it"
            )
        try:
            return pickle.loads(payload)
        except Exception as exc:  # authenticated but unreadable: e.g. other library versions
            raise CheckpointError(f"checkpoint {str(path)!r} cannot be read: {exc}") from None


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
