"""The one checkpoint format (state format version 7, the first release's): state
directories written by the processor (tests/data/checkpoint-v7, made by
tests/data/make_checkpoint_v7.py) resume with identical outputs, and go on so through
another checkpoint; a checkpoint of another version (a development version's, or a newer
streamcal's) is refused with one line; the payload is plain data only."""

from __future__ import annotations

import hashlib
import hmac
import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import orjson
import pytest

from streamcal.stream.config import ProcessorConfig
from streamcal.stream.processor import Processor
from streamcal.stream.state.checkpoint import MAGIC, CheckpointError, seal, unseal
from streamcal.stream.state.fingerprint import check_fingerprint, fingerprint_of
from streamcal.stream.state.kv import KVStore
from streamcal.stream.state.migrations import VERSION
from streamcal.stream.state.units import SNAPSHOT
from tests._fakes import Record
from tests._helpers import error_of

DATA = Path(__file__).resolve().parents[1] / "data" / "checkpoint-v7"
MODES = ("pretrained", "sva", "va")


def feed(unit, records, sent) -> None:
    unit.send = lambda topic, key, value: sent.append((topic, orjson.loads(value)))
    for r in records:
        rec = Record(r["topic"], r["partition"], r["offset"], r["ts"], r["key"].encode(),
                   r["value"].encode())  # fmt: skip
        (unit.on_event if r["topic"] == "ev" else unit.on_label)(rec)
        unit.offsets[(r["topic"], r["partition"])] = r["offset"] + 1


def _fixture(mode: str, tmp_path) -> tuple[dict, ProcessorConfig]:
    want = json.loads((DATA / f"{mode}.json").read_text())
    state = tmp_path / "state"
    shutil.copytree(DATA / mode, state)
    return want, ProcessorConfig.build(**want["settings"], state_dir=str(state))


def _same_outputs(proc, want) -> None:
    sent = []
    feed(proc.state, want["records"], sent)
    preds = [v for t, v in sent if t == "streamcal.predictions"]
    assert len(preds) == len(want["predictions"]) > 50
    assert preds == want["predictions"]
    assert [v["reason"] for t, v in sent if t != "streamcal.predictions"] == want["dead_letters"]
    st = proc.state
    assert st.counts == want["counts"]
    assert {f"{t}:{p}": o for (t, p), o in st.offsets.items()} == want["offsets"]
    assert (st.pending.events, st.pending.labels) == (want["pending"], want["waiting"])
    assert st.tracker.snapshot(reliability=True) == want["tracker"]
    assert st.clf.calibration_size == want["calibration_size"]


@pytest.mark.parametrize("mode", MODES)
def test_a_checkpoint_of_the_one_format_resumes_identically(mode, tmp_path):
    want, config = _fixture(mode, tmp_path)
    proc = Processor(config)
    assert proc.restored
    _same_outputs(proc, want)


@pytest.mark.parametrize("mode", MODES)
def test_a_checkpoint_written_again_is_the_same_state_and_resumes_identically(mode, tmp_path):
    """The fixture -> restored -> checkpointed again (one commit of its store) -> opened
    again: the snapshot is sealed in the one format, holds the state it was restored
    from, and resumes with the same outputs."""
    want, config = _fixture(mode, tmp_path)
    store = KVStore(Path(config.state_dir) / "store")
    before = unseal(config.key_bytes(), store.get(SNAPSHOT), "fixture")
    store.close()
    first = Processor(config)
    first.checkpoint_all()
    first.close()
    store = KVStore(Path(config.state_dir) / "store")
    data = store.get(SNAPSHOT)
    store.close()
    assert data.startswith(MAGIC)
    assert pickle.loads(data[len(MAGIC) + 32 :])["version"] == VERSION == 7
    after = unseal(config.key_bytes(), data, "again")
    assert after.pop("checkpoints") == before.pop("checkpoints") + 1
    # the fixture predates record fingerprints and the label-delay histogram (optional
    # keys); nothing was read or joined since
    assert "read" not in before and not after.pop("read")
    assert "label_delays" not in before and not any(after.pop("label_delays")["counts"])
    for state in (before, after):  # river's own pickle of the model may differ: its
        state["classifier"] = {**state["classifier"], "model": None}  # answers are compared
    assert _comparable(after) == _comparable(before)
    again = Processor(config)
    assert again.restored
    _same_outputs(again, want)


