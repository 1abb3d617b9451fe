"""Helpers shared by the tests: waiting for a condition, and running ``streamcal run`` as a
subprocess (tests reach the latter through the ``streamcal_run`` fixture in conftest.py,
which also kills what a failed test left running)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

CHECKPOINT_KEY = "test-checkpoint-key-0123456789"  # STREAMCAL_CHECKPOINT_KEY of the tests


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


def streamcal_run_args(settings: dict, *extra: str) -> list[str]:
    """The command line of ``streamcal run`` with ``settings`` as flags, then ``extra``.

    >>> streamcal_run_args({"group_id": "g", "window": 5}, "--max-idle-s", "1")[4:]
    ['--group-id', 'g', '--window', '5', '--max-idle-s', '1']
    """
    args = [sys.executable, "-m", "streamcal", "run"]
    for name, value in settings.items():
        args += ["--" + name.replace("_", "-"), str(value)]
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

    def run(self, settings: dict, *extra: str, env=None, timeout: float = 120):
        """Run to the end; a CompletedProcess with the output captured (bytes)."""
        return subprocess.run(
            streamcal_run_args(settings, *extra), env=env or checkpoint_env(),
            capture_output=True, timeout=timeout,
        )  # fmt: skip

    def close(self) -> None:
        for proc in self._started:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
