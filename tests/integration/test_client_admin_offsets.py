"""Admin operations and ListOffsets through pylog's client against a real broker."""

from __future__ import annotations

import pytest

from pyspark_log.client import (
    AdminClient,
    ConfigResource,
    Consumer,
    NewTopic,
    OffsetOutOfRangeError,
    OffsetSpec,
    Producer,
    ResourceType,
    TopicAlreadyExistsError,
    TopicPartition,
    UnknownTopicOrPartitionError,
)
from pyspark_log.client.admin import AlterConfigOp
from pyspark_log.embedded import EmbeddedBroker
from tests.waiting import Deadline, wait_until


def poll_for(c: Consumer, seconds: float) -> None:
    deadline = Deadline(seconds)
    while not deadline.expired():
        c.poll(timeout_ms=500)


def admin(broker: EmbeddedBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def test_create_describe_delete_topics(broker: EmbeddedBroker, topic_name: str) -> None:
    with admin(broker) as a:
        a.create_topics([NewTopic(topic_name + "-dry", 2, 1)], validate_only=True)
        assert topic_name + "-dry" not in a.list_topics()
        a.create_topics([NewTopic(topic_name, 5, 1, config={"retention.ms": "3600000"})])
        with pytest.raises(TopicAlreadyExistsError):
            a.create_topics([NewTopic(topic_name, 5, 1)])
        assert topic_name in a.list_topics()
        desc = a.describe_topics([topic_name])[topic_name]
        assert sorted(desc.partitions) == [0, 1, 2, 3, 4]
        assert all(p.leader >= 0 for p in desc.partitions.values())
        cluster = a.describe_cluster()
        assert cluster.brokers
        assert all(p.leader in {b.node_id for b in cluster.brokers} for p in desc.partitions.values())
        a.delete_topics([topic_name])
        wait_until(lambda: topic_name not in a.list_topics(), f"{topic_name} to leave the topic list")
        with pytest.raises(UnknownTopicOrPartitionError):
            a.delete_topics([topic_name])


def test_topic_configs(broker: EmbeddedBroker, topic_name: str) -> None:
    with admin(broker) as a:
        a.create_topics([NewTopic(topic_name, 1, 1, config={"retention.ms": "3600000"})])
        res = ConfigResource(ResourceType.TOPIC, topic_name)
        configs = a.describe_configs([res])[res]
        assert configs["retention.ms"].value == "3600000"
        assert not configs["retention.ms"].is_default
        a.incremental_alter_configs({res: [AlterConfigOp("retention.ms", "7200000")]})
        assert a.describe_configs([res])[res]["retention.ms"].value == "7200000"


def test_create_partitions(broker: EmbeddedBroker, topic_name: str) -> None:
    with admin(broker) as a:
        a.create_topics([NewTopic(topic_name, 2, 1)])
        a.create_partitions({topic_name: 4})
        wait_until(lambda: len(a.describe_topics([topic_name])[topic_name].partitions) >= 4, "4 partitions")
        assert len(a.describe_topics([topic_name])[topic_name].partitions) == 4


def test_list_offsets_earliest_latest_and_by_timestamp(broker: EmbeddedBroker, topic_name: str) -> None:
    tp = TopicPartition(topic_name, 0)
    with admin(broker) as a:
        a.create_topics([NewTopic(topic_name, 1, 1)])
        empty = a.list_offsets({tp: OffsetSpec.EARLIEST})
        assert empty[tp] is not None
        assert empty[tp].offset == 0  # type: ignore[union-attr]
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0}) as p:
        for i in range(10):
            p.send(topic_name, f"{i}".encode(), timestamp_ms=1_000_000 + 1000 * i).result()
    with Consumer({"bootstrap.servers": broker.bootstrap_servers}) as c:
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: 10}
        assert c.end_offsets([tp], isolation_level="read_committed") == {tp: 10}
        found = c.offsets_for_times({tp: 1_004_500})[tp]
        assert found is not None
        assert (found.offset, found.timestamp) == (5, 1_005_000)
        assert c.offsets_for_times({tp: 1_000_000})[tp].offset == 0  # type: ignore[union-attr]
        assert c.offsets_for_times({tp: 9_999_999_999})[tp] is None
        missing = TopicPartition(topic_name + "-missing", 0)
        assert c.end_offsets([tp, missing], skip_missing=True) == {tp: 10}
        with pytest.raises(UnknownTopicOrPartitionError):
            c.beginning_offsets([missing])
        assert c.list_topics()[topic_name] == [0]
    with admin(broker) as a:
        got = a.list_offsets({tp: OffsetSpec.MAX_TIMESTAMP})[tp]
        assert got is not None
        assert (got.offset, got.timestamp) == (9, 1_009_000)


def test_out_of_range_fetch(broker: EmbeddedBroker, topic_name: str) -> None:
    tp = TopicPartition(topic_name, 0)
    with admin(broker) as a:
        a.create_topics([NewTopic(topic_name, 1, 1)])
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as p:
        p.send(topic_name, b"only").result()
    with Consumer({"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "none"}) as c:
        c.assign([tp])
        c.seek(tp, 42)
        with pytest.raises(OffsetOutOfRangeError) as info:
            poll_for(c, 10.0)
        assert info.value.partitions == {tp: 42}
        with pytest.raises(OffsetOutOfRangeError):
            c.fetch_raw(tp, 42, 1 << 20)
    with Consumer({"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest"}) as c:
        c.assign([tp])
        c.seek(tp, 42)
        recs = wait_until(lambda: c.poll(timeout_ms=500), "the record at offset 42", interval_s=0)
        assert [r.value for r in recs] == [b"only"]
