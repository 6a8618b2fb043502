"""The client's socket streams: responses received straight into their own buffers.

``asyncio.open_connection`` reads a socket into fresh 256 KiB ``bytes``, appends those to the
``StreamReader``'s buffer and copies a frame out of it again: three copies of every fetched byte,
each into newly allocated memory. At 1 KiB records a Spark task spent more CPU there than in the
Arrow decode (issue #27's read figures). ``open_stream`` connects with a
``asyncio.BufferedProtocol`` instead: ``readexactly(n)`` of a large ``n`` (a response frame)
hands the kernel a ``bytearray(n)`` to ``recv_into``, so a fetched frame is written once, by the
kernel, into the buffer the decoder then slices (records stay ``memoryview`` slices of it). Small
reads (the 4-byte frame sizes, SASL frames) go through a small buffer as before.

The reader offers what the connection and the SASL exchange use of ``asyncio.StreamReader``:
``readexactly`` raising ``asyncio.IncompleteReadError`` at EOF and the socket's error otherwise.
The writer offers ``write``, ``drain`` (waits while the transport is over its high-water mark)
and ``close``. TLS works the same way (asyncio's SSL transport feeds buffered protocols).
"""

from __future__ import annotations

import asyncio
import ssl

# A read this large goes straight into its own buffer; smaller ones through the shared one.
DIRECT_READ_BYTES = 64 * 1024
_SCRATCH_BYTES = 256 * 1024
# Above this many buffered, unread bytes the socket is not read until the reader catches up.
_BUFFER_LIMIT = 4 << 20


class _StreamProtocol(asyncio.BufferedProtocol):
    """The receiving side of one connection, and the flow control of its sending side."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.transport: asyncio.Transport | None = None
        self._scratch = memoryview(bytearray(_SCRATCH_BYTES))
        self._buffer = bytearray()  # received bytes no read has taken yet
        self._target: bytearray | None = None  # a large read's own buffer, being filled
        self._target_view: memoryview | None = None
        self._filled = 0
        self._waiter: asyncio.Future[None] | None = None
        self._eof = False
        self._error: BaseException | None = None
        self._paused_reading = False
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []

    # -- asyncio.BufferedProtocol ----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._target_view is not None:
            return self._target_view[self._filled :]
        return self._scratch

    def buffer_updated(self, nbytes: int) -> None:
        if self._target is not None:
            self._filled += nbytes
            if self._filled == len(self._target):
                self._target_view = None  # full: further bytes go to the shared buffer
                self._wake()
            return
        self._buffer += self._scratch[:nbytes]
        if len(self._buffer) > _BUFFER_LIMIT and self.transport is not None and not self._paused_reading:
            self._paused_reading = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = True
        if exc is not None:
            self._error = exc
        self._wake()
        for fut in self._drain_waiters:
            if not fut.done():
                if exc is None:
                    fut.set_result(None)
                else:
                    fut.set_exception(exc)
        self._drain_waiters.clear()

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        for fut in self._drain_waiters:
            if not fut.done():
                fut.set_result(None)
        self._drain_waiters.clear()

    # -- reading -----------------------------------------------------------------------------------
    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _wait(self) -> None:
        assert self._waiter is None, "one read at a time"
        self._waiter = self._loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def _fail(self, partial: bytes | bytearray, expected: int) -> BaseException:
        if self._error is not None:
            return self._error
        return asyncio.IncompleteReadError(bytes(partial), expected)

    async def readexactly(self, n: int) -> bytes | bytearray:
        if n >= DIRECT_READ_BYTES:
            return await self._read_direct(n)
        while len(self._buffer) < n:
            if self._eof:
                raise self._fail(self._buffer, n)
            self._resume_reading()
            await self._wait()
        data = bytes(self._buffer[:n])
        del self._buffer[:n]
        self._resume_reading()
        return data

    async def _read_direct(self, n: int) -> bytearray:
        target = bytearray(n)
        have = min(len(self._buffer), n)
        target[:have] = self._buffer[:have]
        del self._buffer[:have]
        if have == n:
            return target
        self._target, self._target_view, self._filled = target, memoryview(target), have
        try:
            while self._filled < n:
                if self._eof:
                    raise self._fail(target[: self._filled], n)
                self._resume_reading()
                await self._wait()
        finally:
            self._target, self._target_view = None, None
        return target

    def _resume_reading(self) -> None:
        if self._paused_reading and len(self._buffer) <= _BUFFER_LIMIT and self.transport is not None:
            self._paused_reading = False
            self.transport.resume_reading()

    # -- writing -----------------------------------------------------------------------------------
    async def drain(self) -> None:
        if self._error is not None:
            raise self._error
        if self.transport is not None and self.transport.is_closing():
            # as StreamWriter: let connection_lost run, then report the loss
            await asyncio.sleep(0)
            if self._error is not None:
                raise self._error
            raise ConnectionResetError("connection lost")
        if not self._write_paused:
            return
        fut = self._loop.create_future()
        self._drain_waiters.append(fut)
        await fut


class StreamReader:
    """The read half: ``readexactly`` over a ``_StreamProtocol``."""

    def __init__(self, protocol: _StreamProtocol) -> None:
        self._protocol = protocol

    async def readexactly(self, n: int) -> bytes | bytearray:
        """Exactly ``n`` bytes; ``asyncio.IncompleteReadError`` if the peer closed first."""
        return await self._protocol.readexactly(n)


class StreamWriter:
    """The write half: the transport's ``write``, ``drain`` with flow control, ``close``."""

    def __init__(self, transport: asyncio.Transport, protocol: _StreamProtocol) -> None:
        self._transport = transport
        self._protocol = protocol

    def write(self, data: bytes | memoryview) -> None:
        self._transport.write(data)

    async def drain(self) -> None:
        await self._protocol.drain()

    def close(self) -> None:
        self._transport.close()


async def open_stream(
    host: str, port: int, *, ssl_context: ssl.SSLContext | None = None
) -> tuple[StreamReader, StreamWriter]:
    """Connect to ``host:port`` (TLS with ``ssl_context``); TCP_NODELAY is set by asyncio."""
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.create_connection(
        lambda: _StreamProtocol(loop),
        host,
        port,
        ssl=ssl_context,
        server_hostname=host if ssl_context is not None else None,
    )
    assert isinstance(transport, asyncio.Transport)
    return StreamReader(protocol), StreamWriter(transport, protocol)
