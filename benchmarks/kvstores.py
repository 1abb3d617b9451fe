"""Embedded key-value stores for the waiting predictions, side by side: RocksDB (rocksdict),
LMDB and SQLite (issue 27; earlier figures in ../shared/design/waiting-state.md).

The workload: one put per event and one get + delete (a "take") per label, keyed by event id
(9 bytes, e.g. ``e00123456``, in arrival order), values of --value-bytes random bytes. The
changes of an interval commit atomically, together with a 3 MiB blob (the calibration state)
and the offsets record they match. Each store runs in a process of its own (so that RSS is its
own), in three phases:

1. fill to --keys waiting entries, committing every max(--interval-changes) puts;
2. steady state: each step puts a new id and takes a waiting one (the oldest with
   ``--order fifo``, a random one with ``random``), committing every N steps, --commits times
   for each N of --interval-changes (20,000 and 100,000 steps: 1 s and 5 s at 20,000
   events/s);
3. more of the same until the parent kills the process with SIGKILL, mid-interval; the parent
   reopens the store (timed) and checks that it holds exactly the last commit: the entry
   count, samples of the keys the last commit put and took and of those the interval in
   flight had begun to put and take, and the blob's commit number.

How each store commits (none of them fsyncs except LMDB: each may lose its last commits in an
OS crash, with the offsets inside them, but none may be left inconsistent):

- rocksdb: the interval's changes in a WriteBatch plus a dict overlay for reads of them
  (rocksdict has no transactions); one ``db.write``, WAL on, sync off.
- lmdb: one write transaction per interval; ``metasync=False``, so one fsync per commit, the
  least that keeps the file consistent after an OS crash. ``lmdb-nosync`` (not run by default)
  skips it: safe against kill -9, not against an OS crash.
- sqlite: WAL, ``synchronous=NORMAL``, a WITHOUT ROWID table, one transaction per interval
  (the blob and the offsets in a second table).

    pip install -e ".[bench]"
    python benchmarks/kvstores.py                       # 10^6 keys, both orders (~1 minute)
    python benchmarks/kvstores.py --keys 10000000       # 10^7 (~5 minutes, ~4 GB of disk)
    python benchmarks/kvstores.py --keys 2000 --interval-changes 100,500 --commits 2

Figures: put µs at the start and the end of the fill and in steady state; get + delete µs;
µs per event with the commits' share; the commit's wall time (median / max, the loop's stall);
RSS after the steady state (its file-backed part) and its peak; disk bytes per waiting entry
(allocated blocks of the store's files after the last measured commit); the open after kill -9.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np

try:  # imported here, not in the stores, so that an open is timed without the import
    import rocksdict
except ImportError:
    rocksdict = None
try:
    import lmdb
except ImportError:
    lmdb = None

BLOB_KEY = b"!blob"  # the calibration state's snapshot, rewritten by every commit
OFFSETS_KEY = b"!offsets"  # the offsets the commit matches, and what the check reads
META = 2  # entries that are not waiting predictions
BLOB_BYTES = 3 << 20
BLOCK = 1000  # puts, then takes, in blocks of this many: the timer costs little per op
SAMPLE = 50  # keys of each kind that the offsets record names for the check
MISSING = object()
POOL = np.random.default_rng(0).bytes(1 << 20)  # values are slices: incompressible, like floats
clock = time.perf_counter


def key(i: int) -> bytes:
    return b"e%08d" % i


def value(i: int, size: int) -> bytes:
    start = (i * 7919) % (len(POOL) - size)
    return POOL[start : start + size]


class RocksStore:
    """The interval's changes in a WriteBatch; a dict overlay answers reads of them."""

    def __init__(self, path: Path, keys: int, value_bytes: int):
        opts = rocksdict.Options(raw_mode=True)
        opts.create_if_missing(True)
        self.db = rocksdict.Rdict(str(path), opts)
        self.write_opts = rocksdict.WriteOptions()
        self.write_opts.sync = False
        self.write_opts.disable_wal = False
        self._begin()

    def _begin(self):
        self.batch = rocksdict.WriteBatch(raw_mode=True)
        self.overlay: dict[bytes, bytes | None] = {}  # None: deleted in this interval

    def put(self, k: bytes, v: bytes):
        self.batch.put(k, v)
        self.overlay[k] = v

    def get(self, k: bytes) -> bytes | None:
        v = self.overlay.get(k, MISSING)
        return self.db.get(k) if v is MISSING else v

    def take(self, k: bytes) -> bytes | None:
        v = self.get(k)
        self.batch.delete(k)
        self.overlay[k] = None
        return v

    def commit(self, blob: bytes, offsets: bytes):
        self.batch.put(BLOB_KEY, blob)
        self.batch.put(OFFSETS_KEY, offsets)
        self.db.write(self.batch, self.write_opts)
        self._begin()

    def count(self) -> int:
        return sum(1 for _ in self.db.keys()) - META

    def close(self):
        self.db.close()


