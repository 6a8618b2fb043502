"""Spark Connect (Databricks serverless and standard access mode): the source (batch, AvailableNow
in several micro-batches), the sink (batch, and a stream exactly once across a rerun on its
checkpoint), ``delta_sink`` (twice on one checkpoint: each row once) and ``load_to_delta`` (a
second run loads nothing) work through a Connect session, and ``delta_sink`` without ``app_id``
fails with an error that names it (Connect shows ``foreachBatch`` no query id).

The Spark work runs in its own process (``connect_scenarios.py``: a Connect session marks its
whole process as Connect); what it wrote is read back here without Spark — pylog's
read_committed consumer for topics, delta-rs for tables.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pyspark_log.client import Consumer, TopicPartition
from pyspark_log.embedded import EmbeddedBroker
from spark_tests.connect_scenarios import INPUT_RECORDS, PER_TRIGGER
from spark_tests.helpers import Kafka

pytestmark = [pytest.mark.timeout(600)]

PARTITIONS = 3
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def connect_run(broker: EmbeddedBroker, kafka: Kafka, tmp_path_factory: pytest.TempPathFactory) -> Any:
    topic = kafka.create("connect-input", partitions=PARTITIONS)
    for p in range(PARTITIONS):
        ids = range(p, INPUT_RECORDS, PARTITIONS)
        futures = [kafka.producer.send(topic, b"v%d" % i, key=b"k%d" % i, partition=p) for i in ids]
        kafka.producer.flush(30_000)
        assert all(f.result(30) for f in futures)
    work = tmp_path_factory.mktemp("connect")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    done = subprocess.run(
        [sys.executable, "-m", "spark_tests.connect_scenarios", broker.bootstrap_servers, topic, str(work)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=540, check=False,
    )  # fmt: skip
    results = {}
    for line in done.stdout.splitlines():
        if line.startswith("SCENARIO "):
            entry = json.loads(line.removeprefix("SCENARIO "))
            results[entry["scenario"]] = entry
    assert results, f"the Connect process reported nothing (exit {done.returncode}):\n{done.stderr[-4000:]}"
    return topic, results


def scenario(connect_run: Any, name: str) -> Any:
    _, results = connect_run
    entry = results.get(name)
    assert entry is not None, f"scenario {name} did not report"
    assert entry["ok"], f"scenario {name} failed through Spark Connect:\n{entry['error']}"
    assert entry["session"].startswith("pyspark.sql.connect")
    return entry["result"]


def read_committed(servers: str, topic: str, partitions: int) -> list[tuple[bytes | None, bytes | None]]:
    consumer = Consumer({"bootstrap.servers": servers, "isolation.level": "read_committed"})
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = consumer.end_offsets(tps)
        consumer.assign(tps)
        consumer.seek_to_beginning(tps)
        got = []
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            got.extend((r.key, r.value) for r in consumer.poll(1000))
        return got
    finally:
        consumer.close()


def delta_rows(path: str) -> list[dict[str, Any]]:
    from deltalake import DeltaTable

    return DeltaTable(path).to_pyarrow_table().to_pylist()


EXPECTED = sorted((f"k{i}", f"v{i}") for i in range(INPUT_RECORDS))


def test_source_batch_read_through_connect(connect_run: Any) -> None:
    rows = scenario(connect_run, "source_batch")
    assert sorted((k, v) for k, v, _, _ in rows) == EXPECTED
    by_partition = {p: sorted(o for _, _, q, o in rows if q == p) for p in range(PARTITIONS)}
    assert all(offsets == list(range(len(offsets))) for offsets in by_partition.values())


def test_available_now_reads_the_backlog_in_several_batches(connect_run: Any) -> None:
    result = scenario(connect_run, "source_available_now")
    assert result["values"] == sorted(v for _, v in EXPECTED)
    assert len(result["batches"]) >= INPUT_RECORDS // PER_TRIGGER
    assert max(result["batches"]) <= PER_TRIGGER


def test_sink_batch_write_through_connect(connect_run: Any, broker: EmbeddedBroker) -> None:
    out = scenario(connect_run, "sink_batch")
    got = read_committed(broker.bootstrap_servers, out, 1)
    assert sorted((k.decode(), v.decode()) for k, v in got if k and v) == sorted((f"k{i}", f"w{i}") for i in range(50))


def test_sink_stream_exactly_once_through_connect(connect_run: Any, broker: EmbeddedBroker) -> None:
    out = scenario(connect_run, "sink_stream")
    got = read_committed(broker.bootstrap_servers, out, 1)
    assert sorted((k.decode(), v.decode()) for k, v in got if k and v) == EXPECTED


def test_delta_sink_exactly_once_through_connect(connect_run: Any) -> None:
    table = scenario(connect_run, "delta_sink")
    rows = delta_rows(table)
    assert sorted((r["key"].decode(), r["value"].decode()) for r in rows) == EXPECTED


def test_delta_sink_without_app_id_names_the_option(connect_run: Any) -> None:
    error = scenario(connect_run, "delta_sink_without_app_id")
    assert error is not None, "delta_sink without app_id ran through Spark Connect"
    assert "app_id" in error
    assert "Spark Connect" in error


def test_load_to_delta_through_connect(connect_run: Any) -> None:
    result = scenario(connect_run, "load_to_delta")
    assert result["first_rows"] == INPUT_RECORDS
    assert result["second_rows"] in (0, None)
    rows = delta_rows(result["table"])
    assert sorted((r["key"].decode(), r["value"].decode()) for r in rows) == EXPECTED
