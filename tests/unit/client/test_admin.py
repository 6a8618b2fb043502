"""AsyncAdmin against the fake cluster."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pyspark_log.client.admin import AsyncAdmin, NewTopic
from pyspark_log.client.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError
from pyspark_log.client.types import OffsetSpec, TopicPartition
from pyspark_log.wire import ApiKey

from .fake_broker import FakeCluster

Run = Callable[[Any], Any]


def admin(fake: FakeCluster) -> AsyncAdmin:
    return AsyncAdmin({"bootstrap.servers": "fake:9092", "retry.backoff.ms": 1}, connector=fake.connector)


def test_create_describe_list_delete(run: Run) -> None:
    fake = FakeCluster(2, topics={"old": 1})

    async def main() -> None:
        async with admin(fake) as a:
            await a.create_topics([NewTopic("new", 4, 1, config={"retention.ms": "1000"})])
            create = next(r for k, _v, r in fake.requests if k == ApiKey.CREATE_TOPICS)
            assert create.topics[0].configs[0].name == "retention.ms"
            with pytest.raises(TopicAlreadyExistsError) as info:
                await a.create_topics([NewTopic("new", 1), NewTopic("other", 1)])
            assert set(info.value.errors) == {"new"}  # type: ignore[attr-defined]
            assert await a.list_topics() == ["new", "old", "other"]
            desc = await a.describe_topics(["new"])
            assert sorted(desc["new"].partitions) == [0, 1, 2, 3]
            assert desc["new"].partitions[1].leader == 1
            with pytest.raises(UnknownTopicOrPartitionError):
                await a.describe_topics(["absent"])
            await a.create_topics([NewTopic("dry", 1)], validate_only=True)
            assert "dry" not in fake.topics
            await a.delete_topics(["new"])
            assert "new" not in fake.topics
            with pytest.raises(UnknownTopicOrPartitionError):
                await a.delete_topics(["new"])
            cluster = await a.describe_cluster()
            assert cluster.cluster_id == "fake-cluster"
            assert [b.node_id for b in cluster.brokers] == [0, 1]

    run(main())


def test_list_offsets(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 1})

    async def main() -> None:
        async with admin(fake) as a:
            tp = TopicPartition("t", 0)
            got = await a.list_offsets({tp: OffsetSpec.LATEST})
            assert got[tp] is not None
            assert got[tp].offset == 0

    run(main())


def test_group_offsets_commit_and_fetch_follow_the_coordinator(run: Run) -> None:
    from pyspark_log.client.groups import OffsetAndMetadata

    fake = FakeCluster(2, topics={"t": 2})
    fake.coordinator = 1
    fake.coordinator_errors.append(15)  # COORDINATOR_NOT_AVAILABLE first: retried

    async def main() -> None:
        async with admin(fake) as a:
            offsets = {TopicPartition("t", 0): 5, TopicPartition("t", 1): OffsetAndMetadata(9, "m")}
            await a.alter_consumer_group_offsets("g", offsets)
            assert fake.committed == {("g", "t", 0): 5, ("g", "t", 1): 9}
            fake.coordinator = 0  # moved: NOT_COORDINATOR, find it again
            await a.alter_consumer_group_offsets("g", {TopicPartition("t", 0): 6})
            got = await a.list_consumer_group_offsets("g")
            assert {tp: om.offset for tp, om in got.items()} == {TopicPartition("t", 0): 6, TopicPartition("t", 1): 9}

    run(main())
