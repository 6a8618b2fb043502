"""``PeerConnection`` against a peer that answers with frames it cannot read: the request fails
with PeerError (which the driver reports to the core as a failed request, finding 17), and the
next request works on a new connection. A connection whose SASL session is ending (KIP-368) is
retired while an answer is still pending on it."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from typing import Any

import pytest

from broker.network.dial import Dialer
from broker.network.peer import PeerConnection, PeerError
from broker.raft.messages import DescribeQuorumRequest
from broker.raft.rpc import error_response_to_wire, request_to_wire
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.headers import encode_response
from tests.waiting import wait_until_async

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


class StaleOnDemand(Dialer):
    """Plain TCP; a connection is stale (KIP-368: its SASL session ends soon) once the test says."""

    def __init__(self) -> None:
        super().__init__(client_id="raft-1")
        self.opened: list[asyncio.StreamWriter] = []
        self.stale_ones: set[asyncio.StreamWriter] = set()

    async def __call__(self, host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await super().__call__(host, port)
        self.opened.append(writer)
        return reader, writer

    def stale(self, writer: asyncio.StreamWriter) -> bool:
        return writer in self.stale_ones


def epoch(answer: Any) -> int:
    return int(answer.topics[0].partitions[0].leader_epoch)


def test_a_stale_connection_is_retired_and_its_pending_answers_still_arrive() -> None:
    """A request sent while an earlier one waits for its answer goes on a new connection once the
    first is stale; the earlier answer still arrives on the old connection, which then closes."""

    async def main() -> None:
        release_first = asyncio.Event()
        accepted: list[asyncio.StreamWriter] = []
        served: list[int] = []  # the connection (1, 2, ...) of each request, in arrival order
        closed: list[int] = []

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.append(writer)
            number = len(accepted)
            try:
                while True:
                    (size,) = struct.unpack(">i", await reader.readexactly(4))
                    request = await reader.readexactly(size)
                    (correlation_id,) = struct.unpack_from(">i", request, 4)
                    served.append(number)
                    if len(served) == 1:
                        await release_first.wait()  # the first answer waits (a parked Fetch)
                    body = error_response_to_wire(ApiKey.DESCRIBE_QUORUM, 0, 1, 7)
                    writer.write(encode_response(ApiKey.DESCRIBE_QUORUM, version, correlation_id, body))
                    await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                closed.append(number)
                writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        dialer = StaleOnDemand()
        peer = PeerConnection(2, "127.0.0.1", port, client_id="raft-1", request_timeout_ms=30_000, dialer=dialer)
        api_key, version, body = request_to_wire(DescribeQuorumRequest())
        try:
            async with asyncio.timeout(30):
                first = asyncio.create_task(peer.request(api_key, version, body))
                await wait_until_async(lambda: served == [1], what="the first request at the peer")
                dialer.stale_ones.add(dialer.opened[0])
                second = await peer.request(api_key, version, body)  # on a new connection, answered at once
                assert served == [1, 2]
                assert len(dialer.opened) == 2
                assert not first.done()
                release_first.set()
                assert epoch(await first) == epoch(second) == 7
                await wait_until_async(lambda: closed == [1], what="the retired connection closed")
                assert epoch(await peer.request(api_key, version, body)) == 7
                assert len(dialer.opened) == 2  # the new connection stays
        finally:
            await peer.close()
            server.close()
            await server.wait_closed()

    asyncio.run(main())
