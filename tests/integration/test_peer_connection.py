"""``PeerConnection`` against a peer that answers with frames it cannot read: the request fails
with PeerError (which the driver reports to the core as a failed request, finding 17), and the
next request works on a new connection."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable

import pytest

from broker.network.peer import PeerConnection, PeerError
from broker.raft.messages import DescribeQuorumRequest
from broker.raft.rpc import request_to_wire

Answer = Callable[[int], bytes]


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


ANSWERS: dict[str, Answer] = {
    "too short for a correlation id": lambda _cid: frame(b"\xab\xcd"),
    "truncated body": lambda cid: frame(struct.pack(">i", cid) + b"\x00"),
    "garbage body": lambda cid: frame(struct.pack(">i", cid) + b"\xff" * 40),
    "negative frame size": lambda _cid: struct.pack(">i", -7),
}


@pytest.mark.parametrize("answer", ANSWERS.values(), ids=ANSWERS.keys())
def test_an_unreadable_answer_is_a_peer_error_and_the_next_request_reconnects(answer: Answer) -> None:
    async def main() -> None:
        connections = 0

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal connections
            connections += 1
            try:
                while True:
                    (size,) = struct.unpack(">i", await reader.readexactly(4))
                    request = await reader.readexactly(size)
                    (correlation_id,) = struct.unpack_from(">i", request, 4)  # after api key and version
                    writer.write(answer(correlation_id))
                    await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        peer = PeerConnection(2, "127.0.0.1", port, client_id="raft-1", request_timeout_ms=600_000)
        api_key, version, body = request_to_wire(DescribeQuorumRequest())
        try:
            for attempt in (1, 2):
                with pytest.raises(PeerError):  # at once, not by the (long) request timeout
                    async with asyncio.timeout(20):
                        await peer.request(api_key, version, body)
                assert connections <= attempt  # the broken connection is not reused for ever
        finally:
            await peer.close()
            server.close()
            await server.wait_closed()

    asyncio.run(main())
