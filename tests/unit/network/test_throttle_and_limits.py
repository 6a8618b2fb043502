"""KIP-219 channel muting over a socket pair (broker/network/connection.py; issue 16). The
listener's request-frame timeout, per-address limits and accept back-off bind a loopback port:
tests/integration/test_listener_limits.py."""

from __future__ import annotations

import asyncio
import socket
import struct
import time

from broker.network.connection import Connection, ConnectionContext, ConnectionLimits, HandlerResult
from broker.network.response import Response


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class MutingHandler:
    """Mutes the channel for ``mute_s`` on the first request (as the quota enforcer does)."""

    def __init__(self, mute_s: float) -> None:
        self.mute_s = mute_s
        self.handled: list[tuple[bytes, float]] = []
        self.muted_until = 0.0
        self.done = asyncio.Event()

    def handle(self, data: bytes | bytearray, ctx: ConnectionContext) -> HandlerResult:
        self.handled.append((bytes(data), time.monotonic()))
        if len(self.handled) == 1:
            ctx.muted_until = self.muted_until = time.monotonic() + self.mute_s
        else:
            self.done.set()
        return Response([bytes(data)])


def test_kafka_doc_4_9_a_muted_channel_answers_at_once_and_reads_nothing_until_the_delay_ends() -> None:
    """the answer with the delay goes out at once, then the broker mutes the client's channel until the delay
    is over."""

    async def scenario() -> tuple[MutingHandler, list[bytes]]:
        handler = MutingHandler(0.3)
        server, client = socket.socketpair()
        client.setblocking(False)
        conn = Connection(server, handler, ConnectionContext("peer", "PLAINTEXT", 1), ConnectionLimits())
        task = asyncio.create_task(conn.run())
        loop = asyncio.get_running_loop()
        await loop.sock_sendall(client, frame(b"first") + frame(b"second"))
        first = await loop.sock_recv(client, 64)  # the throttled response comes at once
        assert len(handler.handled) == 1  # the pipelined second request waits for the mute to end
        await asyncio.wait_for(handler.done.wait(), 10)
        second = await loop.sock_recv(client, 64)
        client.close()
        await task
        return handler, [first, second]

    handler, responses = asyncio.run(scenario())
    assert responses == [frame(b"first"), frame(b"second")]
    assert handler.handled[1][1] >= handler.muted_until
