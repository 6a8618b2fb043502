"""Log cleaner figures: throughput, bytes per offset-map entry, event-loop latency while it runs.

    .venv/bin/python bench/compaction.py [--mb 60] [--keys 20000] [--value-bytes 100]
        [--appends 1000] [--interval-ms 2]

Everything runs in this process on a temp dir (no broker, no network), with the broker's own
classes (``Log``, ``broker.log.cleaner``):

* **throughput**: a compacted log of ``--mb`` MB of keyed overwrites (``--keys`` distinct keys,
  ``--value-bytes`` values, 100 records per batch, 8 MiB segments) is cleaned once in this
  thread (plan, offset map, recopy, swap); MB/s is of the dirty log read (1 MB = 10^6 B).
* **bytes per map entry**: the offset map's memory over its slots (the seed's 24), and over the
  keys it held at ``log.cleaner.io.buffer.load.factor`` 0.9.
* **event-loop latency**: an asyncio loop appends one 1-record batch to another log every
  ``--interval-ms`` (``--appends`` times) and records, per append, the time from when it was due
  to when the append returned — the part of a produce's latency the broker's loop adds. Measured
  idle, while a clean of a second copy of the log runs in a thread (it shares the GIL with the
  loop), and while it runs in a worker process (as the broker runs it, ``worker.py``);
  p50/p99/max and the p99 ratios to idle (target ≤ 2).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import shutil
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import Executor, ProcessPoolExecutor
from pathlib import Path

from broker.log.cleaner.choose import cleanable_range
from broker.log.cleaner.cleaner import log_facts, make_plan
from broker.log.cleaner.offset_map import OffsetMap
from broker.log.cleaner.recopy import CleanResult, Throttler, clean
from broker.log.cleaner.swap import install
from broker.log.cleaner.worker import CleanJob, init_worker, run_job
from broker.log.config import LogConfig, system_clock_ms
from broker.log.log import Log
from pyspark_log.records.batch import ProducerRecord, encode_batch

SEGMENT_BYTES = 8 * 1024 * 1024
MAP_BYTES = 64 * 1024 * 1024


def build_log(directory: Path, mb: int, keys: int, value_bytes: int) -> Log:
    directory.mkdir(parents=True)
    log = Log.create(
        directory, "bench", 0, LogConfig(segment_bytes=SEGMENT_BYTES, cleanup_policy=("compact",)), system_clock_ms
    )
    value = b"v" * value_bytes
    now = system_clock_ms()
    i = 0
    while log.size_bytes < mb * 1_000_000:
        records = [ProducerRecord(f"key-{(i + j) % keys:08d}".encode(), value, now) for j in range(100)]
        log.append(encode_batch(records))
        i += 100
    log.roll()
    return log


def prepare(log: Log, offset_map: OffsetMap, stop: threading.Event) -> CleanResult:  # the thread's job
    now = system_clock_ms()
    plan = make_plan(log, cleanable_range(log_facts(log, log.log_start_offset), now), now)
    return clean(plan, offset_map, Throttler(float("inf")), stop)


def throughput(log: Log) -> None:
    dirty = log.size_bytes
    offset_map = OffsetMap(MAP_BYTES, 0.9)
    started = time.perf_counter()
    result = prepare(log, offset_map, threading.Event())
    install(log, result, system_clock_ms())
    elapsed = time.perf_counter() - started
    print(f"throughput: {dirty / 1e6:.1f} MB dirty cleaned in {elapsed:.2f} s = {dirty / 1e6 / elapsed:.2f} MB/s")
    print(f"  kept {result.records_kept} of {result.records_read} records; log now {log.size_bytes / 1e6:.2f} MB")
    print(
        f"bytes per map entry: {offset_map.memory_bytes / offset_map.slots:.0f} per slot; "
        f"{offset_map.memory_bytes / max(offset_map.max_entries, 1):.1f} per usable entry at load factor 0.9 "
        f"({result.map_entries} keys held)"
    )


async def append_latencies(target: Log, appends: int, interval_ms: float) -> list[float]:
    """Per append: ms from when it was due to when it returned."""
    out: list[float] = []
    loop = asyncio.get_running_loop()
    due = loop.time()
    for i in range(appends):
        due += interval_ms / 1000
        await asyncio.sleep(max(0.0, due - loop.time()))
        target.append(encode_batch([ProducerRecord(b"k", f"{i}".encode(), system_clock_ms())]))
        out.append((loop.time() - due) * 1000)
    return out


async def latency_while(
    cleaning: Log | None, target: Log, appends: int, interval_ms: float, pool: Executor | None = None
) -> list[float]:
    """Append latencies while ``cleaning`` is cleaned in ``pool`` (a process pool) or a thread."""
    stop = threading.Event()
    job = None
    loop = asyncio.get_running_loop()
    if cleaning is not None:
        now = system_clock_ms()
        plan = make_plan(cleaning, cleanable_range(log_facts(cleaning, cleaning.log_start_offset), now), now)
        if pool is not None:
            work = CleanJob(plan.detached(), MAP_BYTES, 0.9, float("inf"))
            job = loop.run_in_executor(pool, run_job, work)
        else:
            job = loop.run_in_executor(None, lambda: clean(plan, OffsetMap(MAP_BYTES, 0.9), Throttler(1e300), stop))
    try:
        latencies = await append_latencies(target, appends, interval_ms)
        if job is not None and job.done():
            print("  (the clean finished before the appends did: raise --mb for a longer overlap)")
        return latencies
    finally:
        stop.set()
        if job is not None:
            try:
                (await job).discard_files()
            except Exception:
                pass


def summary(name: str, values: list[float]) -> float:
    ordered = sorted(values)
    p99 = ordered[int(0.99 * (len(ordered) - 1))]
    print(f"  {name}: p50 {statistics.median(ordered):.2f} ms, p99 {p99:.2f} ms, max {ordered[-1]:.2f} ms")
    return p99


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=60)
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--appends", type=int, default=1000)
    parser.add_argument("--interval-ms", type=float, default=2.0)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="pylog-compaction-bench-"))
    try:
        print(f"python {sys.version.split()[0]}, switch interval {sys.getswitchinterval() * 1000:.1f} ms")
        throughput(build_log(root / "a", args.mb, args.keys, args.value_bytes))
        second = build_log(root / "b", args.mb, args.keys, args.value_bytes)
        (root / "t").mkdir()
        target = Log.create(root / "t", "t", 0, LogConfig(), system_clock_ms)
        print(f"event-loop latency of {args.appends} appends every {args.interval_ms} ms:")
        n, every = args.appends, args.interval_ms
        idle = summary("idle", asyncio.run(latency_while(None, target, n, every)))
        threaded = summary("cleaning in a thread", asyncio.run(latency_while(second, target, n, every)))
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(1, mp_context=context, initializer=init_worker, initargs=(context.Event(),)) as pool:
            pool.submit(int).result()  # the worker process is up before the measurement
            process = summary(
                "cleaning in a worker process", asyncio.run(latency_while(second, target, n, every, pool))
            )
        ratios = f"thread / idle: {threaded / idle:.2f}; worker process / idle: {process / idle:.2f}"
        print(f"  p99 ratios {ratios} (target <= 2)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
