"""benchmarks/kvstores.py: a tiny run gives a consistent row per store, and its check after
kill -9 sees a store that holds more or less than its last commit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests._helpers import load_benchmark

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "kvstores.py"


@pytest.mark.slow  # 7 processes: 2 s on a quiet machine, 5 s under load
def test_a_tiny_run_has_a_consistent_row_per_store(tmp_path):
    pytest.importorskip("rocksdict")
    pytest.importorskip("lmdb")
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--keys",
            "2000",
            "--interval-changes",
            "100,500",
            "--commits",
            "2",
            "--out-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    for order in ("fifo", "random"):
        table = proc.stdout.split(f"{order} order")[1].split("\n\n")[0]
        rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| ")]
        assert {row[0][2:] for row in rows[1:]} == {"rocksdb", "lmdb", "sqlite"}
        assert [row[-1] for row in rows[1:]] == ["yes |"] * 3
    assert list(tmp_path.iterdir()) == []  # the databases are removed


def test_the_check_sees_a_store_ahead_of_or_behind_its_offsets(tmp_path):
    kv = load_benchmark("kvstores")
    store = kv.SqliteStore(tmp_path, keys=300, value_bytes=16)
    driver = kv.Driver(store, kv.Waiting("random", 300), value_bytes=16)
    for puts, next_takes in [(300, 50), (50, 50)]:
        driver.interval(puts, next_takes)
    record_bytes = store.get(kv.OFFSETS_KEY)
    record = json.loads(record_bytes)
    blob = store.get(kv.BLOB_KEY)
    assert record["puts"] - record["takes"] == store.count() == 300
    assert kv.consistent(store, record, 16)

    store.put(kv.key(record["puts"]), kv.value(record["puts"], 16))  # a put after the commit
    store.commit(blob, record_bytes)
    assert not kv.consistent(store, record, 16)
    store.take(kv.key(record["puts"]))
    store.commit(blob, record_bytes)
    assert kv.consistent(store, record, 16)

    store.take(kv.key(record["next"][0]))  # a take of the interval in flight
    store.put(kv.key(10**6), kv.value(10**6, 16))  # the count stays right
    store.commit(blob, record_bytes)
    assert not kv.consistent(store, record, 16)
