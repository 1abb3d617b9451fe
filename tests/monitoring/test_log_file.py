"""A log appended to after its writer was killed mid-line: the fragment is dropped, so
every line stays JSON for its readers (``streamcal report``)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcal import MetricLogWriter
from streamcal.learner import VennAbersInterval
from streamcal.monitoring import log_file, read_metric_log
from streamcal.monitoring.log_file import open_for_append

line = st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"") + b"\n")
fragment = st.binary(max_size=40).map(lambda b: b.replace(b"\n", b""))


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(line, max_size=6), cut=fragment, chunk=st.integers(1, 50))
def test_only_the_last_line_without_its_newline_is_dropped(tmp_path_factory, lines, cut, chunk):
    path = tmp_path_factory.mktemp("log") / "log.jsonl"
    path.write_bytes(b"".join(lines) + cut)
    # chunk: read backwards in pieces smaller than the lines, the fragment, or larger
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(log_file, "_CHUNK", chunk)
        with open_for_append(path) as fh:
            fh.write(b"new\n")
    assert path.read_bytes() == b"".join(lines) + b"new\n"


def test_a_missing_file_is_created(tmp_path):
    with open_for_append(tmp_path / "m.jsonl") as fh:
        fh.write(b"{}\n")
    assert (tmp_path / "m.jsonl").read_bytes() == b"{}\n"


def _write(path, append=False) -> None:
    with MetricLogWriter(path, every=1, append=append) as log:
        for y in (0, 1):
            log.update(VennAbersInterval(p0=0.2, p1=0.6, p=0.43, score=0.7), y)


def _torn_log(path) -> bytes:
    """A metric log, then the start of one more line cut off (a writer killed mid-line);
    returns the whole lines. Appended to as it is, it cannot be read."""
    _write(path)
    whole = path.read_bytes()
    torn = whole + whole[:37]
    path.write_bytes(torn)
    with open(path, "ab") as fh:
        fh.write(whole)
    with pytest.raises(ValueError, match="line"):
        read_metric_log(path)
    path.write_bytes(torn)
    return whole


def test_the_library_writer_appends_after_a_torn_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    whole = _torn_log(path)
    _write(path, append=True)
    assert path.read_bytes() == whole + whole
    assert len(read_metric_log(path)) == 2 * len(whole.splitlines())


def test_the_processors_metrics_file_appends_after_a_torn_line(tmp_path):
    from streamcal.stream.metrics import _MetricsFile

    path = tmp_path / "metrics.jsonl"
    whole = _torn_log(path)
    out = _MetricsFile(str(path))
    out.write(whole.decode())
    out.close()
    assert path.read_bytes() == whole + whole
    assert len(read_metric_log(path)) == 2 * len(whole.splitlines())
