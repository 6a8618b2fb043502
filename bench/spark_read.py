"""Spark read throughput of ``format("pylog")`` beside a ceiling measured in the same run.

For 100 B and 1 KiB records, a topic of ``--partitions`` partitions is filled through the broker;
then, in a local Spark session (``--master``, default ``local[2]``), the query

    spark.read.format(F)...load().selectExpr("count(*)", "sum(length(value))").collect()

is timed (best of ``--repeat`` after one warm-up, the two sources alternating) for

* ``pylog``    the real source: the driver plans offset ranges, each task fetches raw batches
               from the broker and decodes them to Arrow (``client_access`` + ``decode.py``);
* ``ceiling``  a trivial Python data source with the same Spark partitions whose tasks yield
               ready-made Arrow RecordBatches of the same rows (memory-mapped Arrow IPC files
               written before timing): what any Python source costs in Spark, minus the broker
               and decoding.

rows/s and MB/s (value bytes) are printed for both, the ratio pylog/ceiling (target >= 0.7), and the
broker process's CPU seconds during the timed run. ``BENCH_EXTRA="k=v,..."`` adds source options
to the pylog runs (e.g. ``kafka.max.partition.fetch.bytes=4194304``).
Figures only, nothing asserted.

    .venv/bin/python bench/spark_read.py [--records-100b 400000] [--records-1kb 100000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from pyspark_log.client import AdminClient, NewTopic, Producer, TopicPartition
from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.records.fetched import arrow_schema
from pyspark_log.spark.client_access import connect
from pyspark_log.spark.decode import decode_chunk
from pyspark_log.spark.planning import OffsetRange

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from pyspark.sql import SparkSession

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench.spark_session
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from bench.scratch import scratch_dir
from bench.spark_session import local_session
from pyspark_log.spark.source import source_schema

EXTRA = dict(kv.split("=", 1) for kv in os.environ.get("BENCH_EXTRA", "").split(",") if kv)


class CeilingSource(DataSource):
    """``format("arrow_ceiling")``: option ``dir`` holds one Arrow IPC file per Spark partition."""

    @classmethod
    def name(cls) -> str:
        return "arrow_ceiling"

    def schema(self):  # type: ignore[no-untyped-def]
        return source_schema(False)

    def reader(self, schema):  # type: ignore[no-untyped-def]
        return CeilingReader(self.options["dir"])


class CeilingReader(DataSourceReader):
    def __init__(self, directory: str) -> None:
        self.directory = directory

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(str(p)) for p in sorted(Path(self.directory).glob("*.arrow"))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        with pa.memory_map(partition.value) as source:
            reader = pa.ipc.open_file(source)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)


def produce(servers: str, topic: str, partitions: int, count: int, size: int) -> None:
    with AdminClient({"bootstrap.servers": servers}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    value = (b"0123456789abcdef" * (size // 16 + 1))[:size]
    config = {"bootstrap.servers": servers, "batch.size": 256 * 1024, "linger.ms": 20, "compression.type": "none"}
    with Producer(config) as producer:
        for i in range(count):
            producer.send(topic, value, partition=i % partitions)
        producer.flush()


def write_ceiling_files(servers: str, topic: str, partitions: int, directory: Path) -> None:
    """The same rows as the topic, decoded once, as Arrow IPC files (one per partition)."""
    access = connect(servers, {})
    schema = arrow_schema(False)
    try:
        for p in range(partitions):
            tp = TopicPartition(topic, p)
            end = access.latest_offsets([tp], "read_uncommitted")[tp]
            r = OffsetRange(tp, 0, end)
            with pa.OSFile(str(directory / f"{p:04d}.arrow"), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
                for chunk in access.fetch(tp, 0, end, isolation_level="read_uncommitted", max_bytes=1 << 20):
                    batch = decode_chunk(chunk, r, read_committed=False, include_headers=False)
                    if batch is not None:
                        writer.write_batch(batch)
    finally:
        access.close()


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a process (Linux /proc), 0 elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_once(
    spark: SparkSession, fmt: str, options: dict[str, str], broker_pid: int | None
) -> tuple[float, int, int, float]:
    """(seconds, rows, value bytes, broker CPU seconds) of count + sum(length(value))."""
    df = spark.read.format(fmt).options(**options).load()
    cpu_before = cpu_seconds(broker_pid)
    start = time.perf_counter()
    row = df.selectExpr("count(*) AS n", "sum(length(value)) AS b").collect()[0]
    elapsed = time.perf_counter() - start
    return elapsed, int(row["n"]), int(row["b"] or 0), cpu_seconds(broker_pid) - cpu_before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records-100b", type=int, default=400_000)
    parser.add_argument("--records-1kb", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    spark = local_session(args.master)
    spark.dataSource.register(CeilingSource)

    work = scratch_dir("pylog-bench-")
    print(f"Spark {spark.version} {args.master}, {args.partitions} partitions, best of {args.repeat}")
    print(f"{'records':>16} {'source':>8} {'rows/s':>12} {'MB/s':>8} {'seconds':>8} {'ratio':>6} {'broker CPU':>10}")
    with EmbeddedBroker(work / "broker") as broker:
        servers = broker.bootstrap_servers
        for size, count in ((100, args.records_100b), (1024, args.records_1kb)):
            if count <= 0:
                continue
            topic = f"bench-{size}"
            produce(servers, topic, args.partitions, count, size)
            ceiling_dir = work / f"ceiling-{size}"
            ceiling_dir.mkdir()
            write_ceiling_files(servers, topic, args.partitions, ceiling_dir)
            sources = {
                "pylog": ("pylog", {"bootstrap.servers": servers, "subscribe": topic, **EXTRA}),
                "ceiling": ("arrow_ceiling", {"dir": str(ceiling_dir)}),
            }
            best: dict[str, tuple[float, int, int, float]] = {}
            for i in range(args.repeat + 1):  # alternate, so load changes hit both alike
                for label, (fmt, options) in sources.items():
                    measured = run_once(spark, fmt, options, broker.pid)
                    assert measured[1] == count, f"{label} read {measured[1]} rows, expected {count}"
                    if i > 0 and (label not in best or measured[0] < best[label][0]):  # run 0 warms up
                        best[label] = measured
            results = {}
            for label, (seconds, rows, value_bytes, broker_cpu) in best.items():
                results[label] = rows / seconds
                shown = f"{results['pylog'] / results[label]:6.2f}" if label == "ceiling" else ""
                print(
                    f"{count:>9} x {size:>4}B {label:>8} {rows / seconds:>12,.0f} "
                    f"{value_bytes / seconds / 1e6:>8.1f} {seconds:>8.2f} {shown:>6} {broker_cpu:>10.2f}"
                )
            print(f"{'':>16} pylog/ceiling = {results['pylog'] / results['ceiling']:.2f}")
    spark.stop()


if __name__ == "__main__":
    main()
