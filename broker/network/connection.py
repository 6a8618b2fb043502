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
``connections.max.idle.ms`` is closed, and so is one whose request frame has begun but not
completed within ``socket.request.frame.timeout.ms`` (``frame_started``; the listener's reaper
checks both), so connections that send a partial frame and wait cannot pile up.

Throttling (KIP-219): while ``ctx.muted_until`` lies ahead, the connection reads and dispatches no
further request; responses already decided are still written.

Writing: a response that is complete when its handler returns, to the last request of what one
recv brought, while the writer task is idle with nothing queued (nothing can be ahead of it), is
written by the reader at once, as far as the socket takes it without waiting (``_send_now``);
the writer task sends the rest. A sequential client (one request in flight, as a consumer's
fetches) so gets its answer without a hand-off between tasks; pipelined requests still go
through the writer, which joins their responses into one send. File regions go out with
``sendfile`` from the page cache; ones it does not hold are read in the default executor first
(``FileRegion.cached`` / ``read_cached``), so the loop never waits for the disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import ssl
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from broker.metrics.instruments import BrokerStats
from broker.metrics.requests import finish as finish_request
from broker.network.response import FileRegion, Response, ResponsePart
from broker.network.tls import TlsSession
from broker.security.principal_mapping import NoMatchingRule

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
# Regions smaller than this are read and written inline: for them a sendfile call (which waits
# for the socket buffer to drain and pauses reading) costs more than the copy it saves.
SENDFILE_MIN_BYTES = 64 * 1024
# Bytes asked of each recv; a frame at least LARGE_FRAME_BYTES long that one chunk does not hold
# whole is received into buffers of its own instead (see ``Connection._receive_frame``).
READ_CHUNK_BYTES = 256 * 1024
LARGE_FRAME_BYTES = 64 * 1024
DIRECT_FRAME_MAX_BYTES = 1024 * 1024  # the most allocated ahead of the bytes that fill it
assert READ_CHUNK_BYTES > LARGE_FRAME_BYTES + 4  # an incomplete small frame fits before the next recv
# The writer joins responses that are already complete into one send, up to this many bytes.
COALESCE_MAX_BYTES = 1024 * 1024
TLS_HANDSHAKE_TIMEOUT_S = 10.0  # a TLS client that has not finished its handshake by then is dropped

HandlerResult = Response | None | Awaitable[Response | None]


class _Unsent:
    """The rest of a response the reader began to write (``_send_now``): its size prefix and
    first bytes are already out, so the writer sends these parts as they are. ``response``: the
    response it is the rest of (its timing is finished once the rest is written)."""

    __slots__ = ("parts", "response", "size")

    def __init__(self, parts: list[ResponsePart], response: Response | None = None) -> None:
        self.parts = parts
        self.response = response
        self.size = sum(part.size if isinstance(part, FileRegion) else len(part) for part in parts)


QueueItem = Response | _Unsent | asyncio.Future[Response | None] | None


class CloseConnection(Exception):
    """Raised by a handler to close the connection without a response."""


@dataclass
class ConnectionContext:
    """What handlers may know about the connection a request came on."""

    peer: str
    listener: str
    connection_id: int
    attributes: dict[str, object] = field(default_factory=dict)
    # KIP-219: a throttled client's channel reads no request before this ``time.monotonic()``
    muted_until: float = 0.0
    # ``time.perf_counter()`` when the bytes of the request being handled arrived (metrics)
    received: float = 0.0


class RequestHandler(Protocol):
    def handle(self, frame: bytes | bytearray, ctx: ConnectionContext) -> HandlerResult: ...


