"""Direct segment reads (``readPath=files``) beside the broker path, one run, one Spark session
(issue #33).

    .venv/bin/python bench/direct_read.py [--gb 10] [--sizes 100,1024] [--partitions 4]
        [--repeat 1] [--master local[2]]

For each record size of ``--sizes`` (value bytes; keys null, no compression) a topic of
``--partitions`` partitions holding about ``--gb`` GB of values is written to an
``EmbeddedBroker`` (``Producer.send_batch``, 256 KiB batches). Then, alternating the two paths
``--repeat`` times after a small warm-up read of each,

    spark.read.format("pylog").option(...).load().write.format("noop").mode("overwrite").save()

is timed end to end with ``readPath=broker`` (tasks fetch through the broker) and with
``readPath=files`` + ``logDirs.<node.id>=<the broker's log dir>`` (tasks read the segment files;
the driver still asks the broker for offsets and leaders). Printed per path: rows/s, MB/s of
values, seconds, and the broker's CPU seconds during the run (user + system of the process
and its children, psutil); then the ratio files / broker; then, to show where the time goes, one
task's work on partition 0 without Spark (fetch or file read, and the Arrow decode) per path.
Targets (issue #33): files >= 3x the broker path, broker CPU during a direct read ~ 0. The
files are read from the page cache when they fit in memory, as the broker's own reads are.
Figures only, nothing asserted.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import pyarrow as pa

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from pyspark.sql import SparkSession

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench.spark_session
from bench.scratch import scratch_dir
from bench.spark_session import local_session
from pyspark_log.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.spark.segment_reader import parse_properties

CHUNK_RECORDS = 50_000


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of a process and its live children (psutil), 0 if it is gone."""
    import psutil

    try:
        process = psutil.Process(pid)
        tree = [process, *process.children(recursive=True)]
    except (psutil.Error, ValueError):
        return 0.0
    total = 0.0
    for member in tree:
        try:
            times = member.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def produce(servers: str, topic: str, partitions: int, count: int, size: int) -> float:
    """Write ``count`` records of ``size`` value bytes; returns the seconds it took."""
    with AdminClient({"bootstrap.servers": servers}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    value = (b"0123456789abcdef" * (size // 16 + 1))[:size]
    config = {"bootstrap.servers": servers, "batch.size": 256 * 1024, "linger.ms": 20, "compression.type": "none"}
    start = time.perf_counter()
    with Producer(config) as producer:
        futures = []
        sent = 0
        while sent < count:
            n = min(CHUNK_RECORDS, count - sent)
            chunk = pa.table(
                {
                    "value": pa.array([value] * n, pa.binary()),
                    "partition": pa.array([(sent + i) % partitions for i in range(n)], pa.int32()),
                }
            )
            futures.append(producer.send_batch(topic, chunk))
            sent += n
            if len(futures) > 8:
                futures.pop(0).result(300)
        producer.flush()
        for future in futures:
            future.result(300)
    return time.perf_counter() - start


def end_offsets(servers: str, topic: str, partitions: int) -> int:
    consumer = Consumer({"bootstrap.servers": servers})
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        return sum(consumer.end_offsets(tps).values())
    finally:
        consumer.close()


def task_side_rates(servers: str, topic: str, log_dir: Path) -> dict[str, float]:
    """Rows/s of one task's work on partition 0 without Spark, one thread: the broker path
    (``ClientAccess.fetch`` + ``decode_chunk``) and the files path (``PartitionFiles`` +
    ``decode_chunk``), each decoding every row to Arrow as a Spark task does."""
    from pyspark_log.spark.access import FetchedChunk
    from pyspark_log.spark.client_access import connect
    from pyspark_log.spark.decode import decode_chunk
    from pyspark_log.spark.planning import OffsetRange
    from pyspark_log.spark.segment_reader import PartitionFiles

    tp = TopicPartition(topic, 0)
    access = connect(servers, {})
    try:
        end = access.latest_offsets([tp], "read_uncommitted")[tp]
        r = OffsetRange(tp, 0, end)
        start = time.perf_counter()
        rows = 0
        for chunk in access.fetch(tp, 0, end, isolation_level="read_uncommitted", max_bytes=4 << 20):
            batch = decode_chunk(chunk, r, read_committed=False, include_headers=False)
            rows += batch.num_rows if batch is not None else 0
        broker_rate = rows / (time.perf_counter() - start)
    finally:
        access.close()
    start = time.perf_counter()
    rows = 0
    for piece in PartitionFiles(log_dir / f"{topic}-0").read(0, end, read_committed=False):
        fetched = FetchedChunk(piece.records, (), piece.position, end, end, -1)
        batch = decode_chunk(fetched, OffsetRange(tp, piece.position, end), read_committed=False, include_headers=False)
        rows += batch.num_rows if batch is not None else 0
    return {"broker": broker_rate, "files": rows / (time.perf_counter() - start)}


def run_once(spark: SparkSession, options: dict[str, str], broker_pid: int | None) -> tuple[float, float]:
    """(seconds, broker CPU seconds) of one read into noop."""
    cpu_before = cpu_seconds(broker_pid)
    start = time.perf_counter()
    spark.read.format("pylog").options(**options).load().write.format("noop").mode("overwrite").save()
    return time.perf_counter() - start, cpu_seconds(broker_pid) - cpu_before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gb", type=float, default=10.0, help="GB of values per record size (default 10)")
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    spark = local_session(args.master)
    work = scratch_dir("pylog-bench-direct-")
    print(f"Spark {spark.version} {args.master}, {args.partitions} partitions, {args.gb:g} GB of values per size")
    header = f"{'records':>18} {'path':>7} {'rows/s':>12} {'MB/s':>8} {'seconds':>8} {'broker CPU s':>12}"
    with EmbeddedBroker(work / "broker") as broker:
        servers = broker.bootstrap_servers
        log_dir = broker.data_dir / "logs"
        node = parse_properties((log_dir / "meta.properties").read_text())["node.id"]
        for size in (int(s) for s in args.sizes.split(",")):
            count = int(args.gb * 1e9 / size)
            topic = f"direct-{size}"
            seconds = produce(servers, topic, args.partitions, count, size)
            rows = end_offsets(servers, topic, args.partitions)
            print(f"wrote {rows:,} x {size} B ({rows * size / 1e9:.2f} GB of values) in {seconds:.0f} s")
            common = {"bootstrap.servers": servers, "subscribe": topic, "isolationLevel": "read_uncommitted"}
            paths = {
                "broker": {**common, "readPath": "broker"},
                "files": {**common, "readPath": "files", f"logDirs.{node}": str(log_dir)},
            }
            for options in paths.values():  # warm-up: Python workers, the session, the clients
                warm = {k: v for k, v in options.items() if k != "subscribe"}
                warm["assign"] = f'{{"{topic}":[0]}}'
                warm["endingOffsets"] = f'{{"{topic}":{{"0":{min(rows // args.partitions, 20_000)}}}}}'
                run_once(spark, warm, broker.pid)
            best: dict[str, tuple[float, float]] = {}
            for _ in range(args.repeat):
                for label, options in paths.items():
                    measured = run_once(spark, options, broker.pid)
                    if label not in best or measured[0] < best[label][0]:
                        best[label] = measured
            print(header)
            for label, (elapsed, broker_cpu) in best.items():
                print(
                    f"{rows:>11,} x {size:>4}B {label:>7} {rows / elapsed:>12,.0f} "
                    f"{rows * size / elapsed / 1e6:>8.1f} {elapsed:>8.2f} {broker_cpu:>12.2f}"
                )
            print(f"{'':>18} files/broker = {best['broker'][0] / best['files'][0]:.2f}")
            rates = task_side_rates(servers, topic, log_dir)
            print(
                f"{'':>18} one task without Spark (partition 0, 1 thread): broker {rates['broker']:,.0f} rows/s, "
                f"files {rates['files']:,.0f} rows/s, files/broker = {rates['files'] / rates['broker']:.2f}"
            )
    spark.stop()


if __name__ == "__main__":
    main()
