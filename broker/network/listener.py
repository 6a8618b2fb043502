"""The asyncio listener: accepts connections on one address and runs a ``Connection`` per socket.

It owns the set of live connections: ``close()`` stops accepting and closes every connection,
and a reaper task closes connections idle longer than ``connections.max.idle.ms``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
import ssl
import time

from broker.network.connection import Connection, ConnectionContext, ConnectionLimits, RequestHandler

log = logging.getLogger(__name__)


class Listener:
    """Accept loop for one ``NAME://host:port`` listener."""

    _ids = itertools.count(1)

    def __init__(
        self,
        name: str,
        host: str,
        port: int,
        limits: ConnectionLimits,
        *,
        send_buffer_bytes: int = -1,
        receive_buffer_bytes: int = -1,
        tls_context: ssl.SSLContext | None = None,
    ) -> None:
        self.name = name
        self._tls_context = tls_context  # an SSL listener: every connection starts with a TLS handshake
        self._handler: RequestHandler | None = None
        self._limits = limits
        self._send_buffer_bytes = send_buffer_bytes
        self._receive_buffer_bytes = receive_buffer_bytes
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.socket(family, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host or "0.0.0.0", port))
        self._sock.listen(512)
        self._sock.setblocking(False)
        self.host, self.port = self._sock.getsockname()[:2]
        self._connections: dict[int, Connection] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._accept_task: asyncio.Task[None] | None = None
        self._reaper_task: asyncio.Task[None] | None = None

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    def start(self, handler: RequestHandler) -> None:
        """Serve connections with ``handler`` (the socket is already bound and listening)."""
        self._handler = handler
        self._accept_task = asyncio.create_task(self._accept_loop(), name=f"listener-{self.name}")
        self._reaper_task = asyncio.create_task(self._reap_loop(), name=f"reaper-{self.name}")

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, addr = await loop.sock_accept(self._sock)
            except OSError as exc:
                log.warning("accept failed on %s: %s", self.name, exc)
                await asyncio.sleep(0.05)
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._send_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._send_buffer_bytes)
            if self._receive_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._receive_buffer_bytes)
            assert self._handler is not None
            conn_id = next(self._ids)
            peer = f"{addr[0]}:{addr[1]}"
            conn = Connection(
                sock, self._handler, ConnectionContext(peer, self.name, conn_id), self._limits, self._tls_context
            )
            self._connections[conn_id] = conn
            task = asyncio.create_task(self._serve(conn), name=f"conn-{conn_id}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _serve(self, conn: Connection) -> None:
        try:
            await conn.run()
        finally:
            self._connections.pop(conn.ctx.connection_id, None)

    async def _reap_loop(self) -> None:
        idle_s = self._limits.idle_ms / 1000
        while True:
            await asyncio.sleep(min(idle_s / 4, 30.0))
            now = time.monotonic()
            for conn in list(self._connections.values()):
                if now - conn.last_active > idle_s:
                    log.info("closing idle connection %s from %s", conn.ctx.connection_id, conn.ctx.peer)
                    conn.close()

    async def close(self) -> None:
        for task in (self._accept_task, self._reaper_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._sock.close()
        for conn in list(self._connections.values()):
            conn.close()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5)