@dataclass(frozen=True)
class ConnectionLimits:
    request_max_bytes: int = 104857600
    idle_ms: int = 600000
    max_in_flight: int = 64
    frame_timeout_ms: int = 30000


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
        tls_context: ssl.SSLContext | None = None,
        *,
        principal_mapping: Callable[[str], str] | None = None,
        stats: BrokerStats | None = None,
    ) -> None:
        """``stats``: the broker's counters: bytes in and out of this connection's listener, and
        each response's ``RequestTiming`` finished once the response is written."""
        sock.setblocking(False)
        self._stats = stats
        self._counters = stats.listener(ctx.listener) if stats is not None else None
        self._principal_mapping = principal_mapping  # ssl.principal.mapping.rules of the listener
        self._sock = sock
        # TLS listener: the byte stream goes through a TlsSession; fetches lose sendfile
        self._tls = TlsSession(sock, tls_context) if tls_context is not None else None
        self._handler = handler
        self.ctx = ctx
        self._limits = limits
        # In request order: a Response, the unsent rest of one, or a Future of one (work that
        # waits); None ends the writer.
        self._queue: asyncio.Queue[QueueItem] = asyncio.Queue(limits.max_in_flight)
        self._writer_idle = False  # the writer waits for the queue and has nothing half-sent
        self.last_active = time.monotonic()
        # When the request frame now being received began (None: between frames); mute time excluded.
        self.frame_started: float | None = None
        self._closed = False
        self._writer_task: asyncio.Task[None] | None = None
        self._fd = sock.fileno()
        self._loop: asyncio.AbstractEventLoop | None = None  # set by run()
        # the read loop's waiting recv: its future and buffer, which ``_on_readable`` fills
        self._recv_waiter: tuple[asyncio.Future[int], memoryview] | None = None
        self._reading = False  # ``_on_readable`` is registered with the selector

    async def run(self) -> None:
        """Serve until the peer closes, an error occurs, or ``close()`` is called."""
        self._loop = asyncio.get_running_loop()
        if self._tls is not None and not await self._tls_handshake():
            self._close_socket()
            return
        writer_task = asyncio.create_task(self._write_loop(), name=f"conn-{self.ctx.connection_id}-writer")
        self._writer_task = writer_task
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
        if self._closed:
            # The broker closed this connection (shutdown, idle reaper, a failed handler): no
            # one reads the remaining responses, so parked requests (long-poll fetches waiting
            # up to their max_wait_ms) are cancelled instead of holding up shutdown.
            writer_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError, OSError):
                await writer_task
        # Otherwise (the peer closed or half-closed, or sent a frame we refuse), let the writer
        # finish responses to requests already read, then stop.
        elif not writer_task.done():
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

    async def _tls_handshake(self) -> bool:
        """The TLS handshake, bounded by ``TLS_HANDSHAKE_TIMEOUT_S``; a failure (a plaintext
        client, an untrusted or missing client certificate, a protocol mismatch) is logged with
        the peer and closes this connection only."""
        assert self._tls is not None
        try:
            await asyncio.wait_for(self._tls.handshake(), TLS_HANDSHAKE_TIMEOUT_S)
        except (TimeoutError, ssl.SSLError, ConnectionError, OSError) as exc:
            log.info(
                "TLS handshake with %s on listener %s failed: %s",
                self.ctx.peer, self.ctx.listener, str(exc) or type(exc).__name__,
            )  # fmt: skip
            return False
        try:
            self.ctx.attributes["principal"] = self._tls.principal(self._principal_mapping)
        except NoMatchingRule as exc:  # Kafka fails the TLS authentication
            log.warning("TLS client %s on listener %s refused: %s", self.ctx.peer, self.ctx.listener, exc)
            return False
        if self.ctx.attributes["principal"] != "User:ANONYMOUS":
            log.info(
                "TLS client %s authenticated as %s on listener %s",
                self.ctx.peer, self.ctx.attributes["principal"], self.ctx.listener,
            )  # fmt: skip
        self.ctx.attributes["tls_version"] = self._tls.version
        self.last_active = time.monotonic()
        return True

    def close(self) -> None:
        """Stop serving: the read loop ends at its next wake-up, the socket is shut down, and
        responses still pending (parked long-poll fetches included) are dropped."""
        self._closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        writer = self._writer_task
        if writer is not None and not writer.done() and writer is not asyncio.current_task():
            writer.cancel()

    def _close_socket(self) -> None:
        self._closed = True
        self._stop_reading()  # before the close: the selector must not keep a closed descriptor
        with contextlib.suppress(OSError):
            self._sock.close()

    async def _recv_into(self, loop: asyncio.AbstractEventLoop, buf: memoryview) -> int:
        """``recv_into`` for the read loop on plain TCP. ``loop.sock_recv_into`` registers the
        socket with the selector before each wait and removes it after (two ``epoll_ctl`` calls
        per request of a sequential client); here the registration stays while the reader keeps
        coming back, and the readiness callback receives the bytes itself. Every recv of this
        socket goes through here (a second registration would replace this one)."""
        try:
            return self._sock.recv_into(buf)
        except (BlockingIOError, InterruptedError):
            pass
        waiter: asyncio.Future[int] = loop.create_future()
        self._recv_waiter = (waiter, buf)
        if not self._reading:
            loop.add_reader(self._fd, self._on_readable)
            self._reading = True
        try:
            return await waiter
        finally:
            self._recv_waiter = None

    def _on_readable(self) -> None:
        """The socket is readable: fill the waiting recv. With none waiting (the reader is muted,
        back-pressured or dispatching) it deregisters, so a socket nobody reads never spins the loop."""
        pending = self._recv_waiter
        if pending is None or pending[0].done():
            self._stop_reading()
            return
        waiter, buf = pending
        try:
            n = self._sock.recv_into(buf)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._recv_waiter = None
            waiter.set_exception(exc)
            return
        self._recv_waiter = None
        waiter.set_result(n)

    def _stop_reading(self) -> None:
        if self._reading and self._loop is not None:
            self._reading = False
            self._loop.remove_reader(self._fd)

    def _drain_queue(self) -> None:
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if isinstance(item, asyncio.Future) and not item.done():
                item.cancel()

    async def _read_loop(self) -> None:
        """Frames out of the byte stream, each copied once. Frames are sliced out of a chunk
        buffer; an incomplete frame's start moves to the front of the chunk and the next recv
        lands behind it. A frame of ``LARGE_FRAME_BYTES`` or more that the chunk does not hold
        whole is received into buffers of its own (``_receive_frame``). After a full chunk (more
        is likely waiting) the loop yields, so the writer and other connections run between."""
        loop = asyncio.get_running_loop()
        max_bytes = self._limits.request_max_bytes
        chunk = bytearray(READ_CHUNK_BYTES)
        view = memoryview(chunk)
        head = 0  # bytes of an incomplete frame kept at the front of ``chunk``
        while not self._closed:
            await self._wait_unmuted()
            n = await (self._tls.recv_into(view[head:]) if self._tls else self._recv_into(loop, view[head:]))
            if n == 0:
                return
            self.last_active = time.monotonic()
            if self._counters is not None:
                self._counters.incoming_bytes += n
                self.ctx.received = time.perf_counter()
            if self.frame_started is None:
                self.frame_started = self.last_active
            end = head + n
            pos = 0
            frames: list[bytes | bytearray] = []
            large_size = large_start = 0
            while end - pos >= 4:
                (size,) = _SIZE.unpack_from(chunk, pos)
                if size < 0 or size > max_bytes:
                    await self._dispatch_all(loop, frames)  # answer what came before it
                    raise CloseConnection(f"frame of {size} bytes is outside 0..socket.request.max.bytes ({max_bytes})")
                if end - pos - 4 < size:
                    if size >= LARGE_FRAME_BYTES:
                        large_size, large_start, pos = size, pos + 4, end
                    break
                frames.append(bytes(view[pos + 4 : pos + 4 + size]))
                pos += 4 + size
            head = end - pos  # < LARGE_FRAME_BYTES + 4: it fits in front of the next recv
            if head and pos:
                chunk[:head] = bytes(view[pos:end])
            if not head and not large_size:
                self.frame_started = None
            elif pos:
                self.frame_started = time.monotonic()  # the incomplete frame began in this chunk
            await self._dispatch_all(loop, frames, more=bool(large_size))
            if large_size:
                frame = await self._receive_frame(loop, view[large_start:end], large_size)
                self.frame_started = None
                await self._wait_unmuted()  # an earlier frame of this chunk may have been throttled
                await self._dispatch(loop, frame, last=True)
            elif end == len(chunk):
                await asyncio.sleep(0)

    async def _receive_frame(self, loop: asyncio.AbstractEventLoop, start: memoryview, size: int) -> bytes | bytearray:
        """The frame of ``size`` bytes that begins with ``start``, the rest received in place.

        Up to ``DIRECT_FRAME_MAX_BYTES`` the frame gets one buffer of its size (no copy after the
        kernel's). Past that, buffers of that size are added as bytes arrive and joined at the
        end (one more copy), so a peer that announces a huge frame makes the broker hold no more
        than it has actually sent plus one buffer."""
        pieces: list[bytearray] = []
        filled = 0
        while filled < size:
            piece = bytearray(min(size - filled, DIRECT_FRAME_MAX_BYTES))
            got = 0
            if not pieces:
                got = len(start)
                piece[:got] = start
            with memoryview(piece) as target:
                while got < len(piece):
                    n = await (self._tls.recv_into(target[got:]) if self._tls else self._recv_into(loop, target[got:]))
                    if n == 0:
                        raise ConnectionError(f"peer closed inside a frame ({filled + got} of {size} bytes)")
                    got += n
                    if self._counters is not None:
                        self._counters.incoming_bytes += n
            pieces.append(piece)
            filled += got
        self.last_active = time.monotonic()
        if self._counters is not None:
            self.ctx.received = time.perf_counter()
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    async def _dispatch_all(
        self, loop: asyncio.AbstractEventLoop, frames: list[bytes | bytearray], *, more: bool = False
    ) -> None:
        """Dispatch ``frames`` in order; ``more``: another frame of the same recv follows them."""
        last = len(frames) - 1
        for i, frame in enumerate(frames):
            await self._wait_unmuted()
            await self._dispatch(loop, frame, last=i == last and not more)

    async def _wait_unmuted(self) -> None:
        """Sleep out a throttle (KIP-219); the frame timeout does not run meanwhile."""
        delay = self.ctx.muted_until - time.monotonic()
        if delay <= 0:
            return
        await asyncio.sleep(delay)
        now = time.monotonic()
        self.last_active = now
        if self.frame_started is not None:
            self.frame_started = now

    async def _dispatch(self, loop: asyncio.AbstractEventLoop, frame: bytes | bytearray, *, last: bool) -> None:
        """Handle one frame and queue its response (or the wait for it). ``last``: no further
        frame of this recv is waiting, so a complete response may be written at once (module
        docstring, "Writing")."""
        result = self._handler.handle(frame, self.ctx)
        if result is None:
            return  # no response (acks=0): nothing to keep a place for in the order
        if isinstance(result, Response):
            if last and self._writer_idle and self._queue.empty() and self._tls is None and not result.close_after:
                rest = self._send_now(result)
                self.last_active = time.monotonic()
                if rest is None:
                    if self._stats is not None:
                        self._written(result, time.perf_counter())
                    return
                rest.response = result
                await self._queue.put(rest)
                return
            await self._queue.put(result)
        else:
            await self._queue.put(asyncio.ensure_future(result))

    def _send_now(self, response: Response) -> _Unsent | None:
        """Write ``response`` (size prefix first) as far as the socket takes it without waiting:
        bytes with ``send``, file regions of at least ``SENDFILE_MIN_BYTES`` with ``sendfile``
        (smaller ones read and joined with the bytes around them, as ``_send`` does). A region
        the page cache does not hold is left to the writer, which reads it off the loop.
        Returns the unsent rest, or None when everything went out."""
        sock = self._sock
        parts = response.parts
        count = len(parts)
        pending: list[bytes | bytearray | memoryview] = [_SIZE.pack(response.size)]
        i = 0
        while True:
            while i < count:
                part = parts[i]
                if not isinstance(part, FileRegion):
                    pending.append(part)
                elif part.size < SENDFILE_MIN_BYTES:
                    cached = part.read_cached()
                    if cached is None:
                        return _Unsent([*pending, *parts[i:]])
                    pending.append(cached)
                else:
                    break
                i += 1
            if pending:
                data = pending[0] if len(pending) == 1 else b"".join(pending)
                pending = []
                try:
                    sent = sock.send(data)
                except BlockingIOError:
                    sent = 0
                if sent < len(data):
                    return _Unsent([memoryview(data)[sent:], *parts[i:]])
            if i == count:
                return None
            region = parts[i]
            assert isinstance(region, FileRegion)
            if not region.cached():
                return _Unsent(parts[i:])
            i += 1
            offset, remaining = region.position, region.size
            in_fd, out_fd = region.file.fileno(), sock.fileno()
            while remaining:
                try:
                    sent = os.sendfile(out_fd, in_fd, offset, remaining)
                except BlockingIOError:
                    return _Unsent([FileRegion(region.file, offset, remaining), *parts[i:]])
                if sent == 0:
                    raise ConnectionError(f"file region ended {remaining} bytes early: file shrank")
                offset += sent
                remaining -= sent

    def _written(self, response: Response, now: float) -> None:
        """``response`` went out whole at ``now``: count its bytes, finish its request's timing."""
        size = response.size + 4
        if self._counters is not None:
            self._counters.outgoing_bytes += size
        timing = response.timing
        if timing is not None and self._stats is not None:
            finish_request(self._stats, timing, now, size)

    async def _write_loop(self) -> None:
        """Responses in request order. Responses to later requests that are already complete
        join the current one in a single send (up to ``COALESCE_MAX_BYTES``), so pipelined
        requests cost one write between them rather than one each."""
        loop = asyncio.get_running_loop()
        queue = self._queue
        item = await self._next(queue)
        while item is not None:  # None: the reader is done
            parts: list[ResponsePart] = []
            nbytes = 0
            have_next = False
            closing = False
            written: list[Response] = []  # finished once ``parts`` are sent (metrics)
            while True:
                if isinstance(item, _Unsent):
                    parts.extend(item.parts)
                    nbytes += item.size
                    if item.response is not None:
                        written.append(item.response)
                    response: Response | None = None
                elif isinstance(item, Response):
                    response = item
                else:
                    try:
                        response = await item
                    except CloseConnection as exc:
                        await self._send(loop, parts)  # the answers to earlier requests go first
                        log.info("closing connection %s: %s", self.ctx.connection_id, exc)
                        self.close()
                        return
                    except Exception:
                        await self._send(loop, parts)
                        log.exception("request handler failed on connection %s", self.ctx.connection_id)
                        self.close()
                        return
                if response is not None:
                    size = response.size
                    parts.append(_SIZE.pack(size))
                    parts.extend(response.parts)
                    nbytes += size
                    closing = response.close_after
                    written.append(response)
                if closing or queue.empty() or nbytes >= COALESCE_MAX_BYTES:
                    break
                item = queue.get_nowait()
                if item is None or not (isinstance(item, (Response, _Unsent)) or item.done()):
                    have_next = True
                    break
            if parts:
                await self._send(loop, parts)
                self.last_active = time.monotonic()
            if written and self._stats is not None:
                now = time.perf_counter()
                for done in written:
                    self._written(done, now)
            if closing:
                log.info("closing connection %s from %s after its last response", self.ctx.connection_id, self.ctx.peer)
                self.close()
                return
            if not have_next:
                item = await self._next(queue)

    async def _next(self, queue: asyncio.Queue[QueueItem]) -> QueueItem:
        """The next queue item; meanwhile the reader may write responses itself (``_send_now``)."""
        self._writer_idle = True
        try:
            return await queue.get()
        finally:
            self._writer_idle = False

    async def _send(self, loop: asyncio.AbstractEventLoop, parts: list[ResponsePart]) -> None:
        """Write size prefixes and bodies: bytes joined into one send, file regions of at least
        ``SENDFILE_MIN_BYTES`` with ``sendfile``, smaller ones read and sent inline. File bytes
        the page cache does not hold are read in the default executor first (``_read_region``,
        ``FileRegion.warm``): a ``sendfile`` or read that waits for the disk would stall the loop."""
        if self._tls is not None:
            await self._send_tls(loop, self._tls, parts)
            return
        pending: list[bytes | bytearray | memoryview] = []
        for part in parts:
            if not isinstance(part, FileRegion):
                pending.append(part)
            elif part.size < SENDFILE_MIN_BYTES:
                pending.append(await _read_region(loop, part))
            else:
                if pending:
                    await loop.sock_sendall(self._sock, b"".join(pending))
                    pending = []
                if not part.cached():
                    await loop.run_in_executor(None, part.warm)
                await self._sendfile(loop, part)
        if pending:
            await loop.sock_sendall(self._sock, pending[0] if len(pending) == 1 else b"".join(pending))

    async def _send_tls(self, loop: asyncio.AbstractEventLoop, tls: TlsSession, parts: list[ResponsePart]) -> None:
        """Under TLS, sendfile cannot serve file regions: they are read into memory (large ones
        in the default executor, off the event loop) and encrypted with the bytes around them."""
        pending: list[bytes | bytearray | memoryview] = []
        for part in parts:
            if not isinstance(part, FileRegion):
                pending.append(part)
            elif part.size < SENDFILE_MIN_BYTES:
                pending.append(await _read_region(loop, part))
            else:
                pending.append(await loop.run_in_executor(None, part.read))
        if pending:
            await tls.sendall(pending[0] if len(pending) == 1 else b"".join(pending))

    async def _sendfile(self, loop: asyncio.AbstractEventLoop, region: FileRegion) -> None:
        """``os.sendfile`` the region at its own offset. On EAGAIN it waits for writability; the
        writer callback stays registered until the region is sent (one add/remove per region,
        not per partial send)."""
        out_fd = self._sock.fileno()
        in_fd = region.file.fileno()
        offset = region.position
        remaining = region.size
        waiter: asyncio.Future[None] | None = None
        registered = False

        def wake() -> None:
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

        try:
            while remaining:
                try:
                    sent = os.sendfile(out_fd, in_fd, offset, remaining)
                except BlockingIOError:
                    if not registered:
                        loop.add_writer(out_fd, wake)
                        registered = True
                    waiter = loop.create_future()
                    await waiter
                    continue
                if sent == 0:
                    raise ConnectionError(f"file region ended {remaining} bytes early: file shrank")
                offset += sent
                remaining -= sent
        finally:
            if registered:
                loop.remove_writer(out_fd)


async def _read_region(loop: asyncio.AbstractEventLoop, region: FileRegion) -> bytes | bytearray:
    """A small region's bytes: from the page cache at once, or read in the default executor."""
    data = region.read_cached()
    return data if data is not None else await loop.run_in_executor(None, region.read)
