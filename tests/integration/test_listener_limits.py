"""The listener on a loopback port: the request-frame timeout, KIP-306 per-address and KIP-402
broker-wide connection limits, and accept back-off (broker/network/listener.py; issue 16)."""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import struct

import pytest

from broker.network import listener as listener_module
from broker.network.connection import ConnectionContext, ConnectionLimits, HandlerResult
from broker.network.listener import Listener
from broker.network.response import Response
from broker.quota.connections import ConnectionLimitsConfig, ConnectionQuotas


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class EchoHandler:
    """Answers each request frame with its own payload."""

    def handle(self, data: bytes | bytearray, ctx: ConnectionContext) -> HandlerResult:
        return Response([bytes(data)])


async def _listener(limits: ConnectionLimits, quotas: ConnectionQuotas | None = None) -> Listener:
    listener = Listener("PLAINTEXT", "127.0.0.1", 0, limits, quotas=quotas)
    listener.start(EchoHandler())
    return listener


async def _eof(sock: socket.socket, timeout_s: float = 10) -> bool:
    loop = asyncio.get_running_loop()
    try:
        return await asyncio.wait_for(loop.sock_recv(sock, 1), timeout_s) == b""
    except ConnectionResetError:
        return True


def test_a_request_frame_that_does_not_complete_in_time_closes_the_connection() -> None:
    """Issue 16: connections that send a partial frame and wait are closed after
    ``socket.request.frame.timeout.ms`` (the slow-frame flood that exhausted descriptors)."""

    async def scenario() -> tuple[bool, bool]:
        listener = await _listener(ConnectionLimits(frame_timeout_ms=100))
        loop = asyncio.get_running_loop()
        partial, whole = socket.socket(), socket.socket()
        try:
            for s in (partial, whole):
                s.setblocking(False)
                await loop.sock_connect(s, ("127.0.0.1", listener.port))
            await loop.sock_sendall(partial, struct.pack(">i", 100) + b"abc")
            await loop.sock_sendall(whole, frame(b"ok"))
            closed = await _eof(partial)
            answered = await loop.sock_recv(whole, 64) == frame(b"ok")
            return closed, answered
        finally:
            partial.close()
            whole.close()
            await listener.close()

    assert asyncio.run(scenario()) == (True, True)


def test_kip306_connections_beyond_the_per_ip_limit_are_closed_at_accept() -> None:
    async def scenario() -> tuple[list[bool], int]:
        quotas = ConnectionQuotas(ConnectionLimitsConfig(max_connections_per_ip=2))
        listener = await _listener(ConnectionLimits(), quotas)
        loop = asyncio.get_running_loop()
        socks = [socket.socket() for _ in range(3)]
        try:
            for s in socks:
                s.setblocking(False)
                await loop.sock_connect(s, ("127.0.0.1", listener.port))
            third_closed = await _eof(socks[2])
            for s in socks[:2]:
                await loop.sock_sendall(s, frame(b"hi"))
            answered = [await loop.sock_recv(s, 64) == frame(b"hi") for s in socks[:2]]
        finally:
            for s in socks:
                s.close()
            await listener.close()
        return [*answered, third_closed], quotas.total

    results, total = asyncio.run(scenario())
    assert results == [True, True, True]
    assert total == 0  # every close released its count


def test_accept_errors_back_off_and_are_logged_once_per_interval(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 16: "the listener logged 'Too many open files' every 50 ms" — now exponential
    back-off to 1 s and one log line per interval."""
    sleeps: list[float] = []
    real_sleep = asyncio.sleep

    async def recording_sleep(delay: float) -> None:
        sleeps.append(delay)
        await real_sleep(0)

    async def scenario() -> int:
        listener = Listener("PLAINTEXT", "127.0.0.1", 0, ConnectionLimits(idle_ms=10**9))
        loop = asyncio.get_running_loop()

        async def emfile(_sock: socket.socket) -> tuple[socket.socket, object]:
            raise OSError(errno.EMFILE, "Too many open files")

        monkeypatch.setattr(loop, "sock_accept", emfile)
        monkeypatch.setattr(listener_module.asyncio, "sleep", recording_sleep)
        listener.start(EchoHandler())
        while listener.accept_errors < 8:
            await real_sleep(0)
        monkeypatch.setattr(listener_module.asyncio, "sleep", real_sleep)
        await listener.close()
        return listener.accept_errors

    with caplog.at_level(logging.WARNING, logger="broker.network.listener"):
        asyncio.run(scenario())
    backoffs = [s for s in sleeps if s in (0.05, 0.1, 0.2, 0.4, 0.8, 1.0)]
    assert backoffs[:7] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert len([r for r in caplog.records if "accept failed" in r.getMessage()]) == 1


def test_kip402_at_max_connections_the_listener_waits_for_a_free_slot() -> None:
    async def scenario() -> tuple[bool, bytes]:
        quotas = ConnectionQuotas(ConnectionLimitsConfig(max_connections=1))
        listener = await _listener(ConnectionLimits(), quotas)
        loop = asyncio.get_running_loop()
        first, second = socket.socket(), socket.socket()
        try:
            for s in (first, second):
                s.setblocking(False)
            await loop.sock_connect(first, ("127.0.0.1", listener.port))
            await loop.sock_sendall(first, frame(b"one"))
            assert await loop.sock_recv(first, 64) == frame(b"one")
            await loop.sock_connect(second, ("127.0.0.1", listener.port))  # completes in the backlog
            await loop.sock_sendall(second, frame(b"two"))
            waiting = listener.connection_count == 1
            first.close()
            answer = await asyncio.wait_for(loop.sock_recv(second, 64), 10)
        finally:
            first.close()
            second.close()
            await listener.close()
        return waiting, answer

    waiting, answer = asyncio.run(scenario())
    assert waiting
    assert answer == frame(b"two")
