"""Write the state directories under tests/data/checkpoint-v7/: the one checkpoint format
(state format version 7, the first release's), as the processor writes it.

For each mode a processor (no broker: its outputs are collected in a list) reads the
first part of a synthetic stream (late, early, missing and bad records), is
checkpointed and closed: that state directory (the unit's store and its mark) is the
fixture. A second processor, identical, reads the whole stream with a checkpoint at the
same place; ``<mode>.json`` holds the rest of the records and what it produced from
them: the predictions, dead letters, final counts and tracker snapshot that any later
streamcal must reproduce from the fixture. The key is ``KEY`` below (a test key,
nothing secret).

Run from the repository root (only to regenerate; the committed files are the fixture):

    python tests/data/make_checkpoint_v7.py
"""

from __future__ import annotations

import json
import random
import shutil
import sys
import tempfile
from pathlib import Path

import orjson

KEY = "streamcal-test-data-key-v7-0123456789"
HERE = Path(__file__).resolve().parent / "checkpoint-v7"
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


def settings(mode: str) -> dict:
    return dict(
        events_topic=EVENTS, labels_topic=LABELS, model="logreg", merge="log",
        metrics_file="none", metrics_every=10**9, pending_ttl=2.0, label_wait=0.5,
        checkpoint_key=KEY, **MODES[mode],
    )  # fmt: skip


def processor(mode: str, state_dir):
    from streamcal.stream.config import ProcessorConfig
    from streamcal.stream.processor import Processor

    return Processor(ProcessorConfig.build(**settings(mode), state_dir=str(state_dir)))


def main() -> None:
    sys.path.insert(0, str(HERE.parents[2]))
    from tests.stream.test_state_format import feed

    recs = stream()
    cut = len(recs) * 2 // 3
    for mode in MODES:
        state = HERE / mode
        shutil.rmtree(state, ignore_errors=True)
        first = processor(mode, state)
        feed(first.state, recs[:cut], [])
        first.checkpoint_all()
        first.close()
        for log in state.glob("store/LOG*"):  # RocksDB's own info log: not state
            log.unlink()
        whole = processor(mode, tempfile.mkdtemp())
        feed(whole.state, recs[:cut], [])
        whole.checkpoint_all()
        sent = []
        feed(whole.state, recs[cut:], sent)
        st = whole.state
        resume = dict(
            settings=settings(mode),
            records=recs[cut:],
            predictions=[v for t, v in sent if t == "streamcal.predictions"],
            dead_letters=[v["reason"] for t, v in sent if t != "streamcal.predictions"],
            counts=st.counts,
            offsets={f"{t}:{p}": o for (t, p), o in st.offsets.items()},
            pending=st.pending.events,
            waiting=st.pending.labels,
            tracker=st.tracker.snapshot(reliability=True),
            calibration_size=st.clf.calibration_size,
        )
        whole.close()
        (HERE / f"{mode}.json").write_text(json.dumps(resume, indent=1) + "\n")
        print(mode, st.counts, len(resume["predictions"]), "predictions after the checkpoint")


if __name__ == "__main__":
    main()
