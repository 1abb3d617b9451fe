"""Helpers shared by the tests: waiting for a condition, running ``streamcal run`` as a
subprocess (tests reach it through the ``streamcal_run`` fixture in conftest.py, which also
kills what a failed test left running), and hypothesis example counts."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import hypothesis
import pytest

CHECKPOINT_KEY = "test-checkpoint-key-0123456789"  # STREAMCAL_CHECKPOINT_KEY of the tests
BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def error_of(stderr: str, whole: bool = True) -> str:
    """The error line a command ended with in ``stderr``, once its shape is asserted: the
    last two lines are ``streamcal CMD: error: ...`` and its ``  what to do: ...``;
    ``whole``: nothing else was printed."""
    lines = stderr.strip().splitlines()
    assert len(lines) >= 2 and not (whole and len(lines) > 2), stderr
    error, todo = lines[-2:]
    assert error.startswith("streamcal ") and ": error: " in error, stderr
    assert todo.startswith("  what to do: "), stderr
    return error


def load_benchmark(name: str):
    """The module of ``benchmarks/<name>.py``, loaded from its path: benchmarks/ on sys.path
    would shadow kafka-python (benchmarks/kafka.py)."""
    spec = importlib.util.spec_from_file_location(f"{name}_bench", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The inner loop (pytest -m "not slow ...") runs hypothesis tests with at most this many
# examples (conftest.py loads the "fast" profile); other runs use the counts as written.
FAST_EXAMPLES = 20
# No deadline anywhere: a deadline is a wall-clock bound, and the suite runs on 2 loaded
# cores (a merge test took 268 ms against the default 200 ms); speed is the benchmarks'.
hypothesis.settings.register_profile("streamcal", deadline=None)
hypothesis.settings.register_profile("fast", parent=hypothesis.settings.get_profile("streamcal"),
                                     max_examples=FAST_EXAMPLES)  # fmt: skip
hypothesis.settings.load_profile("streamcal")


def examples(n: int) -> int:
    """``n``, or at most FAST_EXAMPLES under the "fast" profile: the ``max_examples`` of a
    test that sets its own (a profile sets only the default)."""
    fast = hypothesis.settings.default is hypothesis.settings.get_profile("fast")
    return min(n, FAST_EXAMPLES) if fast else n


def wait_until(predicate, timeout: float, what: str, interval: float = 0.05):
    """Call ``predicate`` until it returns something true, and return that; raise
    TimeoutError naming ``what`` after ``timeout`` seconds. A predicate may raise (e.g.
    assert that a process is still running) to stop waiting at once.

    >>> wait_until(lambda: 42, 1, "the answer")
    42
    >>> wait_until(lambda: False, 0.1, "nothing", interval=0.01)
    Traceback (most recent call last):
    TimeoutError: timed out after 0.1 s waiting for nothing
    """
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def log_records(path) -> list[dict]:
    """The records a `streamcal run --log-format json` wrote to ``path`` so far: complete
    lines only (it may be writing the last one), and only JSON ones (a traceback is not).

    >>> import pathlib, tempfile
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "log.txt"
    >>> _ = p.write_text('{"event": "adopted", "units": [0, 1]}\\nTraceback\\n{"event": "rel')
    >>> log_records(p)
    [{'event': 'adopted', 'units': [0, 1]}]
    """
    import orjson

    try:
        text = open(path, "rb").read()
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines(keepends=True):
        if line.startswith(b"{") and line.endswith(b"\n"):
            try:
                out.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                pass  # not a log record (output of another kind that starts with "{")
    return out


def held_units(path) -> set:
    """The units an instance holds now, from the "adopted" and "released" records of its
    JSON log (``path``)."""
    held: set = set()
    for r in log_records(path):
        if r.get("event") == "adopted":
            held |= set(r["units"])
        elif r.get("event") == "released":
            held -= set(r["units"])
    return held


def streamcal_run_args(settings: dict, *extra: str) -> list[str]:
    """The command line of ``streamcal run`` with ``settings`` as flags (a bool as
    ``--name`` or ``--no-name``), then ``extra``.

    >>> streamcal_run_args({"group_id": "g", "window": 5, "global_lock": False}, "-x")[4:]
    ['--group-id', 'g', '--window', '5', '--no-global-lock', '-x']
    """
    args = [sys.executable, "-m", "streamcal", "run"]
    for name, value in settings.items():
        flag = name.replace("_", "-")
        if isinstance(value, bool):
            args.append(f"--{flag}" if value else f"--no-{flag}")
        else:
            args += [f"--{flag}", str(value)]
    return args + list(extra)


def checkpoint_env(**extra: str) -> dict:
    """This process's environment with the tests' checkpoint key (and ``extra``)."""
    return {**os.environ, "STREAMCAL_CHECKPOINT_KEY": CHECKPOINT_KEY, **extra}


class StreamcalRun:
    """Starts ``streamcal run`` subprocesses (environment: :func:`checkpoint_env` unless
    ``env`` is given) and kills those still running at :meth:`close`."""

    def __init__(self):
        self._started: list[subprocess.Popen] = []

    def popen(self, settings: dict, *extra: str, env=None, **kw) -> subprocess.Popen:
        proc = subprocess.Popen(
            streamcal_run_args(settings, *extra), env=env or checkpoint_env(), **kw
        )
        self._started.append(proc)
        return proc

    def run(self, settings: dict, *extra: str, env=None, timeout: float = 300):
        """Run to the end; a CompletedProcess with the output captured (bytes). The timeout
        only stops a hang: a 12,000-event run took over 120 s on a loaded 2-core machine."""
        return subprocess.run(
            streamcal_run_args(settings, *extra), env=env or checkpoint_env(),
            capture_output=True, timeout=timeout,
        )  # fmt: skip

    def close(self) -> None:
        for proc in self._started:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def make_self_signed_cert(directory) -> tuple[str, str]:
    """(cert, key) PEM paths of a self-signed certificate for 127.0.0.1 and localhost."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True,
    )  # fmt: skip
    return str(cert), str(key)


