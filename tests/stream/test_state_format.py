"""The checkpoint format: checkpoints of the release before the versioned state format
(tests/data/checkpoint-v0, made by tests/data/make_checkpoint_v0.py) load and resume with
identical predictions: with --no-protect exactly as before; with --protect (the default)
the same p, plus p_protected from fresh protectors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import orjson
import pytest

from streamcal.monitoring.schema import ALARM_KEYS, PROTECTION_KEYS
from streamcal.stream.config import ProcessorConfig
from streamcal.stream.processor import Processor
from streamcal.stream.state.checkpoint import CheckpointError, seal, unseal
from streamcal.stream.state.kv import KVStore
from streamcal.stream.state.migrations import VERSION
from streamcal.stream.state.units import SNAPSHOT
from tests._fakes import Record

DATA = Path(__file__).resolve().parents[1] / "data" / "checkpoint-v0"
MODES = ("pretrained", "sva", "va")


def _resume(mode: str, tmp_path, protect: bool = True):
    want = json.loads((DATA / f"{mode}.json").read_text())
    state = tmp_path / "state"
    shutil.copytree(DATA / mode, state)
    config = ProcessorConfig.build(**want["settings"], state_dir=str(state), protect=protect)
    proc = Processor(config)
    assert proc.restored
    sent = []
    feed(proc.state, want["records"], sent)
    return want, proc, sent


def feed(unit, records, sent) -> None:
    unit.send = lambda topic, key, value: sent.append((topic, orjson.loads(value)))
    for r in records:
        rec = Record(r["topic"], r["partition"], r["offset"], r["ts"], r["key"].encode(),
                   r["value"].encode())  # fmt: skip
        (unit.on_event if r["topic"] == "ev" else unit.on_label)(rec)
        unit.offsets[(r["topic"], r["partition"])] = r["offset"] + 1


def _unprotected(snapshot: dict) -> dict:
    """Without the fields of protection and the alarm (which old checkpoints lacked)."""
    return {k: v for k, v in snapshot.items() if k not in PROTECTION_KEYS + ALARM_KEYS}


@pytest.mark.parametrize("protect", [False, True])
@pytest.mark.parametrize("mode", MODES)
def test_checkpoint_of_the_previous_release_resumes_identically(mode, protect, tmp_path):
    want, proc, sent = _resume(mode, tmp_path, protect)
    preds = [v for t, v in sent if t == "streamcal.predictions"]
    assert all(("p_protected" in p) == protect for p in preds)
    drop = ("version", "p_protected")
    assert len(preds) == len(want["predictions"]) > 50
    assert [{k: v for k, v in p.items() if k not in drop} for p in preds] == [
        {k: v for k, v in p.items() if k not in drop} for p in want["predictions"]
    ]
    assert [v["reason"] for t, v in sent if t != "streamcal.predictions"] == want["dead_letters"]
    st = proc.state
    new = {"evicted": 0, "labels_lost": 0, "rejected_state_records": 0,  # counts since v6
           "labels_late": 0, "labels_defaulted": 0, "label_delay_warnings": 0}  # fmt: skip
    assert st.counts == {**want["counts"], **new}
    assert {f"{t}:{p}": o for (t, p), o in st.offsets.items()} == want["offsets"]
    assert (st.pending.events, st.pending.labels) == (want["pending"], want["waiting"])
    snapshot = st.tracker.snapshot(reliability=True)
    assert _unprotected(snapshot) == want["tracker"]
    # events predicted since the resume carry p_protected, and their labels count
    protected = snapshot.get("protected_labels")
    assert protected is None if not protect else 50 < protected < st.counts["labels"]
    assert st.clf.calibration_size == want["calibration_size"]


@pytest.mark.parametrize("mode", MODES)
def test_state_roundtrip_through_the_current_format_resumes_identically(mode, tmp_path):
    """Old checkpoint -> the state store (one commit: the waiting entries and the sealed
    snapshot) -> opened again, without the old files -> same results."""
    want = json.loads((DATA / f"{mode}.json").read_text())
    state = tmp_path / "state"
    shutil.copytree(DATA / mode, state)
    config = ProcessorConfig.build(**want["settings"], state_dir=str(state))
    first = Processor(config)
    first.checkpoint_all()
    first.close()
    for old in state.glob("checkpoint-*.ckpt"):
        old.unlink()
    store = KVStore(state / "store")  # the sealed snapshot is under its key
    assert store.get(SNAPSHOT).startswith(b"STREAMCAL-CHECKPOINT v2\n")
    store.close()
    again = Processor(config)
    assert again.restored
    sent = []
    feed(again.state, want["records"], sent)
    preds = [v for t, v in sent if t == "streamcal.predictions"]
    assert [(p["id"], p["p0"], p["p1"], p["score"]) for p in preds] == [
        (p["id"], p["p0"], p["p1"], p["score"]) for p in want["predictions"]
    ]
    assert _unprotected(again.state.tracker.snapshot(reliability=True)) == want["tracker"]
    assert (again.state.pending.events, again.state.pending.labels) == (
        want["pending"], want["waiting"],
    )  # fmt: skip


def test_newer_format_version_is_refused_with_one_line():
    import pickle

    key = b"k" * 32
    data = seal(key, {"x": 1})
    assert unseal(key, data, "here") == {"x": 1}
    payload = pickle.dumps({"version": VERSION + 1, "state": {}})
    newer = data[: len(b"STREAMCAL-CHECKPOINT v2\n")]
    import hashlib
    import hmac

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
    import hashlib
    import hmac
    import pickle

    class Boom:
        def __reduce__(self):
            return (exec, ("raise SystemExit('unpickled!')",))

    key = b"k" * 32
    payload = pickle.dumps({"version": VERSION, "state": Boom()})
    magic = b"STREAMCAL-CHECKPOINT v2\n"
    data = magic + hmac.new(key, magic + payload, hashlib.sha256).digest() + payload
    with pytest.raises(CheckpointError, match="not plain data"):
        unseal(key, data, "checkpoint 'z'")
