"""Failure injection for the exactly-once pylog sink (issue #5): a task that fails after writing
its rows (retried by Spark, and, without retries, the query restarted), a query killed between
the tasks' writes and the driver's commit (before any commit, and half-way through it), and a
restart that replays the last micro-batch. In every case a read_committed reader of the output
topic ends up with every input record exactly once, and the uncommitted data of failed attempts
(visible to read_uncommitted readers) proves the failure hit after the rows were written.

The hooks are subclasses of the sink's writer built inside ``hooked_source`` (local classes, so
cloudpickle ships them to Spark's Python workers by value). Spark retries failed tasks only with
a ``local[N,F]`` master; the session of this tier is ``local[2]``, so the retry test runs its
query in a child process with its own ``local[2,4]`` session (``python -m`` this module).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from spark_tests.helpers import Kafka, stream, wait_until
from spark_tests.test_sink import confluent_values, output, settled

pytestmark = [pytest.mark.timeout(420), pytest.mark.usefixtures("stop_queries")]

REPO = Path(__file__).resolve().parent.parent


def hooked_source(name: str, *, fail_marker: Path | None = None, crash_keeping: int | None = None) -> type:
    """``format(name)``: the pylog sink with failures injected.

    ``fail_marker``: the first task attempt that finds this file (and wrote rows) removes it and
    fails after ``write`` returned, i.e. with its transaction prepared; with ``"attempt0"`` as its
    content every first attempt of task 0 fails instead (needs a master with task retries).
    ``crash_keeping=n``: the driver's commit completes the transactions of the n lowest task
    partitions, then "dies": it raises, and ``abort`` does nothing (a dead driver aborts nothing).
    """
    from pyspark import TaskContext

    from pyspark_log.spark.sink import complete_all
    from pyspark_log.spark.source import PylogDataSource
    from pyspark_log.spark.writer import PylogStreamWriter, stream_writer

    marker = None if fail_marker is None else str(fail_marker)

    def should_fail() -> bool:
        assert marker is not None
        ctx = TaskContext.get()
        if os.path.exists(marker) and Path(marker).read_text() == "attempt0":
            return ctx.partitionId() == 0 and ctx.attemptNumber() == 0
        try:
            os.remove(marker)  # exactly one attempt wins the marker
        except FileNotFoundError:
            return False
        return True

    class HookedWriter(PylogStreamWriter):
        def write(self, iterator):
            message = super().write(iterator)
            if marker is not None and message.result.handle is not None and should_fail():
                raise RuntimeError("injected task failure after the task's rows were written")
            return message

        def commit(self, messages, batchId):  # noqa: N803 - PySpark's name
            if crash_keeping is None:
                super().commit(messages, batchId)
                return
            results = sorted(
                (m.result for m in messages if m is not None and m.result.handle is not None),
                key=lambda r: r.partition_id,
            )
            complete_all(self.options, results[:crash_keeping], commit=True, what="hook")
            raise RuntimeError(f"injected driver crash while committing micro-batch {batchId}")

        def abort(self, messages, batchId):  # noqa: N803 - PySpark's name
            if crash_keeping is None:
                super().abort(messages, batchId)

    class HookedSource(PylogDataSource):
        @classmethod
        def name(cls) -> str:
            return name

        def streamWriter(self, schema, overwrite):  # noqa: N802 - PySpark's name
            plain = stream_writer(self.options, schema)
            return HookedWriter(plain.options, plain.columns)

    return HookedSource


def pipeline(spark: Any, servers: str, source: str, *, same_partition: bool = False, **options: str) -> Any:
    """input value ``vN`` -> output value ``out-vN``, in micro-batches of at most 20 records;
    with ``same_partition`` each record goes to the output partition numbered like its input one."""
    df = stream(spark, servers, subscribe=source, startingOffsets="earliest", maxOffsetsPerTrigger="20", **options)
    columns = ["concat('out-', CAST(value AS STRING)) AS value"]
    if same_partition:
        columns.append("partition")
    return df.selectExpr(*columns)


def run(df: Any, servers: str, fmt: str, chk: Path, sink: str, *, expect_error: str | None = None) -> Any:
    """Run ``df`` into ``sink`` with Trigger.AvailableNow through ``format(fmt)``."""
    query = (
        df.writeStream.format(fmt)
        .option("bootstrap.servers", servers)
        .option("topic", sink)
        .option("checkpointLocation", str(chk))
        .trigger(availableNow=True)
        .start()
    )
    if expect_error is None:
        assert query.awaitTermination(240), "the AvailableNow query did not finish"
        assert query.exception() is None
    else:
        with pytest.raises(Exception, match=expect_error):
            query.awaitTermination(240)
    return query


def expected(count: int) -> list[str]:
    return sorted(f"out-v{i}" for i in range(count))


def topics(kafka: Kafka, topic: str) -> tuple[str, str]:
    return kafka.create(f"{topic}-in", 2), kafka.create(f"{topic}-out", 2)


def test_task_failing_after_its_writes_then_restart(spark, kafka: Kafka, topic: str, tmp_path: Path) -> None:
    """Without task retries (local[2]) the failed task fails the micro-batch: Spark aborts the
    other tasks' transactions, the driver fences the failed task's transactional id, the query
    stops; its restart writes the batch again."""
    source, sink = topics(kafka, topic)
    kafka.produce_spread(source, 2, 60)
    marker = tmp_path / "fail-once"
    marker.write_text("once")
    spark.dataSource.register(hooked_source("pylog_fail_task", fail_marker=marker))
    chk = tmp_path / "chk"
    run(
        pipeline(spark, kafka.servers, source),
        kafka.servers,
        "pylog_fail_task",
        chk,
        sink,
        expect_error="injected task failure after the task's rows were written",
    )
    assert not marker.exists()
    settled(spark, kafka, sink, [])
    assert output(spark, kafka, sink, "read_uncommitted"), "the failed attempt wrote its rows"
    run(pipeline(spark, kafka.servers, source), kafka.servers, "pylog", chk, sink)
    settled(spark, kafka, sink, expected(60))


@pytest.mark.parametrize("keeping", [0, 1], ids=["before-any-commit", "half-committed"])
def test_query_killed_between_task_writes_and_driver_commit(
    spark, kafka: Kafka, topic: str, tmp_path: Path, keeping: int
) -> None:
    """The dead driver leaves the other task's transaction open (until its timeout), which holds
    back the LSO of every output partition it wrote to; each task writes one output partition (its
    input's) so that the committed task's share is visible beside it."""
    source, sink = topics(kafka, topic)
    kafka.produce_spread(source, 2, 20)
    chk = tmp_path / "chk"

    def crashing_pipeline() -> Any:
        return pipeline(spark, kafka.servers, source, same_partition=True)

    run(crashing_pipeline(), kafka.servers, "pylog", chk, sink)  # batch 0
    settled(spark, kafka, sink, expected(20))
    kafka.produce_spread(source, 2, 20, "x")  # batch 1: x0..x19, 10 per input partition
    fmt = f"pylog_crash_{keeping}"
    spark.dataSource.register(hooked_source(fmt, crash_keeping=keeping))
    run(crashing_pipeline(), kafka.servers, fmt, chk, sink, expect_error="injected driver crash")
    batch1 = sorted(f"out-x{i}" for i in range(20))
    uncommitted = output(spark, kafka, sink, "read_uncommitted")
    assert sorted(v for v in uncommitted if v.startswith("out-x")) == batch1, "the tasks wrote batch 1"
    if keeping == 0:
        committed_x = [v for v in output(spark, kafka, sink) if v.startswith("out-x")]
        assert committed_x == []  # nothing of the crashed batch is visible
    else:
        # One task's share, whole: the input partition of x{i} is i % 2 and each task reads one.
        # Polled, not read once, so a slow reader cannot fail it; the share must still be whole.
        shares = [sorted(f"out-x{i}" for i in range(r, 20, 2)) for r in (0, 1)]
        seen: list[list[str]] = []

        def one_share_committed() -> bool:
            seen.append([v for v in output(spark, kafka, sink) if v.startswith("out-x")])
            return seen[-1] in shares

        wait_until(one_share_committed, 60, "one task's share of batch 1 to be committed")
        committed_x = seen[-1]
    # Restart from the checkpoint: batch 1 is replayed; the committed task skips, the rest rewrite.
    run(crashing_pipeline(), kafka.servers, "pylog", chk, sink)
    settled(spark, kafka, sink, sorted([*expected(20), *batch1]))
    assert len(output(spark, kafka, sink, "read_uncommitted")) == 20 + 20 + (20 - len(committed_x))


@pytest.mark.parametrize("prefix", [None, "replayed"], ids=["default-prefix", "explicit-prefix"])
def test_restart_that_replays_the_last_batch(
    spark, kafka: Kafka, topic: str, tmp_path: Path, prefix: str | None
) -> None:
    source, sink = topics(kafka, topic)
    kafka.produce_spread(source, 2, 60)
    chk = tmp_path / "chk"
    options = {} if prefix is None else {"transactionalIdPrefix": f"{prefix}-{topic}"}
    df = pipeline(spark, kafka.servers, source)

    def start() -> Any:
        writer = df.writeStream.format("pylog").option("bootstrap.servers", kafka.servers).option("topic", sink)
        for key, value in options.items():
            writer = writer.option(key, value)
        query = writer.option("checkpointLocation", str(chk)).trigger(availableNow=True).start()
        assert query.awaitTermination(240)
        assert query.exception() is None
        return query

    first = start()
    settled(spark, kafka, sink, expected(60))
    last = max(p["batchId"] for p in first.recentProgress)
    assert last >= 2
    commit_file = chk / "commits" / str(last)
    assert commit_file.exists()
    commit_file.unlink()
    (chk / "commits" / f".{last}.crc").unlink(missing_ok=True)

    again = start()
    replayed = [p for p in again.recentProgress if p["batchId"] == last]
    assert replayed, "Spark did not replay the last batch"
    assert replayed[0]["numInputRows"] > 0
    assert commit_file.exists()
    settled(spark, kafka, sink, expected(60))
    # The replay wrote nothing at all, not even aborted data.
    assert output(spark, kafka, sink, "read_uncommitted") == expected(60)


# ---------------------------------------------------------------------------------------------
# Task retries, in a child process with a local[2,4] session


def test_task_failing_after_its_writes_is_retried(spark, kafka: Kafka, topic: str, tmp_path: Path) -> None:
    """Every first attempt of task 0 fails after preparing its transaction, and a UDF fails the
    first attempt of every task once mid-way; Spark retries them (local[2,4]); each retry fences
    the failed attempt (init_transactions aborts its open transaction) and the query completes."""
    source, sink = topics(kafka, topic)
    kafka.produce_spread(source, 2, 80)
    job = {
        "servers": kafka.servers,
        "source": source,
        "sink": sink,
        "checkpoint": str(tmp_path / "chk"),
        "marker": str(tmp_path / "attempt0"),
        "udf_markers": str(tmp_path / "udf"),
    }
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    proc = subprocess.run(
        [sys.executable, "-m", "spark_tests.test_sink_failures", json.dumps(job)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=360,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["error"] is None
    assert report["batches"] >= 4
    assert report["udf_failures"] >= 1
    settled(spark, kafka, sink, expected(80))
    assert confluent_values(kafka.servers, sink, 2) == expected(80)
    assert len(output(spark, kafka, sink, "read_uncommitted")) > 80, "failed attempts wrote rows (aborted)"


def _retry_job(job: dict[str, str]) -> dict[str, Any]:
    """The child process: a local[2,4] session running the pipeline with failing first attempts."""
    from pyspark import TaskContext
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import udf

    udf_dir = job["udf_markers"]
    os.makedirs(udf_dir, exist_ok=True)

    def fail_first_attempt_midway(value: str) -> str:
        ctx = TaskContext.get()
        if ctx.attemptNumber() == 0 and value.endswith("5"):
            flag = os.path.join(udf_dir, f"{ctx.stageId()}-{ctx.partitionId()}")
            if not os.path.exists(flag):
                Path(flag).write_text("failed")
                raise RuntimeError("injected UDF failure on a task's first attempt")
        return value

    spark = (
        SparkSession.builder.master("local[2,4]")
        .appName("pylog-sink-retries")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    import pyspark_log.spark as pylog_spark

    pylog_spark.register(spark)
    Path(job["marker"]).write_text("attempt0")
    spark.dataSource.register(hooked_source("pylog_retry", fail_marker=Path(job["marker"])))
    df = pipeline(spark, job["servers"], job["source"])
    df = df.select(udf(fail_first_attempt_midway, "string")("value").alias("value"))
    query = (
        df.writeStream.format("pylog_retry")
        .option("bootstrap.servers", job["servers"])
        .option("topic", job["sink"])
        .option("checkpointLocation", job["checkpoint"])
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    error = query.exception()
    report = {
        "error": None if error is None else str(error),
        "batches": len([p for p in query.recentProgress if p["numInputRows"]]),
        "udf_failures": len(os.listdir(udf_dir)),
    }
    spark.stop()
    return report


if __name__ == "__main__":
    print(json.dumps(_retry_job(json.loads(sys.argv[1]))))  # the parent reads the last line
