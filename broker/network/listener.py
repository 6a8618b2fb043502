"""The asyncio listener: accepts connections on one address and runs a ``Connection`` per socket.

It owns the set of live connections: ``close()`` stops accepting and closes every connection,
and a reaper task closes connections idle longer than ``connections.max.idle.ms`` or stuck inside
a request frame longer than ``socket.request.frame.timeout.ms``.

Connection limits (``broker.quota.connections``, shared by all listeners of a broker): at
``max.connections`` the accept loop waits for a connection to close; a connection beyond its
address's ``max.connections.per.ip`` (or an ``ip`` entity's ``connection_creation_rate``) is
closed at once; above ``max.connection.creation.rate`` the next accept is delayed.

Accept errors (``EMFILE`` "Too many open files", ``ENFILE``, ``ENOBUFS`` …) back off
exponentially from 50 ms to 1 s, and are logged at most once per ``ACCEPT_ERROR_LOG_INTERVAL_S``
with the number of failures since the last line, instead of a line every 50 ms.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
import ssl
import time
from collections.abc import Callable

from broker.metrics.instruments import BrokerStats
from broker.network.connection import Connection, ConnectionContext, ConnectionLimits, RequestHandler
from broker.quota.connections import ConnectionQuotas

log = logging.getLogger(__name__)

ACCEPT_BACKOFF_MIN_S = 0.05
ACCEPT_BACKOFF_MAX_S = 1.0
ACCEPT_ERROR_LOG_INTERVAL_S = 10.0
SLOT_WAIT_S = 0.1  # re-check for a free slot at least this often (a close on another listener)


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
        principal_mapping: Callable[[str], str] | None = None,
        quotas: ConnectionQuotas | None = None,
        stats: BrokerStats | None = None,
    ) -> None:
        """``stats``: the broker's counters (connections created and closed on this listener,
        bytes in and out, request timings)."""
        self.name = name
        self._stats = stats
        self._principal_mapping = principal_mapping  # ssl.principal.mapping.rules (None: DEFAULT)
        self._tls_context = tls_context  # an SSL listener: every connection starts with a TLS handshake
        self._handler: RequestHandler | None = None
        self._limits = limits
        self._quotas = quotas
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
        self._slot_freed = asyncio.Event()
        self.accept_errors = 0
        self.rejected = 0

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
        backoff = 0.0
        failures_unlogged = 0
        last_logged = -ACCEPT_ERROR_LOG_INTERVAL_S
        quotas = self._quotas
        while True:
            if quotas is not None and not quotas.slot_available():
                self._slot_freed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._slot_freed.wait(), SLOT_WAIT_S)
                continue
            try:
                sock, addr = await loop.sock_accept(self._sock)
            except OSError as exc:
                self.accept_errors += 1
                failures_unlogged += 1
                now = time.monotonic()
                if now - last_logged >= ACCEPT_ERROR_LOG_INTERVAL_S:
                    log.warning(
                        "accept failed on %s: %s (%d failure(s) since the last report; backing off up to %.0f ms)",
                        self.name, exc, failures_unlogged, ACCEPT_BACKOFF_MAX_S * 1000,
                    )  # fmt: skip
                    last_logged, failures_unlogged = now, 0
                backoff = min(max(backoff * 2, ACCEPT_BACKOFF_MIN_S), ACCEPT_BACKOFF_MAX_S)
                await asyncio.sleep(backoff)
                continue
            backoff = 0.0
            ip = str(addr[0])
            delay_ms = 0
            if quotas is not None:
                now_ms = int(time.time() * 1000)
                admission = quotas.admit(ip, now_ms)
                if not admission.accepted:
                    self.rejected += 1
                    log.debug("refused a connection on %s: %s", self.name, admission.reason)
                    with contextlib.suppress(OSError):
                        sock.close()
                    continue
                delay_ms = quotas.accept_delay_ms(now_ms)
            self._serve_socket(sock, addr)
            if delay_ms > 0:
                await asyncio.sleep(delay_ms / 1000)  # max.connection.creation.rate

    def _serve_socket(self, sock: socket.socket, addr: tuple[object, ...]) -> None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._send_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._send_buffer_bytes)
            if self._receive_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._receive_buffer_bytes)
        except OSError:  # the peer is already gone
            sock.close()
            self._released(str(addr[0]))
            return
        assert self._handler is not None
        conn_id = next(self._ids)
        peer = f"{addr[0]}:{addr[1]}"
        conn = Connection(
            sock,
            self._handler,
            ConnectionContext(peer, self.name, conn_id),
            self._limits,
            self._tls_context,
            principal_mapping=self._principal_mapping,
            stats=self._stats,
        )
        if self._stats is not None:
            self._stats.listener(self.name).connections_created += 1
        self._connections[conn_id] = conn
        task = asyncio.create_task(self._serve(conn, str(addr[0])), name=f"conn-{conn_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, conn: Connection, ip: str) -> None:
        try:
            await conn.run()
        finally:
            self._connections.pop(conn.ctx.connection_id, None)
            self._released(ip)
            if self._stats is not None:
                self._stats.listener(self.name).connections_closed += 1

    def _released(self, ip: str) -> None:
        if self._quotas is not None:
            self._quotas.release(ip)
            self._slot_freed.set()

    async def _reap_loop(self) -> None:
        idle_s = self._limits.idle_ms / 1000
        frame_s = self._limits.frame_timeout_ms / 1000
        while True:
            await asyncio.sleep(max(0.05, min(idle_s / 4, frame_s / 2, 30.0)))
            now = time.monotonic()
            for conn in list(self._connections.values()):
                started = conn.frame_started
                if now - conn.last_active > idle_s:
                    log.info("closing idle connection %s from %s", conn.ctx.connection_id, conn.ctx.peer)
                    conn.close()
                elif started is not None and now - started > frame_s and conn.ctx.muted_until <= now:
                    log.info(
                        "closing connection %s from %s: its request frame did not complete within %d ms"
                        " (socket.request.frame.timeout.ms)",
                        conn.ctx.connection_id, conn.ctx.peer, self._limits.frame_timeout_ms,
                    )  # fmt: skip
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
