"""An embedded key-value store for state that outgrows memory: RocksDB, written in atomic
commits.

Why RocksDB (through ``rocksdict``, as quixstreams does; Kafka Streams and Flink use it too):
the waiting predictions are one put per event and one get and delete per label, for labels
that come in any order, at 10^7 live keys; RocksDB keeps its memory to its caches and its
write buffers whatever it holds, and commits a batch atomically. LMDB is faster per key
while labels come in event order, but its memory-mapped file grows to several times the
live data (and counts in RSS) when they come in random order; SQLite's commit stalls grow
with its write-ahead log. ``benchmarks/kvstores.py`` measures the three side by side.

Writes (``put``, ``delete``) go to an overlay dict, so that a read (``get``) sees them at
once; nothing reaches the database until ``commit(meta)`` writes the overlay's last value of
each key (a put, or a delete) as one batch, with ``meta`` (the snapshot and the input offsets
it matches) inside it, in one atomic ``db.write``. The database ends as if every write had
gone in one by one, but a waiting prediction put and deleted between two commits (most of
them: labels come soon) costs one delete there, not a put and a delete. So after a kill -9
the store holds exactly what one commit left: never data ahead of its offsets. A commit
with ``sync`` (the checkpoints of a state directory) is on disk when it returns, so a
machine crash keeps it too, and the mark written after it
(``streamcal.stream.state.marker``) is never ahead of the store; other commits (stores in
a temporary directory, which hold memory's overflow) are written without fsync.
``changes()`` is what the next commit will write, by key (a value, or None for a delete):
the delta a changelog needs.

>>> store = KVStore()  # no path: a temporary directory, removed on close
>>> store.put(b"a", b"1"); store.put(b"b", b"2"); store.delete(b"a")
>>> store.get(b"a"), store.get(b"b"), store.changes()
(None, b'2', {b'a': None, b'b': b'2'})
>>> store.commit({b"~meta": b"offsets"}) and None
>>> store.get(b"b"), store.get(b"~meta"), store.changes()
(b'2', b'offsets', {})
>>> store.close()
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from pathlib import Path

from rocksdict import (
    BlockBasedOptions,
    Cache,
    Options,
    Rdict,
    ReadOptions,
    WriteBatch,
    WriteBufferManager,
    WriteOptions,
)

from streamcal.stream.state.errors import StoreError, storage_error

__all__ = ["DEFAULT_MEMORY", "KVStore", "StoreError", "check_directory", "memory", "next_key",
           "set_memory"]

_MISSING = object()


# Shared by every store of the process, so that the memory of all units together is
# bounded by one figure (``--state-memory``), not by the number of units (``--scope
# partition`` opens a store per unit): the block cache holds the data blocks read, the
# index and filter blocks of every file and, charged to it by the write buffer manager,
# the memtables of all stores (a quarter of it at most, then they are flushed).
DEFAULT_MEMORY = 256 << 20
_shared: dict = {"memory": DEFAULT_MEMORY}


def _shared_parts() -> tuple:
    if "cache" not in _shared:
        memory = _shared["memory"]
        cache = Cache(memory)
        _shared["cache"] = cache
        _shared["buffers"] = WriteBufferManager.new_write_buffer_manager_with_cache(
            memory // 4, False, cache
        )
    return _shared["cache"], _shared["buffers"]


def set_memory(total: int) -> None:
    """Bound the memory of this process's stores to about ``total`` bytes: the shared
    block cache's capacity, with the memtables (a quarter of it) charged to it. Stores
    opened before keep their memtable size but share the new bounds.

    >>> set_memory(64 << 20); memory()
    67108864
    >>> set_memory(DEFAULT_MEMORY)
    """
    total = int(total)
    if total < 8 << 20:
        raise ValueError(f"state_memory must be at least 8 MiB, got {total}")
    _shared["memory"] = total
    if "cache" in _shared:
        _shared["cache"].set_capacity(total)
        _shared["buffers"].set_buffer_size(total // 4)


def memory() -> int:
    """The bound ``set_memory`` gave (``DEFAULT_MEMORY`` if none)."""
    return _shared["memory"]


def _options() -> Options:
    cache, buffers = _shared_parts()
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    table = BlockBasedOptions()
    table.set_block_cache(cache)
    # Most lookups are for ids that are not there (every new event is checked for a
    # duplicate): a bloom filter answers them without reading a block.
    table.set_bloom_filter(10, False)
    table.set_cache_index_and_filter_blocks(True)
    table.set_pin_l0_filter_and_index_blocks_in_cache(True)
    opts.set_block_based_table_factory(table)
    opts.set_write_buffer_manager(buffers)
    # A store's memtable: at most 16 MiB, and small enough that a few fit in the
    # memtables' quarter of the bound.
    opts.set_write_buffer_size(min(16 << 20, _shared["memory"] // 16))
    opts.set_max_write_buffer_number(3)
    opts.set_keep_log_file_num(2)
    opts.set_max_background_jobs(2)
    return opts


def check_directory(path: str | os.PathLike) -> None:
    """``StoreError`` (naming the directory and what to do) unless stores can be made in
    ``path``: it is created if missing and a file is written in it. For a state directory
    whose stores open later (``--scope partition``: once units are assigned), so that a
    read-only one is told at start."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=p) as fh:
            fh.write(b"streamcal")
    except OSError as exc:
        raise storage_error("use the state directory", p, exc) from None


