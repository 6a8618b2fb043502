"""Garbage-collection pauses of a broker with a big heap, ``gc.freeze.enable`` off vs. on, in one run.

    .venv/bin/python bench/gc_pauses.py [--topics 30] [--partitions 100] [--groups 300]
        [--seconds 10] [--rate 4000] [--rounds 2]

Project rule: "Nothing that can take more than a millisecond runs on the broker's event loop
between requests: measure the loop's stalls." A collection holds the GIL, so each pause is a
stall of the broker's event loop.

Set-up (once, untimed): a broker on a temp dir gets ``--topics`` x ``--partitions`` partitions
(one record each) and ``--groups`` consumer groups with committed offsets, then stops. Every
round then restarts that same data dir twice, ``gc.freeze.enable=false`` (the broker before the
change) and ``=true``: the partitions' logs, indexes and producer states and the groups' offsets
are loaded at start-up, as in a long-running broker after a restart. Under load for
``--seconds``: a confluent-kafka producer (acks=1, linger.ms=5, 512 B values) at ``--rate``
records/s spread over one topic's partitions and a group consumer reading them back (Fetch
requests across all those partitions). Printed per mode, from the broker's own ``/metrics``
(``python_gc_*``, since the broker became ready): gen-0/1/2 collections, their p99 (last 1024)
and max pause; the objects frozen; the broker's RSS after start and after the load and the
unreachable objects the collector freed (bounded memory: cycles are still collected); and the
loop's stalls as a client sees them: ApiVersions round trips every 2 ms on a connection of
their own (``Pinger``, p50/p99/max).

Also in this process: the cost of one full collection (``gc.collect()``) over the same kind of heap,
a ``LogManager`` that opened every partition of the data dir, before and after ``gc.freeze()``.
Figures are noisy on a shared machine: compare the modes of one run, and run it more than once.
"""

from __future__ import annotations

import argparse
import gc
import re
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.broker_throughput import Pinger
from broker.log.config import LogConfig, LogManagerConfig
from broker.log.manager import LogManager
from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.embedded_cluster import free_port

LOAD_TOPIC = "gc-load"
_SAMPLE = re.compile(r'^(python_gc_\w+)(?:\{generation="(\d)"(?:,quantile="([\d.]+)")?\})? (\S+)$')


def scrape(port: int) -> dict[str, float]:
    """``name[gen][@quantile]`` -> value of the ``python_gc_`` samples."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        text = response.read().decode()
    out = {}
    for line in text.splitlines():
        found = _SAMPLE.match(line)
        if found:
            name, gen, q, value = found.groups()
            out[name + (gen or "") + (f"@{q}" if q else "")] = float(value)
    return out


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def build_heap(data_dir: Path, args: argparse.Namespace) -> None:
    """Topics, one record per partition, and groups with committed offsets; then the broker stops."""
    with EmbeddedBroker(data_dir, overrides={"gc.freeze.enable": "false"}) as broker:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        names = [f"gc-heap-{t}" for t in range(args.topics)]
        new = [NewTopic(n, args.partitions, 1) for n in names] + [NewTopic(LOAD_TOPIC, args.partitions, 1)]
        for future in admin.create_topics(new, operation_timeout=120).values():
            future.result(180)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
        for name in names:
            for p in range(args.partitions):
                producer.produce(name, value=b"v" * 100, partition=p)
            producer.poll(0)
        producer.flush(120)
        for g in range(args.groups):
            offsets = [TopicPartition(names[g % len(names)], p, 1) for p in range(min(args.partitions, 10))]
            futures = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(f"gc-group-{g}", offsets)])
            for future in futures.values():
                future.result(60)


def load(bootstrap: str, args: argparse.Namespace, tag: str) -> list[float]:
    """Produce at ``--rate`` over the load topic while a group consumer reads it; returns ping RTTs."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "enable.idempotence": False})
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"gc-load-{tag}", "auto.offset.reset": "latest",
        "enable.auto.commit": True, "fetch.wait.max.ms": 100,
    })  # fmt: skip
    consumer.subscribe([LOAD_TOPIC])
    deadline = time.monotonic() + 60
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.1)
    host, port = bootstrap.rsplit(":", 1)
    value = b"x" * 512
    received = 0
    with Pinger((host, int(port))) as pinger:
        start = time.monotonic()
        sent = 0
        while (now := time.monotonic()) - start < args.seconds:
            due = int((now - start) * args.rate)
            while sent < due:
                try:
                    producer.produce(LOAD_TOPIC, value=value, partition=sent % args.partitions)
                except BufferError:
                    producer.poll(0.01)
                    continue
                sent += 1
            producer.poll(0)
            for msg in consumer.consume(1000, 0.002):
                received += msg.error() is None
        producer.flush(30)
    consumer.close()
    print(f"  [{tag}] produced {sent}, consumed {received}", file=sys.stderr)
    return pinger.rtts_ms


