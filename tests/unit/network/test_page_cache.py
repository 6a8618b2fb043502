"""File regions the page cache does not hold are read off the event loop (docs/architecture.md, "slow work off
the event loop": nothing that
can take >1 ms on the broker's event loop; ``broker/network/response.py``, ``connection.py``).

Kafka documentation §4.3 "Efficiency": the broker sends log chunks "from pagecache to the network directly" with
sendfile — which is only non-blocking when the chunk is in the page cache. A region that is not
(an old segment a lagging consumer or a new follower reads) is read into the cache by an
executor thread first; a small one is read there whole.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

import pytest

from broker.network.connection import Connection, ConnectionContext, ConnectionLimits, HandlerResult
from broker.network.response import FileRegion, Response


def evict(path: Path) -> None:
    """Drop ``path``'s pages from the page cache (fsync, then POSIX_FADV_DONTNEED)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def evicted(tmp_path: Path, data: bytes, name: str = "00000000000000000000.log") -> Path:
    """A file holding ``data`` whose pages are not in the page cache. Skips where the filesystem
    keeps file pages in memory (tmpfs), which a sibling file shows: probing the file itself would
    start a readahead of it."""
    probe = tmp_path / "probe.bin"
    probe.write_bytes(bytes(8192))
    evict(probe)
    with probe.open("rb") as file:
        if FileRegion(file, 0, 8192).cached():
            pytest.skip(f"the filesystem of {tmp_path} keeps file pages in memory (tmpfs?)")
    path = tmp_path / name
    path.write_bytes(data)
    evict(path)
    return path


class FetchAfterPing:
    """Answers b"ping" with b"pong" and b"fetch" with ``response``."""

    def __init__(self, response: Response) -> None:
        self.response = response

    def handle(self, data: bytes | bytearray, ctx: ConnectionContext) -> HandlerResult:
        return Response([b"pong"]) if bytes(data) == b"ping" else self.response


def test_a_region_out_of_the_page_cache_is_not_cached_until_warmed(tmp_path: Path) -> None:
    """Each file is touched first by the probe under test: a missed nowait read may start a
    readahead, after which the pages arrive on their own."""
    data = os.urandom(256 * 1024)
    with open_evicted(tmp_path, data, "a", lambda f: not FileRegion(f, 4096, len(data) - 8192).cached()) as file:
        region = FileRegion(file, 4096, len(data) - 8192)
        region.warm()
        assert region.cached()
        assert region.read_cached() == data[4096:-4096]
    with open_evicted(tmp_path, data, "b", lambda f: FileRegion(f, 4096, 16384).read_cached() is None):
        pass


def open_evicted(tmp_path: Path, data: bytes, stem: str, out_of_cache: Callable[[BinaryIO], bool]) -> BinaryIO:
    """A new evicted file holding ``data``, open, for which ``out_of_cache`` held (the check under
    test). Up to three files: on a busy machine the kernel may keep a page that is still being
    written back when it is told to drop it, which only that file's check can see; a probe that
    never reports a missing page fails all three."""
    for attempt in range(3):
        file = evicted(tmp_path, data, f"{stem}{attempt}.log").open("rb")
        if out_of_cache(file):
            return file
        file.close()
    raise AssertionError(f"three evicted files of {len(data)} bytes all read as cached")


@pytest.mark.parametrize("size", [16 * 1024, 2 * 1024 * 1024], ids=["read-inline-size", "sendfile-size"])
def test_kafka_doc_4_3_a_region_out_of_the_page_cache_is_never_read_on_the_event_loop(
    tmp_path: Path, size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reads that may wait for the disk (``FileRegion.read``, ``FileRegion.warm``) run on an
    executor thread, never the loop's; the response arrives whole. (Whether one is needed at all
    depends on the readahead that the first nowait probe may start, so that is not asserted.)
    A ping first leaves the writer idle, so the fetch's response is begun by the reader itself
    (``Connection._send_now``), the path of a sequential consumer."""
    data = os.urandom(size)
    path = evicted(tmp_path, data)
    blocking_reads_on: list[str] = []
    for name in ("read", "warm"):
        original = getattr(FileRegion, name)

        def recording(region: FileRegion, _original: Callable[[FileRegion], Any] = original) -> Any:
            blocking_reads_on.append(threading.current_thread().name)
            return _original(region)

        monkeypatch.setattr(FileRegion, name, recording)

    async def scenario(file: BinaryIO) -> bytes:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(1, thread_name_prefix="executor"))
        server, client = socket.socketpair()
        client.setblocking(False)
        response = Response([b"head", FileRegion(file, 0, size), b"tail"])
        handler = FetchAfterPing(response)
        conn = Connection(server, handler, ConnectionContext("peer", "PLAINTEXT", 1), ConnectionLimits())
        task = asyncio.create_task(conn.run())
        await loop.sock_sendall(client, struct.pack(">i", 4) + b"ping")
        assert await loop.sock_recv(client, 64) == struct.pack(">i", 4) + b"pong"
        await loop.sock_sendall(client, struct.pack(">i", 5) + b"fetch")
        want = 4 + 4 + size + 4
        got = bytearray()
        while len(got) < want:
            chunk = await loop.sock_recv(client, 1 << 20)
            assert chunk, "closed early"
            got += chunk
        client.close()
        await task
        return bytes(got)

    with path.open("rb") as file:
        answer = asyncio.run(scenario(file))
    assert answer == struct.pack(">i", size + 8) + b"head" + data + b"tail"
    assert all(name.startswith("executor") for name in blocking_reads_on), blocking_reads_on