def full_state(unit) -> dict:
    """A unit's whole state as plain data, for round trips in memory: its snapshot with
    every entry of its store (committed or not) as ``entries``, which ``resume`` puts into
    the new unit's store (``from_state`` reads no such key)."""
    return {**unit.to_state(), "entries": unit.store.items(b"", b"\xff")}


def resume(state: dict, **deps):
    """The unit of a ``full_state``: ``CalibrationUnit.from_state`` with its entries
    committed to a new store first, as a checkpoint leaves them."""
    from streamcal.stream.state.kv import KVStore
    from streamcal.stream.unit import CalibrationUnit

    store = KVStore()
    for k, v in state["entries"]:
        store.put(k, v)
    store.commit()
    try:
        return CalibrationUnit.from_state(state, store=store, **deps)
    except BaseException:
        store.close()
        raise


def stored(state_dir, unit=None) -> tuple:
    """``(sealed snapshot, every entry)`` of a unit's state store in ``state_dir`` (the
    global unit's, or partition ``unit``'s): what a checkpoint left there."""
    from pathlib import Path

    from streamcal.stream.state.kv import KVStore
    from streamcal.stream.state.units import SNAPSHOT

    path = Path(state_dir) / ("store" if unit is None else f"unit-{unit}/store")
    store = KVStore(path)
    try:
        return store.get(SNAPSHOT), store.items(b"", b"\xff")
    finally:
        store.close()


def stored_state(state_dir, unit=None) -> dict:
    """The unit's state (plain data, authenticated with the tests' key) in ``state_dir``."""
    from streamcal.stream.state.checkpoint import unseal

    return unseal(CHECKPOINT_KEY.encode(), stored(state_dir, unit)[0], "the test's read")


def assert_bad_label_dead_lettered(unit, sent: list, label, reason: str) -> None:
    """The label ``label`` of the waiting event "bad" becomes one dead letter with
    ``reason`` (``sent``: what ``unit`` sent, as (topic, JSON)), the unit's state as it was
    but for that count, the event still waiting."""
    import pickle

    import orjson

    from streamcal.stream.pending import EVENT
    from tests._fakes import Record

    before = pickle.dumps({k: v for k, v in full_state(unit).items() if k != "offsets"})
    sent.clear()
    unit.on_label(Record("lab", 0, 999, 5000, b"bad", orjson.dumps({"id": "bad", "label": label})))
    after = full_state(unit)
    assert [(t, m["reason"]) for t, m in sent] == [("streamcal.dead-letters", reason)]
    after["counts"]["dead_letters"] -= 1
    assert pickle.dumps({k: v for k, v in after.items() if k != "offsets"}) == before
    assert unit.pending.lookup("bad")[0] == EVENT  # still waits for a good label