def next_key(prefix: bytes) -> bytes:
    """The smallest key above every key that starts with ``prefix`` (an exclusive bound).

    >>> next_key(b"q"), next_key(b"a\\xff")
    (b'r', b'b')
    """
    p = bytearray(prefix)
    while p and p[-1] == 0xFF:
        p.pop()
    if not p:
        raise ValueError("no key follows a prefix of 0xff bytes")
    p[-1] += 1
    return bytes(p)


class KVStore:
    """A RocksDB database in ``path`` (created if missing), or in a temporary directory
    removed on ``close`` (and at exit) when ``path`` is None. Keys and values are bytes."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.temporary = path is None
        if path is None:
            path = tempfile.mkdtemp(prefix="streamcal-store-")
            self._cleanup = weakref.finalize(self, shutil.rmtree, path, True)
        self.path = Path(path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            # The options for the default column family too: given only the database's, rocksdict
            # reopens an existing store with the options saved in it, whose block cache is a
            # new 8 MiB one (not the shared cache): at 10^7 waiting each get then read and
            # parsed index blocks again (85 µs against 13).
            opts = _options()
            self._db = Rdict(str(self.path), opts, column_families={"default": opts})
        except Exception as exc:  # rocksdict raises plain Exceptions with RocksDB's text
            raise storage_error("open the state store in", self.path, exc) from None
        self._write_opts = WriteOptions()
        self._write_opts.sync = False
        self._synced_opts = WriteOptions()
        self._synced_opts.sync = True
        self._overlay: dict = {}  # key -> value, or None (deleted), since the last commit
        self._writes = 0  # puts and deletes since the last commit
        self._read: dict = {}  # key -> committed value or None, read ahead (``prefetch``)
        self.commits = 0  # commits written by this object
        self._failed = False  # a write failed: closing may fail too, and must not hide it

    # ------------------------------------------------------------------ reads
    def get(self, key: bytes):
        """The value of ``key`` (uncommitted writes included), or None."""
        v = self._overlay.get(key, _MISSING)
        if v is _MISSING:
            v = self._read.get(key, _MISSING)
            if v is not _MISSING:
                return v
            try:  # free unless it raises (3.11's exceptions cost nothing until then)
                return self._db.get(key)
            except Exception as exc:  # noqa: BLE001 - RocksDB's, e.g. a block checksum mismatch
                raise storage_error("read the state store in", self.path, exc) from None
        return v

    def prefetch(self, keys: list) -> None:
        """Read the committed values of ``keys`` in one ``multi_get``, for the ``get`` calls
        that follow until the next ``prefetch``, ``commit`` or ``rollback`` (the committed
        values cannot change meanwhile; a write since the last commit goes first)."""
        overlay = self._overlay
        keys = [k for k in keys if k not in overlay]
        if not keys:
            self._read = {}
            return
        try:
            self._read = dict(zip(keys, self._db.get(keys), strict=True))
        except Exception as exc:  # noqa: BLE001 - RocksDB's, e.g. a block checksum mismatch
            raise storage_error("read the state store in", self.path, exc) from None

    @property
    def pending_writes(self) -> int:
        """Writes since the last commit (what the next ``commit`` writes, each a put or a
        delete): its cost, about 1 µs each."""
        return self._writes

    def changes(self) -> dict:
        """The writes since the last commit: key -> value, or None for a delete (a view:
        do not modify it)."""
        return self._overlay

    def committed_items(self, start: bytes, stop: bytes):
        """The committed (key, value) pairs with ``start <= key < stop``, in key order (not
        the writes since the last commit). A generator over a consistent view."""
        opts = ReadOptions()
        opts.set_iterate_upper_bound(stop)
        try:
            it = self._db.iter(opts)
            it.seek(start)
            while it.valid():
                yield it.key(), it.value()
                it.next()
            it.status()  # an iterator stops at a corrupt block: say so, not a short read
        except Exception as exc:  # noqa: BLE001 - RocksDB's, e.g. a block checksum mismatch
            raise storage_error("read the state store in", self.path, exc) from None

    def items(self, start: bytes, stop: bytes) -> list:
        """Every (key, value) with ``start <= key < stop`` as of now (committed and not), in
        key order. Reads the whole range: for small ranges, exports and tests."""
        merged = dict(self.committed_items(start, stop))
        for k, v in self._overlay.items():
            if start <= k < stop:
                if v is None:
                    merged.pop(k, None)
                else:
                    merged[k] = v
        return sorted(merged.items())

    # ------------------------------------------------------------------ writes
    def put(self, key: bytes, value: bytes) -> None:
        self._overlay[key] = value
        self._writes += 1

    def delete(self, key: bytes) -> None:
        self._overlay[key] = None
        self._writes += 1

    def commit(self, meta: dict | None = None, sync: bool = False) -> dict:
        """Write the changes since the last commit and ``meta`` (key -> value) in one atomic
        batch; returns the changes written (``changes()`` as it was). With ``sync`` the
        write-ahead log is on disk when it returns, so a machine crash keeps it too."""
        batch = WriteBatch(raw_mode=True)
        put, delete = batch.put, batch.delete
        for k, v in self._overlay.items():
            if v is None:
                delete(k)
            else:
                put(k, v)
        for k, v in (meta or {}).items():
            put(k, v)
        try:
            self._db.write(batch, self._synced_opts if sync else self._write_opts)
        except Exception as exc:  # noqa: BLE001 - RocksDB's I/O errors, with its text
            self._failed = True
            raise storage_error("write the state store in", self.path, exc) from None
        done = self._overlay
        self._overlay = {}
        self._writes = 0
        self._read = {}
        self.commits += 1
        return done

    def rollback(self) -> None:
        """Forget the writes since the last commit."""
        self._overlay = {}
        self._writes = 0
        self._read = {}

    def close(self) -> None:
        """Close the database, dropping uncommitted writes; a temporary one is removed."""
        db, self._db = self._db, None
        if db is not None:
            try:
                db.close()
            except Exception as exc:  # noqa: BLE001 - RocksDB's I/O errors, with its text
                if not self._failed:  # else its write error is the one to tell
                    raise storage_error("close the state store in", self.path, exc) from None
        if self.temporary:
            self._cleanup()

    def __del__(self):
        if getattr(self, "_db", None) is not None:
            try:
                self._db.close()
            except Exception:  # noqa: BLE001 - interpreter shutdown
                pass
