"""Event-loop stalls from log fsyncs (synchronous flushes vs. the background flush) and from
``/metrics`` scrapes, in one run.

    .venv/bin/python bench/loop_stalls.py [--seconds 3] [--rate 500] [--partitions 8]
        [--segment-bytes 65536] [--flush-messages 0] [--epochs 100] [--dir PATH]
        [--scrape-partitions 2000] [--scrapes 20] [--only-scrape]

Project rule: "Nothing that can take more than a millisecond (fsync, file scans, cleaning,
CPU-heavy encoding) runs on the broker's event loop between requests: measure the loop's stalls."

Each mode runs the same work on an asyncio loop, in this process, over a ``LogManager`` in a
fresh temp dir (``--dir``: put it on the disk the broker uses; tmpfs makes fsync free):

* **appends**: 1 KiB-record batches (16 records) appended round-robin to ``--partitions`` logs
  at ``--rate`` appends per second (the same work in both modes) for ``--seconds``, one append
  per loop iteration, with a small ``segment.bytes`` so segments roll often (every roll flushes
  the old segment), and ``flush.messages`` when given. Reported: the time each append call held the loop (max, p99),
  and the loop's stalls seen by a ticker task that asks to wake every 1 ms (how late it woke:
  max, p99) — what any other request waiting on the loop would have waited.
* **epochs**: ``--epochs`` partitions take a new leader epoch one after another, as a failover
  moving that many leaders does (``LeaderEpochCache.assign`` → ``leader-epoch-checkpoint``
  rewrite): total and max loop time of those writes.

Modes: ``sync`` is the behaviour before the change (``LogManager(flush_in_background=False)``:
fsyncs inline on the loop; ``LeaderEpochFile`` without a hook: ``write_atomic`` with fsyncs);
``background`` is the broker's now (flush jobs in the manager's threads; the epoch file written
without fsync and made durable by the log's next flush). Figures vary with the disk and with
other load on the machine: compare the two modes of one run, never across machines.

**scrape** (issue #32: "a scrape of a broker with 2,000 partitions answers within 200 ms and does
not stall the event loop by more than 5 ms"): a ``BrokerServer`` runs in this process with
``metrics.port`` and ``--scrape-partitions`` partitions (topics of 100 partitions created with
confluent-kafka's AdminClient). The same 1 ms ticker runs on the broker's loop, first for
``--seconds`` without scrapes (the quiet baseline), then while another process scrapes
``/metrics`` ``--scrapes`` times back to back. Reported: scrape time as the scraper saw it
(max, median), the page size and samples, and the loop's stalls (max, p99) in each window.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.log.config import LogConfig, LogManagerConfig
from broker.log.manager import LogManager
from broker.metrics.exposition import RenderStats
from broker.replication.leader_epoch import LeaderEpochFile
from pyspark_log.records.batch import ProducerRecord, encode_batch

TICK_S = 0.001


def p99(values: list[float]) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[98]


async def ticker(stalls_ms: list[float], stop: asyncio.Event) -> None:
    """Asks to wake every ``TICK_S``; records how late each wake-up was (the loop's stalls)."""
    while not stop.is_set():
        t0 = time.perf_counter()
        await asyncio.sleep(TICK_S)
        stalls_ms.append(max(0.0, (time.perf_counter() - t0 - TICK_S) * 1000))


async def run_mode(args: argparse.Namespace, *, background: bool, root: Path) -> dict[str, float]:
    directory = Path(tempfile.mkdtemp(prefix="loop-stalls-", dir=root))
    config = LogConfig(
        segment_bytes=args.segment_bytes,
        flush_messages=args.flush_messages or 2**63 - 1,
    )
    manager = LogManager(LogManagerConfig(log_dirs=(str(directory),)), config, flush_in_background=background)
    manager.startup()
    records = [ProducerRecord(key=None, value=b"x" * 1024, timestamp=int(time.time() * 1000)) for _ in range(16)]
    data = encode_batch(records)
    logs = [manager.get_or_create_log("bench", p) for p in range(args.partitions)]
    append_ms: list[float] = []
    stalls_ms: list[float] = []
    stop = asyncio.Event()
    tick = asyncio.create_task(ticker(stalls_ms, stop))
    rolls_before = sum(len(lg.segments) for lg in logs)
    start = time.perf_counter()
    total = int(args.rate * args.seconds)
    i = 0
    while i < total:
        delay = start + i / args.rate - time.perf_counter()
        await asyncio.sleep(max(delay, 0))
        target = logs[i % len(logs)]
        t0 = time.perf_counter()
        target.append(data)
        append_ms.append((time.perf_counter() - t0) * 1000)
        i += 1
    elapsed = time.perf_counter() - start  # above --seconds when the loop could not keep the rate
    stop.set()
    await tick
    rolls = sum(len(lg.segments) for lg in logs) - rolls_before

    # epochs: a failover making this broker the leader of --epochs partitions, one after another
    epoch_logs = [manager.get_or_create_log("epochs", p) for p in range(args.epochs)]
    caches = [
        LeaderEpochFile(lg.directory, lg.flusher.sync_before if background else None).load(lg.log_end_offset, ())
        for lg in epoch_logs
    ]
    epoch_ms: list[float] = []
    for lg, cache in zip(epoch_logs, caches, strict=True):
        t0 = time.perf_counter()
        cache.assign(1, lg.log_end_offset)
        epoch_ms.append((time.perf_counter() - t0) * 1000)
        await asyncio.sleep(0)
    manager.shutdown()
    return {
        "appends": len(append_ms),
        "seconds": elapsed,
        "rolls": rolls,
        "append max ms": max(append_ms),
        "append p99 ms": p99(append_ms),
        "stall max ms": max(stalls_ms),
        "stall p99 ms": p99(stalls_ms),
        "epochs total ms": sum(epoch_ms),
        "epoch max ms": max(epoch_ms),
    }


async def run_scrape(args: argparse.Namespace, root: Path) -> dict[str, float]:
    import subprocess

    from confluent_kafka.admin import AdminClient, NewTopic

    from broker.config import BrokerConfig
    from broker.meta_properties import ensure_meta_properties
    from broker.server import BrokerServer

    directory = Path(tempfile.mkdtemp(prefix="loop-stalls-scrape-", dir=root))
    config = BrokerConfig.from_mapping(
        {"log.dirs": str(directory), "listeners": "PLAINTEXT://127.0.0.1:0", "metrics.port": "0"}
    )
    ensure_meta_properties(config.log_dirs, config.node_id, "")  # formatted, as `pylog storage format` does
    server = BrokerServer(config)
    await server.start()
    loop = asyncio.get_running_loop()
    try:
        bootstrap = server.advertised[0].split("://", 1)[1]
        per_topic = 100
        topics = [NewTopic(f"scrape-{i}", per_topic, 1) for i in range(max(1, args.scrape_partitions // per_topic))]

        def create() -> None:
            admin = AdminClient({"bootstrap.servers": bootstrap})
            for future in admin.create_topics(topics, operation_timeout=120).values():
                future.result(120)

        await loop.run_in_executor(None, create)
        wanted = len(topics) * per_topic
        deadline = time.monotonic() + 120
        assert server._logs is not None
        while sum(1 for lg in server._logs.logs() if lg.topic.startswith("scrape-")) < wanted:
            assert time.monotonic() < deadline, "the partitions were not created"
            await asyncio.sleep(0.1)
        assert server._metrics is not None
        url = f"http://127.0.0.1:{server._metrics.port}/metrics"
        quiet: list[float] = []
        stop = asyncio.Event()
        tick = asyncio.create_task(ticker(quiet, stop))
        await asyncio.sleep(args.seconds)
        stop.set()
        await tick
        scraper = (
            "import sys, time, urllib.request\n"
            "times = []\n"
            "for _ in range(int(sys.argv[2])):\n"
            "    t0 = time.perf_counter()\n"
            "    body = urllib.request.urlopen(sys.argv[1], timeout=60).read()\n"
            "    times.append((time.perf_counter() - t0) * 1000)\n"
            "samples = sum(1 for line in body.splitlines() if line and not line.startswith(b'#'))\n"
            "print(len(body), samples, *times)\n"
        )
        metrics = server._metrics
        renders: list[RenderStats] = []
        original_page = metrics.page

        async def page() -> bytes:
            body = await original_page()
            renders.append(metrics.last_render)
            return body

        metrics.page = page  # type: ignore[method-assign]
        gc_pauses_ms: list[float] = []
        gc_started = [0.0]

        def on_gc(phase: str, info: dict[str, int]) -> None:
            if phase == "start":
                gc_started[0] = time.perf_counter()
            else:
                gc_pauses_ms.append((time.perf_counter() - gc_started[0]) * 1000)

        gc.callbacks.append(on_gc)
        during: list[float] = []
        stop = asyncio.Event()
        tick = asyncio.create_task(ticker(during, stop))
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", scraper, url, str(args.scrapes), stdout=subprocess.PIPE
        )
        out, _ = await proc.communicate()
        stop.set()
        await tick
        gc.callbacks.remove(on_gc)
        size, samples, *times = out.split()
        scrape_ms = [float(t) for t in times]
    finally:
        await server.shutdown()
    return {
        "partitions": wanted,
        "page bytes": float(size),
        "samples": float(samples),
        "scrape max ms": max(scrape_ms),
        "scrape median ms": statistics.median(scrape_ms),
        "quiet stall max ms": max(quiet),
        "quiet stall p99 ms": p99(quiet),
        "scrape stall max ms": max(during),
        "scrape stall p99 ms": p99(during),
        "render loop ms (max)": max(r.loop_s for r in renders) * 1000,
        "render step max ms": max(r.longest_step_s for r in renders) * 1000,
        "gc pause max ms": max(gc_pauses_ms, default=0.0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rate", type=float, default=500.0, help="appends per second (16 KiB each)")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--segment-bytes", type=int, default=65536)
    parser.add_argument("--flush-messages", type=int, default=0, help="flush.messages (0: never)")
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--dir", default=None, help="where the temp log dirs go (default: the temp dir)")
    parser.add_argument("--scrape-partitions", type=int, default=2000, help="partitions of the scrape mode")
    parser.add_argument("--scrapes", type=int, default=20, help="scrapes in the scrape mode")
    parser.add_argument("--only-scrape", action="store_true", help="run the scrape mode alone")
    args = parser.parse_args()
    root = Path(args.dir or tempfile.gettempdir())
    scrape = asyncio.run(run_scrape(args, root))
    print("scrape mode (a broker in this process; /metrics scraped by another process)")
    for key, value in scrape.items():
        print(f"{key:22}{value:>12.2f}")
    if args.only_scrape:
        return
    results = {}
    for name, background in (("sync (before)", False), ("background (after)", True)):
        results[name] = asyncio.run(run_mode(args, background=background, root=root))
    keys = list(next(iter(results.values())))
    print(f"{'':18}" + "".join(f"{name:>22}" for name in results))
    for key in keys:
        print(f"{key:18}" + "".join(f"{r[key]:>22.2f}" for r in results.values()))


if __name__ == "__main__":
    main()
