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


def test_seed_4_9_a_muted_channel_answers_at_once_and_reads_nothing_until_the_delay_ends() -> None:
    """ "이 지연 시간을 담은 응답을 즉시 반환한다 … 그런 다음 브로커는 지연이 끝날 때까지 더 이상 클라이언트의
    요청을 처리하지 않으며, 이 클라이언트에 대한 채널을 mute시킨다"."""

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
