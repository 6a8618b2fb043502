"""``AsyncAdmin.elect_leaders`` against the fake cluster: the request it sends (null partitions for
all), per-partition outcomes, and request-level errors retried or raised."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pyspark_log.client.admin import AsyncAdmin, ElectionType
from pyspark_log.client.errors import ErrorCode, KafkaError
from pyspark_log.client.types import TopicPartition
from pyspark_log.wire import ApiKey

from .fake_broker import FakeCluster

Run = Callable[[Any], Any]


def admin(fake: FakeCluster) -> AsyncAdmin:
    return AsyncAdmin({"bootstrap.servers": "fake:9092", "retry.backoff.ms": 1}, connector=fake.connector)


def answer(*top_errors: int, partitions: dict[tuple[str, int], int] | None = None):
    """A fake ElectLeaders handler: the request-level errors in turn, then ``partitions``' codes."""
    pending = list(top_errors)

    def handler(node: int, version: int, req: Any) -> dict[str, Any]:
        code = pending.pop(0) if pending else 0
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, index), err in (partitions or {}).items():
            by_topic.setdefault(topic, []).append(
                {"partition_id": index, "error_code": err, "error_message": None if err == 0 else "why"}
            )
        results = [{"topic": t, "partition_result": ps} for t, ps in by_topic.items()]
        return {"throttle_time_ms": 0, "error_code": code, "replica_election_results": results if code == 0 else []}

    return handler


def test_preferred_election_of_named_partitions_reports_each_outcome(run: Run) -> None:
    fake = FakeCluster(2, topics={"t": 2})
    fake._h_elect_leaders = answer(partitions={("t", 0): 0, ("t", 1): ErrorCode.ELECTION_NOT_NEEDED})  # type: ignore[attr-defined]

    async def main() -> None:
        async with admin(fake) as a:
            got = await a.elect_leaders("preferred", [TopicPartition("t", 0), TopicPartition("t", 1)])
            assert got[TopicPartition("t", 0)] is None
            err = got[TopicPartition("t", 1)]
            assert isinstance(err, KafkaError)
            assert err.code == ErrorCode.ELECTION_NOT_NEEDED
            _, version, req = next(r for r in fake.requests if r[0] == ApiKey.ELECT_LEADERS)
            assert version == 2
            assert req.election_type == ElectionType.PREFERRED
            assert [(t.topic, list(t.partitions)) for t in req.topic_partitions] == [("t", [0, 1])]

    run(main())


def test_all_partitions_is_null_and_not_controller_is_retried(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 1})
    fake._h_elect_leaders = answer(ErrorCode.NOT_CONTROLLER, partitions={("t", 0): 0})  # type: ignore[attr-defined]

    async def main() -> None:
        async with admin(fake) as a:
            assert await a.elect_leaders(ElectionType.UNCLEAN, None) == {TopicPartition("t", 0): None}
            sent = [req for key, _v, req in fake.requests if key == ApiKey.ELECT_LEADERS]
            assert len(sent) == 2
            assert sent[-1].topic_partitions is None
            assert sent[-1].election_type == ElectionType.UNCLEAN

    run(main())


def test_a_request_level_error_is_raised(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 1})
    fake._h_elect_leaders = answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)  # type: ignore[attr-defined]

    async def main() -> None:
        async with admin(fake) as a:
            with pytest.raises(KafkaError) as info:
                await a.elect_leaders(ElectionType.PREFERRED, None)
            assert info.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED

    run(main())


def test_election_type_names_parse_case_insensitively() -> None:
    assert ElectionType.parse("Unclean") is ElectionType.UNCLEAN
    assert ElectionType.parse(0) is ElectionType.PREFERRED
    with pytest.raises(ValueError, match="PREFERRED or UNCLEAN"):
        ElectionType.parse("dirty")