class LmdbStore:
    """One write transaction per interval."""

    def __init__(self, path: Path, keys: int, value_bytes: int, sync: bool = True):
        # The map must hold the file's growth, not the live data: in random order the file grew
        # to 4.3x the live data here (10^6 waiting, 6 x 10^5 taken and put again). A full map
        # fails a commit (MDB_MAP_FULL).
        map_size = (1 << 30) + 8 * keys * (value_bytes + 16)
        self.env = lmdb.open(str(path), map_size=map_size, sync=sync, metasync=False)
        self.txn = self.env.begin(write=True)

    def put(self, k: bytes, v: bytes):
        self.txn.put(k, v)

    def get(self, k: bytes) -> bytes | None:
        return self.txn.get(k)

    def take(self, k: bytes) -> bytes | None:
        return self.txn.pop(k)

    def commit(self, blob: bytes, offsets: bytes):
        self.txn.put(BLOB_KEY, blob)
        self.txn.put(OFFSETS_KEY, offsets)
        self.txn.commit()
        self.txn = self.env.begin(write=True)

    def count(self) -> int:
        return self.txn.stat(self.env.open_db())["entries"] - META

    def close(self):
        self.txn.abort()
        self.env.close()


class SqliteStore:
    """WAL, synchronous=NORMAL, a WITHOUT ROWID table; one transaction per interval."""

    def __init__(self, path: Path, keys: int, value_bytes: int):
        self.db = sqlite3.connect(path / "waiting.sqlite", isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS w (k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID")
        # The blob and the offsets in a table of their own: beside the oldest keys of `w`, the
        # blob's row made each FIFO delete cost ~250 µs instead of ~4 (its 3 MiB in a
        # WITHOUT ROWID b-tree).
        self.db.execute("CREATE TABLE IF NOT EXISTS meta (k BLOB PRIMARY KEY, v BLOB)")
        self.db.execute("BEGIN")

    def put(self, k: bytes, v: bytes):
        self.db.execute("INSERT INTO w VALUES (?, ?)", (k, v))

    def get(self, k: bytes) -> bytes | None:
        table = "meta" if k in (BLOB_KEY, OFFSETS_KEY) else "w"
        rows = self.db.execute(f"SELECT v FROM {table} WHERE k = ?", (k,)).fetchall()
        return rows[0][0] if rows else None

    def take(self, k: bytes) -> bytes | None:
        rows = self.db.execute("DELETE FROM w WHERE k = ? RETURNING v", (k,)).fetchall()
        return rows[0][0] if rows else None

    def commit(self, blob: bytes, offsets: bytes):
        self.db.executemany(
            "INSERT OR REPLACE INTO meta VALUES (?, ?)", [(BLOB_KEY, blob), (OFFSETS_KEY, offsets)]
        )
        self.db.execute("COMMIT")
        self.db.execute("BEGIN")

    def count(self) -> int:
        return self.db.execute("SELECT count(*) FROM w").fetchone()[0]

    def close(self):
        self.db.close()


STORES = {
    "rocksdb": RocksStore,
    "lmdb": LmdbStore,
    "sqlite": SqliteStore,
    "lmdb-nosync": partial(LmdbStore, sync=False),
}
NEEDS = {"rocksdb": rocksdict, "lmdb": lmdb, "lmdb-nosync": lmdb, "sqlite": sqlite3}


class Waiting:
    """The ids waiting for their label; `pick` removes k of them, oldest first or at random."""

    def __init__(self, order: str, capacity: int, seed: int = 0):
        self.n = 0
        self.oldest = 0  # fifo: the waiting ids are oldest, oldest + 1, ...
        self.ids = np.full(capacity, -1, np.int64) if order == "random" else None
        self.rng = np.random.default_rng(seed)

    def add(self, first: int, count: int):
        if self.ids is not None:
            self.ids[self.n : self.n + count] = np.arange(first, first + count)
        self.n += count

    def pick(self, k: int) -> list[int]:
        if self.ids is None:
            self.oldest += k
            self.n -= k
            return list(range(self.oldest - k, self.oldest))
        out, ids = [], self.ids
        for r in self.rng.random(k).tolist():  # swap with the last: O(1) per pick
            i = int(r * self.n)
            out.append(int(ids[i]))
            self.n -= 1
            ids[i] = ids[self.n]
        return out


def spread(ids) -> list[int]:
    """About SAMPLE of `ids`, the first and the last among them."""
    return list(ids[:: max(1, len(ids) // SAMPLE)]) + list(ids[-1:])


class Driver:
    """Runs commit intervals against one store: puts of new ids, takes of planned ones."""

    def __init__(self, store, waiting: Waiting, value_bytes: int):
        self.store, self.waiting, self.value_bytes = store, waiting, value_bytes
        self.puts = self.takes = self.commits = 0
        self.planned: list[int] = []  # the ids the next interval takes
        self.blob = bytearray(np.random.default_rng(1).bytes(BLOB_BYTES))

    def interval(self, n_puts: int, next_takes: int) -> dict:
        """Put `n_puts` new ids and take the planned ones, in alternating blocks; plan
        `next_takes` for the next interval; commit. Returns the seconds of each part."""
        start = clock()
        store, first, takes = self.store, self.puts, self.planned
        put_s = take_s = 0.0
        for b in range(0, max(n_puts, len(takes)), BLOCK):
            items = [
                (key(i), value(i, self.value_bytes))
                for i in range(first + b, first + min(b + BLOCK, n_puts))
            ]
            keys = [key(i) for i in takes[b : b + BLOCK]]
            t0 = clock()
            for k, v in items:
                store.put(k, v)
            t1 = clock()
            got = [store.take(k) for k in keys]
            take_s += clock() - t1
            put_s += t1 - t0
            if None in got:
                raise RuntimeError(f"a take found nothing: {keys[got.index(None)]!r}")
        self.puts += n_puts
        self.takes += len(takes)
        self.commits += 1
        self.waiting.add(first, n_puts)
        self.planned = self.waiting.pick(next_takes)
        record = {
            "commit": self.commits,
            "puts": self.puts,
            "takes": self.takes,
            "put": spread(range(first, self.puts)),
            "taken": spread(takes),
            "next": spread(self.planned),
        }
        self.blob[:8] = self.commits.to_bytes(8, "little")
        blob = bytes(self.blob)
        t0 = clock()
        store.commit(blob, json.dumps(record).encode())
        stall = clock() - t0
        return {
            "puts": n_puts,
            "takes": len(takes),
            "put_s": put_s,
            "take_s": take_s,
            "stall_s": stall,
            "wall_s": clock() - start,
        }


def consistent(store, record: dict, value_bytes: int) -> bool:
    """Whether the store holds exactly the commit that `record` names: no more, no less."""
    # Present: what the commit put, and what the interval in flight had begun to take.
    # Absent: what the commit took, and the first id the interval in flight put.
    present = record["put"] + record["next"]
    absent = record["taken"] + [record["puts"]]
    blob = store.get(BLOB_KEY)
    return (
        store.count() == record["puts"] - record["takes"]
        and all(store.get(key(i)) == value(i, value_bytes) for i in present)
        and all(store.get(key(i)) is None for i in absent)
        and len(blob) == BLOB_BYTES
        and int.from_bytes(blob[:8], "little") == record["commit"]
    )


def memory() -> dict[str, int]:
    """This process's VmRSS, VmHWM (peak RSS) and RssFile (file-backed part), in bytes."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "VmHWM", "RssFile"):
            out[name] = int(rest.split()[0]) * 1024
    return out


def disk_bytes(path: Path) -> int:
    return sum(f.stat().st_blocks * 512 for f in path.rglob("*") if f.is_file())


def child(args):
    """Fill a store, run it in steady state, print the figures as one JSON line, then keep
    going until the parent kills this process."""
    path, first_k = Path(args.path), args.interval_changes[0]
    waiting = Waiting(args.order, args.keys)
    base = memory()["VmRSS"]
    driver = Driver(
        STORES[args.child](path, args.keys, args.value_bytes), waiting, args.value_bytes
    )
    chunk = max(args.interval_changes)
    fill = [min(chunk, args.keys - s) for s in range(0, args.keys, chunk)]
    steady = [k for k in args.interval_changes for _ in range(args.commits)]
    plan = [(n, 0) for n in fill] + [(k, k) for k in steady] + [(first_k, first_k)]
    runs = [driver.interval(n, plan[i + 1][1]) for i, (n, _) in enumerate(plan[:-1])]
    mem = memory()
    fills, steadies = runs[: len(fill)], runs[len(fill) :]
    out = {
        "put_start": fills[0]["put_s"] / fills[0]["puts"],
        "put_end": fills[-1]["put_s"] / fills[-1]["puts"],
        "put": sum(r["put_s"] for r in steadies) / sum(r["puts"] for r in steadies),
        "take": sum(r["take_s"] for r in steadies) / sum(r["takes"] for r in steadies),
        "event": sum(r["put_s"] + r["take_s"] + r["stall_s"] for r in steadies)
        / sum(r["puts"] for r in steadies),
        "stalls": {
            k: [r["stall_s"] for r in steadies if r["puts"] == k] for k in args.interval_changes
        },
        "rss": mem["VmRSS"],
        "rss_file": mem["RssFile"],
        "rss_peak": mem["VmHWM"],
        "rss_base": base,
        "disk": disk_bytes(path) / args.keys,
        "interval_s": statistics.median(r["wall_s"] for r in steadies if r["puts"] == first_k),
    }
    print(json.dumps(out), flush=True)
    deadline = time.monotonic() + 600  # in case the parent died
    while time.monotonic() < deadline:
        driver.interval(first_k, first_k)


def measure(name: str, order: str, args, root: Path, rng: random.Random) -> dict:
    """One store in one order, in a child process; then kill -9, reopen and check."""
    path = root / f"{order}-{name}"
    path.mkdir()
    # The child reads this run's own options; the later --order wins over the run's.
    cmd = [sys.executable, __file__, *args.argv, "--child", name, "--path", str(path)]
    proc = subprocess.Popen([*cmd, "--order", order], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("{"):
        raise SystemExit(f"kvstores: {name} ({order}) failed, exit {proc.wait()}")
    out = json.loads(line)
    time.sleep(rng.uniform(0.5, 1.5) * out["interval_s"])
    proc.kill()
    proc.wait()
    t0 = clock()
    store = STORES[name](path, args.keys, args.value_bytes)
    record = json.loads(store.get(OFFSETS_KEY))
    out["open"] = clock() - t0
    out["consistent"] = consistent(store, record, args.value_bytes)
    out["killed_at"] = record["commit"]
    store.close()
    shutil.rmtree(path)
    return out


def fmt(x: float) -> str:
    return f"{x:.2f}" if x < 10 else f"{x:.1f}" if x < 100 else f"{x:,.0f}"


def table(order: str, rows: dict[str, dict], args) -> str:
    ks = [f"{k // 1000}k" if k >= 1000 else str(k) for k in args.interval_changes]
    head = [
        "store",
        "put µs: fill start / end / steady",
        "get+delete µs",
        "µs per event, commits included",
        *[f"commit ms, {k} (median / max)" for k in ks],
        "RSS MiB: steady (file-backed) / peak",
        "disk B/entry",
        "open after kill -9 ms",
        "consistent",
    ]
    lines = [f"| {' | '.join(head)} |", "|" + "---|" * len(head)]
    mib = 1 << 20
    for name, r in rows.items():
        stalls = [sorted(r["stalls"][str(k)]) for k in args.interval_changes]
        cells = [
            name,
            " / ".join(fmt(r[p] * 1e6) for p in ("put_start", "put_end", "put")),
            fmt(r["take"] * 1e6),
            fmt(r["event"] * 1e6),
            *[f"{fmt(statistics.median(s) * 1e3)} / {fmt(s[-1] * 1e3)}" for s in stalls],
            f"{r['rss'] / mib:,.0f} ({r['rss_file'] / mib:,.0f}) / {r['rss_peak'] / mib:,.0f}",
            f"{r['disk']:,.0f}",
            fmt(r["open"] * 1e3),
            "yes" if r["consistent"] else "no",
        ]
        lines.append(f"| {' | '.join(cells)} |")
    base = max(r["rss_base"] for r in rows.values()) / mib
    return "\n".join(
        [
            f"\n{order} order, {args.keys:,} waiting, {args.value_bytes}-byte values, "
            f"{args.commits} commits per interval ({', '.join(ks)} steps of one put and one take);"
            f" the benchmark's own RSS before a store opens: {base:,.0f} MiB",
            *lines,
        ]
    )


def int_list(text: str) -> list[int]:
    try:
        values = [int(float(t)) for t in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None
    if any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return values


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--keys",
        type=lambda t: int(float(t)),
        default=1_000_000,
        help="waiting entries (default 1e6)",
    )
    p.add_argument("--value-bytes", type=int, default=208)
    p.add_argument(
        "--interval-changes",
        type=int_list,
        default=[20_000, 100_000],
        help="steps per commit, each one put and one take (default 20000,100000)",
    )
    p.add_argument("--commits", type=int, default=5, help="commits per interval size")
    p.add_argument("--order", choices=["fifo", "random", "both"], default="both")
    p.add_argument(
        "--stores", default="rocksdb,lmdb,sqlite", help=f"comma-separated, of {', '.join(STORES)}"
    )
    p.add_argument(
        "--out-dir",
        help="where the databases go (a temporary directory is made"
        " in it and removed at the end; default: the system's temporary directory)",
    )
    p.add_argument("--seed", type=int, default=0, help="of the kill times")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--path", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    args.stores = args.stores.split(",")
    for name in args.stores:
        if name not in STORES:
            p.error(f"unknown store {name!r}; choose from {', '.join(STORES)}")
        if NEEDS[name] is None:
            p.error(
                f"{name} needs {'rocksdict' if name == 'rocksdb' else 'lmdb'}: "
                'pip install -e ".[bench]"'
            )
    if max(args.interval_changes) > args.keys:
        p.error("--interval-changes must not exceed --keys")
    if args.commits < 1 or not 0 < args.value_bytes <= len(POOL) // 2:
        p.error(f"--commits must be at least 1, --value-bytes from 1 to {len(POOL) // 2}")
    return args


def main(argv=None):
    args = parse(argv)
    if args.child:
        return child(args)
    orders = ["fifo", "random"] if args.order == "both" else [args.order]
    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix="kvstores-", dir=args.out_dir))
    try:
        for order in orders:
            rows = {}
            for name in args.stores:
                t0, load = time.monotonic(), os.getloadavg()[0]
                rows[name] = measure(name, order, args, root, rng)
                print(
                    f"{order} {name}: {time.monotonic() - t0:.0f} s, load {load:.1f} at "
                    f"start, {os.getloadavg()[0]:.1f} at end",
                    file=sys.stderr,
                )
            print(table(order, rows, args), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
