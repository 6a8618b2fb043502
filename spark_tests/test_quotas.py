"""A streaming read under a consumer quota (Kafka documentation §4.9 "Quotas"): throttled Fetches are answered at once
without data and the channel is muted, yet every micro-batch completes, only more slowly."""

from __future__ import annotations

import socket
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyspark_log.client import ClientQuotaAlteration
from pyspark_log.embedded import EmbeddedBroker
from spark_tests.helpers import Kafka, stream, values_of

pytestmark = [pytest.mark.timeout(240), pytest.mark.usefixtures("stop_queries")]

QUOTA = 100_000  # consumer_byte_rate: 100 kB/s
VALUE = "v" * 10_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def quota_kafka(tmp_path: Path) -> Iterator[tuple[Kafka, int]]:
    port = _free_port()
    overrides = {"quota.window.num": "3", "metrics.port": str(port)}
    with EmbeddedBroker(tmp_path / "broker", python=sys.executable, overrides=overrides) as broker:
        kafka = Kafka(broker)
        try:
            yield kafka, port
        finally:
            kafka.close()


def test_kafka_doc_4_9_streaming_read_under_a_consumer_quota_completes_every_micro_batch(
    spark, quota_kafka: tuple[Kafka, int], topic: str, tmp_path: Path
) -> None:
    kafka, metrics_port = quota_kafka
    kafka.create(topic, 2)
    values = [f"{i:04d}{VALUE}" for i in range(80)]  # 800 kB: several seconds at 100 kB/s
    kafka.produce(topic, values)
    kafka.admin.alter_client_quotas(
        [ClientQuotaAlteration({"client-id": "spark-quota"}, {"consumer_byte_rate": QUOTA})]
    )
    rows: list = []
    batches: list[int] = []
    throttle_ms: list[float] = []

    def collect(batch, batch_id: int) -> None:
        got = batch.collect()
        rows.extend(got)
        batches.append(len(got))
        throttle_ms.append(fetch_throttle_time(metrics_port))  # a mean over the last 3 s: read it now

    df = stream(
        spark, kafka.servers, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="20",
        **{"kafka.client.id": "spark-quota"},
    )  # fmt: skip
    query = (
        df.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "chk"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180), "the AvailableNow query did not finish"
    assert query.exception() is None
    assert values_of(rows) == sorted(values)
    assert [n for n in batches if n] == [20, 20, 20, 20]
    assert max(throttle_ms) > 0, throttle_ms


def fetch_throttle_time(metrics_port: int) -> float:
    """``kafka_server_fetch_throttle_time`` of the group ``spark-quota`` (0 if absent)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    for line in text.splitlines():
        if line.startswith("kafka_server_fetch_throttle_time{") and 'client_id="spark-quota"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0
