"""A TLS front end for a plaintext broker: the demo's TLS when tansu cannot do it itself.

``TlsTerminator(host, port, upstream, cert, key)`` accepts TLS connections on
``host:port`` and pipes the plaintext bytes to ``host:upstream`` (stdlib ``ssl`` and
``asyncio``, in a thread of this process). ``LocalBroker(cert=..., key=...)`` puts it in
front of a loopback-only tansu when tansu refuses the certificate and key together (see
``streamcal.demo.broker``).
"""

from __future__ import annotations

import asyncio
import ssl
import threading

__all__ = ["TlsTerminator"]


class TlsTerminator:
    """Accept TLS on ``host:port`` and pipe the plaintext bytes to ``host:upstream``."""

    def __init__(self, host: str, port: int, upstream: int, cert: str, key: str):
        self.host, self.port, self.upstream = host, port, upstream
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(cert, key)
        self.loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="streamcal-tls", daemon=True)

    def start(self) -> None:
        """Listen (in a thread of this process); OSError if it cannot."""
        self._thread.start()
        self._started.wait(10)
        if self._error is not None:
            raise OSError(str(self._error))

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self._server = self.loop.run_until_complete(
                asyncio.start_server(self._handle, self.host, self.port, ssl=self.context)
            )
        except BaseException as exc:  # reported by start()
            self._error = exc
            self._started.set()
            return
        self._started.set()
        self.loop.run_forever()
        # Shutting down: close the listener and every open connection.
        self._server.close()
        tasks = asyncio.all_tasks(self.loop)
        for task in tasks:
            task.cancel()
        self.loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self.loop.close()

    async def _handle(self, client_r, client_w) -> None:
        try:
            up_r, up_w = await asyncio.open_connection(self.host, self.upstream)
        except OSError:
            client_w.close()
            return

        async def pipe(reader, writer):
            try:
                while data := await reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            except (OSError, asyncio.IncompleteReadError, ssl.SSLError):
                pass
            finally:
                writer.close()

        await asyncio.gather(pipe(client_r, up_w), pipe(up_r, client_w), return_exceptions=True)

    def stop(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
