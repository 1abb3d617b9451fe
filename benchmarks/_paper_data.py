"""The paper's UCI datasets that ship with Debian's ``weka`` package, loaded as numpy arrays.

Vovk & Petej (2014) use nine UCI datasets; five of them are in
``/usr/share/doc/weka/examples`` (Debian package ``weka``), the others are not available
offline here. Getting the files without installing Java::

    apt-get update && apt-get download weka && dpkg -x weka_*.deb /tmp/weka
    # then: --data-dir /tmp/weka/usr/share/doc/weka/examples

Encoding (documented in docs/paper.md):

- the class is the last attribute; label 1 is its *last* declared value
  (breast: recurrence-events, diabetes: tested_positive, ionosphere: g, labor: good,
  vote: republican). Log loss, square loss, PAVA and both merges are symmetric under
  swapping the labels, so the choice only matters for DIR's tie-breaking.
- a nominal attribute becomes one 0/1 column per declared value, plus a "missing" column
  when the attribute has missing values (in ``vote`` a missing value means "did not vote",
  which is informative, so it gets its own indicator rather than an imputed value);
- a missing numeric value becomes the column mean over the whole dataset (labels are not
  used, so this is a legitimate unsupervised, transductive step).
"""

from __future__ import annotations

import gzip
import io
import os
from functools import cache
from pathlib import Path

import numpy as np

DATASETS = {
    # our name: (arff file stem, the paper's row name)
    "breast": ("breast-cancer", "Breast"),
    "diabetes": ("diabetes", "Diabetes"),
    "ionosphere": ("ionosphere", "Ionosphere"),
    "labor": ("labor", "Labor"),
    "vote": ("vote", "Vote"),
}
"""The five of the paper's nine datasets we have; Australian, Echo, Hepatitis, Liver are missing."""

DEFAULT_DATA_DIR = "/usr/share/doc/weka/examples"
ENV_VAR = "STREAMCAL_PAPER_DATA"

INSTALL_HINT = f"""the paper's datasets were not found.
They ship with the Debian package `weka` (no Java needed just to get the files):
    apt-get update && apt-get download weka && dpkg -x weka_*.deb /tmp/weka
then pass --data-dir /tmp/weka/usr/share/doc/weka/examples
(or set {ENV_VAR}; or `apt-get install weka`, which puts them in {DEFAULT_DATA_DIR})."""


class DataMissing(RuntimeError):
    """A dataset file is not where we looked; the message says how to get it."""


def data_dir(explicit: str | None = None) -> Path:
    """The directory holding the .arff files: explicit > $STREAMCAL_PAPER_DATA > Debian's."""
    return Path(explicit or os.environ.get(ENV_VAR) or DEFAULT_DATA_DIR)


def find_file(name: str, directory: Path) -> Path:
    """Path of ``<stem>.arff`` or ``<stem>.arff.gz`` for a dataset; ``DataMissing`` if neither."""
    stem = DATASETS[name][0]
    for candidate in (directory / f"{stem}.arff", directory / f"{stem}.arff.gz"):
        if candidate.is_file():
            return candidate
    raise DataMissing(f"{stem}.arff(.gz) not in {directory}: {INSTALL_HINT}")


def _read_arff(path: Path):
    from scipy.io import arff

    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    return arff.loadarff(io.StringIO(raw.decode("utf-8", errors="replace")))


def encode(data, meta) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(X float64, y int64, column names) from scipy's arff records; see the module docstring."""
    names = meta.names()
    *features, target = names
    kind, classes = meta[target]
    if kind != "nominal" or len(classes) != 2:
        raise ValueError(f"class attribute {target!r} is not binary nominal: {classes}")
    raw_y = np.array([v.decode() for v in data[target]])
    if np.any(raw_y == "?"):
        raise ValueError("missing class labels")
    y = (raw_y == classes[1]).astype(np.int64)
    columns: list[np.ndarray] = []
    colnames: list[str] = []
    for name in features:
        kind, values = meta[name]
        if kind == "numeric":
            col = np.asarray(data[name], dtype=float)
            missing = np.isnan(col)
            if missing.all():
                continue
            col[missing] = col[~missing].mean()
            columns.append(col)
            colnames.append(name)
        else:
            col = np.array([v.decode() for v in data[name]])
            for value in values:
                columns.append((col == value).astype(float))
                colnames.append(f"{name}={value}")
            if np.any(col == "?"):
                columns.append((col == "?").astype(float))
                colnames.append(f"{name}=?")
    return np.column_stack(columns), y, colnames


@cache
def load(name: str, directory: str | None = None) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """Load one dataset by our short name: (X, y, column names). Cached per process."""
    path = find_file(name, data_dir(directory))
    X, y, cols = encode(*_read_arff(path))
    return X, y, tuple(cols)
