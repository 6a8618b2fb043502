"""Broker-to-broker connections: one TCP connection per peer and purpose, reopened on demand.

Used by the KIP-595 Raft RPCs (``broker.raft.driver``) and the follower fetchers
(``broker.replication.fetcher``); each opens its own connections, since a connection answers in
request order and a parked follower fetch must not hold up a vote.

``PeerConnection.request(api_key, version, body)`` connects if needed, writes the request frame
and waits for the response with the same correlation id, at most ``request_timeout_ms``
(``quorum.request.timeout.ms``). Any failure (connect refused, reset, EOF, undecodable frame,
timeout) raises ``PeerError``, closes the connection, and fails every other request waiting on it
(docs/architecture.md ("one owner per file and per background loop")); the next request connects again. Retries and
their pacing are the Raft
core's business (``request_failed`` -> exponential backoff), not this class's.

Connections are opened by a ``broker.network.dial.Dialer`` (TLS and/or the SASL login of the
listener the peer is reached on; plain TCP without one). When the peer's SASL session is ending
(KIP-368, ``Dialer.stale``), the connection is retired: the next request goes on a new one while
the requests already sent on the old one still get their answers there; it is closed once they
have (or fail with it if the peer closes it first). Frames use ``pyspark_log.wire`` codecs;
no ApiVersions handshake: peers are pylog brokers of the same release and the versions are fixed
(``broker.raft.rpc``, ``broker.replication.fetcher``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import Mapping
from typing import Any

from broker.network.dial import Dialer
from pyspark_log.wire.headers import decode_response, encode_request, peek_correlation_id
from pyspark_log.wire.message import Message

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
MAX_FRAME_BYTES = 256 * 1024 * 1024


class PeerError(Exception):
    """A request to a peer failed (no connection, broken connection, timeout, bad frame)."""


class PeerConnection:
    """Requests to one peer ``host:port``; used from one event loop."""

    def __init__(
        self, node_id: int, host: str, port: int, *, client_id: str, request_timeout_ms: int,
        dialer: Dialer | None = None,
    ) -> None:  # fmt: skip
        self.node_id = node_id
        self._dial = dialer or Dialer(client_id=client_id)
        self.host = host
        self.port = port
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._connecting: asyncio.Task[None] | None = None
        # correlation id -> (api key, version, waiter, the connection it was sent on)
        self._pending: dict[int, tuple[int, int, asyncio.Future[Message], asyncio.StreamWriter]] = {}
        self._retiring: dict[asyncio.StreamWriter, asyncio.Task[None] | None] = {}  # stale, answers pending
        self._next_correlation_id = 1
        self._closed = False

    def __repr__(self) -> str:
        return f"PeerConnection(node={self.node_id}, {self.host}:{self.port})"

    @property
    def connected(self) -> bool:
        return self._writer is not None

    async def request(self, api_key: int, version: int, body: Mapping[str, Any]) -> Message:
        """Send one request and return the decoded response body; PeerError on any failure."""
        if self._closed:
            raise PeerError(f"{self} is closed")
        try:
            async with asyncio.timeout(self.request_timeout_ms / 1000):
                if self._writer is not None and self._dial.stale(self._writer):
                    self._retire()  # KIP-368: the peer ends this session soon
                await self._ensure_connected()
                correlation_id = self._next_correlation_id
                self._next_correlation_id = (correlation_id + 1) & 0x7FFF_FFFF
                future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
                writer = self._writer
                assert writer is not None
                self._pending[correlation_id] = (api_key, version, future, writer)
                try:
                    writer.write(encode_request(api_key, version, correlation_id, self.client_id, body))
                    await writer.drain()
                    return await future
                finally:
                    self._pending.pop(correlation_id, None)
                    if writer in self._retiring and not self._sent_on(writer):
                        self._close_retired(writer)
        except TimeoutError:
            self._drop(PeerError(f"{self}: no response within {self.request_timeout_ms} ms"))
            raise PeerError(f"{self}: request timed out after {self.request_timeout_ms} ms") from None
        except (OSError, EOFError, asyncio.IncompleteReadError) as exc:
            self._drop(PeerError(f"{self}: {exc!r}"))
            raise PeerError(f"{self}: {exc!r}") from exc

    async def _ensure_connected(self) -> None:
        if self._writer is not None:
            return
        if self._connecting is None:
            self._connecting = asyncio.create_task(self._connect(), name=f"peer-connect-{self.node_id}")
            self._connecting.add_done_callback(_consume_result)
        task = self._connecting
        try:
            await asyncio.shield(task)
        finally:
            if task.done() and self._connecting is task:
                self._connecting = None

    async def _connect(self) -> None:
        reader, writer = await self._dial(self.host, self.port)
        if self._closed:
            writer.close()
            raise PeerError(f"{self} is closed")
        self._writer = writer
        self._reader_task = asyncio.create_task(self._read_loop(reader, writer), name=f"peer-{self.node_id}")

    async def _read_loop(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        error: Exception = PeerError(f"{self}: connection closed by peer")
        try:
            while True:
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                if not 0 < size <= MAX_FRAME_BYTES:
                    error = PeerError(f"{self}: bad frame size {size}")
                    break
                frame = await reader.readexactly(size)
                pending = self._pending.get(peek_correlation_id(frame))
                if pending is None:
                    continue  # the answer to a request that already timed out
                api_key, version, future, _ = pending
                try:
                    _, body = decode_response(api_key, version, frame)
                except Exception as exc:  # noqa: BLE001 - a frame we cannot read fails its request only
                    if not future.done():
                        future.set_exception(PeerError(f"{self}: undecodable response: {exc!r}"))
                    continue
                if not future.done():
                    future.set_result(body)
        except Exception as exc:  # noqa: BLE001 - whatever broke the stream, every waiter gets a PeerError
            error = PeerError(f"{self}: {exc!r}")
        finally:
            if self._writer is writer:
                self._drop(error, from_reader=True)
            elif writer in self._retiring:
                self._retiring.pop(writer, None)
                writer.close()
                self._fail_sent_on(writer, error)

    def _sent_on(self, writer: asyncio.StreamWriter) -> bool:
        return any(entry[3] is writer for entry in self._pending.values())

    def _fail_sent_on(self, writer: asyncio.StreamWriter | None, error: Exception) -> None:
        """Fail the requests waiting for an answer on ``writer`` (None: on any connection)."""
        for correlation_id, (_, _, future, sent_on) in list(self._pending.items()):
            if writer is None or sent_on is writer:
                if not future.done():
                    future.set_exception(error)
                del self._pending[correlation_id]

    def _retire(self) -> None:
        """Stop sending on the current connection; it closes once its pending answers came."""
        writer, task = self._writer, self._reader_task
        self._writer, self._reader_task = None, None
        if writer is None:
            return
        self._retiring[writer] = task
        if not self._sent_on(writer):
            self._close_retired(writer)

    def _close_retired(self, writer: asyncio.StreamWriter) -> None:
        task = self._retiring.pop(writer, None)
        writer.close()
        if task is not None:
            task.cancel()

    def _drop(self, error: Exception, *, from_reader: bool = False) -> None:
        """Close the current connection and fail every request waiting on it."""
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
        task, self._reader_task = self._reader_task, None
        if task is not None and not from_reader:
            task.cancel()
        if writer is not None:
            self._fail_sent_on(writer, error)

    async def close(self) -> None:
        """Close for good: fail every waiting request; later requests raise PeerError."""
        self._closed = True
        task = self._reader_task
        error = PeerError(f"{self} is closed")
        self._drop(error)
        for retired in list(self._retiring):
            self._close_retired(retired)
        self._fail_sent_on(None, error)
        if self._connecting is not None:
            self._connecting.cancel()
            with contextlib.suppress(BaseException):
                await self._connecting
        if task is not None:
            with contextlib.suppress(BaseException):
                await task


def _consume_result(task: asyncio.Task[None]) -> None:
    """A connect task's failure is reported to the request that awaited it; this only keeps
    asyncio from logging it again when that request timed out first."""
    if not task.cancelled():
        task.exception()
