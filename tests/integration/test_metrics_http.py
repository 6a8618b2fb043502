"""The ``metrics.port`` endpoint (``broker.metrics.http``) against clients that send garbage, partial
or oversized HTTP, or nothing at all: each such connection is answered 400/404 or closed, and the
endpoint keeps serving ``GET /metrics`` to everyone else (review finding 20)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from broker.metrics import http as metrics_http
from broker.metrics.collectors import RaftCollector
from broker.metrics.exposition import render
from broker.metrics.http import MetricsServer

VALUES: dict[str, float | int | str] = {"current-leader": 1, "current-state": "leader", "poll-idle-ratio-avg": 0.5}
Scenario = Callable[[MetricsServer], Awaitable[None]]
Collector = Callable[[], dict[str, float | int | str] | None]


async def exchange(port: int, data: bytes, *, eof: bool = True) -> bytes:
    """Send ``data`` (then EOF), return everything the server sends before closing."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        if eof:
            writer.write_eof()
        async with asyncio.timeout(20):
            return await reader.read()
    finally:
        writer.close()


async def get_metrics(port: int) -> bytes:
    return await exchange(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")


def run_with_server(scenario: Scenario, collect: Collector = lambda: VALUES) -> None:
    async def main() -> None:
        server = MetricsServer("127.0.0.1", 0, RaftCollector(collect))
        await server.start()
        try:
            await scenario(server)
            answer = await get_metrics(server.port)  # whatever happened before, it still serves
            assert answer.startswith(b"HTTP/1.0 200 OK\r\n")
            assert answer.endswith(render([RaftCollector(collect)]))
        finally:
            await server.close()

    asyncio.run(main())


def test_get_metrics_is_the_prometheus_page() -> None:
    async def scenario(server: MetricsServer) -> None:
        answer = await get_metrics(server.port)
        head, _, body = answer.partition(b"\r\n\r\n")
        assert b"Content-Type: text/plain; version=0.0.4" in head
        assert f"Content-Length: {len(body)}".encode() in head
        assert b'kafka_raft_current_state{state="leader"} 1.0' in body

    run_with_server(scenario)


@pytest.mark.parametrize(
    "garbage",
    [
        b"",  # connect and close
        b"\x00\xff\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" * 20,  # binary (a TLS hello), no head end
        b"GET /metr",  # cut inside the request line
        b"GET /metrics HTTP/1.1\r\nHost: x\r\n",  # head without its blank line
        b"\r\n\r\n",  # an empty request line
        b"\xff\xfe\xfd\r\n\r\n",  # one undecodable word
        b"GET\r\n\r\n",  # no path
        b"GET /metrics HTTP/1.1 extra words\r\n\r\n",  # too many parts
    ],
)
def test_garbage_is_closed_or_answered_400(garbage: bytes) -> None:
    async def scenario(server: MetricsServer) -> None:
        answer = await exchange(server.port, garbage)
        assert answer == b"" or answer.startswith(b"HTTP/1.0 400 Bad Request\r\n")

    run_with_server(scenario)


@pytest.mark.parametrize(
    ("request_head", "status"),
    [
        (b"POST /metrics HTTP/1.1\r\n\r\n", b"404"),
        (b"GET /other HTTP/1.1\r\n\r\n", b"404"),
        (b"GET /metrics?name[]=x HTTP/1.0\r\n\r\n", b"200"),
        (b"GET / HTTP/1.0\r\n\r\n", b"200"),
        (b"GET /metrics\r\n\r\n", b"200"),  # HTTP/0.9-style line, still answered
        (b"GET\t/metrics\tHTTP/1.1\r\n\r\n", b"200"),
        (b"\r\n\r\n\r\n", b"400"),
    ],
)
def test_request_lines(request_head: bytes, status: bytes) -> None:
    async def scenario(server: MetricsServer) -> None:
        answer = await exchange(server.port, request_head)
        assert answer.startswith(b"HTTP/1.0 " + status)

    run_with_server(scenario)


def test_an_oversized_head_is_closed_without_reading_it_all() -> None:
    async def scenario(server: MetricsServer) -> None:
        head = b"GET /metrics HTTP/1.1\r\n" + b"X-Filler: " + b"a" * (64 * 1024) + b"\r\n\r\n"
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            writer.write(head)
            await writer.drain()
            async with asyncio.timeout(20):
                answer = await reader.read()
        except ConnectionError:  # the server closed while we were still sending: reset or pipe
            answer = b""
        finally:
            writer.close()
        assert answer == b""

    run_with_server(scenario)


def test_a_silent_client_is_dropped_and_does_not_block_others(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics_http, "_READ_TIMEOUT_S", 0.2)

    async def scenario(server: MetricsServer) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /metrics HTTP/1.1\r\n")  # and never the rest
        await writer.drain()
        try:
            assert (await get_metrics(server.port)).startswith(b"HTTP/1.0 200")  # served meanwhile
            async with asyncio.timeout(20):
                assert await reader.read() == b""  # then the silent one is closed, unanswered
        finally:
            writer.close()

    run_with_server(scenario)


def test_many_half_open_connections_at_once() -> None:
    async def scenario(server: MetricsServer) -> None:
        answers = await asyncio.gather(
            *(exchange(server.port, b"GET /metrics HTTP/1.1\r\n" if i % 2 else b"\x00" * i) for i in range(50)),
            *(get_metrics(server.port) for _ in range(10)),
        )
        assert all(a == b"" for a in answers[:50])
        assert all(a.startswith(b"HTTP/1.0 200") for a in answers[50:])

    run_with_server(scenario)


def test_a_failing_collector_closes_that_connection_only() -> None:
    calls: list[int] = []

    def collect() -> dict[str, float | int | str] | None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("collector broke once")
        return VALUES

    async def scenario(server: MetricsServer) -> None:
        assert await get_metrics(server.port) == b""

    run_with_server(scenario, collect)


def test_no_quorum_renders_up_zero() -> None:
    assert render([RaftCollector(lambda: None)]).endswith(b"# TYPE kafka_raft_up gauge\nkafka_raft_up 0.0\n")
