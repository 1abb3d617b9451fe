"""A first look at the broker before the Kafka clients start: a TLS or SASL set-up that
cannot work is told within seconds, naming the setting to check.

kafka-python retries whatever fails while it connects: a plaintext client at a TLS
listener, an untrusted certificate, a wrong SASL password all end, after its 30 s, in a
bare "Unable to bootstrap"; a TLS client at a plaintext listener can even wait forever
(the broker reads the TLS hello as the head of a 350 MB request). ``check_broker`` opens
one connection to the first bootstrap server that accepts one and goes through the
set-up the clients will: the TLS handshake with their settings (``--ssl-*``), one Kafka
request (ApiVersions), then the SASL handshake and, for PLAIN and SCRAM, the
authentication (``--sasl-*``); without SASL, a Metadata request, which a broker that
requires SASL refuses. The first step that fails raises ``SetupError`` naming the
setting to check.

``reach_broker`` is the processor's way in: while no bootstrap server accepts a
connection it tries again (the broker may be starting), saying so once, for ``WAIT``
seconds, as long as kafka-python waits to bootstrap; then ``Unreachable`` names the
addresses tried and why each failed. The clients are not started before a broker
answers, so neither client's retry lines (one per failed attempt) are seen, and both
clients end alike.

Requests are written by hand (request header v1, the oldest versions of ApiVersions,
Metadata, SaslHandshake and SaslAuthenticate, which every broker still answers); SASL's
exchanges are kafka-python's own mechanisms.
"""

from __future__ import annotations

import logging
import socket
import ssl
import struct
import time

from streamcal.errors import BrokerError, ConfigurationError

__all__ = ["SetupError", "Unreachable", "check_broker", "reach_broker"]

log = logging.getLogger(__name__)

TIMEOUT = 5.0  # seconds per step: a broker that answers does so in milliseconds
WAIT = 30.0  # seconds for a first answer: kafka-python's own wait to bootstrap

_API_VERSIONS, _METADATA, _SASL_HANDSHAKE, _SASL_AUTHENTICATE = 18, 3, 17, 36
_UNSUPPORTED_SASL_MECHANISM = 33
_CREDENTIALS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")  # whose exchange is checked here
_TLS_RECORDS = (0x14, 0x15, 0x16, 0x17)  # the first byte of a TLS record (alert: 0x15)


class SetupError(ConfigurationError, ValueError):
    """The broker refuses the clients' security set-up: the message names the setting
    to check."""


class Unreachable(BrokerError, ConnectionError):
    """No bootstrap server accepted a connection in time: the message, in streamcal's
    words, names each address and why."""

    client_words = False


def check_broker(settings: dict, timeout: float = TIMEOUT, causes: dict | None = None) -> bool:
    """Go through the clients' set-up (``kafka_client_settings``) with the first bootstrap
    server that accepts a connection: True once it has, False if none accepted one (and
    ``causes``, if given, gets each address's reason); ``SetupError`` at the first step
    that fails."""
    for server in settings["bootstrap_servers"]:
        where = server.strip()
        try:
            host, port = _address(where)
            sock = socket.create_connection((host, port), timeout=timeout)
        except (OSError, ValueError) as exc:
            if causes is not None:
                causes[where] = _cause(exc)
            continue
        with sock:
            _Probe(sock, host, where, settings, timeout).run()
        return True
    return False


def reach_broker(settings: dict, wait: float = WAIT, timeout: float = TIMEOUT) -> None:
    """``check_broker``, tried again while no bootstrap server accepts a connection, for
    up to ``wait`` seconds; then ``Unreachable``.

    >>> try:
    ...     reach_broker({"bootstrap_servers": ["127.0.0.1:1"]}, wait=0)
    ... except Unreachable as exc:
    ...     print(exc)
    no Kafka broker answered at 127.0.0.1:1 (connection refused) within 0 s
    """
    deadline = time.monotonic() + wait
    pause = 0.25
    while True:
        causes: dict = {}
        left = deadline - time.monotonic()
        if check_broker(settings, max(0.1, min(timeout, left)), causes):
            return
        tried = _tried(causes)
        if left <= 0:
            raise Unreachable(f"no Kafka broker answered at {tried} within {wait:g} s")
        if pause == 0.25:  # once: the final error says the rest
            log.warning("no Kafka broker answers at %s yet; trying again for up to %g s",
                        tried, wait)  # fmt: skip
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(2.0, pause * 2)