def _comparable(state):
    """Plain data with its numpy arrays as (dtype, shape, bytes), so that == compares all."""
    if isinstance(state, dict):
        return {k: _comparable(v) for k, v in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(_comparable(v) for v in state)
    if isinstance(state, np.ndarray):
        return (state.dtype.str, state.shape, state.tobytes())
    return state


def _sealed(key: bytes, doc, magic: bytes = MAGIC) -> bytes:
    payload = pickle.dumps(doc)
    return magic + hmac.new(key, magic + payload, hashlib.sha256).digest() + payload


@pytest.mark.parametrize("version", range(1, VERSION))
def test_a_development_versions_checkpoint_is_refused_with_one_line(version):
    key = b"k" * 32
    with pytest.raises(CheckpointError) as exc:
        unseal(key, _sealed(key, {"version": version, "state": {}}), "checkpoint 'x'")
    msg = str(exc.value)
    assert msg.startswith(f"checkpoint 'x' has state format version {version}, ")
    assert "before the first release" in msg and "empty --state-dir" in msg
    assert "\n" not in msg


def test_the_framing_of_before_the_state_format_is_refused_with_one_line():
    key = b"k" * 32
    data = _sealed(key, {"anything": 1}, b"STREAMCAL-CHECKPOINT v1\n")
    with pytest.raises(CheckpointError) as exc:
        unseal(key, data, "checkpoint 'x'")
    msg = str(exc.value)
    assert "before the first release" in msg and "empty --state-dir" in msg
    assert "\n" not in msg


def test_a_fingerprint_without_the_task_or_the_horizon_is_refused_with_one_line():
    # development versions before version 5 (tasks) and 7 wrote these: no default stands in
    config = ProcessorConfig.build(events_topic="ev", labels_topic="lab", metrics_file="none")
    for key, shown in (("task", "task=None but .* task='binary'"),
                       ("late_labels", "late_labels=None but .*='dead-letter'")):  # fmt: skip
        fingerprint = fingerprint_of(config)
        del fingerprint[key]
        with pytest.raises(CheckpointError, match=f"written with {shown}") as exc:
            check_fingerprint({"fingerprint": fingerprint}, config)
        assert "\n" not in str(exc.value)


def test_newer_format_version_is_refused_with_one_line():
    key = b"k" * 32
    data = seal(key, {"x": 1})
    assert unseal(key, data, "here") == {"x": 1}
    payload = pickle.dumps({"version": VERSION + 1, "state": {}})
    newer = data[: len(b"STREAMCAL-CHECKPOINT v2\n")]
    newer += hmac.new(key, newer + payload, hashlib.sha256).digest() + payload
    with pytest.raises(CheckpointError) as exc:
        unseal(key, newer, "checkpoint 'x'")
    msg = str(exc.value)
    assert f"version {VERSION + 1}, newer than this streamcal's ({VERSION})" in msg
    assert "\n" not in msg
    with pytest.raises(CheckpointError, match="newer than this streamcal reads"):
        unseal(key, b"STREAMCAL-CHECKPOINT v9\n" + data[24:], "checkpoint 'y'")


def test_plain_state_never_builds_objects():
    """A sealed payload that names a class is refused even with the right key."""
    class Boom:
        def __reduce__(self):
            return (exec, ("raise SystemExit('unpickled!')",))

    key = b"k" * 32
    payload = pickle.dumps({"version": VERSION, "state": Boom()})
    magic = b"STREAMCAL-CHECKPOINT v2\n"
    data = magic + hmac.new(key, magic + payload, hashlib.sha256).digest() + payload
    with pytest.raises(CheckpointError, match="not plain data"):
        unseal(key, data, "checkpoint 'z'")


def test_streamcal_run_on_a_development_versions_state_dir_ends_with_one_line(tmp_path,
                                                                            monkeypatch,
                                                                            capsys):  # fmt: skip
    """A state directory of before the store (checkpoint files) written by a development
    version: refused at start, exit status 2, one line naming the file and what to do;
    the directory is left as it was."""
    from streamcal.cli import main

    key = "a-checkpoint-key-of-32-bytes-long"
    old = tmp_path / "state" / "checkpoint-000000000001.ckpt"
    old.parent.mkdir()
    old.write_bytes(_sealed(key.encode(), {"version": 5, "state": {"unit": None}}))
    monkeypatch.setenv("STREAMCAL_CHECKPOINT_KEY", key)
    argv = ["run", "--bootstrap-servers", "127.0.0.1:1", "--state-dir", str(old.parent),
            "--metrics-file", "none"]  # fmt: skip
    assert main(argv) == 2
    err = error_of(capsys.readouterr().err)
    assert str(old) in err, err
    assert "state format version 5" in err and "empty --state-dir" in err
    assert old.exists()
