"""Append and read throughput of ``broker.log.Log`` beside plain-file baselines in the same run.

    .venv/bin/python bench/log_append.py [--mb 128] [--rounds 5] [--flush-every 0] [--profile]

For 1 KiB records in ~16 KiB and ~1 MiB batches it prints, per case, the best of ``--rounds``
runs (runs of the log and of its baseline alternate, so both see the same disk and page-cache
state):

* append: ``Log.append`` (validation with CRC check, offset assignment on a copy, segment write,
  index upkeep) against ``os.write`` of the same bytes to a plain file; with ``--flush-every N``
  both fsync every N appends (the log via ``flush.messages``);
* read: ``Log.read`` of 1 MiB fetches sent with ``os.sendfile`` to /dev/null and to a socket
  pair (a forked process drains it), and read into memory with ``FileSlice.read_bytes``, against the same
  transfers done on the plain file in 1 MiB steps.

Kafka documentation §4.3 "Efficiency" is the reason for the read side: the broker hands segment bytes to the socket with
sendfile, so the log should add only its lookups on top of the plain transfer. Figures are noisy
on a shared machine: run it a couple of times.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.log.config import LogConfig
from broker.log.log import Log
from pyspark_log.records.batch import ProducerRecord, encode_batch

RECORD_BYTES = 1024
FETCH_BYTES = 1 << 20
CASES = [("16 KiB batches", 16), ("1 MiB batches", 1000)]
Seconds = tuple[float, float]  # (wall, cpu)


def make_batch(records: int) -> bytes:
    value = bytes(range(256)) * (RECORD_BYTES // 256)
    return encode_batch([ProducerRecord(f"key-{i}".encode(), value, 1_700_000_000_000) for i in range(records)])


def _clock() -> int:
    return time.time_ns() // 1_000_000


class Timer:
    """Wall-clock and CPU (user + system, all threads of this process) seconds of a block."""

    def __enter__(self) -> Timer:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu

    @property
    def result(self) -> tuple[float, float]:
        return self.wall, self.cpu


def new_log(root: Path, flush_every: int) -> Log:
    directory = Path(tempfile.mkdtemp(prefix="log-", dir=root))
    config = LogConfig(flush_messages=flush_every or LogConfig().flush_messages, message_timestamp_after_max_ms=2**62)
    return Log.create(directory, "bench", 0, config, _clock)


def append_log(root: Path, data: bytes, count: int, flush_every: int, records: int) -> tuple[Seconds, Log]:
    log = new_log(root, flush_every * records if flush_every else 0)
    with Timer() as timer:
        for _ in range(count):
            log.append(data)
    return timer.result, log


def append_plain(root: Path, data: bytes, count: int, flush_every: int) -> tuple[Seconds, Path]:
    path = Path(tempfile.mkstemp(prefix="plain-", dir=root)[1])
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    with Timer() as timer:
        for i in range(count):
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if flush_every and (i + 1) % flush_every == 0:
                os.fsync(fd)
    os.close(fd)
    return timer.result, path


class Drainer:
    """A forked process that reads ``total`` bytes from a socket: the receiving side of the
    socket-pair benchmarks, in its own process so that it does not compete for our GIL."""

    def __init__(self, sock: socket.socket, total: int) -> None:
        self.pid = os.fork()
        if self.pid == 0:  # child
            got = 0
            while got < total:
                chunk = sock.recv(1 << 20)
                if not chunk:
                    break
                got += len(chunk)
            os._exit(0)

    def join(self) -> None:
        os.waitpid(self.pid, 0)


def read_log(log: Log, mode: str) -> Seconds:
    total = log.size_bytes
    sink, drainer, pair = _sink(mode, total)
    with Timer() as timer:
        offset = 0
        end = log.log_end_offset
        while offset < end:
            chunk = log.read(offset, FETCH_BYTES)
            if mode == "memory":
                chunk.read_bytes()
            else:
                chunk.send_to(sink)
            offset = chunk.next_offset
            chunk.close()
        if drainer is not None:
            drainer.join()
    _close_sink(mode, sink, pair)
    return timer.result


def read_plain(path: Path, mode: str) -> Seconds:
    total = path.stat().st_size
    sink, drainer, pair = _sink(mode, total)
    fd = os.open(path, os.O_RDONLY)
    with Timer() as timer:
        position = 0
        while position < total:
            size = min(FETCH_BYTES, total - position)
            if mode == "memory":
                os.pread(fd, size, position)
            else:
                sent = 0
                while sent < size:
                    sent += os.sendfile(sink, fd, position + sent, size - sent)
            position += size
        if drainer is not None:
            drainer.join()
    os.close(fd)
    _close_sink(mode, sink, pair)
    return timer.result


def _sink(mode: str, total: int) -> tuple[int, Drainer | None, tuple[socket.socket, ...]]:
    if mode == "socket":
        left, right = socket.socketpair()
        return left.fileno(), Drainer(right, total), (left, right)
    if mode == "devnull":
        return os.open(os.devnull, os.O_WRONLY), None, ()
    return -1, None, ()


def _close_sink(mode: str, sink: int, pair: tuple[socket.socket, ...]) -> None:
    for sock in pair:
        sock.close()
    if mode == "devnull":
        os.close(sink)


def _remove_log(log: Log) -> None:
    log.close(flush=False)
    for path in log.directory.iterdir():
        path.unlink()
    log.directory.rmdir()


def _line(name: str, seconds: float, nbytes: int, batches: int) -> str:
    return f"    {name:<30} {nbytes / seconds / 1e6:9.1f} MB/s {batches / seconds:11.0f} batches/s"


def _report(title: str, plain: list[Seconds], log: list[Seconds], nbytes: int, batches: int) -> None:
    """Best wall time of each side, and the log/plain throughput ratio on wall and on CPU time
    (CPU time is less disturbed by other processes on a shared machine)."""
    plain_wall, log_wall = min(w for w, _ in plain), min(w for w, _ in log)
    plain_cpu, log_cpu = min(c for _, c in plain), min(c for _, c in log)
    print(_line(f"plain {title}", plain_wall, nbytes, batches))
    print(_line(f"Log {title}", log_wall, nbytes, batches))
    ratio_cpu = plain_cpu / log_cpu if log_cpu > 0 else float("nan")
    print(f"    {'ratio log/plain':<30} {plain_wall / log_wall:9.2f} wall  {ratio_cpu:9.2f} cpu")


def bench_case(root: Path, label: str, records: int, total_mb: int, rounds: int, flush_every: int) -> None:
    data = make_batch(records)
    count = max(1, total_mb * 1_000_000 // len(data))
    nbytes = count * len(data)
    print(f"{label}: {records} x {RECORD_BYTES} B records, {len(data)} B per batch, {count} batches")
    log_times: list[Seconds] = []
    plain_times: list[Seconds] = []
    reads: dict[str, list[Seconds]] = {}
    modes = {"devnull": "sendfile /dev/null", "socket": "sendfile socketpair", "memory": "pread"}
    for round_number in range(rounds):
        # Alternate who goes first, and delete each file right after its reads: deleted files'
        # dirty pages are dropped, so neither side pays for the other's writeback.
        for kind in ("plain", "log") if round_number % 2 == 0 else ("log", "plain"):
            if kind == "plain":
                plain_time, plain_path = append_plain(root, data, count, flush_every)
                plain_times.append(plain_time)
                for mode in modes:
                    reads.setdefault(f"plain {mode}", []).append(read_plain(plain_path, mode))
                plain_path.unlink()
            else:
                log_time, log = append_log(root, data, count, flush_every, records)
                log_times.append(log_time)
                for mode in modes:
                    reads.setdefault(f"log {mode}", []).append(read_log(log, mode))
                _remove_log(log)
    policy = f"fsync every {flush_every} appends" if flush_every else "no fsync: page cache"
    print(f"  append ({policy}; plain = os.write, Log = Log.append)")
    _report("append", plain_times, log_times, nbytes, count)
    print(f"  read ({FETCH_BYTES >> 20} MiB fetches; Log = Log.read + the same transfer of its FileSlice)")
    for mode, title in modes.items():
        _report(title, reads[f"plain {mode}"], reads[f"log {mode}"], nbytes, count)


def profile_append(root: Path, total_mb: int) -> None:
    data = make_batch(1000)
    count = max(1, total_mb * 1_000_000 // len(data))
    profiler = cProfile.Profile()
    profiler.enable()
    _, log = append_log(root, data, count, 0, 1000)
    profiler.disable()
    _remove_log(log)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(12)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=128, help="bytes appended per run, in MB")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--flush-every", type=int, default=0, help="fsync every N appends (0: never)")
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp dir)")
    parser.add_argument("--profile", action="store_true", help="cProfile the 1 MiB append path")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pylog-bench-", dir=args.dir) as tmp:
        root = Path(tmp)
        if args.profile:
            profile_append(root, args.mb)
            return
        for label, records in CASES:
            bench_case(root, label, records, args.mb, args.rounds, args.flush_every)


if __name__ == "__main__":
    main()
