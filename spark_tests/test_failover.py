"""A streaming query reading a replicated topic survives the SIGKILL of a partition leader.

Kafka documentation §4.7 "Replication": "a committed message will not be lost, as long as there is at least one in sync
replica alive". Three ``broker,controller`` nodes, a topic of replication factor 3 written with
acks=all; a ``readStream.format("pylog")`` query loads it into Delta through ``delta_sink``; the
leader of a partition is SIGKILLed mid-stream and later restarted. The query goes on (or fails
with a clear error and resumes from its checkpoint), and the table holds every record exactly once.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from deltalake import DeltaTable

from pyspark_log.delta import delta_sink
from pyspark_log.embedded_cluster import EmbeddedCluster
from spark_tests.helpers import stream, wait_until

pytestmark = [pytest.mark.timeout(420), pytest.mark.usefixtures("stop_queries")]

NODES = (1, 2, 3)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    overrides = {
        "broker.session.timeout.ms": "4000",
        "broker.heartbeat.interval.ms": "1000",
        "offsets.topic.num.partitions": "3",
        "transaction.state.log.num.partitions": "3",
    }
    with EmbeddedCluster(
        tmp_path_factory.mktemp("spark-failover"), brokers=NODES, combined=True, overrides=overrides
    ) as c:
        yield c


def produce(bootstrap: str, topic: str, tag: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(count):
        producer.produce(topic, value=f"{tag}-{i}".encode(), partition=i % 2)
    assert producer.flush(120) == 0


def table_rows(table: Path) -> list[dict]:
    if not (table / "_delta_log").exists():
        return []
    return DeltaTable(str(table)).to_pyarrow_table(columns=["partition", "offset", "value"]).to_pylist()


def test_streaming_into_delta_survives_a_leader_sigkill_with_every_record_once(
    spark, cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    topic = f"spark-failover-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.create_topics([NewTopic(topic, 2, 3, config={"min.insync.replicas": "2"})])[topic].result(60)
    wait_until(lambda: len(cluster.partitions(topic)) == 2, 60, "the topic in the metadata")
    produce(cluster.bootstrap(), topic, "before", 100)
    table, chk = tmp_path / "table", tmp_path / "chk"
    servers = cluster.bootstrap()

    def start():
        df = stream(spark, servers, subscribe=topic, startingOffsets="earliest")
        return (
            df.writeStream.foreachBatch(delta_sink(str(table)))
            .option("checkpointLocation", str(chk))
            .trigger(processingTime="200 milliseconds")
            .start()
        )

    query = start()
    wait_until(lambda: len(table_rows(table)) == 100, 120, "the first 100 records")
    restarts = 0

    def landed(expected: int) -> None:
        nonlocal query, restarts

        def check() -> bool:
            nonlocal query, restarts
            if not query.isActive:
                error = query.exception()
                assert error is not None
                assert any(w in str(error) for w in ("broker", "connect", "fetch", "offsets", "leader")), str(error)
                restarts += 1
                query = start()
            return len(table_rows(table)) >= expected

        wait_until(check, 180, f"{expected} records in the Delta table")

    victim = cluster.partitions(topic)[0].leader
    cluster.kill(victim)
    survivors = tuple(n for n in NODES if n != victim)
    wait_until(
        lambda: cluster.partitions(topic, via=survivors[0])[0].leader in survivors, 120, "a new leader of partition 0"
    )
    produce(cluster.bootstrap(survivors), topic, "after-kill", 100)
    landed(200)

    cluster.restart(victim)
    wait_until(lambda: set(cluster.partitions(topic)[0].isr) == set(NODES), 120, "the killed node back in the ISR")
    produce(cluster.bootstrap(), topic, "after-restart", 100)
    landed(300)
    query.stop()

    rows = table_rows(table)
    keys = [(r["partition"], r["offset"]) for r in rows]
    assert len(keys) == len(set(keys)) == 300
    values = sorted(bytes(r["value"]).decode() for r in rows)
    expected = sorted(f"{tag}-{i}" for tag in ("before", "after-kill", "after-restart") for i in range(100))
    assert values == expected
    assert restarts <= 2