def pct(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def broker_round(data_dir: Path, args: argparse.Namespace, freeze: bool, round_no: int) -> dict[str, float]:
    port = free_port()
    overrides = {"gc.freeze.enable": str(freeze).lower(), "metrics.port": str(port)}
    with EmbeddedBroker(data_dir, overrides=overrides, start_timeout_s=300) as broker:
        assert broker.pid is not None
        rss_start = rss_mib(broker.pid)
        rtts = load(broker.bootstrap_servers, args, f"{'on' if freeze else 'off'}-{round_no}")
        figures = scrape(port)
        rss_end = rss_mib(broker.pid)
    row = {"frozen objects": figures["python_gc_frozen_objects"], "RSS start MiB": rss_start, "RSS end MiB": rss_end}
    for g in "012":
        row[f"gen{g} count"] = figures[f"python_gc_collections_total{g}"]
        row[f"gen{g} p99 ms"] = figures[f"python_gc_pause_seconds{g}@0.99"] * 1000
        row[f"gen{g} max ms"] = figures[f"python_gc_pause_seconds_max{g}"] * 1000
        row[f"gen{g} total ms"] = figures[f"python_gc_pause_seconds_sum{g}"] * 1000
    row["objects collected"] = sum(figures[f"python_gc_objects_collected_total{g}"] for g in "012")
    row |= {"ping p50 ms": pct(rtts, 50), "ping p99 ms": pct(rtts, 99), "ping max ms": max(rtts, default=0.0)}
    return row


def full_collection_ms(data_dir: Path) -> tuple[float, float, int]:
    """One ``gc.collect()`` over a LogManager holding every partition of ``data_dir``: before and after a freeze."""
    manager = LogManager(LogManagerConfig(log_dirs=(str(data_dir),)), LogConfig())
    manager.startup()
    try:
        gc.collect()
        t0 = time.perf_counter()
        gc.collect()
        before = (time.perf_counter() - t0) * 1000
        gc.freeze()
        t0 = time.perf_counter()
        gc.collect()
        after = (time.perf_counter() - t0) * 1000
        frozen = gc.get_freeze_count()
        gc.unfreeze()
    finally:
        manager.shutdown()
    return before, after, frozen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=30)
    parser.add_argument("--partitions", type=int, default=100, help="per topic")
    parser.add_argument("--groups", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=4000.0, help="records per second")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pylog-gc-bench-") as tmp:
        data_dir = Path(tmp) / "broker"
        t0 = time.monotonic()
        build_heap(data_dir, args)
        total = (args.topics + 1) * args.partitions
        print(f"set-up: {total} partitions, {args.groups} groups ({time.monotonic() - t0:.0f} s)", file=sys.stderr)
        results: dict[str, dict[str, float]] = {}
        for round_no in range(args.rounds):
            for freeze in (False, True):
                name = f"{'on' if freeze else 'off'} #{round_no + 1}"
                results[name] = broker_round(data_dir, args, freeze, round_no)
        before, after, frozen = full_collection_ms(data_dir / "logs")
    keys = list(next(iter(results.values())))
    print(f"{total} partitions, {args.groups} groups, {args.rate:.0f} rec/s for {args.seconds:.0f} s")
    print(f"{'gc.freeze.enable':16}" + "".join(f"{n:>11}" for n in results))
    for key in keys:
        print(f"{key:16}" + "".join(f"{r[key]:>11.2f}" for r in results.values()))
    print(f"in-process full collection over the same logs: {before:.2f} ms, after gc.freeze() {after:.2f} ms "
          f"({frozen} objects frozen)")  # fmt: skip


if __name__ == "__main__":
    main()
