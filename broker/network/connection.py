"""One client connection: size-prefixed frames in, responses out in request order.

Contract with the request handler (``RequestHandler.handle``):
- ``handle`` is called for each request frame, one at a time, in arrival order, on the event loop.
  Everything it does before returning happens in that order (so pipelined produce requests to
  one partition are appended in order).
- It returns a ``Response``, ``None`` (no response: acks=0 produce), or an awaitable of either
  (work that waits: a long-poll fetch, a join-group). Awaitables run concurrently; responses are
  still written strictly in request order.
- It may raise ``CloseConnection`` to drop this connection (malformed request that cannot be
  answered); any other exception is a bug: it is logged and the connection closed, and the broker
  keeps serving every other connection.

Bounds: at most ``max_in_flight`` requests per connection wait for their response; past that the
connection stops reading (back-pressure). A frame larger than ``socket.request.max.bytes`` or with
a negative size closes the connection, as Kafka does. A connection idle for
``connections.max.idle.ms`` is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import struct
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Protocol

from broker.network.response import FileRegion, Response

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
# Regions smaller than this are read and written inline: for them a sendfile call (which waits
# for the socket buffer to drain and pauses reading) costs more than the copy it saves.
SENDFILE_MIN_BYTES = 64 * 1024

HandlerResult = Response | None | Awaitable[Response | None]


class CloseConnection(Exception):
    """Raised by a handler to close the connection without a response."""


@dataclass
class ConnectionContext:
    """What handlers may know about the connection a request came on."""

    peer: str
    listener: str
    connection_id: int
    attributes: dict[str, object] = field(default_factory=dict)


class RequestHandler(Protocol):
    def handle(self, frame: bytes, ctx: ConnectionContext) -> HandlerResult: ...


@dataclass(frozen=True)
class ConnectionLimits:
    request_max_bytes: int = 104857600
    idle_ms: int = 600000
    max_in_flight: int = 64


class Connection:
    """Owns one non-blocking socket: a reader task and a writer task, joined by a bounded queue.

    Raw sockets rather than asyncio streams so that file regions go out with ``os.sendfile`` at
    an explicit offset (no shared file position, no transport buffer in between).
    """

    def __init__(
        self,
        sock: socket.socket,
        handler: RequestHandler,
        ctx: ConnectionContext,
        limits: ConnectionLimits,
    ) -> None:
        sock.setblocking(False)
        self._sock = sock
        self._handler = handler
        self.ctx = ctx
        self._limits = limits
        self._queue: asyncio.Queue[asyncio.Future[Response | None] | None] = asyncio.Queue(
            limits.max_in_flight
        )
        self.last_active = time.monotonic()
        self._closed = False

    async def run(self) -> None:
        """Serve until the peer closes, an error occurs, or ``close()`` is called."""
        writer_task = asyncio.create_task(self._write_loop(), name=f"conn-{self.ctx.connection_id}-writer")
        try:
            await self._read_loop()
        except (ConnectionError, OSError):
            pass
        except CloseConnection as exc:
            log.info("closing connection %s from %s: %s", self.ctx.connection_id, self.ctx.peer, exc)
        except asyncio.CancelledError:
            writer_task.cancel()
            self._drain_queue()
            self._close_socket()
            raise
        except Exception:
            log.exception("unexpected error on connection %s from %s", self.ctx.connection_id, self.ctx.peer)
        # Let the writer finish responses to requests already read, then stop.
        if not writer_task.done():
            try:
                self._queue.put_nowait(None)
            except asyncio.QueueFull:
                writer_task.cancel()
            try:
                await asyncio.wait_for(writer_task, timeout=30)
            except (TimeoutError, asyncio.CancelledError, ConnectionError, OSError):
                pass
        self._drain_queue()
        self._close_socket()

    def close(self) -> None:
        """Stop serving: the read loop ends at its next wake-up and the socket is shut down."""
        self._closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)

    def _close_socket(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._sock.close()

    def _drain_queue(self) -> None:
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if item is not None and not item.done():
                item.cancel()

    async def _read_loop(self) -> None:
        loop = asyncio.get_running_loop()
        sock = self._sock
        buf = bytearray()
        chunk = bytearray(256 * 1024)
        view = memoryview(chunk)
        while not self._closed:
            n = await loop.sock_recv_into(sock, view)
            if n == 0:
                return
            buf += view[:n]
            self.last_active = time.monotonic()
            pos = 0
            while len(buf) - pos >= 4:
                (size,) = _SIZE.unpack_from(buf, pos)
                if size < 0 or size > self._limits.request_max_bytes:
                    raise CloseConnection(
                        f"frame of {size} bytes is outside 0..socket.request.max.bytes "
                        f"({self._limits.request_max_bytes})"
                    )
                if len(buf) - pos - 4 < size:
                    break
                frame = bytes(buf[pos + 4 : pos + 4 + size])
                pos += 4 + size
                await self._dispatch(loop, frame)
            if pos:
                del buf[:pos]

    async def _dispatch(self, loop: asyncio.AbstractEventLoop, frame: bytes) -> None:
        result = self._handler.handle(frame, self.ctx)
        future: asyncio.Future[Response | None]
        if result is None or isinstance(result, Response):
            future = loop.create_future()
            future.set_result(result)
        else:
            future = asyncio.ensure_future(result)
        await self._queue.put(future)

    async def _write_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            future = await self._queue.get()
            if future is None:
                return
            try:
                response = await future
            except CloseConnection as exc:
                log.info("closing connection %s: %s", self.ctx.connection_id, exc)
                self.close()
                return
            except Exception:
                log.exception("request handler failed on connection %s", self.ctx.connection_id)
                self.close()
                return
            if response is None:
                continue
            await self._send(loop, response)
            self.last_active = time.monotonic()

    async def _send(self, loop: asyncio.AbstractEventLoop, response: Response) -> None:
        pending: list[bytes | bytearray | memoryview] = [_SIZE.pack(response.size)]
        for part in response.parts:
            if not isinstance(part, FileRegion):
                pending.append(part)
            elif part.size < SENDFILE_MIN_BYTES:
                pending.append(part.read())
            else:
                await loop.sock_sendall(self._sock, b"".join(pending))
                pending = []
                await self._sendfile(loop, part)
        if pending:
            await loop.sock_sendall(self._sock, b"".join(pending))

    async def _sendfile(self, loop: asyncio.AbstractEventLoop, region: FileRegion) -> None:
        """``os.sendfile`` the region at its own offset; waits for writability on EAGAIN."""
        out_fd = self._sock.fileno()
        in_fd = region.file.fileno()
        offset = region.position
        remaining = region.size
        while remaining:
            try:
                sent = os.sendfile(out_fd, in_fd, offset, remaining)
            except BlockingIOError:
                await _wait_writable(loop, out_fd)
                continue
            if sent == 0:
                raise ConnectionError(f"file region ended {remaining} bytes early: file shrank")
            offset += sent
            remaining -= sent


async def _wait_writable(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    waiter: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not waiter.done():
            waiter.set_result(None)

    loop.add_writer(fd, wake)
    try:
        await waiter
    finally:
        loop.remove_writer(fd)
