"""A damaged state store is refused, never taken for the unit's state (issue 37, item 2).

RocksDB opens a store whose MANIFEST was cut short as the files the cut MANIFEST still
names: an older checkpoint, or nothing. The mark beside the store
(``streamcal.stream.state.marker``) tells: such a store is refused with one line naming
its path and the way out (exit 2 from the command line). A corrupt block read later is a
``StoreError`` naming the store, never RocksDB's bare exception."""

from __future__ import annotations

import glob
import os

import orjson
import pytest

from streamcal.cli import main
from streamcal.stream.config import ProcessorConfig
from streamcal.stream.state import marker
from streamcal.stream.state.errors import DamagedStore, StoreError
from streamcal.stream.state.kv import KVStore
from streamcal.stream.state.units import UnitStates
from streamcal.stream.unit import GLOBAL_UNIT, TopicRank
from tests._fakes import Record
from tests._helpers import CHECKPOINT_KEY, error_of

KEY = CHECKPOINT_KEY.encode()


def _config(state_dir):
    return ProcessorConfig.build(
        events_topic="ev",
        labels_topic="lab",
        metrics_file="none",
        state_dir=str(state_dir),
        checkpoint_key=CHECKPOINT_KEY,
    )


def _checkpoints(state_dir, n: int, per: int = 300) -> None:
    """``n`` checkpoints of the global unit, each after ``per`` events and labels, its
    memtable flushed after each (as a long run's fill their write buffers): the MANIFEST
    then lists SST files added by edits, which a cut drops from the end."""
    states = UnitStates(_config(state_dir), KEY)
    states.restore_global()
    unit = states.held[GLOBAL_UNIT]
    unit.send = lambda topic, key, value: None
    offset = unit.counts["events"]
    for _ in range(n):
        for _ in range(per):
            i = offset
            event = orjson.dumps({"id": f"e{i}", "features": {"x1": (i % 17) / 17}})
            unit.handle(TopicRank.EVENT, Record("ev", 0, i, 1000 * i, b"k", event))
            label = orjson.dumps({"id": f"e{i}", "label": i % 3 == 0})
            unit.handle(TopicRank.LABEL, Record("lab", 0, i, 1000 * i, b"k", label))
            offset += 1
        states.save([unit])
        unit.store._db.flush()
    states.close()


def _restore(state_dir):
    states = UnitStates(_config(state_dir), KEY)
    try:
        states.restore_global()
        return states.held[GLOBAL_UNIT].checkpoints
    finally:
        states.close()


@pytest.mark.parametrize("fraction", [0.2, 0.5, 0.7, 0.9, 0.95, 0.99])
def test_a_cut_manifest_never_restores_an_older_or_empty_state(tmp_path, fraction):
    _checkpoints(tmp_path / "state", 4)  # not reopened: opening writes a new MANIFEST
    (manifest,) = glob.glob(str(tmp_path / "state" / "store" / "MANIFEST-*"))
    with open(manifest, "r+b") as fh:
        fh.truncate(int(os.path.getsize(manifest) * fraction))
    try:
        restored = _restore(tmp_path / "state")
    except StoreError as exc:  # refused: named, one line
        assert str(tmp_path / "state" / "store") in str(exc)
        assert "\n" not in str(exc)
    else:
        assert restored == 4  # RocksDB still read all of it


def test_a_store_older_than_its_mark_is_refused_with_the_way_out(tmp_path):
    _checkpoints(tmp_path / "state", 2)
    marker.write(tmp_path / "state" / "store", 3)  # as if checkpoint 3 had been lost
    with pytest.raises(DamagedStore, match="holds checkpoint 2, but checkpoint 3") as exc:
        _restore(tmp_path / "state")
    assert "empty --state-dir" in str(exc.value)


def test_an_emptied_store_is_refused_at_the_command_line_in_one_line(tmp_path, monkeypatch,
                                                                       capsys):  # fmt: skip
    _checkpoints(tmp_path / "state", 2)
    store = tmp_path / "state" / "store"
    for f in store.iterdir():  # what a store that lost its files opens as: empty
        f.unlink()
    monkeypatch.setenv("STREAMCAL_CHECKPOINT_KEY", CHECKPOINT_KEY)
    argv = ["run", "--bootstrap-servers", "127.0.0.1:1", "--state-dir", str(tmp_path / "state"),
            "--metrics-file", "none"]  # fmt: skip
    assert main(argv) == 2
    err = error_of(capsys.readouterr().err)
    assert str(store) in err and "opened empty, but checkpoint 2" in err


def test_checkpoints_move_the_mark_and_a_new_directory_has_none(tmp_path):
    state = tmp_path / "state"
    _checkpoints(state, 1)
    assert (state / "store.mark").read_text() == "1\n"
    _checkpoints(state, 2)
    assert (state / "store.mark").read_text() == "3\n"
    assert _restore(state) == 3


def test_a_corrupt_block_read_later_names_the_store(tmp_path):
    store = KVStore(tmp_path / "store")
    values = {b"k%05d" % i: os.urandom(40) for i in range(5000)}
    for k, v in values.items():
        store.put(k, v)
    store.commit()
    store.close()
    KVStore(tmp_path / "store").close()  # reopened: the log is flushed into an SST file
    (sst,) = glob.glob(str(tmp_path / "store" / "*.sst"))
    with open(sst, "r+b") as fh:  # flip bytes inside the first data blocks
        fh.seek(100)
        data = bytearray(fh.read(2000))
        fh.seek(100)
        fh.write(bytes(b ^ 0xFF for b in data))
    with pytest.raises(StoreError) as exc:
        store = KVStore(tmp_path / "store")
        try:
            for k in values:
                store.get(k)
        finally:
            store.close()
    assert str(tmp_path / "store") in str(exc.value) and "orruption" in str(exc.value)
