"""Connection contract (broker/network/connection.py): order, acks=0, limits, and close()."""

from __future__ import annotations

import asyncio
import socket
import struct

from broker.network.connection import Connection, ConnectionContext, ConnectionLimits, HandlerResult
from broker.network.response import Response


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
