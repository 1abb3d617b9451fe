"""Atomic, authenticated checkpoints of the processor's state.

A checkpoint (a file here, records of the state topic in ``streamcal.stream.state.topic``)
is ``MAGIC`` (framing), an HMAC-SHA256 tag over magic + payload, then the payload: the
state as plain data (dicts, lists, numbers, strings, bytes, numpy arrays; see
``streamcal.stream.state.migrations`` for the format and its version). The tag is checked with
``hmac.compare_digest`` *before* anything is unpickled: unpickling runs code, so a
checkpoint written by someone without the key (tampered, or from another deployment) is
refused, never loaded. Even then the payload is read with an unpickler that builds no
object but numpy arrays; only the river model's own pickle, inside it, is a full pickle.
The framing of before the state format (``MAGIC_V1``: a pickle of the processor's objects,
written only by development versions) is refused, as any other.

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
streamcal.stream.state.errors.CheckpointError: checkpoint ... failed authentication ...
"""

from __future__ import annotations

import hashlib
import hmac
import io
import os
import pickle
import re
import tempfile
from pathlib import Path

from streamcal.stream.state import migrations
from streamcal.stream.state.errors import CheckpointError, storage_error

__all__ = ["CheckpointStore", "CheckpointError", "MAGIC", "seal", "unseal"]

MAGIC = b"STREAMCAL-CHECKPOINT v2\n"  # payload: {"version": N, "state": plain data}
MAGIC_V1 = b"STREAMCAL-CHECKPOINT v1\n"  # before the first release: refused
_MAGIC_PREFIX = b"STREAMCAL-CHECKPOINT v"
_TAG = hashlib.sha256().digest_size
_NAME = re.compile(r"^checkpoint-(\d{12})\.ckpt$")


# What the plain-data unpickler may build besides builtins: numpy arrays (both numpy 1
# and numpy 2 spell their reconstructor's module).
_ALLOWED = {
    (f"numpy{core}.{mod}", name)
    for core in ("._core", ".core")
    for mod, name in (("multiarray", "_reconstruct"), ("multiarray", "scalar"),
                      ("numeric", "_frombuffer"))
} | {("numpy", "ndarray"), ("numpy", "dtype")}  # fmt: skip


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not plain data")
        return super().find_class(module, name)


def _tag(key: bytes, magic: bytes, payload: bytes) -> bytes:
    return hmac.new(key, magic + payload, hashlib.sha256).digest()


def seal(key: bytes, state) -> bytes:
    """``state`` (plain data) as checkpoint bytes: magic, HMAC tag, payload."""
    payload = pickle.dumps({"version": migrations.VERSION, "state": state}, protocol=5)
    return MAGIC + _tag(key, MAGIC, payload) + payload


def unseal(key: bytes, data: bytes, where: str):
    """The state in checkpoint bytes ``data``, authenticated, then upgraded to the current
    format. Raises ``CheckpointError`` (one line naming ``where``) when it cannot be
    trusted or read, or was written by a newer streamcal."""
    magic = data[: len(MAGIC)]
    if magic not in (MAGIC, MAGIC_V1):
        if data.startswith(_MAGIC_PREFIX):
            raise CheckpointError(
                f"{where} has the framing {magic.strip().decode(errors='replace')!r}, "
                "newer than this streamcal reads; upgrade streamcal"
            )
        raise CheckpointError(f"{where} is not a streamcal checkpoint (bad header); refusing it")
    tag = data[len(magic) : len(magic) + _TAG]
    payload = data[len(magic) + _TAG :]
    if len(tag) != _TAG or not hmac.compare_digest(tag, _tag(key, magic, payload)):
        raise CheckpointError(
            f"{where} failed authentication (tampered, or written with another key); "
            "refusing to load it"
        )
    if magic == MAGIC_V1:
        migrations.refuse_before_first(where, "the framing 'STREAMCAL-CHECKPOINT v1'")
    try:
        doc = _PlainUnpickler(io.BytesIO(payload)).load()
    except Exception as exc:  # authenticated but unreadable: e.g. other library versions
        raise CheckpointError(f"{where} cannot be read: {exc}") from None
    return migrations.upgrade(doc, where)


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

    def save(self, state) -> Path:
        """Write ``state`` as the next checkpoint and delete all but the newest ``keep``
        (``StoreError`` naming the directory if the disk refuses)."""
        try:
            return self._save(state)
        except OSError as exc:
            raise storage_error("write a checkpoint in", self.directory, exc) from None

    def _save(self, state) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        files = self._files()
        seq = files[-1][0] + 1 if files else 1
        data = seal(self.key, state)
        final = self.directory / f"checkpoint-{seq:012d}.ckpt"
        fd, tmp = tempfile.mkstemp(prefix=".tmp-checkpoint-", dir=self.directory)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
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
        one is not silently used instead, because that would replay and re-count input;
        ``StoreError`` (naming the directory) if the disk refuses.
        """
        try:
            files = self._files()
            for tmp in self.directory.glob(".tmp-checkpoint-*") if self.directory.is_dir() else ():
                tmp.unlink(missing_ok=True)  # left by a crash during a write
            if not files:
                return None
            path = files[-1][1]
            data = path.read_bytes()
        except OSError as exc:
            raise storage_error("read the checkpoints in", self.directory, exc) from None
        return unseal(self.key, data, f"checkpoint {str(path)!r}")


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
