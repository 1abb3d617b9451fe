"""Appending to a JSON-lines log that a killed writer may have left with its last line cut
off.

A process killed (kill -9, a crash, the machine) while it wrote a line leaves a fragment
without its newline at the end of the file. Appended to as it is, the fragment and the
next writer's first line make one line that is not JSON, and every reader of the log
(``streamcal report``) stops there. So a log opened to be appended to loses that fragment
first: the line it was is lost either way, and a restarted processor writes its lines again
from its last checkpoint.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "metrics.jsonl"
>>> _ = path.write_bytes(b'{"labels": 1}\\n{"labels": 2, "log_lo')
>>> with open_for_append(path) as fh:
...     _ = fh.write(b'{"labels": 2}\\n')
>>> path.read_bytes()
b'{"labels": 1}\\n{"labels": 2}\\n'
"""

from __future__ import annotations

import os
from typing import BinaryIO

__all__ = ["open_for_append"]

_CHUNK = 1 << 16


def open_for_append(path) -> BinaryIO:
    """``path`` opened to append bytes (created if missing), its last line cut to its last
    newline if it has none."""
    fh = open(path, "a+b")  # noqa: SIM115 - the caller closes it
    try:
        end = fh.seek(0, os.SEEK_END)
        keep, pos = 0, end
        while pos > 0:  # backwards, a chunk at a time: a log can be large
            start = max(0, pos - _CHUNK)
            fh.seek(start)
            newline = fh.read(pos - start).rfind(b"\n")
            if newline >= 0:
                keep = start + newline + 1
                break
            pos = start
        if keep != end:
            fh.truncate(keep)
    except BaseException:
        fh.close()
        raise
    return fh