def _address(server: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``) as a pair; a bare host has Kafka's port, 9092.

    >>> _address("[::1]:9093"), _address("kafka")
    (('::1', 9093), ('kafka', 9092))
    """
    host, sep, port = server.rpartition(":")
    if not sep or host.endswith(":") and not host.startswith("["):
        return server.strip("[]"), 9092
    return host.strip("[]"), int(port)


def _cause(exc: Exception) -> str:
    """Why a connection failed, in a few words.

    >>> _cause(ConnectionRefusedError(111, "Connection refused")), _cause(TimeoutError())
    ('connection refused', 'timed out')
    """
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return "unknown host"
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, ValueError):
        return "not host:port"
    return (exc.strerror or str(exc) or type(exc).__name__).lower()


def _tried(causes: dict) -> str:
    """The addresses and their reasons, one reason for all when they share it.

    >>> _tried({"a:1": "connection refused", "b:1": "connection refused"})
    'a:1, b:1 (connection refused)'
    >>> _tried({"a:1": "connection refused", "b:1": "unknown host"})
    'a:1 (connection refused), b:1 (unknown host)'
    """
    if len(set(causes.values())) == 1:
        return f"{', '.join(causes)} ({next(iter(causes.values()))})"
    return ", ".join(f"{where} ({cause})" for where, cause in causes.items())


def _string(s: str) -> bytes:
    data = s.encode()
    return struct.pack(">h", len(data)) + data


class _Probe:
    """One connection going through the set-up (see the module docstring)."""

    def __init__(self, sock, host: str, where: str, settings: dict, timeout: float):
        self.sock, self.host, self.where = sock, host, where
        self.settings, self.timeout = settings, timeout
        self.protocol = settings.get("security_protocol", "PLAINTEXT")
        self.correlation = 0
        self.tls_answer = False  # the broker answered a request with a TLS record

    def run(self) -> None:
        if "SSL" in self.protocol:
            self._tls()
        if self._request(_API_VERSIONS, 0, b"") is None:
            if "SSL" in self.protocol:
                raise SetupError(
                    f"the broker at {self.where} did not answer a Kafka request over TLS: "
                    "check --bootstrap-servers (a Kafka listener?)"
                )
            seen = "answered with TLS" if self.tls_answer else "did not answer"
            raise SetupError(
                f"the broker at {self.where} {seen} a plaintext Kafka request: does it "
                f"expect TLS? check --security-protocol (now {self.protocol}; SSL or "
                "SASL_SSL with --ssl-cafile)"
            )
        if "SASL" in self.protocol:
            self._sasl()
        elif self._request(_METADATA, 0, struct.pack(">i", 0)) is None:
            raise SetupError(
                f"the broker at {self.where} closed the connection at a Metadata request: "
                f"does it require SASL? check --security-protocol (now {self.protocol}) "
                "and --sasl-mechanism, --sasl-username, --sasl-password"
            )

    # ------------------------------------------------------------------ TLS
    def _context(self) -> ssl.SSLContext:
        """The context kafka-python builds from the same settings."""
        s = self.settings
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.check_hostname = s.get("ssl_check_hostname", True)
        try:
            if s.get("ssl_cafile"):
                ctx.load_verify_locations(s["ssl_cafile"])
            else:
                ctx.load_default_certs()
        except (ssl.SSLError, OSError) as exc:
            raise SetupError(f"cannot use --ssl-cafile {s['ssl_cafile']!r}: {exc}") from None
        if s.get("ssl_certfile"):
            try:
                ctx.load_cert_chain(s["ssl_certfile"], s.get("ssl_keyfile"))
            except (ssl.SSLError, OSError) as exc:
                raise SetupError(
                    f"cannot use the client certificate --ssl-certfile {s['ssl_certfile']!r} "
                    f"with --ssl-keyfile {s.get('ssl_keyfile')!r}: {exc}"
                ) from None
        return ctx

    def _tls(self) -> None:
        try:
            self.sock = self._context().wrap_socket(self.sock, server_hostname=self.host)
        except ssl.SSLCertVerificationError as exc:
            why = exc.verify_message or str(exc)
            if exc.verify_code == 62 or "hostname" in why.lower():  # a certificate of another host
                raise SetupError(
                    f"the TLS certificate of {self.where} is not for {self.host!r} ({why}): "
                    "check the host in --bootstrap-servers (a name the certificate "
                    "holds), or --no-ssl-check-hostname"
                ) from None
            raise SetupError(
                f"the TLS certificate of {self.where} is not trusted ({why}): check "
                "--ssl-cafile (the CA certificate that signed the broker's)"
            ) from None
        except (ssl.SSLError, OSError) as exc:  # no TLS there: a plaintext listener
            what = "no answer" if isinstance(exc, TimeoutError) else str(exc)
            raise SetupError(
                f"no TLS handshake with {self.where} ({what}): is it a plaintext listener? "
                f"check --security-protocol (now {self.protocol}; PLAINTEXT or SASL_PLAINTEXT)"
            ) from None

    # ------------------------------------------------------------------ SASL
    def _sasl(self) -> None:
        s = self.settings
        mechanism = s.get("sasl_mechanism")
        answer = self._request(_SASL_HANDSHAKE, 1, _string(mechanism))
        if answer is None:
            raise SetupError(
                f"the broker at {self.where} closed the connection at the SASL handshake "
                f"for {mechanism}: check --sasl-mechanism, and --security-protocol (now "
                f"{self.protocol}: is its listener a SASL one?)"
            )
        error, offered = _handshake_answer(answer)
        if error == _UNSUPPORTED_SASL_MECHANISM and mechanism not in offered:
            raise SetupError(
                f"the broker at {self.where} does not offer SASL mechanism {mechanism} (it "
                f"offers {', '.join(offered) or 'none'}): check --sasl-mechanism"
            )
        if error == _UNSUPPORTED_SASL_MECHANISM:  # it offers none, naming ours back (tansu)
            raise SetupError(
                f"the broker at {self.where} takes no SASL on this listener: check "
                f"--security-protocol (now {self.protocol}; PLAINTEXT or SSL?)"
            )
        if error:
            raise SetupError(
                f"the broker at {self.where} refused the SASL handshake (error {error}): "
                "check --security-protocol and --sasl-mechanism"
            )
        if mechanism not in _CREDENTIALS:
            return  # OAUTHBEARER, GSSAPI: their exchanges are left to the clients
        from streamcal.stream.kafka.kafka_python import sasl_exchange

        exchange = sasl_exchange(mechanism, s)
        failed = (
            f"SASL authentication as {s.get('sasl_plain_username')!r} with {mechanism} at "
            f"{self.where} failed"
        )
        check = "check --sasl-username and --sasl-password"
        while not exchange.is_done():
            answer = self._request(_SASL_AUTHENTICATE, 0, _bytes(exchange.auth_bytes()))
            if answer is None:
                raise SetupError(f"{failed} (the broker closed the connection): {check}")
            error, message, data = _authenticate_answer(answer)
            if error:
                raise SetupError(f"{failed} ({message or f'error {error}'}): {check}")
            if data.startswith(b"e="):  # SCRAM's server-final message with an error
                raise SetupError(f"{failed} ({data[2:].decode(errors='replace')}): {check}")
            try:
                exchange.receive(data)
            except Exception as exc:  # noqa: BLE001 - e.g. a SCRAM server proof that fails
                raise SetupError(f"{failed} ({exc!r}): {check}") from None
        if not exchange.is_authenticated():
            raise SetupError(f"{failed}: {check}")

    # ------------------------------------------------------------------ the wire
    def _request(self, api_key: int, version: int, body: bytes) -> bytes | None:
        """Send a request; its answer (after the correlation id), or None if the broker
        closed the connection, said nothing within the timeout, or answered otherwise."""
        self.correlation += 1
        head = struct.pack(">hhi", api_key, version, self.correlation) + _string("streamcal")
        message = head + body
        try:
            self.sock.settimeout(self.timeout)
            self.sock.sendall(struct.pack(">i", len(message)) + message)
            size = self._read(4)
            if size is None:
                return None
            if size[0] in _TLS_RECORDS and size[1] == 3:  # "\x15\x03\x03": a TLS alert
                self.tls_answer = True
                return None
            (n,) = struct.unpack(">i", size)
            if not 4 <= n <= 1 << 26:
                return None
            answer = self._read(n)
        except (OSError, ssl.SSLError):
            return None
        if answer is None or struct.unpack_from(">i", answer)[0] != self.correlation:
            return None
        return answer[4:]

    def _read(self, n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data


def _bytes(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def _handshake_answer(answer: bytes) -> tuple[int, list[str]]:
    """(error code, mechanisms offered) of a SaslHandshake answer."""
    error, n = struct.unpack_from(">hi", answer)
    at, offered = 6, []
    for _ in range(max(0, n)):
        (k,) = struct.unpack_from(">h", answer, at)
        offered.append(answer[at + 2 : at + 2 + k].decode(errors="replace"))
        at += 2 + k
    return error, offered


def _authenticate_answer(answer: bytes) -> tuple[int, str | None, bytes]:
    """(error code, error message, auth bytes) of a SaslAuthenticate v0 answer."""
    error, k = struct.unpack_from(">hh", answer)
    at = 4
    message = None
    if k >= 0:
        message = answer[at : at + k].decode(errors="replace")
        at += k
    (n,) = struct.unpack_from(">i", answer, at)
    return error, message, answer[at + 4 : at + 4 + max(0, n)]
