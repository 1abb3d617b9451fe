"""A SASL/SCRAM-SHA-512 front for a plaintext tansu broker, for the tests of a successful
SASL run (``tests/stream/test_sasl.py``).

tansu with ``--authentication`` checks SCRAM, but its users are created over the Kafka
API by an authenticated client (``tansu user create`` speaks plaintext only), so the
first user must exist before authentication is turned on, and the memory storage the
tests use does not survive that restart. So the front does what a SASL listener does
and the broker behind it does the rest: it answers SaslHandshake and SaslAuthenticate
itself (RFC 5802 and 7677: it checks the client's proof against the password and sends
its own signature, which the client checks), refuses any other request before
authentication by closing the connection, as Kafka does, and afterwards relays the
bytes both ways. The broker advertises the front's address, so every connection of a
client (bootstrap, group coordinator, partition leader) goes through it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import socket
import struct
import threading

MECHANISM = "SCRAM-SHA-512"
ITERATIONS = 4096
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM = 58, 33


def _read_exact(sock, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _frame(sock) -> bytes | None:
    head = _read_exact(sock, 4)
    if head is None:
        return None
    return _read_exact(sock, struct.unpack(">i", head)[0])


def _uvarint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def _compact_bytes(b: bytes | None) -> bytes:
    n = 0 if b is None else len(b) + 1
    out = bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            break
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    return bytes(out) + (b or b"")


class Scram:
    """The server side of one SCRAM-SHA-512 exchange for ``user``/``password``."""

    def __init__(self, user: str, password: str):
        self.user, self.password = user, password
        self.salt = os.urandom(16)
        self.first_bare = self.server_first = ""

    def step(self, message: bytes) -> tuple[bytes | None, str | None]:
        """(the answer, None) or (None, why it failed)."""
        text = message.decode()
        if not self.server_first:
            gs2, _, bare = text.partition(",,")  # "n,," : no channel binding
            attrs = dict(kv.split("=", 1) for kv in bare.split(","))
            if attrs.get("n") != self.user:
                return None, "unknown user"
            self.first_bare = bare
            nonce = attrs["r"] + base64.b64encode(os.urandom(18)).decode()
            salt = base64.b64encode(self.salt).decode()
            self.server_first = f"r={nonce},s={salt},i={ITERATIONS}"
            return self.server_first.encode(), None
        without_proof, _, proof = text.rpartition(",p=")
        salted = hashlib.pbkdf2_hmac("sha512", self.password.encode(), self.salt, ITERATIONS)
        client_key = hmac.digest(salted, b"Client Key", "sha512")
        auth = f"{self.first_bare},{self.server_first},{without_proof}".encode()
        signature = hmac.digest(hashlib.sha512(client_key).digest(), auth, "sha512")
        want = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        if not hmac.compare_digest(base64.b64decode(proof), want):
            return None, "invalid credentials"
        server_key = hmac.digest(salted, b"Server Key", "sha512")
        verifier = base64.b64encode(hmac.digest(server_key, auth, "sha512")).decode()
        return f"v={verifier}".encode(), None


class SaslFront:
    """Listens on a free loopback port (``port``) and relays authenticated connections to
    ``backend`` (host, port). ``accepted``/``refused`` count the SCRAM exchanges."""

    def __init__(self, backend: tuple[str, int], user: str, password: str):
        self.backend, self.user, self.password = backend, user, password
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.accepted = self.refused = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def close(self) -> None:
        self.server.close()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._client, args=(conn,), daemon=True).start()

    def _client(self, conn) -> None:
        try:
            with conn, socket.create_connection(self.backend) as up:
                if self._authenticate(conn, up):
                    threading.Thread(target=self._pipe, args=(up, conn), daemon=True).start()
                    self._pipe(conn, up)
        except OSError:
            pass

    @staticmethod
    def _pipe(src, dst) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _authenticate(self, conn, up) -> bool:
        """Serve the requests before authentication; True once it has succeeded."""
        scram = None
        while True:
            req = _frame(conn)
            if req is None:
                return False
            api, version, corr, n = struct.unpack_from(">hhih", req)
            body = 10 + max(n, 0)
            if api == 18:  # ApiVersions: the broker's own answer
                up.sendall(struct.pack(">i", len(req)) + req)
                answer = _frame(up)
                if answer is None:
                    return False
                conn.sendall(struct.pack(">i", len(answer)) + answer)
                continue
            if api == SASL_HANDSHAKE:
                (k,) = struct.unpack_from(">h", req, body)
                asked = req[body + 2 : body + 2 + k].decode()
                ok = asked == MECHANISM
                scram = Scram(self.user, self.password) if ok else None
                out = struct.pack(">hih", 0 if ok else UNSUPPORTED_SASL_MECHANISM, 1,
                                  len(MECHANISM)) + MECHANISM.encode()  # fmt: skip
                self._answer(conn, corr, out, flexible=False)
                continue
            if api != SASL_AUTHENTICATE or scram is None:
                return False  # what a SASL listener does with anything else first
            flexible = version >= 2
            if flexible:
                _, i = _uvarint(req, body)  # the header's tagged fields (none)
                size, i = _uvarint(req, i)
                token = req[i : i + size - 1]
            else:
                (size,) = struct.unpack_from(">i", req, body)
                token = req[body + 4 : body + 4 + size]
            reply, why = scram.step(token)
            if why is not None:
                self.refused += 1
                msg = f"Authentication failed: {why}".encode()
                if flexible:
                    out = (struct.pack(">h", SASL_AUTHENTICATION_FAILED) + _compact_bytes(msg)
                           + _compact_bytes(b"") + struct.pack(">q", 0) + b"\x00")  # fmt: skip
                else:
                    out = struct.pack(">hh", SASL_AUTHENTICATION_FAILED, len(msg)) + msg
                    out += struct.pack(">i", 0) + (struct.pack(">q", 0) if version else b"")
                self._answer(conn, corr, out, flexible)
                return False
            if flexible:
                out = struct.pack(">h", 0) + b"\x00" + _compact_bytes(reply)
                out += struct.pack(">q", 0) + b"\x00"
            else:
                out = struct.pack(">hhi", 0, -1, len(reply)) + reply
                out += struct.pack(">q", 0) if version else b""
            self._answer(conn, corr, out, flexible)
            if reply.startswith(b"v="):
                self.accepted += 1
                return True

    @staticmethod
    def _answer(conn, corr: int, body: bytes, flexible: bool) -> None:
        head = struct.pack(">i", corr) + (b"\x00" if flexible else b"")
        conn.sendall(struct.pack(">i", len(head) + len(body)) + head + body)
