"""Log cleaner figures: throughput, bytes per offset-map entry, event-loop latency while it runs.

    .venv/bin/python bench/compaction.py [--mb 60] [--keys 20000] [--value-bytes 100]
        [--appends 1000] [--interval-ms 2] [--broker] [--broker-mb 150]

Everything runs in this process on a temp dir (no broker, no network), with the broker's own
classes (``Log``, ``broker.log.cleaner``):

* **throughput**: a compacted log of ``--mb`` MB of keyed overwrites (``--keys`` distinct keys,
  ``--value-bytes`` values, 100 records per batch, 8 MiB segments) is cleaned once in this
  thread (plan, offset map, recopy, swap); MB/s is of the dirty log read (1 MB = 10^6 B); the
  swap's own time (the part that runs on the broker's event loop) is printed too.
* **bytes per map entry**: the offset map's memory over its slots (Kafka documentation §4.8 says 24), and over the
  keys it held at ``log.cleaner.io.buffer.load.factor`` 0.9.
* **event-loop latency**: an asyncio loop appends one 1-record batch to another log every
  ``--interval-ms`` (``--appends`` times) and records, per append, the time from when it was due
  to when the append returned — the part of a produce's latency the broker's loop adds. Measured
  idle, while a clean of a second copy of the log runs in a thread (it shares the GIL with the
  loop), and while it runs in a worker process (as the broker runs it, ``worker.py``);
  p50/p99/max and the p99 ratios to idle (target ≤ 2).
* **produce latency with a real broker** (``--broker``): an ``EmbeddedBroker`` (cleaner backoff
  100 ms); ``--broker-mb`` MB of keyed overwrites go to a ``cleanup.policy=delete`` topic with
  8 MiB segments; then a confluent-kafka producer (acks=1, linger.ms=0) sends ``--appends``
  records, one every ``--interval-ms``, to another topic — librdkafka's per-message latency
  (``Message.latency()``, produce() to acknowledgement) — once idle, and once right after the
  loaded topic was switched to ``cleanup.policy=compact`` (IncrementalAlterConfigs) and its
  first ``.cleaned`` file appeared; the cleaner must still be working when the sends end.
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
    swap_started = time.perf_counter()
    install(log, result, system_clock_ms())
    swap_ms = (time.perf_counter() - swap_started) * 1000
    elapsed = time.perf_counter() - started
    print(f"throughput: {dirty / 1e6:.1f} MB dirty cleaned in {elapsed:.2f} s = {dirty / 1e6 / elapsed:.2f} MB/s")
    print(f"  kept {result.records_kept} of {result.records_read} records; log now {log.size_bytes / 1e6:.2f} MB")
    print(f"  the swap on the event loop took {swap_ms:.1f} ms ({len(result.groups)} cleaned segment(s))")
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
    parser.add_argument("--broker", action="store_true", help="also measure produce latency on a real broker")
    parser.add_argument("--broker-mb", type=int, default=150)
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
        if args.broker:
            broker_latency(args.broker_mb, args.appends, args.interval_ms, args.value_bytes, args.keys)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def broker_latency(mb: int, appends: int, interval_ms: float, value_bytes: int, keys: int) -> None:
    """The ``--broker`` phase (module docstring)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
        ResourceType,
    )

    from pyspark_log.embedded import EmbeddedBroker

    overrides = {"log.cleaner.backoff.ms": "100", "log.cleaner.dedupe.buffer.size": str(MAP_BYTES)}
    with EmbeddedBroker(overrides=overrides) as broker:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topics = [NewTopic("dirty", 1, 1, config={"segment.bytes": str(SEGMENT_BYTES)}), NewTopic("lat", 1, 1)]
        for future in admin.create_topics(topics).values():
            future.result(30)
        loader = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 1000})
        value = b"v" * value_bytes
        i = 0
        while i * (value_bytes + 12) < mb * 1_000_000:
            loader.produce("dirty", key=f"key-{i % keys:08d}".encode(), value=value)
            loader.poll(0)
            i += 1
        loader.flush(120)
        directory = broker.data_dir / "logs" / "dirty-0"
        loaded = sum(f.stat().st_size for f in directory.glob("*.log"))
        print(f"broker: {loaded / 1e6:.0f} MB loaded into 'dirty' ({i} records)")

        def send_all() -> list[float]:
            latencies: list[float] = []
            producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1})
            producer.produce("lat", b"warm-up")
            producer.flush(30)

            def report(err: object, msg: object) -> None:
                assert err is None, err
                latencies.append(msg.latency() * 1000)  # type: ignore[attr-defined]

            due = time.monotonic()
            for n in range(appends):
                due += interval_ms / 1000
                while time.monotonic() < due:
                    producer.poll(max(0.0, due - time.monotonic()))
                producer.produce("lat", f"{n}".encode(), on_delivery=report)
            producer.flush(60)
            return latencies

        idle = summary("produce, idle", send_all())
        resource = ConfigResource(
            ResourceType.TOPIC, "dirty",
            incremental_configs=[ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)],
        )  # fmt: skip
        admin.incremental_alter_configs([resource])[resource].result(30)
        deadline = time.monotonic() + 60
        while not list(directory.glob("*.cleaned")):
            if time.monotonic() > deadline:
                raise SystemExit("the cleaner did not start within 60 s")
            time.sleep(0.01)
        busy = summary("produce, cleaning", send_all())
        checkpoint = broker.data_dir / "logs" / "cleaner-offset-checkpoint"
        still = not checkpoint.exists() or "dirty" not in checkpoint.read_text()
        print(f"  cleaner still working when the sends ended: {still}")
        print(f"  p99 ratio cleaning / idle: {busy / idle:.2f} (target <= 2)")


if __name__ == "__main__":
    main()
