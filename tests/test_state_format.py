"""The checkpoint format: checkpoints of the release before the versioned state format
(tests/data/checkpoint-v0, made by tests/data/make_checkpoint_v0.py) load and resume with
identical predictions."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import orjson
import pytest

from streamcal.stream.config import ProcessorConfig
from streamcal.stream.processor import Processor, _Rec

DATA = Path(__file__).parent / "data" / "checkpoint-v0"
MODES = ("pretrained", "sva", "va")


def _resume(mode: str, tmp_path):
    want = json.loads((DATA / f"{mode}.json").read_text())
    state = tmp_path / "state"
    shutil.copytree(DATA / mode, state)
    proc = Processor(ProcessorConfig.build(**want["settings"], state_dir=str(state)))
    assert proc.restored
    sent = []
    proc._send = lambda topic, key, value: sent.append((topic, orjson.loads(value)))
    proc._on_metrics = proc._metrics_out = None
    for r in want["records"]:
        rec = _Rec(r["topic"], r["partition"], r["offset"], r["ts"], r["key"].encode(),
                   r["value"].encode())  # fmt: skip
        (proc._on_event if r["topic"] == "ev" else proc._on_label)(rec)
        proc.state.offsets[(r["topic"], r["partition"])] = r["offset"] + 1
    return want, proc, sent


@pytest.mark.parametrize("mode", MODES)
def test_checkpoint_of_the_previous_release_resumes_identically(mode, tmp_path):
    want, proc, sent = _resume(mode, tmp_path)
    preds = [v for t, v in sent if t == "streamcal.predictions"]
    drop = ("version",)
    assert len(preds) == len(want["predictions"]) > 50
    assert [{k: v for k, v in p.items() if k not in drop} for p in preds] == [
        {k: v for k, v in p.items() if k not in drop} for p in want["predictions"]
    ]
    assert [v["reason"] for t, v in sent if t != "streamcal.predictions"] == want["dead_letters"]
    st = proc.state
    assert st.counts == want["counts"]
    assert {f"{t}:{p}": o for (t, p), o in st.offsets.items()} == want["offsets"]
    assert (len(st.pending), len(st.waiting)) == (want["pending"], want["waiting"])
    assert st.tracker.snapshot(reliability=True) == want["tracker"]
    assert st.clf.calibration_size == want["calibration_size"]
