"""A wrong broker address, as a user meets it: ``streamcal run`` at a closed loopback port
ends, with either Kafka client, in one line naming the address and the cause and one
saying what to do, exit status 1 (``BrokerError``), after one line that it waits; no
client retry lines, no traceback, no exception inside another's repr.

Slow: it waits the 30 s a broker has to answer (no setting shortens it)."""

from __future__ import annotations

import re
import socket
import time

import pytest

from streamcal.errors import BrokerError

pytestmark = pytest.mark.slow


def test_streamcal_run_without_a_broker_ends_in_one_clear_line(kafka_client, streamcal_run,
                                                               tmp_path):  # fmt: skip
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        where = f"127.0.0.1:{s.getsockname()[1]}"  # closed once the block ends
    settings = {"kafka_client": kafka_client, "bootstrap_servers": where, "max_idle_s": 1,
                "state_dir": tmp_path / "state", "metrics_file": "none"}  # fmt: skip
    t = time.monotonic()
    done = streamcal_run.run(settings, timeout=120)
    took = time.monotonic() - t
    err = done.stderr.decode()
    assert done.returncode == BrokerError.exit_status == 1, err
    lines = err.strip().splitlines()
    assert lines[-2:] == [
        f"streamcal run: error: no Kafka broker answered at {where} (connection refused) "
        "within 30 s",
        f"  what to do: {BrokerError.what_to_do}",
    ], err
    # what came before: the one line that it waits, nothing from the clients
    assert len(lines) == 3 and "no Kafka broker answers at" in lines[0], err
    assert "Traceback" not in err and not re.search(r"[A-Za-z]+\(['\"]", err), err
    assert 30 <= took < 90, took
