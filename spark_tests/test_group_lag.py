"""A streaming query reading ``format("pylog")`` with ``groupId`` is visible to lag tools: after
each completed micro-batch the source commits the processed offsets to the group (the checkpoint
stays the source of truth), so ``pylog groups describe`` shows the query's partitions with their
lag, which falls to 0 once the query has caught up (issue 6: "A Spark streaming query with
``groupId`` shows up in ``pylog groups describe`` with its lag falling to 0")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from spark_tests.helpers import Kafka, stream, values_of, wait_until

pytestmark = [pytest.mark.timeout(240), pytest.mark.usefixtures("stop_queries")]


def pylog_groups(kafka: Kafka, *args: str) -> subprocess.CompletedProcess[str]:
    """``pylog groups ARGS`` as a user runs it: a separate process."""
    env = {k: v for k, v in os.environ.items() if k != "PYLOG_BOOTSTRAP_SERVERS"}
    argv = [sys.executable, "-m", "pyspark_log.cli", "--bootstrap-server", kafka.servers, "groups", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=90, env=env, check=False)


def describe(kafka: Kafka, group: str) -> dict[str, Any]:
    proc = pylog_groups(kafka, "describe", "--group", group, "--output", "json")
    assert proc.returncode == 0, proc.stderr
    [desc] = json.loads(proc.stdout)
    return desc


def lag_by_partition(kafka: Kafka, group: str) -> dict[int, int | None]:
    return {row["partition"]: row["lag"] for row in describe(kafka, group)["offsets"]}


def start(df: Any, checkpoint: Any, sink: list) -> Any:
    """A running query appending every batch's rows to ``sink``."""
    return (
        df.writeStream.foreachBatch(lambda batch, _id: sink.extend(batch.collect()))
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="100 milliseconds")
        .start()
    )


def test_group_lag_of_a_streaming_query_falls_to_zero(spark, kafka: Kafka, topic: str, tmp_path) -> None:
    kafka.create(topic, 2)
    kafka.produce_spread(topic, 2, 10, "a")
    group = f"spark-lag-{topic}"
    df = stream(spark, kafka.servers, subscribe=topic, startingOffsets="earliest", groupId=group)
    rows: list = []
    query = start(df, tmp_path / "chk", rows)
    query.processAllAvailable()
    assert values_of(rows) == sorted(f"a{i}" for i in range(10))
    # The commit of a batch's end reaches the group when the source plans the next trigger.
    wait_until(lambda: lag_by_partition(kafka, group) == {0: 0, 1: 0}, what="the group's lag to reach 0")

    desc = describe(kafka, group)
    assert (desc["state"], desc["protocolType"], desc["members"]) == ("Empty", "", [])
    assert [(r["partition"], r["currentOffset"], r["logEndOffset"], r["consumerId"]) for r in desc["offsets"]] == [
        (0, 5, 5, None),
        (1, 5, 5, None),
    ]
    proc = pylog_groups(kafka, "describe", "--group", group)
    assert proc.returncode == 0, proc.stderr
    assert [line.split() for line in proc.stdout.splitlines()[2:]] == [
        [group, topic, "0", "5", "5", "0", "-", "-", "-"],
        [group, topic, "1", "5", "5", "0", "-", "-", "-"],
    ]
    assert proc.stderr == f"Consumer group '{group}' has no active members.\n"
    listed = pylog_groups(kafka, "list", "--output", "json")
    assert {"groupId": group, "state": "Empty", "protocolType": "", "type": "classic"} in json.loads(listed.stdout)
    query.stop()

    kafka.produce_spread(topic, 2, 6, "b")  # three more records per partition, nobody reading
    assert lag_by_partition(kafka, group) == {0: 3, 1: 3}

    rows.clear()
    query = start(df, tmp_path / "chk", rows)  # the same checkpoint: it resumes at 5 and 5
    query.processAllAvailable()
    assert values_of(rows) == sorted(f"b{i}" for i in range(6))
    wait_until(lambda: lag_by_partition(kafka, group) == {0: 0, 1: 0}, what="the group's lag to fall to 0 again")
    offsets = describe(kafka, group)["offsets"]
    assert [(r["currentOffset"], r["logEndOffset"]) for r in offsets] == [(8, 8), (8, 8)]
    query.stop()
