"""Connection contract (broker/network/connection.py): order, acks=0, limits, and close()."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import struct
from pathlib import Path
from typing import BinaryIO

from broker.network.connection import Connection, ConnectionContext, ConnectionLimits, HandlerResult
from broker.network.response import FileRegion, Response


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class ScriptedHandler:
    """Answers each request with what ``script`` says for its payload."""

    def __init__(self, script: dict[bytes, HandlerResult]) -> None:
        self.script = script
        self.seen: list[bytes] = []
        self.called = asyncio.Event()
        self.all_called = asyncio.Event()

    def handle(self, data: bytes | bytearray, ctx: ConnectionContext) -> HandlerResult:
        self.seen.append(bytes(data))
        self.called.set()
        if len(self.seen) == len(self.script):
            self.all_called.set()
        return self.script[bytes(data)]


async def read_frames(sock: socket.socket, count: int) -> list[bytes]:
    loop = asyncio.get_running_loop()
    buf = b""
    out: list[bytes] = []
    while len(out) < count:
        chunk = await loop.sock_recv(sock, 65536)
        if not chunk:
            break
        buf += chunk
        while len(buf) >= 4 and len(buf) - 4 >= struct.unpack_from(">i", buf)[0]:
            size = struct.unpack_from(">i", buf)[0]
            out.append(buf[4 : 4 + size])
            buf = buf[4 + size :]
    return out


def start(handler: ScriptedHandler, limits: ConnectionLimits | None = None) -> tuple[Connection, socket.socket]:
    server, client = socket.socketpair()
    client.setblocking(False)
    conn = Connection(server, handler, ConnectionContext("peer", "PLAINTEXT", 1), limits or ConnectionLimits())
    return conn, client


def test_responses_keep_request_order_when_handlers_finish_out_of_order() -> None:
    async def scenario() -> list[bytes]:
        slow: asyncio.Future[Response | None] = asyncio.get_running_loop().create_future()
        handler = ScriptedHandler({b"first": slow, b"second": Response([b"2"]), b"acks0": None})
        conn, client = start(handler)
        task = asyncio.create_task(conn.run())
        await asyncio.get_running_loop().sock_sendall(client, frame(b"first") + frame(b"acks0") + frame(b"second"))
        await handler.all_called.wait()
        slow.set_result(Response([b"1"]))
        frames = await read_frames(client, 2)
        client.close()
        await task
        return frames

    assert asyncio.run(scenario()) == [b"1", b"2"]


def test_oversized_frame_closes_the_connection() -> None:
    async def scenario() -> bytes:
        handler = ScriptedHandler({})
        conn, client = start(handler, ConnectionLimits(request_max_bytes=1024))
        task = asyncio.create_task(conn.run())
        await asyncio.get_running_loop().sock_sendall(client, struct.pack(">i", 4096))
        await task
        rest = await asyncio.get_running_loop().sock_recv(client, 10)
        client.close()
        assert handler.seen == []
        return rest

    assert asyncio.run(scenario()) == b""


def test_close_cancels_parked_responses_instead_of_waiting_for_them() -> None:
    """A long-poll fetch parked on a connection must not hold up a broker shutdown."""

    async def scenario() -> asyncio.Future[Response | None]:
        parked: asyncio.Future[Response | None] = asyncio.get_running_loop().create_future()
        handler = ScriptedHandler({b"fetch": parked})
        conn, client = start(handler)
        task = asyncio.create_task(conn.run())
        await asyncio.get_running_loop().sock_sendall(client, frame(b"fetch"))
        await handler.called.wait()
        conn.close()
        await task
        client.close()
        return parked

    assert asyncio.run(scenario()).cancelled()


def test_a_response_to_a_later_request_waits_for_an_earlier_parked_one() -> None:
    """Requests that arrive in separate reads: the second's complete response must not be
    written at once by the reader while the first (a long poll) is still being waited for."""

    async def scenario() -> list[bytes]:
        loop = asyncio.get_running_loop()
        parked: asyncio.Future[Response | None] = loop.create_future()
        handler = ScriptedHandler({b"fetch": parked, b"metadata": Response([b"2"])})
        conn, client = start(handler)
        task = asyncio.create_task(conn.run())
        await loop.sock_sendall(client, frame(b"fetch"))
        await handler.called.wait()
        await loop.sock_sendall(client, frame(b"metadata"))
        await handler.all_called.wait()
        parked.set_result(Response([b"1"]))
        frames = await read_frames(client, 2)
        client.close()
        await task
        return frames

    assert asyncio.run(scenario()) == [b"1", b"2"]


def test_a_file_region_larger_than_the_socket_buffer_is_finished_by_the_writer(tmp_path: Path) -> None:
    """The reader writes a complete response at once only as far as the socket takes it; the
    writer sends the rest (file region included, from where sendfile stopped) before the next
    response, so the client reads both whole and in order."""
    data = os.urandom(4 * 1024 * 1024)  # far more than a socketpair's buffer
    path = tmp_path / "segment.log"
    path.write_bytes(data)

    async def scenario(file: BinaryIO) -> list[bytes]:
        loop = asyncio.get_running_loop()
        big = Response([b"head", FileRegion(file, 0, len(data)), b"tail"])
        handler = ScriptedHandler({b"fetch": big, b"next": Response([b"2"])})
        conn, client = start(handler)
        task = asyncio.create_task(conn.run())
        await loop.sock_sendall(client, frame(b"fetch"))
        await handler.called.wait()
        await loop.sock_sendall(client, frame(b"next"))
        await handler.all_called.wait()
        frames = await read_frames(client, 2)
        client.close()
        await task
        return frames

    with path.open("rb") as file:
        assert asyncio.run(scenario(file)) == [b"head" + data + b"tail", b"2"]


def test_a_cancelled_connection_leaves_no_selector_registration_for_its_descriptor_number() -> None:
    """The reader stays registered with the selector between requests (``Connection._recv_into``);
    a connection that ends must drop that registration — here one cancelled while its reader
    waits (as the listener cancels connections at shutdown). Epoll forgets a closed descriptor
    but the selector's map would not, and a new socket given the same number would never be
    woken. Each request is sent while the reader waits on the selector (after an answer)."""

    async def serve(payloads: list[bytes], *, cancel: bool) -> tuple[int, list[bytes]]:
        loop = asyncio.get_running_loop()
        handler = ScriptedHandler({p: Response([p]) for p in payloads})
        conn, client = start(handler)
        fd = conn._sock.fileno()
        task = asyncio.create_task(conn.run())
        answers: list[bytes] = []
        for payload in payloads:
            await loop.sock_sendall(client, frame(payload))
            answers += await asyncio.wait_for(read_frames(client, 1), 10)
        if cancel:  # while the peer is still connected: no end of stream wakes the reader
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            client.close()
        else:
            client.close()
            await task
        return fd, answers

    async def scenario() -> tuple[tuple[int, list[bytes]], tuple[int, list[bytes]]]:
        return await serve([b"1"], cancel=True), await serve([b"2", b"3"], cancel=False)

    (first_fd, first), (second_fd, second) = asyncio.run(scenario())
    assert second_fd == first_fd  # the second connection got the first one's descriptor number
    assert (first, second) == ([b"1"], [b"2", b"3"])
