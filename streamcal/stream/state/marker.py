"""The mark a state directory keeps beside a unit's store: which checkpoint the store last
committed, so that a store that opens emptier or older than that is refused.

RocksDB opens a store whose MANIFEST was cut short as the files it still names: an empty
store, or one holding an older checkpoint. Either would be silently taken for the
unit's state, which replays the input from an old offset, or from 0, and, under
retention, rebuilds the model from less than it saw. The mark is a small file written
after each commit (the commit itself is synced first, so a machine crash cannot leave
the mark ahead of the store it describes), holding the number of that checkpoint
(``CalibrationUnit.checkpoints``, in the sealed state). On open, a store with no state
while a mark exists, or with a lower number than the mark's, is damaged:
``DamagedStore`` names the path and the way out.

>>> import tempfile
>>> from pathlib import Path
>>> store = Path(tempfile.mkdtemp()) / "store"
>>> check(store, None)  # no mark: a new directory, or one of an older streamcal
>>> write(store, 7)
>>> check(store, 7), check(store, 8)
(None, None)
>>> check(store, 6)
Traceback (most recent call last):
...
streamcal.stream.state.errors.DamagedStore: the state store '...store' holds checkpoint 6, ...
>>> remove(store); check(store, None)
"""

from __future__ import annotations

import os
from pathlib import Path

from streamcal.stream.state.errors import DamagedStore, storage_error

__all__ = ["check", "remove", "write"]

_WAY_OUT = (
    "restore it (with --scope partition and a state topic, delete the unit's directory: "
    "it is rebuilt from the topic), or start afresh with an empty --state-dir"
)


def _path(store: Path) -> Path:
    return store.with_name(store.name + ".mark")


def write(store: Path, checkpoint: int) -> None:
    """Mark ``store`` as holding ``checkpoint`` (atomic: a crash leaves the old or the new
    mark, never a torn one)."""
    path = _path(store)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(f"{checkpoint}\n")
        os.replace(tmp, path)
    except OSError as exc:
        raise storage_error("mark the state store in", store, exc) from None


def remove(store: Path) -> None:
    """Drop ``store``'s mark: its content is replaced by other means (a rebuild)."""
    _path(store).unlink(missing_ok=True)


def check(store: Path, checkpoint: int | None) -> None:
    """``DamagedStore`` if ``store``, holding the state of ``checkpoint`` (None: no state
    at all), is behind its mark."""
    try:
        text = _path(store).read_text()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise storage_error("read the mark of the state store in", store, exc) from None
    try:
        marked = int(text)
    except ValueError:
        raise DamagedStore(
            f"the mark of the state store {str(store)!r} is unreadable ({text[:40]!r}); "
            f"{_WAY_OUT}"
        ) from None
    if checkpoint is None:
        raise DamagedStore(
            f"the state store {str(store)!r} opened empty, but checkpoint {marked} was "
            f"committed to it: it is damaged (a cut MANIFEST?); {_WAY_OUT}"
        )
    if checkpoint < marked:
        raise DamagedStore(
            f"the state store {str(store)!r} holds checkpoint {checkpoint}, but checkpoint "
            f"{marked} was committed to it: it is damaged (a cut MANIFEST?); {_WAY_OUT}"
        )
