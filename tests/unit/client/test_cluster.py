"""Cluster: bootstrap over several servers, metadata refresh on request and on max age,
reconnect backoff, and the snapshot shared with other threads."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Callable
from typing import Any

import pytest

from pyspark_log.client.clock import SYSTEM_CLOCK
from pyspark_log.client.cluster import Cluster
from pyspark_log.client.config import CONSUMER, parse
from pyspark_log.client.errors import BrokerConnectionError, ClientClosedError
from pyspark_log.client.types import TopicPartition
from pyspark_log.wire import ApiKey
from tests.waiting import wait_until_async

from .fake_broker import FakeCluster

Run = Callable[[Any], Any]


def cluster(fake: FakeCluster, servers: str = "fake:9092", **cfg: Any) -> Cluster:
    config = parse(CONSUMER, {"bootstrap.servers": servers, **cfg}, "consumer")
    return Cluster(config, connector=fake.connector, rng=random.Random(0))


def metadata_requests(fake: FakeCluster) -> int:
    return sum(1 for k, _v, _r in fake.requests if k == ApiKey.METADATA)


def test_bootstrap_tries_each_server(run: Run) -> None:
    fake = FakeCluster(3, topics={"t": 3})
    fake.refuse.update({0, 1})

    async def main() -> None:
        c = cluster(fake, "fake:9092,fake:9093,fake:9094")
        await c.start()
        assert sorted(c.metadata.brokers) == [0, 1, 2]
        await c.close()

    run(main())


def test_bootstrap_failure_is_a_clear_error(run: Run) -> None:
    fake = FakeCluster(1)
    fake.refuse.add(0)

    async def main() -> None:
        c = cluster(fake)
        with pytest.raises(BrokerConnectionError, match=r"no broker reachable \(bootstrap.servers=fake:9092\)"):
            await c.start()
        await c.close()

    run(main())


def test_tracked_topics_refresh_on_request_and_on_max_age(run: Run) -> None:
    fake = FakeCluster(2, topics={"t": 2})

    async def main() -> None:
        c = cluster(fake, **{"metadata.max.age.ms": 50})
        await c.start()
        c.add_topics(["t"])
        meta = await c.refresh()
        assert meta.leader_for(TopicPartition("t", 1)) == 1
        fake.leaders[("t", 1)] = 0
        before = metadata_requests(fake)
        await wait_until_async(  # the max-age timer refreshes on its own (every 50 ms)
            lambda: c.metadata.leader_for(TopicPartition("t", 1)) == 0, what="a refresh by the max-age timer"
        )
        assert metadata_requests(fake) > before
        assert c.metadata.leader_for(TopicPartition("t", 1)) == 0
        await c.close()

    run(main())


def test_unknown_topics_are_kept_with_their_error(run: Run) -> None:
    fake = FakeCluster(1, topics={})

    async def main() -> None:
        c = cluster(fake)
        await c.start()
        c.add_topics(["ghost"])
        meta = await c.refresh()
        assert meta.topics["ghost"].error_code == 3
        assert meta.partition_count("ghost") is None
        await c.close()
        with pytest.raises(ClientClosedError):
            await c.refresh()

    run(main())


def test_reconnect_backoff_after_a_failed_connect(run: Run) -> None:
    fake = FakeCluster(2, topics={"t": 2})

    async def main() -> None:
        c = cluster(fake, **{"reconnect.backoff.ms": 10_000, "reconnect.backoff.max.ms": 10_000})
        await c.start()
        fake.refuse.add(1)
        with pytest.raises(BrokerConnectionError):
            await c.connection(1)
        assert c.backoff_remaining_ms(1) > 5000
        c.start_connect(1)  # no-op while backing off
        assert 1 not in c._connecting
        await c.close()

    run(main())


def test_a_failed_connect_refreshes_the_metadata(run: Run) -> None:
    """A leader SIGKILLed before the controller fenced it stays in the metadata of the moment;
    the failed connects to it must bring a refresh, not wait for ``metadata.max.age.ms``."""
    fake = FakeCluster(2, topics={"t": 2})

    async def main() -> None:
        c = cluster(fake, **{"metadata.max.age.ms": 600_000, "retry.backoff.ms": 10, "reconnect.backoff.ms": 10})
        await c.start()
        c.add_topics(["t"])
        await c.refresh()
        tp = TopicPartition("t", 1)
        assert c.metadata.leader_for(tp) == 1
        fake.refuse.add(1)
        fake.leaders[("t", 1)] = 0
        with pytest.raises(BrokerConnectionError):
            await c.connection(1)
        await wait_until_async(lambda: c.metadata.leader_for(tp) == 0, what="a refresh after the failed connect")
        await c.close()

    run(main())


def test_metadata_snapshot_is_immutable_and_swapped(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 1})

    async def main() -> None:
        c = cluster(fake)
        await c.start()
        first = c.metadata
        c.add_topics(["t"])
        await c.refresh()
        assert c.metadata is not first
        assert "t" not in first.topics
        await c.close()

    run(main())


def test_update_requests_do_not_storm_the_broker(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 1})

    async def main() -> None:
        # when each Metadata request reached the broker, on the clock the cluster spaces refreshes by
        sent_ms: list[float] = []
        handle = fake.handle

        def timed(node: int, api_key: int, version: int, req: Any) -> dict[str, Any] | None:
            if api_key == ApiKey.METADATA:
                sent_ms.append(SYSTEM_CLOCK.monotonic_ms())
            return handle(node, api_key, version, req)

        fake.handle = timed  # type: ignore[method-assign]
        c = cluster(fake, **{"retry.backoff.ms": 100})
        await c.start()
        for _ in range(4):
            seen = len(sent_ms)
            for _ in range(10):  # a burst of update requests right after a refresh
                c.request_update()
            await wait_until_async(lambda: len(sent_ms) > seen, what="the refresh the burst asked for")  # noqa: B023
        assert len(sent_ms) == 5
        gaps_ms = [later - earlier for earlier, later in itertools.pairwise(sent_ms)]
        # never two refreshes within retry.backoff.ms (1 ms of slack: asyncio may wake that early)
        assert min(gaps_ms) >= 99, gaps_ms
        await c.close()

    run(main())


def test_when_the_metadata_task_dies_waiters_fail(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 1})

    async def main() -> None:
        c = cluster(fake)
        await c.start()

        async def boom(timeout_ms: object) -> None:
            raise RuntimeError("bug in the metadata task")

        c._refresh_once = boom  # type: ignore[method-assign,assignment]
        with pytest.raises(Exception, match="metadata task died"):
            await c.refresh(2000)
        with pytest.raises(Exception, match="metadata task died"):
            await c.refresh(2000)
        await c.close()

    run(main())


def test_a_new_topic_is_fetched_without_the_refresh_spacing(run: Run) -> None:
    """As the Java client's ``requestUpdateForNewTopics``: the first send to a topic right after the
    bootstrap refresh does not wait ``retry.backoff.ms`` for its metadata."""
    fake = FakeCluster(1, topics={"t": 1})

    async def main() -> None:
        c = cluster(fake, **{"retry.backoff.ms": 60_000})
        await c.start()
        meta = await asyncio.wait_for(c.wait_for_topic("t", 30_000), 10)
        assert len(meta.partitions) == 1
        await c.close()

    run(main())
