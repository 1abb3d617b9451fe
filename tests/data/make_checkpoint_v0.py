"""Write the checkpoints under tests/data/checkpoint-v0/ with streamcal 0.x's own code.

They are the "checkpoint from the release before the versioned state format": a pickle of
the processor's whole object graph (``ProcessorState``), HMAC-authenticated as
``CheckpointStore`` writes it, with the key ``KEY`` below (a test key, nothing secret).

For each mode a processor (no broker: its outputs are collected in a list) reads the
first part of a synthetic stream (late, early, missing and bad records), is
checkpointed, then reads the rest. ``resume.json`` holds the rest of the records and
what the processor produced from them: the predictions, dead letters and final counts
and tracker snapshot that any later streamcal must reproduce from the checkpoint.

Run from the repository root (only to regenerate; the committed files are the fixture):

    python tests/data/make_checkpoint_v0.py
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import orjson

KEY = "streamcal-test-data-key-v0-0123456789"
HERE = Path(__file__).resolve().parent / "checkpoint-v0"
EVENTS, LABELS = "ev", "lab"
T0 = 1_700_000_000_000
MODES = {
    "pretrained": dict(mode="pretrained", window=30, refresh_every=10),
    "sva": dict(mode="sva", window=40, refresh_every=15),
    "va": dict(mode="va", window=15),
}


def stream(n: int = 300, seed: int = 7) -> list[dict]:
    """Records in processing order: dicts of topic, partition, offset, ts, key, value."""
    rng = random.Random(seed)
    recs = []
    for i in range(n):
        x1, x2 = rng.gauss(0, 1), rng.gauss(0, 1)
        y = int(rng.random() < 1 / (1 + 2.718281828 ** -(1.5 * x1 - x2)))
        ts = T0 + 10 * i
        eid = f"e{i}"
        recs.append((EVENTS, ts, eid, {"id": eid, "features": {"x1": x1, "x2": x2}}))
        if i % 37 == 5:
            continue  # never labelled
        delay = -4 if i % 23 == 3 else 10 * rng.randrange(40) + rng.randrange(1, 10)
        recs.append((LABELS, ts + delay, eid, {"id": eid, "label": y}))
    recs.append((EVENTS, T0 + 1001, "bad", b"{oops"))
    recs.append((LABELS, T0 + 1502, "e3", {"id": "e3", "label": 7}))
    recs.append((EVENTS, T0 + 2003, "e1", {"id": "e1", "features": {"x1": 0.0, "x2": 0.0}}))
    recs.sort(key=lambda r: (r[1], r[0] != EVENTS))
    offsets = {EVENTS: 0, LABELS: 0}
    out = []
    for topic, ts, key, value in recs:
        raw = value if isinstance(value, bytes) else orjson.dumps(value)
        out.append(
            dict(topic=topic, partition=0, offset=offsets[topic], ts=ts, key=key,
                 value=raw.decode())
        )  # fmt: skip
        offsets[topic] += 1
    return out


def settings(mode: str, state_dir) -> dict:
    return dict(
        events_topic=EVENTS, labels_topic=LABELS, model="logreg", merge="log",
        metrics_file="none", metrics_every=10**9, pending_ttl=2.0, label_wait=0.5,
        state_dir=str(state_dir), checkpoint_key=KEY, **MODES[mode],
    )  # fmt: skip


def main() -> None:
    from streamcal.stream.config import ProcessorConfig
    from streamcal.stream.processor import Processor, _Rec

    recs = stream()
    cut = len(recs) * 2 // 3
    for mode in MODES:
        state = HERE / mode
        shutil.rmtree(state, ignore_errors=True)
        proc = Processor(ProcessorConfig.build(**settings(mode, state)))
        sent = []
        proc._send = lambda topic, key, value, sent=sent: sent.append((topic, value))
        proc._on_metrics = proc._metrics_out = None
        proc._rate_mark = (0.0, 0)
        for i, r in enumerate(recs):
            if i == cut:
                proc._checkpoints.save(proc.state)
                sent.clear()
            rec = _Rec(r["topic"], r["partition"], r["offset"], r["ts"], r["key"].encode(),
                       r["value"].encode())  # fmt: skip
            (proc._on_event if r["topic"] == EVENTS else proc._on_label)(rec)
            proc.state.offsets[(r["topic"], r["partition"])] = r["offset"] + 1
        st = proc.state
        resume = dict(
            key=KEY,
            streamcal_version=st.version,
            settings={k: v for k, v in settings(mode, "").items() if k != "state_dir"},
            records=recs[cut:],
            predictions=[orjson.loads(v) for t, v in sent if t == "streamcal.predictions"],
            dead_letters=[
                orjson.loads(v)["reason"] for t, v in sent if t != "streamcal.predictions"
            ],
            counts=st.counts,
            offsets={f"{t}:{p}": o for (t, p), o in st.offsets.items()},
            pending=len(st.pending),
            waiting=len(st.waiting),
            tracker=st.tracker.snapshot(reliability=True),
            calibration_size=st.clf.calibration_size,
        )
        (HERE / f"{mode}.json").write_text(json.dumps(resume, indent=1) + "\n")
        print(mode, st.counts, len(resume["predictions"]), "predictions after the checkpoint")


if __name__ == "__main__":
    main()
