"""The WriteTxnMarkers client of the transaction coordinator against a scripted broker on
loopback (review finding 18): one connection per destination even for concurrent first requests,
a timed-out request closes only its own socket, an unreadable response is a retriable failure."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable

import pytest

from broker.coordinator.txn import sender as sender_module
from broker.coordinator.txn.sender import BrokerSender, MarkerRequest
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.errors import ErrorCode
from pyspark_log.wire.headers import decode_request, encode_response

REQUEST = MarkerRequest(7, 1, 0, True, (("t", 0), ("t", 1)))
Answer = Callable[[int, int, bytes], Awaitable[bytes | None]]  # (connection no, request no, frame) -> reply


def ok_partition(index: int) -> dict[str, int]:
    return {"partition_index": index, "error_code": 0}


class ScriptedBroker:
    """Accepts connections and answers each WriteTxnMarkers frame through ``answer``."""

    def __init__(self, answer: Answer | None = None) -> None:
        self.connections = 0
        self.requests = 0
        self.received = asyncio.Event()  # set at the first request
        self.answer = answer or self.ok
        self.server: asyncio.Server | None = None

    @staticmethod
    async def ok(connection: int, number: int, frame: bytes) -> bytes | None:
        header, body = decode_request(frame)
        markers = [
            {
                "producer_id": m.producer_id,
                "topics": [
                    {"name": t.name, "partitions": [ok_partition(i) for i in t.partition_indexes]} for t in m.topics
                ],
            }
            for m in body.markers
        ]
        body_out = {"markers": markers}
        return encode_response(ApiKey.WRITE_TXN_MARKERS, header.api_version, header.correlation_id, body_out)

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        connection = self.connections
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                self.requests += 1
                self.received.set()
                reply = await self.answer(connection, self.requests, frame)
                if reply is not None:
                    writer.write(reply)
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()


def all_ok(results: dict[tuple[str, int], int]) -> bool:
    return results == dict.fromkeys(REQUEST.partitions, int(ErrorCode.NONE))


def test_concurrent_first_requests_share_one_connection() -> None:
    async def scenario() -> None:
        broker = ScriptedBroker()
        port = await broker.start()
        client = BrokerSender()
        first, second = await asyncio.gather(
            client.write_txn_markers("127.0.0.1", port, REQUEST),
            client.write_txn_markers("127.0.0.1", port, REQUEST),
        )
        assert all_ok(first)
        assert all_ok(second)
        assert broker.connections == 1
        client.close()
        await broker.stop()

    asyncio.run(scenario())


def test_a_timed_out_request_closes_its_connection_and_the_next_reopens(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first connection never answers: its request times out while holding the lock and
    closes that socket; the request queued behind it opens a new connection and succeeds."""
    never = asyncio.Event()

    async def silent_first_connection(connection: int, number: int, frame: bytes) -> bytes | None:
        if connection == 1:
            await never.wait()
        return await ScriptedBroker.ok(connection, number, frame)

    async def scenario() -> None:
        broker = ScriptedBroker(silent_first_connection)
        port = await broker.start()
        client = BrokerSender()
        monkeypatch.setattr(sender_module, "REQUEST_TIMEOUT_S", 1.0)
        stuck = asyncio.create_task(client.write_txn_markers("127.0.0.1", port, REQUEST))
        await asyncio.wait_for(broker.received.wait(), 10)  # sent before its timeout: it holds the lock now
        monkeypatch.setattr(sender_module, "REQUEST_TIMEOUT_S", 30.0)
        queued = asyncio.create_task(client.write_txn_markers("127.0.0.1", port, REQUEST))
        assert await stuck == dict.fromkeys(REQUEST.partitions, int(ErrorCode.REQUEST_TIMED_OUT))
        assert all_ok(await queued)
        assert broker.connections == 2
        client.close()
        never.set()
        await broker.stop()

    asyncio.run(scenario())


def test_a_waiter_that_times_out_leaves_the_holders_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    release = asyncio.Event()

    async def slow_first_request(connection: int, number: int, frame: bytes) -> bytes | None:
        if number == 1:
            await release.wait()
        return await ScriptedBroker.ok(connection, number, frame)

    async def scenario() -> None:
        broker = ScriptedBroker(slow_first_request)
        port = await broker.start()
        client = BrokerSender()
        holder = asyncio.create_task(client.write_txn_markers("127.0.0.1", port, REQUEST))
        await asyncio.wait_for(broker.received.wait(), 10)
        monkeypatch.setattr(sender_module, "REQUEST_TIMEOUT_S", 0.2)
        waiter = await client.write_txn_markers("127.0.0.1", port, REQUEST)  # times out on the lock
        assert waiter == dict.fromkeys(REQUEST.partitions, int(ErrorCode.REQUEST_TIMED_OUT))
        release.set()
        assert all_ok(await holder)
        monkeypatch.setattr(sender_module, "REQUEST_TIMEOUT_S", 30.0)
        assert all_ok(await client.write_txn_markers("127.0.0.1", port, REQUEST))
        assert broker.connections == 1  # nobody closed the holder's socket
        client.close()
        await broker.stop()

    asyncio.run(scenario())


def test_an_unreadable_response_is_retriable_and_resets_the_connection() -> None:
    async def garbage_first(connection: int, number: int, frame: bytes) -> bytes | None:
        reply = await ScriptedBroker.ok(connection, number, frame)
        assert reply is not None
        if number == 1:
            payload = reply[4:8] + b"\xff\xff\xff"  # the right correlation id, then no valid body
            return struct.pack(">i", len(payload)) + payload
        return reply

    async def scenario() -> None:
        broker = ScriptedBroker(garbage_first)
        port = await broker.start()
        client = BrokerSender()
        first = await client.write_txn_markers("127.0.0.1", port, REQUEST)
        assert first == dict.fromkeys(REQUEST.partitions, int(ErrorCode.REQUEST_TIMED_OUT))
        assert all_ok(await client.write_txn_markers("127.0.0.1", port, REQUEST))
        assert broker.connections == 2
        client.close()
        await broker.stop()

    asyncio.run(scenario())
