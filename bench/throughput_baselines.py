"""The raw-socket side of ``broker_throughput.py``: Kafka requests sent without a Kafka client, and
the two baselines the broker is compared with (its module doc describes them).

* ``produce_frames`` / ``pipelined_send``: librdkafka's own record batches, re-sent as Produce v9
  frames over one pipelined connection (row "pylog, raw client", and baseline (a));
* ``append_baseline``: baseline (a), a plain asyncio server in a child process (this file run with
  ``--append-server FILE``) that appends every received frame to a file and answers it;
* ``loopback_baseline``: baseline (b), bytes streamed over loopback TCP between two threads;
* ``raw_fetch``: sequential Fetch v12 requests received into one reused buffer (row "pylog, raw
  fetch client").

``Phase`` measures a block's wall seconds and the CPU seconds a process spent in it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyspark_log.records.header import iter_batch_headers
from pyspark_log.wire import ApiKey, decode_response, encode_request

_SIZE = struct.Struct(">i")
_ACK_BODY = bytes(44)  # baseline (a) answers: correlation id + 44 bytes = a Produce v9 answer's size


def broker_cpu_s(pid: int) -> float:
    """CPU seconds of process ``pid`` (Linux /proc): the scheduler's nanosecond run time summed
    over its threads (``task/*/schedstat``), or where the kernel keeps no schedstat, user +
    system clock ticks (``stat``: 10 ms steps, 0.05 ms/MB over a 200 MB phase). A thread that
    ends inside a phase takes its time with it; the broker's threads live as long as it does."""
    total_ns = 0
    try:
        for task in os.scandir(f"/proc/{pid}/task"):
            try:
                total_ns += int(Path(task.path, "schedstat").read_text().split()[0])
            except FileNotFoundError:
                continue  # the thread ended meanwhile
    except FileNotFoundError:
        total_ns = 0
    if total_ns:
        return total_ns / 1e9
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Phase:
    """Wall seconds of a block and the CPU seconds a process spent in it."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.wall = self.cpu = 0.0

    def __enter__(self) -> Phase:
        self._cpu0, self._t0 = broker_cpu_s(self.pid), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self._t0
        self.cpu = broker_cpu_s(self.pid) - self._cpu0


def partition_batches(data_dir: Path, topic: str) -> list[bytes]:
    """Every record batch of ``topic``-0, read from its segment files in offset order."""
    directory = data_dir / "logs" / f"{topic}-0"
    out: list[bytes] = []
    for path in sorted(directory.glob("*.log")):
        buf = path.read_bytes()
        out.extend(
            buf[pos : pos + h.size] for pos, h in iter_batch_headers(buf, verify_crc=False, stop_at_partial=True)
        )
    return out


def produce_frames(topic: str, batches: list[bytes]) -> list[bytes]:
    """One Produce v9 request (acks=1) per batch, as librdkafka sends them for one partition."""
    frames = []
    for i, batch in enumerate(batches):
        partition = {"index": 0, "records": batch}
        body = {"acks": 1, "timeout_ms": 30000, "topic_data": [{"name": topic, "partition_data": [partition]}]}
        frames.append(encode_request(ApiKey.PRODUCE, 9, i, "bench", body))
    return frames


def read_frames(sock: socket.socket, count: int, on_frame: Callable[[bytes], None] | None = None) -> None:
    """Read ``count`` size-prefixed frames from ``sock``."""
    buf = bytearray()
    seen = 0
    while seen < count:
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError(f"closed after {seen} of {count} responses")
        buf += chunk
        pos = 0
        while len(buf) - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if len(buf) - pos - 4 < size:
                break
            if on_frame is not None:
                on_frame(bytes(buf[pos + 4 : pos + 4 + size]))
            pos += 4 + size
            seen += 1
        del buf[:pos]


def pipelined_send(addr: tuple[str, int], frames: list[bytes], check: Callable[[bytes], None] | None = None) -> float:
    """Send every frame pipelined on one connection (a writer thread) and read one answer per
    frame; the wall seconds from the first send to the last answer."""
    with socket.create_connection(addr) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        errors: list[BaseException] = []

        def write() -> None:
            try:
                for frame in frames:
                    sock.sendall(frame)
            except OSError as exc:
                errors.append(exc)

        t0 = time.perf_counter()
        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        read_frames(sock, len(frames), check)
        elapsed = time.perf_counter() - t0
        writer.join()
        if errors:
            raise errors[0]
        return elapsed


# -- baseline (a): a plain asyncio server that appends each received frame to a file --------------


class _AppendProtocol(asyncio.Protocol):
    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buf = bytearray()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        pos = 0
        acks = []
        with memoryview(buf) as view:
            while len(buf) - pos >= 4:
                (size,) = _SIZE.unpack_from(buf, pos)
                if len(buf) - pos - 4 < size:
                    break
                os.write(self._fd, view[pos + 4 : pos + 4 + size])
                acks.append(_SIZE.pack(4 + len(_ACK_BODY)) + bytes(view[pos + 8 : pos + 12]) + _ACK_BODY)
                pos += 4 + size
        del buf[:pos]
        if acks and self._transport is not None:
            self._transport.write(b"".join(acks))


async def _serve_append(path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _AppendProtocol(fd), "127.0.0.1", 0)
    print(f"port {server.sockets[0].getsockname()[1]}", flush=True)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    server.close()
    os.close(fd)


def append_baseline(workdir: Path, frames: list[bytes]) -> tuple[float, float]:
    """Wall seconds of sending ``frames`` to a fresh append server, and the server's CPU seconds."""
    target = workdir / "append-baseline.bin"
    proc = subprocess.Popen(
        [sys.executable, __file__, "--append-server", str(target)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().split()[1])
        with Phase(proc.pid) as phase:
            pipelined_send(("127.0.0.1", port), frames)
        return phase.wall, phase.cpu
    finally:
        proc.terminate()
        proc.wait(10)
        target.unlink(missing_ok=True)


# -- baseline (b): loopback TCP bandwidth ----------------------------------------------------------


def loopback_baseline(total_bytes: int) -> tuple[float, float]:
    """Wall seconds to stream ``total_bytes`` over loopback TCP, and the sender thread's CPU."""
    chunk = os.urandom(1 << 20)
    with socket.create_server(("127.0.0.1", 0)) as server:
        sender = socket.create_connection(server.getsockname())
        receiver, _ = server.accept()
    sender_cpu = [0.0]

    def send() -> None:
        cpu0 = time.thread_time()
        left = total_bytes
        while left > 0:
            n = min(left, len(chunk))
            sender.sendall(memoryview(chunk)[:n])
            left -= n
        sender_cpu[0] = time.thread_time() - cpu0

    buf = bytearray(1 << 20)
    got = 0
    t0 = time.perf_counter()
    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    while got < total_bytes:
        n = receiver.recv_into(buf)
        if n == 0:
            break
        got += n
    elapsed = time.perf_counter() - t0
    thread.join()
    sender.close()
    receiver.close()
    return elapsed, sender_cpu[0]


def raw_fetch(addr: tuple[str, int], topic: str, end_offset: int) -> tuple[float, int]:
    """Read ``topic``-0 from offset 0 to ``end_offset`` with sequential Fetch v12 requests at
    librdkafka's default sizes; wall seconds and the record bytes received.

    Each response is received with ``recv_into`` straight into one reused buffer (as the
    loopback receiver does, and as librdkafka reads into its buffers), and its batch headers are
    parsed in place: the client copies no response byte after the kernel, so the row measures
    the broker rather than Python copies in the client."""
    offset = 0
    nbytes = 0
    buf = bytearray(4 << 20)  # grown when a response is larger (a first batch over the limit, KIP-74)
    with socket.create_connection(addr) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        t0 = time.perf_counter()
        while offset < end_offset:
            part = {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
            body = {"max_wait_ms": 500, "min_bytes": 1, "max_bytes": 50 << 20, "topics": [
                {"topic": topic, "partitions": [part]}]}  # fmt: skip
            sock.sendall(encode_request(ApiKey.FETCH, 12, offset, "bench", body))
            buf, size = _receive_frame_into(sock, buf)
            with memoryview(buf) as view:
                _, resp = decode_response(ApiKey.FETCH, 12, view[4 : 4 + size])
                records = resp.responses[0].partitions[0].records
                last = None
                for _, header in iter_batch_headers(records, verify_crc=False, stop_at_partial=True):
                    last = header
                if last is None:
                    raise RuntimeError(f"fetch at {offset} returned no whole batch: {resp}")
                nbytes += len(records)
                offset = last.next_offset
                del resp, records
        return time.perf_counter() - t0, nbytes


def _receive_frame_into(sock: socket.socket, buf: bytearray) -> tuple[bytearray, int]:
    """One size-prefixed frame received into ``buf`` (a larger buffer when it does not fit);
    the buffer and the frame's size (the frame starts at byte 4)."""
    got = 0
    size = -1
    while size < 0 or got < size + 4:
        if size >= 0 and size + 4 > len(buf):
            bigger = bytearray(size + 4)
            bigger[:got] = buf[:got]
            buf = bigger
        with memoryview(buf) as view:
            n = sock.recv_into(view[got : size + 4] if size >= 0 else view[got:])
        if n == 0:
            raise ConnectionError("closed inside a response")
        got += n
        if size < 0 and got >= 4:
            (size,) = _SIZE.unpack_from(buf)
    if got != size + 4:
        raise RuntimeError(f"{got - size - 4} bytes past the response: the client sent one request")
    return buf, size


def main() -> None:
    """The baseline (a) child: ``--append-server FILE`` serves until SIGTERM."""
    parser = argparse.ArgumentParser(description="baseline (a) of broker_throughput.py: the append server")
    parser.add_argument("--append-server", metavar="FILE", required=True)
    asyncio.run(_serve_append(parser.parse_args().append_server))


if __name__ == "__main__":
    main()
