"""``format("pylog")`` beside Spark's own Kafka connector (``format("kafka")``), one run, one Spark
session, against a pylog broker and against Apache Kafka (issue #27).

    .venv/bin/python bench/spark_connectors.py [--rows 1000000] [--sizes 100,1024] [--partitions 4]
        [--repeat 1] [--brokers pylog,kafka] [--master local[2]]

Spark's connector is the 4.2.0 jar of ``refs/spark/pom.xml`` on ``spark.jars``
(``spark_tests.jars.reference_jars``, fetched on first use); Apache Kafka is the cached 4.1.1 of
``refs/kafka/pom.xml`` (``tests.apache_kafka.ApacheKafkaCluster``, one combined KRaft node with
the JVM options of ``kafka-server-start.sh``); pylog is ``EmbeddedBroker``. For each broker and
value size (``--sizes``: the id zero-padded to 10 digits and a constant tail, keys
``CAST(id AS STRING)``, ``--rows`` rows in 2 Spark partitions, topics of ``--partitions``):

* ``batch write``   ``df.write.format(F)`` into a fresh topic: pylog's sink commits one
                    transaction per task (exactly-once); Spark's is at-least-once (idempotent
                    producer, acks=all, the Java producer's defaults otherwise);
* ``stream write``  ``readStream.parquet`` of the same rows (written before, not timed) →
                    ``writeStream.format(F)``, Trigger.AvailableNow, from ``start()`` to the end:
                    pylog's exactly-once streaming sink beside Spark's at-least-once one;
* ``batch read``    ``spark.read.format(F)`` of the topic Spark's sink wrote → ``format("noop")``;
* ``stream read``   ``readStream.format(F)`` of that topic, ``startingOffsets=earliest``,
                    Trigger.AvailableNow → ``format("noop")``, from ``start()`` to the end;
* ``... batches``   the stream lines' rows over the time inside their micro-batches (Spark's
                    ``triggerExecution``), without the query's start and stop: a Python source
                    pays ~2 s per query there (Spark starts a Python process for it), the
                    connector ~0.2 s, which dominates short runs.

Both sources read with ``kafka.isolation.level=read_uncommitted`` (the connector's default; the
topic holds no transactions) and every column; each source's defaults otherwise (one Spark
partition per topic-partition for both). A warm-up round of 20,000 rows of every path runs first
on each broker. Each path is timed end to end (best of ``--repeat``, the two connectors
alternating); printed: rows/s of each and the ratio pylog / Spark's connector. Targets (issue
#27): reads >= 1.5x, the exactly-once sink >= 1.0x Spark's sink. Figures only, nothing asserted.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.apache_kafka, spark_tests.jars

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from pyspark.sql import SparkSession

from bench.scratch import scratch_dir
from bench.spark_session import local_session
from pyspark_log.client import AdminClient, NewTopic
from pyspark_log.embedded import EmbeddedBroker
from spark_tests.jars import connector_version, reference_jars
from tests.apache_kafka import KAFKA_SERVER_JVM_OPTS, ApacheKafkaCluster, kafka_version

FORMATS = ("pylog", "kafka")
TARGETS = {
    "batch write": 1.0, "stream write": 1.0, "stream write batches": 1.0,
    "batch read": 1.5, "stream read": 1.5, "stream read batches": 1.5,
}  # fmt: skip
READ = {"kafka.isolation.level": "read_uncommitted"}


@contextmanager
def broker(kind: str, work: Path) -> Iterator[str]:
    """The bootstrap servers of a fresh pylog broker or Apache Kafka node, for the block."""
    if kind == "pylog":
        with EmbeddedBroker(work / "pylog") as b:
            yield b.bootstrap_servers
    else:
        with ApacheKafkaCluster(work / "kafka", brokers=(1,), jvm_opts=KAFKA_SERVER_JVM_OPTS) as cluster:
            yield cluster.bootstrap()


def create(servers: str, partitions: int) -> str:
    name = f"bench-connectors-{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": servers}) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])
    return name


def rows_df(spark: SparkSession, rows: int, size: int) -> Any:
    """Keys ``CAST(id AS STRING)``, values of exactly ``size`` bytes (as bench/spark_write.py)."""
    tail = "x" * (size - 10)
    return spark.range(0, rows, 1, 2).selectExpr(
        "CAST(id AS STRING) AS key", f"CAST(concat(lpad(CAST(id AS STRING), 10, '0'), '{tail}') AS BINARY) AS value"
    )


def batch_write(spark: SparkSession, fmt: str, servers: str, topic: str, rows: int, size: int) -> float:
    writer = rows_df(spark, rows, size).write.format(fmt).mode("append")
    writer = writer.option("kafka.bootstrap.servers", servers).option("topic", topic)
    start = time.perf_counter()
    writer.save()
    return time.perf_counter() - start


def run_stream(df: Any, checkpoint: Path, configure: Callable[[Any], Any]) -> tuple[float, float]:
    """(seconds from ``start()`` to the end of an AvailableNow run of ``df`` into
    ``configure(writer)``, seconds inside its micro-batches: Spark's ``triggerExecution``)."""
    start = time.perf_counter()
    writer = configure(df.writeStream).option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
    query = writer.start()
    query.awaitTermination()
    elapsed = time.perf_counter() - start
    if query.exception() is not None:
        raise RuntimeError(f"the streaming query failed: {query.exception()}")
    return elapsed, sum(p["durationMs"].get("triggerExecution", 0) for p in query.recentProgress) / 1000


def stream_write(
    spark: SparkSession, fmt: str, servers: str, table: Path, topic: str, checkpoint: Path
) -> tuple[float, float]:
    df = spark.readStream.schema(spark.read.parquet(str(table)).schema).parquet(str(table))
    return run_stream(
        df, checkpoint, lambda w: w.format(fmt).option("kafka.bootstrap.servers", servers).option("topic", topic)
    )


def batch_read(spark: SparkSession, fmt: str, servers: str, topic: str) -> float:
    df = spark.read.format(fmt).option("kafka.bootstrap.servers", servers).option("subscribe", topic)
    df = df.options(**READ).load()
    start = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - start


def stream_read(spark: SparkSession, fmt: str, servers: str, topic: str, checkpoint: Path) -> tuple[float, float]:
    df = spark.readStream.format(fmt).option("kafka.bootstrap.servers", servers).option("subscribe", topic)
    df = df.option("startingOffsets", "earliest").options(**READ).load()
    return run_stream(df, checkpoint, lambda w: w.format("noop"))


def count(spark: SparkSession, servers: str, topic: str) -> int:
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", servers).option("subscribe", topic)
    return reader.option("kafka.isolation.level", "read_committed").load().count()


def round_of(
    spark: SparkSession, servers: str, work: Path, rows: int, size: int, partitions: int, order: tuple[str, ...]
) -> dict[tuple[str, str], float]:
    """Seconds of every (path, format) once, the formats in ``order`` on each path."""
    seconds: dict[tuple[str, str], float] = {}
    table = work / f"table-{size}-{rows}"
    if not table.exists():
        rows_df(spark, rows, size).write.parquet(str(table))
    written: dict[str, str] = {}
    for fmt in order:
        topic = written[fmt] = create(servers, partitions)
        seconds["batch write", fmt] = batch_write(spark, fmt, servers, topic, rows, size)
    for fmt in order:
        topic, chk = create(servers, partitions), work / f"chk-{uuid.uuid4().hex[:8]}"
        seconds["stream write", fmt], seconds["stream write batches", fmt] = stream_write(
            spark, fmt, servers, table, topic, chk
        )
        got = count(spark, servers, topic)
        assert got == rows, f"the {fmt} stream wrote {got} rows, expected {rows}"
    for fmt, topic in written.items():
        got = count(spark, servers, topic)
        assert got == rows, f"the {fmt} batch write left {got} rows, expected {rows}"
    source = written["kafka"]  # what Spark's sink wrote (no transactions in it)
    for fmt in order:
        seconds["batch read", fmt] = batch_read(spark, fmt, servers, source)
    for fmt in order:
        chk = work / f"chk-{uuid.uuid4().hex[:8]}"
        seconds["stream read", fmt], seconds["stream read batches", fmt] = stream_read(spark, fmt, servers, source, chk)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--brokers", default="pylog,kafka")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if min(sizes) < 10:
        raise SystemExit("value sizes start at 10 bytes")

    spark = local_session(args.master, **{"spark.jars": ",".join(str(jar) for jar in reference_jars())})
    print(
        f"Spark {spark.version} {args.master}; Spark's Kafka connector {connector_version()}; Apache Kafka "
        f"{kafka_version()}; {args.rows:,} rows, {args.partitions} partitions, best of {args.repeat}"
    )
    print(
        f"{'broker':>6} {'value':>6} {'path':>20} {'pylog rows/s':>13} {'kafka rows/s':>13} {'ratio':>6} {'target':>7}"
    )
    work = scratch_dir("pylog-bench-connectors-")
    for kind in args.brokers.split(","):
        with broker(kind, work / kind) as servers:
            round_of(spark, servers, work / kind, 20_000, 100, args.partitions, FORMATS)  # warm-up
            for size in sizes:
                best: dict[tuple[str, str], float] = {}
                for i in range(args.repeat):
                    order = FORMATS if i % 2 == 0 else FORMATS[::-1]
                    for key, seconds in round_of(
                        spark, servers, work / kind, args.rows, size, args.partitions, order
                    ).items():
                        best[key] = min(best.get(key, float("inf")), seconds)
                for path, target in TARGETS.items():
                    ours, theirs = args.rows / best[path, "pylog"], args.rows / best[path, "kafka"]
                    print(
                        f"{kind:>6} {size:>5}B {path:>20} {ours:>13,.0f} {theirs:>13,.0f} {ours / theirs:>6.2f} "
                        f"{'>= ' + str(target):>7}",
                        flush=True,
                    )
    spark.stop()


if __name__ == "__main__":
    main()
