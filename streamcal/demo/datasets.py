"""The demo's data sets: examples ``(features, label)`` to replay as a stream.

* ``phishing``: river's bundled Phishing data set, shuffled, so the stream is
  exchangeable and Venn-Abers' guarantee applies;
* ``drift``: a synthetic stream whose concept changes halfway, to show what calibration
  does when the stream is not exchangeable.

>>> DATASETS
('phishing', 'drift')
"""

from __future__ import annotations

import math
import random
from pathlib import Path

__all__ = ["DATASETS", "DEFAULT_EVENTS", "DESCRIPTIONS", "EXCHANGEABLE", "change_event",
           "load_dataset"]  # fmt: skip

# name -> what it is (for help texts); the first is the default.
DESCRIPTIONS = {
    "phishing": "river's bundled data set, shuffled (1250 events)",
    "drift": "a synthetic stream whose concept changes halfway (see the calibration alarm "
    "fire and the protected p recover)",
}
DATASETS = tuple(DESCRIPTIONS)
DEFAULT_EVENTS = {"phishing": 1250, "drift": 5000}
# Those whose order is random: Corollary 1 holds on them up to sampling error.
EXCHANGEABLE = frozenset({"phishing"})


def change_event(name: str, n: int) -> int | None:
    """The number of the first event after the abrupt change of data set ``name`` of ``n``
    events (None: it has none), where the calibration alarm should fire soon after.

    >>> change_event("drift", 5000), change_event("phishing", 1250)
    (2500, None)
    """
    return n // 2 if name == "drift" else None


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


def _drift_stream(n: int, rng: random.Random):
    """Four numeric features and a colour; the true weights change abruptly at n/2
    (``change_event``) and the noise level at 3n/4, so a model trained on the past is
    miscalibrated for a while.
    """
    colors = ("red", "green", "blue")
    before = (2.0, -1.0, 0.5, 0.0)
    after = (-1.0, 1.5, 0.0, 1.5)
    color_effect = {"red": 0.8, "green": 0.0, "blue": -0.8}
    change = change_event("drift", n)
    for i in range(n):
        w = before if i < change else after
        temperature = 1.0 if i < (3 * n) // 4 else 0.5  # sharper odds: confident model wrong
        x = {f"x{j + 1}": rng.gauss(0.0, 1.0) for j in range(4)}
        x["color"] = rng.choice(colors)
        z = sum(wj * x[f"x{j + 1}"] for j, wj in enumerate(w)) + color_effect[x["color"]]
        y = rng.random() < _sigmoid(z / temperature)
        yield x, y


_PHISHING_INTS = ("age_of_domain", "ip_in_url")


def _phishing() -> list[tuple[dict, bool]]:
    """river's ``datasets.Phishing``, read straight from its CSV file: importing
    ``river.datasets`` costs seconds (it pulls in scikit-learn), the file milliseconds."""
    import csv
    import gzip
    import importlib.util

    spec = importlib.util.find_spec("river")
    path = Path(spec.submodule_search_locations[0]) / "datasets" / "phishing.csv.gz"
    with gzip.open(path, "rt", newline="") as f:
        rows = list(csv.DictReader(f))
    data = []
    for row in rows:
        y = row.pop("is_phishing") == "1"
        x = {k: int(v) if k in _PHISHING_INTS else float(v) for k, v in row.items()}
        data.append((x, y))
    return data


def load_dataset(name: str, events: int | None, rng: random.Random) -> list[tuple[dict, bool]]:
    """``events`` examples ``(features, label)`` of ``phishing`` (river's bundled data set,
    1250 examples, shuffled by ``rng`` so the stream is exchangeable) or ``drift``.

    >>> len(load_dataset("phishing", 10, random.Random(0)))
    10
    """
    if name not in DATASETS:
        raise ValueError(f"dataset must be one of {', '.join(DATASETS)}; got {name!r}")
    n = DEFAULT_EVENTS[name] if events is None else events
    if n < 1:
        raise ValueError(f"events must be >= 1, got {n}")
    if name == "drift":
        return list(_drift_stream(n, rng))
    data = _phishing()
    if n > len(data):
        raise ValueError(f"the phishing data set has {len(data)} examples; asked for {n}")
    rng.shuffle(data)
    return data[:n]
