"""Errors that say where (issue 29, item 5): a storage error names the file or directory
and what to do; a TLS or SASL set-up that cannot work is told within seconds, naming the
setting to check (``streamcal.stream.kafka.preflight``), instead of kafka-python's bare
"Unable to bootstrap" after 30 s.

The set-up probe is tested against small fake brokers here (no broker needed), and
against tansu (plaintext, TLS, and SASL with ``--authentication``) in the kafka tests."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import threading
import time

import pytest

from streamcal.cli import main
from streamcal.stream.kafka.preflight import SetupError, Unreachable, check_broker, reach_broker
from streamcal.stream.state.checkpoint import CheckpointStore
from streamcal.stream.state.kv import KVStore, StoreError
from tests._helpers import CHECKPOINT_KEY, error_of


# ---------------------------------------------------------------- storage
@pytest.mark.parametrize("scope", ["global", "partition"])
def test_a_state_dir_that_cannot_be_made_is_named_at_start(scope, tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("STREAMCAL_CHECKPOINT_KEY", CHECKPOINT_KEY)
    argv = ["run", "--bootstrap-servers", "127.0.0.1:1", "--scope", scope,
            "--state-dir", str(blocker / "state")]  # fmt: skip
    assert main(argv) == 2
    err = error_of(capsys.readouterr().err)
    assert str(blocker / "state") in err and "give another --state-dir" in err


class _FullDisk:
    """A RocksDB handle whose writes fail as on a full disk (and then its close too)."""

    def __init__(self, db):
        self.db = db

    def write(self, batch, opts):
        raise Exception("IO error: No space left on device: While appending to file: 000004.log")

    def close(self):
        self.db.close()
        raise Exception("IO error: Writer has previous error.")

    def get(self, key):
        return self.db.get(key)


def test_a_full_disk_at_a_commit_names_the_store_and_closing_does_not_hide_it(tmp_path):
    store = KVStore(tmp_path / "store")
    store._db = _FullDisk(store._db)
    store.put(b"a", b"1")
    with pytest.raises(StoreError) as exc:
        store.commit()
    assert str(tmp_path / "store") in str(exc.value)
    assert "free space on its disk or give another --state-dir" in str(exc.value)
    store.close()  # no second error over the first


def test_checkpoint_files_on_a_bad_directory_are_named(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    store = CheckpointStore(blocker / "ckpt", key=b"k" * 32)
    with pytest.raises(StoreError, match=r"cannot write a checkpoint in '.*a-file/ckpt'"):
        store.save({"x": 1})


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_disk_under_the_metrics_file_names_it():
    from streamcal.stream.metrics import _MetricsFile

    out = _MetricsFile("/dev/full")
    with pytest.raises(OSError, match="cannot write the metric log '/dev/full'.*--metrics-file"):
        out.write("{}\n")
        out.flush()


# ---------------------------------------------------------------- set-up: fake brokers
class FakeBroker:
    """Accepts connections on a loopback port; ``answer(api_key, version, body)`` gives
    the response body for each request (None: close the connection, b"": say nothing,
    ``RAW + bytes``: send those bytes as they are)."""

    RAW = b"\x00raw:"

    def __init__(self, answer):
        self.answer = answer
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.requests: list[int] = []
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def bootstrap(self) -> list[str]:
        return [f"127.0.0.1:{self.port}"]

    def _serve(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                try:
                    self._talk(conn)
                except OSError:  # the client gave up first
                    pass

    def _talk(self, conn):
        while True:
            head = conn.recv(4)
            if len(head) < 4:
                return
            (n,) = struct.unpack(">i", head)
            data = b""
            while len(data) < n:
                chunk = conn.recv(n - len(data))
                if not chunk:
                    return
                data += chunk
            api, version, corr, k = struct.unpack_from(">hhih", data)
            self.requests.append(api)
            body = self.answer(api, version, data[10 + k :])
            if body is None:
                return
            if body.startswith(self.RAW):
                conn.sendall(body[len(self.RAW) :])
            elif body:
                out = struct.pack(">i", corr) + body
                conn.sendall(struct.pack(">i", len(out)) + out)

    def close(self):
        self.server.close()


def _strings(*names: str) -> bytes:
    out = struct.pack(">i", len(names))
    for n in names:
        out += struct.pack(">h", len(n)) + n.encode()
    return out


def sasl_plain_broker(offered=("PLAIN",)):
    """ApiVersions, SaslHandshake (offering ``offered``) and SaslAuthenticate of PLAIN
    for alice/secret."""

    def answer(api, version, body):
        if api == 18:
            return struct.pack(">hi", 0, 0)
        if api == 17:
            (k,) = struct.unpack_from(">h", body)
            asked = body[2 : 2 + k].decode()
            return struct.pack(">h", 0 if asked in offered else 33) + _strings(*offered)
        if api == 36:
            (n,) = struct.unpack_from(">i", body)
            if body[4 : 4 + n] == b"alice\x00alice\x00secret":
                return struct.pack(">hhi", 0, -1, 0)
            msg = b"Authentication failed: invalid credentials"
            return struct.pack(">hh", 58, len(msg)) + msg + struct.pack(">i", 0)
        return None

    return FakeBroker(answer)


def sasl(mechanism="PLAIN", user="alice", password="secret"):
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
            "sasl_plain_username": user, "sasl_plain_password": password}  # fmt: skip


def test_sasl_plain_with_the_right_password_passes():
    broker = sasl_plain_broker()
    try:
        assert check_broker({"bootstrap_servers": broker.bootstrap, **sasl()}) is True
        assert broker.requests == [18, 17, 36]
    finally:
        broker.close()


def test_a_wrong_sasl_password_names_the_settings_and_the_broker_s_words():
    broker = sasl_plain_broker()
    try:
        with pytest.raises(SetupError) as exc:
            check_broker({"bootstrap_servers": broker.bootstrap, **sasl(password="oops")})
        msg = str(exc.value)
        assert "SASL authentication as 'alice' with PLAIN" in msg
        assert "invalid credentials" in msg and "check --sasl-username and --sasl-password" in msg
    finally:
        broker.close()


def test_a_mechanism_the_broker_does_not_offer_is_named_with_those_it_does():
    broker = sasl_plain_broker(offered=("SCRAM-SHA-512",))
    try:
        with pytest.raises(SetupError, match=r"does not offer SASL mechanism PLAIN \(it offers "
                                             r"SCRAM-SHA-512\): check --sasl-mechanism"):
            check_broker({"bootstrap_servers": broker.bootstrap, **sasl()})
    finally:
        broker.close()


@pytest.mark.parametrize(
    "reply, words",
    [(b"", "did not answer a plaintext Kafka request"),
     (FakeBroker.RAW + b"\x15\x03\x03\x00\x02\x02\x32", "answered with TLS a plaintext")],
)  # fmt: skip
def test_a_plaintext_client_at_a_tls_listener_is_told_to_check_the_protocol(reply, words):
    broker = FakeBroker(lambda api, version, body: reply)
    try:
        t = time.monotonic()
        with pytest.raises(SetupError) as exc:
            check_broker({"bootstrap_servers": broker.bootstrap, "security_protocol": "PLAINTEXT"},
                         timeout=0.5)  # fmt: skip
        assert time.monotonic() - t < 3
        assert words in str(exc.value) and "check --security-protocol" in str(exc.value)
    finally:
        broker.close()


def test_a_broker_that_requires_sasl_is_told_to_a_plaintext_client():
    broker = FakeBroker(lambda api, version, body: struct.pack(">hi", 0, 0) if api == 18 else None)
    try:
        with pytest.raises(SetupError, match="does it require SASL"):
            check_broker({"bootstrap_servers": broker.bootstrap, "security_protocol": "PLAINTEXT"})
    finally:
        broker.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed once the block ends: nobody listens there


def test_an_unreachable_broker_is_told_by_check_broker_with_its_cause():
    port, causes = _closed_port(), {}
    assert check_broker({"bootstrap_servers": [f"127.0.0.1:{port}"]}, causes=causes) is False
    assert causes == {f"127.0.0.1:{port}": "connection refused"}


def test_no_broker_answering_is_one_line_naming_each_address_and_why():
    port = _closed_port()
    servers = [f"127.0.0.1:{port}", "nohost.invalid:9092", "127.0.0.1:x"]
    with pytest.raises(Unreachable) as exc:
        reach_broker({"bootstrap_servers": servers}, wait=0)
    assert str(exc.value) == (
        f"no Kafka broker answered at 127.0.0.1:{port} (connection refused), "
        "nohost.invalid:9092 (unknown host), 127.0.0.1:x (not host:port) within 0 s"
    )
    assert exc.value.exit_status == 1 and not exc.value.client_words


def test_reach_broker_waits_for_a_broker_saying_so_once(caplog):
    port = _closed_port()
    t = time.monotonic()
    with caplog.at_level("INFO"), pytest.raises(Unreachable, match="within 1.5 s$"):
        reach_broker({"bootstrap_servers": [f"127.0.0.1:{port}"]}, wait=1.5)
    assert 1.5 <= time.monotonic() - t < 5
    said = [r for r in caplog.records if r.name.startswith("streamcal")]
    assert [r.levelname for r in said] == ["WARNING"]
    assert f"127.0.0.1:{port} (connection refused) yet" in said[0].getMessage()


def test_a_client_certificate_that_cannot_be_loaded_is_named(tmp_path):
    broker = FakeBroker(lambda api, version, body: b"")
    bad = tmp_path / "client.pem"
    bad.write_text("not a certificate")
    try:
        with pytest.raises(SetupError, match="--ssl-certfile .*client.pem"):
            check_broker({"bootstrap_servers": broker.bootstrap, "security_protocol": "SSL",
                          "ssl_certfile": str(bad), "ssl_keyfile": str(bad)})  # fmt: skip
    finally:
        broker.close()


# ---------------------------------------------------------------- set-up: tansu
@pytest.mark.kafka
@pytest.mark.slow  # a TLS client at a plaintext listener waits the probe's 5 s
def test_tls_set_ups_that_cannot_work_are_told_within_seconds(kafka_broker, tls_broker):
    tls, plain = [tls_broker.bootstrap_servers], [kafka_broker]
    cases = [
        ({"bootstrap_servers": tls, "security_protocol": "PLAINTEXT"}, "check --security-protocol"),
        ({"bootstrap_servers": tls, "security_protocol": "SSL"}, "check --ssl-cafile"),
        ({"bootstrap_servers": plain, "security_protocol": "SSL", "ssl_cafile": tls_broker.cert},
         "no TLS handshake"),
    ]  # fmt: skip
    for settings, words in cases:
        t = time.monotonic()
        with pytest.raises(SetupError, match=words):
            check_broker(settings)
        assert time.monotonic() - t < 10
    ok = {"bootstrap_servers": tls, "security_protocol": "SSL", "ssl_cafile": tls_broker.cert}
    assert check_broker(ok) and check_broker({"bootstrap_servers": plain})


@pytest.mark.kafka
def test_a_certificate_for_another_host_names_the_host_setting(tls_broker, tmp_path):
    # the broker's certificate is for 127.0.0.1 and localhost; reach it by another name
    host = socket.gethostname()
    port = tls_broker.bootstrap_servers.rsplit(":", 1)[1]
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
    except OSError:
        pytest.skip(f"the broker is not reachable as {host!r}")
    with pytest.raises(SetupError, match=rf"not for '{host}'.*--no-ssl-check-hostname"):
        check_broker({"bootstrap_servers": [f"{host}:{port}"], "security_protocol": "SSL",
                      "ssl_cafile": tls_broker.cert})  # fmt: skip


@pytest.mark.kafka
@pytest.mark.slow
def test_streamcal_run_at_a_tls_listener_without_tls_exits_2_within_seconds(tls_broker, capsys):
    t = time.monotonic()
    argv = ["run", "--bootstrap-servers", tls_broker.bootstrap_servers, "--max-idle-s", "1",
            "--metrics-file", "none"]  # fmt: skip
    assert main(argv) == 2
    assert time.monotonic() - t < 15
    err = capsys.readouterr().err
    assert "check --security-protocol" in err and "Unable to bootstrap" not in err


@pytest.mark.kafka
def test_scram_credentials_a_broker_does_not_know_are_told(tmp_path):
    """tansu with --authentication (SCRAM): a user it does not know."""
    from streamcal.demo.broker import find_tansu, free_port

    try:
        binary = find_tansu()
    except Exception as exc:  # noqa: BLE001 - no tansu: skip as the fixtures do
        pytest.skip(str(exc))
    port = free_port("127.0.0.1")
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/", "--authentication"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("tansu did not start")
                time.sleep(0.1)
        bootstrap = [f"127.0.0.1:{port}"]
        with pytest.raises(SetupError, match=r"SASL authentication as 'alice' with "
                                             r"SCRAM-SHA-512 .*check --sasl-username"):
            check_broker({"bootstrap_servers": bootstrap, **sasl("SCRAM-SHA-512")})
        with pytest.raises(SetupError, match="does it require SASL"):
            check_broker({"bootstrap_servers": bootstrap, "security_protocol": "PLAINTEXT"})
    finally:
        proc.terminate()
        proc.wait(10)

