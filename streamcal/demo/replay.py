"""The demo stream: a data set replayed as event and label messages, labels late or missing.

``demo_records`` turns a data set (``streamcal.demo.datasets``) into the messages a real
system would see (formats in the stream processor's contract): one event per example,
and its label some random number of events later (``label_delay`` on average), or never
(``missing_labels``). Every record carries an explicit Kafka timestamp on a virtual
clock, one step per event, so the processor's timestamp-ordered merge sees each label
exactly where it was meant to arrive, however the producer batches. Everything is
deterministic given the seed.

>>> recs = demo_records("drift", events=4, seed=1, label_delay=1, start_ms=0)
>>> [(r.kind, r.timestamp_ms) for r in recs][:3]
[('event', 0), ('event', 10), ('label', 15)]
>>> recs[0].value
b'{"id":"e0","features":{"x1":...,"x2":...,"x3":...,"x4":...,"color":"..."},"ts":0.0}'
>>> recs == demo_records("drift", events=4, seed=1, label_delay=1, start_ms=0)
True

``replay(producer, records, topics)`` sends them; ``ensure_topics`` creates the topics.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from typing import NamedTuple

import orjson

from streamcal.demo.datasets import load_dataset

__all__ = ["ReplayRecord", "demo_records", "ensure_topics", "first_label_from", "replay",
           "replay_counts"]  # fmt: skip

STEP_MS = 10  # virtual time between two events


class ReplayRecord(NamedTuple):
    """One message: ``kind`` is event, label, bad-event or bad-label; ``topic`` is the
    role (events or labels), mapped to a topic name by :func:`replay`."""

    kind: str
    topic: str
    key: bytes | None
    value: bytes
    timestamp_ms: int


def _bad_records(n: int, rng: random.Random) -> list[tuple[str, str, bytes]]:
    """Malformed messages of the kinds a real stream gets; each must be dead-lettered."""
    kinds = [
        ("bad-event", "events", b"{not json"),
        ("bad-event", "events", orjson.dumps({"id": "bad-no-features", "x": 1})),
        ("bad-event", "events", orjson.dumps({"features": {"x1": 1.0}})),
        ("bad-event", "events", orjson.dumps({"id": "bad-features", "features": [1, 2]})),
        ("bad-label", "labels", orjson.dumps({"id": "e0", "label": "maybe"})),
        ("bad-label", "labels", b"\xff\xfe"),
    ]
    return [kinds[rng.randrange(len(kinds))] for _ in range(n)]


def demo_records(
    dataset: str = "phishing",
    events: int | None = None,
    seed: int = 0,
    label_delay: float = 20,
    missing_labels: float = 0.02,
    bad_records: int = 0,
    start_ms: int | None = None,
) -> list[ReplayRecord]:
    """Event and label messages in timestamp order.

    Event ``i`` (id ``e{i}``) is stamped ``start_ms + 10 ms * i``. Its label follows the
    event ``i + lag`` (lag uniform in 0..2*label_delay, so ``label_delay`` on average),
    5 ms after it; a fraction ``missing_labels`` of labels is never sent. ``bad_records``
    malformed messages are mixed in at random places (each should become a dead letter).
    ``start_ms`` defaults to now minus the stream's span, so no timestamp is in the future.
    """
    if not 0.0 <= missing_labels < 1.0:
        raise ValueError(f"missing_labels must be in [0, 1), got {missing_labels}")
    if label_delay < 0:
        raise ValueError(f"label_delay must be >= 0, got {label_delay}")
    if bad_records < 0:
        raise ValueError(f"bad_records must be >= 0, got {bad_records}")
    rng = random.Random(seed)
    data = load_dataset(dataset, events, rng)
    n = len(data)
    max_lag = int(round(2 * label_delay))
    if start_ms is None:
        start_ms = int(time.time() * 1000) - (n + max_lag + 1) * STEP_MS
    out: list[tuple[int, int, ReplayRecord]] = []  # (timestamp, tie-break, record)
    for i, (x, y) in enumerate(data):
        eid = f"e{i}"
        ts = start_ms + i * STEP_MS
        value = orjson.dumps({"id": eid, "features": x, "ts": ts / 1000.0})
        rec = ReplayRecord("event", "events", key=eid.encode(), value=value, timestamp_ms=ts)
        out.append((ts, 2 * i, rec))
        lag = rng.randint(0, max_lag)
        if rng.random() < missing_labels:
            continue
        lts = start_ms + (i + lag) * STEP_MS + STEP_MS // 2
        label = orjson.dumps({"id": eid, "label": int(y)})
        rec = ReplayRecord("label", "labels", key=eid.encode(), value=label, timestamp_ms=lts)
        out.append((lts, 2 * i + 1, rec))
    for j, (kind, role, value) in enumerate(_bad_records(bad_records, rng)):
        ts = start_ms + rng.randrange(n) * STEP_MS + 1
        out.append((ts, -1 - j, ReplayRecord(kind, role, key=None, value=value, timestamp_ms=ts)))
    out.sort(key=lambda t: (t[0], t[1]))
    return [rec for _, _, rec in out]


def replay_counts(records: list[ReplayRecord]) -> Counter:
    """How many records of each kind, e.g. ``Counter({'event': 1250, 'label': 1224})``."""
    return Counter(r.kind for r in records)


def first_label_from(records: list[ReplayRecord], event: int) -> int | None:
    """The label count (1, 2, ... in the records' timestamp order, which is the order
    the processor joins them in) of the first label of an event numbered ``event`` or
    later; None if there is none.

    >>> recs = demo_records("drift", events=6, seed=1, label_delay=1, start_ms=0)
    >>> [r.key.decode() for r in recs if r.kind == "label"][:4], first_label_from(recs, 3)
    (['e0', 'e2', 'e1', 'e4'], 4)
    """
    k = 0
    for r in records:
        if r.kind == "label":
            k += 1
            if int(r.key[1:]) >= event:
                return k
    return None


def replay(producer, records: list[ReplayRecord], topics: dict, progress=None) -> None:
    """Send ``records`` with ``producer`` (``clients.producer``'s, taking bytes) to
    ``topics["events"]`` / ``topics["labels"]``, keeping their timestamps; then flush.
    ``progress(k)`` is called after every 500 records."""
    for k, rec in enumerate(records, 1):
        producer.send(
            topics[rec.topic], key=rec.key, value=rec.value, timestamp_ms=rec.timestamp_ms
        )
        if progress is not None and k % 500 == 0:
            progress(k)
    producer.flush()


def ensure_topics(client_settings: dict, names, partitions: int = 1) -> list[str]:
    """Create the topics that do not exist yet (``partitions`` each); returns those made.

    Brokers that auto-create topics would do it anyway, but with their own partition count
    (tansu: 4); creating them first makes the demo the same on every broker.
    """
    from streamcal.stream.kafka import clients
    from streamcal.stream.kafka.port import TopicExists

    admin = clients.admin(client_settings)
    try:
        existing = set(admin.list_topics())
        wanted = [t for t in dict.fromkeys(names) if t and t not in existing]
        made = []
        for topic in wanted:
            try:
                admin.create_topic(topic, partitions, 1)
                made.append(topic)
            except TopicExists:  # created meanwhile by someone else
                pass
        return made
    finally:
        admin.close()
