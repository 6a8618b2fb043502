"""``client_access``: the ``BrokerAccess`` contract (``access.py``) against a real broker process.

No Spark needed, but it is the Spark source's broker layer, so it lives in this tier."""

from __future__ import annotations

import logging
import time

import pytest

from pyspark_log.client import TopicPartition
from pyspark_log.records.columnar import decode_arrow
from pyspark_log.spark import client_access
from pyspark_log.spark.access import BrokerAccessError, OffsetOutOfRangeError, UnknownPartitionError
from pyspark_log.spark.options import PylogOptionError
from spark_tests.helpers import Kafka, wait_until

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def access(kafka: Kafka):
    acc = client_access.ClientAccess(kafka.servers, {"fetch.timeout.ms": "1500"})
    yield acc
    acc.close()


def test_offsets_and_topics_omit_missing_partitions(access, kafka: Kafka, topic: str) -> None:
    kafka.create(topic, 2)
    kafka.produce(topic, ["a", "b", "c"], partition=1)
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1), TopicPartition(topic, 5), TopicPartition("nope", 0)]
    assert access.list_topics()[topic] == 2
    assert "__consumer_offsets" not in access.list_topics()
    assert access.earliest_offsets(tps) == {tps[0]: 0, tps[1]: 0}
    for level in ("read_committed", "read_uncommitted"):
        assert access.latest_offsets(tps, level) == {tps[0]: 0, tps[1]: 3}
    stamps = access.offsets_for_timestamps({tps[1]: 0, tps[0]: 0, tps[3]: 0}, "read_committed")
    assert stamps == {tps[1]: 0, tps[0]: None}
    assert access.earliest_offsets([]) == {}


def test_fetch_yields_whole_batches_until_the_end(access, kafka: Kafka, topic: str) -> None:
    kafka.create(topic)
    for i in range(20):
        kafka.produce(topic, [f"{i}-{j}" for j in range(10)])  # batches of up to 10 records
    tp = TopicPartition(topic, 0)
    chunks = list(access.fetch(tp, 15, 155, isolation_level="read_committed", max_bytes=600))
    assert len(chunks) > 1
    assert chunks[-1].next_offset >= 155
    decoded = [decode_arrow(c.records, topic=topic, partition=0).batch for c in chunks]
    offsets = [o for batch in decoded for o in batch.column("offset").to_pylist()]
    assert 10 <= offsets[0] <= 15  # the whole batch holding offset 15
    assert offsets == list(range(offsets[0], chunks[-1].next_offset))
    assert all(c.high_watermark == 200 and c.log_start_offset == 0 for c in chunks)


def test_fetch_errors(access, kafka: Kafka, topic: str) -> None:
    kafka.create(topic)
    kafka.produce(topic, ["a", "b"])
    with pytest.raises(UnknownPartitionError):
        list(access.fetch(TopicPartition(topic, 3), 0, 1, isolation_level="read_committed", max_bytes=1 << 20))
    started = time.monotonic()
    with pytest.raises(OffsetOutOfRangeError) as err:  # the log never reaches offset 5
        list(access.fetch(TopicPartition(topic, 0), 0, 5, isolation_level="read_committed", max_bytes=1 << 20))
    assert (err.value.offset, err.value.log_start_offset, err.value.log_end_offset) == (2, 0, 2)
    assert time.monotonic() - started < 15
    with pytest.raises(OffsetOutOfRangeError):  # beyond the log end
        list(access.fetch(TopicPartition(topic, 0), 7, 9, isolation_level="read_committed", max_bytes=1 << 20))


def test_fetch_waits_for_records_that_arrive(kafka: Kafka, topic: str) -> None:
    kafka.create(topic)
    acc = client_access.ClientAccess(kafka.servers, {"fetch.timeout.ms": "20000"})
    try:
        import threading

        later = threading.Timer(1.0, lambda: kafka.produce(topic, ["late"]))
        later.start()
        chunks = list(acc.fetch(TopicPartition(topic, 0), 0, 1, isolation_level="read_committed", max_bytes=1 << 20))
        later.join()
        assert chunks[-1].next_offset == 1
    finally:
        acc.close()


def test_fetch_below_the_log_start_is_out_of_range(access, kafka: Kafka, topic: str) -> None:
    from pyspark_log.client import AlterConfigOp, ConfigResource, ResourceType

    kafka.create(topic, 1, **{"segment.bytes": "500"})
    kafka.produce(topic, [f"v{i}" for i in range(30)], batch=False)
    resource = ConfigResource(ResourceType.TOPIC, topic)
    kafka.admin.incremental_alter_configs({resource: [AlterConfigOp("retention.ms", "100")]})
    wait_until(lambda: kafka.earliest(topic) == 30, 30, "retention")
    with pytest.raises(OffsetOutOfRangeError) as err:
        list(access.fetch(TopicPartition(topic, 0), 3, 30, isolation_level="read_committed", max_bytes=1 << 20))
    assert err.value.offset == 3
    assert err.value.log_start_offset == 30


def test_pool_reuses_clients_per_process(kafka: Kafka) -> None:
    client_access._POOL.clear()
    first = client_access.connect(kafka.servers, {"client.id": "pool-test"})
    assert first.list_topics() is not None
    consumer = first.consumer()
    first.close()
    second = client_access.connect(kafka.servers, {"client.id": "pool-test"})
    assert second is first
    assert second.consumer() is consumer
    other = client_access.connect(kafka.servers, {"client.id": "another"})
    assert other is not first
    second.close()
    other.close()
    client_access._POOL.clear()


def test_bad_client_setting_names_the_option(kafka: Kafka) -> None:
    acc = client_access.ClientAccess(kafka.servers, {"request.timeout.ms": "soon"})
    with pytest.raises(PylogOptionError, match=r"request\.timeout\.ms"):
        acc.list_topics()
    with pytest.raises(PylogOptionError, match=r"fetch\.timeout\.ms"):
        client_access.ClientAccess(kafka.servers, {"fetch.timeout.ms": "0"})


def test_unreachable_broker_raises_broker_access_error() -> None:
    acc = client_access.ClientAccess(
        "127.0.0.1:1", {"default.api.timeout.ms": "1000", "socket.connection.setup.timeout.ms": "200"}
    )
    with pytest.raises(BrokerAccessError, match=r"127\.0\.0\.1:1"):
        acc.list_topics()
    acc.close()


def test_commit_offsets_warns_once_without_a_coordinator(kafka: Kafka, topic: str, caplog) -> None:
    """Until the broker has a group coordinator, commits are skipped with one warning; once it
    has one, they are stored and visible to lag tools."""
    kafka.create(topic)
    tp = TopicPartition(topic, 0)
    acc = client_access.ClientAccess(kafka.servers, {})
    try:
        with caplog.at_level(logging.WARNING, logger="pyspark_log.spark.client_access"):
            acc.commit_offsets(f"group-{topic}", {tp: 0})
            acc.commit_offsets(f"group-{topic}", {tp: 0})
        warnings = [r for r in caplog.records if "no group coordinator" in r.getMessage()]
        if warnings:
            assert len(warnings) == 1
        else:
            committed = kafka.admin.list_consumer_group_offsets(f"group-{topic}")
            assert committed[tp].offset == 0
    finally:
        acc.close()
