"""``pyspark_log.client.stream``: the client's receive path over a real loopback socket.

A server writes frames of every size class (below and above ``DIRECT_READ_BYTES``) in pieces cut
at seeded random points, so a large read starts with bytes already buffered, ends mid-piece, and
small reads follow a large one inside the same piece. EOF inside a read is
``asyncio.IncompleteReadError`` with the bytes received, as ``asyncio.StreamReader`` raises it.
"""

from __future__ import annotations

import asyncio
import random
import struct

import pytest

from pyspark_log.client.stream import DIRECT_READ_BYTES, open_stream

SIZES = [0, 1, 3, 4096, DIRECT_READ_BYTES - 1, DIRECT_READ_BYTES, DIRECT_READ_BYTES + 1, 3 << 20, 17, 5 << 20, 2]


def _frames(seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(n) for n in SIZES]


async def _serve_pieces(data: bytes, seed: int, *, close_early_at: int | None = None):
    """A server that writes ``data`` (cut at random points) to its first client, then closes."""
    rng = random.Random(seed)
    payload = data if close_early_at is None else data[:close_early_at]

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        pos = 0
        while pos < len(payload):
            step = rng.choice((1, 3, 100, 65_535, 65_537, 300_000, 1 << 20))
            writer.write(payload[pos : pos + step])
            await writer.drain()
            pos += step
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_frames_of_every_size_arrive_whole_and_in_order(seed: int) -> None:
    frames = _frames(seed)
    data = b"".join(struct.pack(">i", len(f)) + f for f in frames)

    async def main() -> list[bytes]:
        server = await _serve_pieces(data, seed)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await open_stream("127.0.0.1", port)
        got = []
        try:
            for _ in frames:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                got.append(bytes(await reader.readexactly(size)))
            with pytest.raises(asyncio.IncompleteReadError):
                await reader.readexactly(4)
        finally:
            writer.close()
            server.close()
            await server.wait_closed()
        return got

    assert asyncio.run(main()) == frames


@pytest.mark.parametrize("want", [10, DIRECT_READ_BYTES * 4])
def test_eof_inside_a_read_raises_incomplete_read_with_the_partial_bytes(want: int) -> None:
    data = random.Random(want).randbytes(want)
    cut = want // 2

    async def main() -> asyncio.IncompleteReadError:
        server = await _serve_pieces(data, 7, close_early_at=cut)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await open_stream("127.0.0.1", port)
        try:
            with pytest.raises(asyncio.IncompleteReadError) as info:
                await reader.readexactly(want)
        finally:
            writer.close()
            server.close()
            await server.wait_closed()
        return info.value

    err = asyncio.run(main())
    assert err.partial == data[:cut]
    assert err.expected == want


def test_writes_larger_than_the_socket_buffers_drain() -> None:
    """``drain`` waits while the transport is over its high-water mark and resumes when the peer
    reads: 64 MiB written in 1 MiB pieces all arrive."""
    total = 64 << 20
    received = 0

    async def main() -> int:
        nonlocal received
        done = asyncio.get_running_loop().create_future()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal received
            while received < total:
                chunk = await reader.read(1 << 20)
                if not chunk:
                    break
                received += len(chunk)
            writer.close()
            done.set_result(None)

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        _, writer = await open_stream("127.0.0.1", port)
        piece = b"x" * (1 << 20)
        try:
            for _ in range(total // len(piece)):
                writer.write(piece)
                await writer.drain()
            await asyncio.wait_for(done, 120)
        finally:
            writer.close()
            server.close()
            await server.wait_closed()
        return received

    assert asyncio.run(main()) == total
