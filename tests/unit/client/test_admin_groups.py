"""The Admin calls behind ``pylog groups`` (``AsyncAdmin.list/describe/delete_consumer_groups``,
``delete_consumer_group_offsets``) against the client tests' fake cluster: requests go to every
broker (ListGroups) or to the group's coordinator (found again on NOT_COORDINATOR), versions are
negotiated from the broker's ApiVersions, assignments are decoded from the consumer protocol."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest

from pyspark_log.client.admin import AsyncAdmin
from pyspark_log.client.errors import UnsupportedFeatureError
from pyspark_log.client.group_admin import ConsumerGroupListing, MemberDescription
from pyspark_log.client.types import TopicPartition
from pyspark_log.wire import ApiKey, ErrorCode, KafkaError
from pyspark_log.wire.consumer_protocol import Assignment, encode_assignment
from tests.unit.client.fake_broker import FakeCluster


class GroupsCluster(FakeCluster):
    """FakeCluster plus the admin group APIs over ``groups``: id -> (protocol type, state, members)."""

    def __init__(self, nodes: int = 2) -> None:
        super().__init__(nodes, topics={"t": 2})
        self.groups: dict[str, tuple[str, str, list[dict[str, Any]]]] = {}
        self.group_nodes: dict[str, int] = {}  # which broker coordinates (lists) each group

    def _h_list_groups(self, node: int, version: int, req: Any) -> dict[str, Any]:
        listed = [
            {"group_id": g, "protocol_type": ptype, "group_state": state}
            for g, (ptype, state, _m) in self.groups.items()
            if self.group_nodes.get(g, 0) == node
        ]
        return {"error_code": 0, "groups": listed}

    def _h_describe_groups(self, node: int, version: int, req: Any) -> dict[str, Any]:
        out = []
        for g in req.groups:
            code = ErrorCode.NOT_COORDINATOR if node != self.coordinator else 0
            ptype, state, members = self.groups.get(g, ("", "Dead", []))
            out.append(
                {
                    "error_code": code,
                    "group_id": g,
                    "group_state": state,
                    "protocol_type": ptype,
                    "protocol_data": "range" if state == "Stable" else "",
                    "members": members,
                }
            )
        return {"groups": out}

    def _h_consumer_group_describe(self, node: int, version: int, req: Any) -> dict[str, Any]:
        """Every group here is a classic one: GROUP_ID_NOT_FOUND, and the admin asks DescribeGroups."""
        return {"groups": [{"error_code": ErrorCode.GROUP_ID_NOT_FOUND, "group_id": g} for g in req.group_ids]}

    def _h_delete_groups(self, node: int, version: int, req: Any) -> dict[str, Any]:
        results = []
        for g in req.groups_names:
            entry = self.groups.get(g)
            code = ErrorCode.GROUP_ID_NOT_FOUND if entry is None else 0
            if entry is not None and entry[1] != "Empty":
                code = ErrorCode.NON_EMPTY_GROUP
            if not code:
                del self.groups[g]
            results.append({"group_id": g, "error_code": code})
        return {"results": results}

    def _h_offset_delete(self, node: int, version: int, req: Any) -> dict[str, Any]:
        if req.group_id not in self.groups:
            return {"error_code": ErrorCode.GROUP_ID_NOT_FOUND, "topics": []}
        topics = [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": 0 if t.name == "t" else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    }
                    for p in t.partitions
                ],
            }
            for t in req.topics
        ]
        return {"error_code": 0, "topics": topics}


def member(member_id: str, assignment: bytes, instance: str | None = None) -> dict[str, Any]:
    return {
        "member_id": member_id,
        "group_instance_id": instance,
        "client_id": f"client-{member_id}",
        "client_host": "/10.1.2.3",
        "member_metadata": b"",
        "member_assignment": assignment,
    }


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    async def bounded() -> Any:
        async with asyncio.timeout(20):
            return await coro

    return asyncio.run(bounded())


def admin(fake: FakeCluster) -> AsyncAdmin:
    return AsyncAdmin({"bootstrap.servers": "fake:9092", "retry.backoff.ms": 1}, connector=fake.connector)


def test_list_asks_every_broker_and_keeps_consumer_groups() -> None:
    fake = GroupsCluster(2)
    fake.groups = {
        "a": ("consumer", "Stable", []),
        "b": ("", "Empty", []),
        "connect": ("connect", "Stable", []),
        "c": ("consumer", "PreparingRebalance", []),
    }
    fake.group_nodes = {"b": 1, "c": 1}

    async def main() -> None:
        async with admin(fake) as a:
            assert await a.list_consumer_groups() == [
                ConsumerGroupListing("a", "consumer", "Stable"),
                ConsumerGroupListing("b", "", "Empty"),
                ConsumerGroupListing("c", "consumer", "PreparingRebalance"),
            ]
            assert [g.group_id for g in await a.list_consumer_groups(["empty", "STABLE"])] == ["a", "b"]
            sent = [(v, r) for k, v, r in fake.requests if k == ApiKey.LIST_GROUPS]
            assert sent[-1][0] == 5  # v5: with group types (KIP-848)
            assert sorted(sent[-1][1].states_filter) == ["STABLE", "empty"]

    run(main())


def test_list_with_a_broker_before_v4_has_no_states() -> None:
    fake = GroupsCluster(1)
    fake.api_versions[ApiKey.LIST_GROUPS] = (0, 3)
    fake.groups = {"a": ("consumer", "Stable", [])}

    async def main() -> None:
        async with admin(fake) as a:
            assert await a.list_consumer_groups() == [ConsumerGroupListing("a", "consumer", None)]

    run(main())


def test_describe_finds_the_coordinator_and_decodes_assignments() -> None:
    fake = GroupsCluster(2)
    fake.coordinator = 1
    fake.coordinator_errors.append(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    owned = encode_assignment(Assignment((("t", 1), ("t", 0))))
    fake.groups = {
        "g": ("consumer", "Stable", [member("m1", owned, "static-1"), member("m2", b"")]),
        "other": ("connect", "Stable", [member("w1", b"\x00\x01not-a-consumer-assignment")]),
    }

    async def main() -> None:
        async with admin(fake) as a:
            found = await a.describe_consumer_groups(["g", "other", "nope"])
            g = found["g"]
            assert (g.state, g.protocol_type, g.partition_assignor, g.is_simple) == (
                "Stable",
                "consumer",
                "range",
                False,
            )
            assert g.coordinator is not None
            assert g.coordinator.node_id == 1
            assert g.members == (
                MemberDescription(
                    "m1", "static-1", "client-m1", "/10.1.2.3", (TopicPartition("t", 0), TopicPartition("t", 1))
                ),
                MemberDescription("m2", None, "client-m2", "/10.1.2.3", ()),
            )
            assert found["other"].members[0].assignment == ()  # not the consumer protocol: not decoded
            assert (found["nope"].state, found["nope"].members) == ("Dead", ())
            fake.coordinator = 0  # moved: NOT_COORDINATOR from node 1, found again
            assert (await a.describe_consumer_groups(["g"]))["g"].coordinator.node_id == 0  # type: ignore[union-attr]

    run(main())


def test_delete_groups_reports_each_failure() -> None:
    fake = GroupsCluster(1)
    fake.groups = {"empty": ("", "Empty", []), "busy": ("consumer", "Stable", [])}

    async def main() -> None:
        async with admin(fake) as a:
            with pytest.raises(KafkaError) as info:
                await a.delete_consumer_groups(["empty", "busy", "nope"])
            errors = info.value.errors  # type: ignore[attr-defined]
            assert {g: e.code for g, e in errors.items()} == {
                "busy": ErrorCode.NON_EMPTY_GROUP,
                "nope": ErrorCode.GROUP_ID_NOT_FOUND,
            }
            assert set(fake.groups) == {"busy"}

    run(main())


def test_delete_offsets_per_partition_and_group_errors() -> None:
    fake = GroupsCluster(1)
    fake.groups = {"g": ("", "Empty", [])}

    async def main() -> None:
        async with admin(fake) as a:
            await a.delete_consumer_group_offsets("g", [TopicPartition("t", 0)])
            with pytest.raises(KafkaError) as info:
                await a.delete_consumer_group_offsets("g", [TopicPartition("t", 1), TopicPartition("zz", 0)])
            assert list(info.value.errors) == [TopicPartition("zz", 0)]  # type: ignore[attr-defined]
            with pytest.raises(KafkaError) as info:
                await a.delete_consumer_group_offsets("nope", [TopicPartition("t", 0)])
            assert info.value.code == ErrorCode.GROUP_ID_NOT_FOUND

    run(main())


def test_a_broker_without_the_api_is_an_unsupported_feature() -> None:
    fake = GroupsCluster(1)
    del fake.api_versions[ApiKey.DELETE_GROUPS]

    async def main() -> None:
        async with admin(fake) as a:
            with pytest.raises(UnsupportedFeatureError, match="share no version of DeleteGroups"):
                await a.delete_consumer_groups(["g"])

    run(main())
