"""The group API handlers at every version Kafka 3.7 defines: each request decodes, is answered, and
the answer encodes (through the generated codecs), and a whole group lifecycle works per version."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import pytest

from broker.api.context import Request
from broker.api.groups import group_handlers
from broker.coordinator.group import OFFSETS_TOPIC, CommittedOffset
from broker.metadata.image import BrokerInfo, MetadataImage, PartitionImage, TopicImage
from broker.network.connection import ConnectionContext
from pyspark_log.wire import ApiKey, ErrorCode
from pyspark_log.wire.headers import RequestHeader
from pyspark_log.wire.message import Message
from pyspark_log.wire.registry import (
    decode_request_body,
    decode_response_body,
    encode_request_body,
    encode_response_body,
    get_api,
)
from pyspark_log.wire.versions import SUPPORTED_VERSIONS

from .helpers import Harness, subscription

HANDLERS = group_handlers()


def topic(name: str, partitions: int) -> TopicImage:
    return TopicImage(name, uuid.uuid4(), {p: PartitionImage(p, 1, 0, (1,), (1,)) for p in range(partitions)}, {})


class FakeBroker:
    """What the group handlers use of ``broker.api.context.Broker``."""

    def __init__(self, harness: Harness) -> None:
        self.groups = harness.coordinator
        self.txn = None  # no transaction coordinator: FindCoordinator key type 1 is unavailable
        self.clock_ms = harness.clock
        self.config: dict[str, Any] = {}
        # the harness's offsets store is in memory, with no replicas to wait for
        self.replicas = SimpleNamespace(get_partition=lambda _topic, _partition: None)
        self.leased = True  # the broker's session lease (broker.controller.broker_session)
        self.controller = SimpleNamespace(holds_session_lease=lambda: self.leased)
        image = MetadataImage.empty("cluster", 1).with_broker(BrokerInfo(1, "127.0.0.1", 9092))
        for t in (topic(OFFSETS_TOPIC, harness.partitions), topic("t", 2)):
            image = image.with_topic(t)
        self._image = image

    def image(self) -> MetadataImage:
        return self._image


def call(broker: FakeBroker, api_key: int, version: int, body: Mapping[str, Any]) -> Any:
    """Encode ``body`` at ``version``, decode it as the broker would, run the handler."""
    decoded = decode_request_body(api_key, version, encode_request_body(api_key, version, body))
    header = RequestHeader(api_key, version, 1, "client", 2 if get_api(api_key).is_flexible(version) else 1)
    request = Request(header, decoded, ConnectionContext("127.0.0.1:5000", "PLAINTEXT", 1))
    return HANDLERS[api_key](broker, request)  # type: ignore[arg-type]


async def send(h: Harness, broker: FakeBroker, api_key: int, version: int, body: Mapping[str, Any]) -> Message:
    """Run the handler on this loop; drive the clock while its answer is deferred; round-trip the
    answer through the response codec of ``version``."""
    result = call(broker, api_key, version, body)
    if asyncio.iscoroutine(result):
        task = asyncio.ensure_future(result)
        for _ in range(400):
            await asyncio.sleep(0)
            if task.done():
                break
            h.advance(50)
        result = await task
    return decode_response_body(api_key, version, encode_response_body(api_key, version, result))


def versions(api_key: int) -> list[int]:
    lo, hi = SUPPORTED_VERSIONS[api_key]
    return list(range(lo, hi + 1))


@pytest.mark.parametrize("version", versions(ApiKey.JOIN_GROUP))
def test_group_lifecycle_at_each_join_group_version(version: int) -> None:
    asyncio.run(lifecycle(version))


async def lifecycle(version: int) -> None:
    h = Harness()
    broker = FakeBroker(h)
    group = f"g{version}"
    join = {
        "group_id": group,
        "session_timeout_ms": 1000,
        "rebalance_timeout_ms": 1000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": subscription("t")}],
    }
    resp = await send(h, broker, ApiKey.JOIN_GROUP, version, join)
    if version >= 4:
        assert resp.error_code == ErrorCode.MEMBER_ID_REQUIRED
        resp = await send(h, broker, ApiKey.JOIN_GROUP, version, {**join, "member_id": resp.member_id})
    assert resp.error_code == ErrorCode.NONE
    member, generation = resp.member_id, resp.generation_id
    assert resp.leader == member
    assert [m.member_id for m in resp.members] == [member]

    ids = {"group_id": group, "generation_id": generation, "member_id": member}
    v = min(version, SUPPORTED_VERSIONS[ApiKey.SYNC_GROUP][1])
    sync = await send(
        h, broker, ApiKey.SYNC_GROUP, v, {**ids, "assignments": [{"member_id": member, "assignment": b"A"}]}
    )
    assert sync.assignment == b"A"
    v = min(version, SUPPORTED_VERSIONS[ApiKey.HEARTBEAT][1])
    assert (await send(h, broker, ApiKey.HEARTBEAT, v, ids)).error_code == ErrorCode.NONE
    v = min(version, SUPPORTED_VERSIONS[ApiKey.LEAVE_GROUP][1])
    leave = {"group_id": group, "member_id": member, "members": [{"member_id": member}]}
    assert (await send(h, broker, ApiKey.LEAVE_GROUP, v, leave)).error_code == ErrorCode.NONE
    assert h.coordinator.describe_group(group)[1].state == "Empty"


@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_COMMIT))
def test_offset_commit_and_fetch_at_each_version(version: int) -> None:
    asyncio.run(commit_and_fetch(version))


async def commit_and_fetch(version: int) -> None:
    h = Harness()
    broker = FakeBroker(h)
    topics = [
        {"name": "t", "partitions": [{"partition_index": 1, "committed_offset": 42, "committed_metadata": None}]},
        {"name": "missing", "partitions": [{"partition_index": 0, "committed_offset": 1}]},
    ]
    resp = await send(h, broker, ApiKey.OFFSET_COMMIT, version, {"group_id": "g", "topics": topics})
    codes = {t.name: t.partitions[0].error_code for t in resp.topics}
    assert codes == {"t": ErrorCode.NONE, "missing": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    for fetch_version in versions(ApiKey.OFFSET_FETCH):
        wanted = [{"name": "t", "partition_indexes": [0, 1]}]
        body: dict[str, Any] = {"group_id": "g", "topics": wanted, "groups": [{"group_id": "g", "topics": wanted}]}
        fetched = await send(h, broker, ApiKey.OFFSET_FETCH, fetch_version, body)
        found_topics = fetched.groups[0].topics if fetch_version >= 8 else fetched.topics
        found = {p.partition_index: (p.committed_offset, p.metadata) for p in found_topics[0].partitions}
        assert found == {0: (-1, ""), 1: (42, "")}


@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_FETCH))
def test_offset_fetch_without_the_session_lease_is_not_coordinator(version: int) -> None:
    """A broker whose session lease lapsed (broker.controller.broker_session) may have lost the
    offsets partition to a coordinator with newer commits: NOT_COORDINATOR, clients look again."""

    async def run() -> None:
        h = Harness()
        broker = FakeBroker(h)
        topics = [{"name": "t", "partitions": [{"partition_index": 1, "committed_offset": 42}]}]
        await send(h, broker, ApiKey.OFFSET_COMMIT, 8, {"group_id": "g", "topics": topics})
        broker.leased = False
        wanted = [{"name": "t", "partition_indexes": [1]}]
        body: dict[str, Any] = {"group_id": "g", "topics": wanted, "groups": [{"group_id": "g", "topics": wanted}]}
        fetched = await send(h, broker, ApiKey.OFFSET_FETCH, version, body)
        if version >= 8:
            assert fetched.groups[0].error_code == ErrorCode.NOT_COORDINATOR
        elif version >= 2:
            assert fetched.error_code == ErrorCode.NOT_COORDINATOR
        else:
            assert fetched.topics[0].partitions[0].error_code == ErrorCode.NOT_COORDINATOR

    asyncio.run(run())


@pytest.mark.parametrize("version", versions(ApiKey.FIND_COORDINATOR))
def test_find_coordinator_at_each_version(version: int) -> None:
    asyncio.run(find(version))


async def find(version: int) -> None:
    h = Harness()
    broker = FakeBroker(h)
    body = {"key": "g", "key_type": 0, "coordinator_keys": ["g", "h"]}
    resp = await send(h, broker, ApiKey.FIND_COORDINATOR, version, body)
    if version >= 4:
        found = [(c.key, c.node_id, c.port, c.error_code) for c in resp.coordinators]
        assert found == [("g", 1, 9092, 0), ("h", 1, 9092, 0)]
    else:
        assert (resp.node_id, resp.host, resp.port, resp.error_code) == (1, "127.0.0.1", 9092, 0)
    if version >= 1:  # key type 1: transactions
        resp = await send(h, broker, ApiKey.FIND_COORDINATOR, version, {**body, "key_type": 1})
        error = resp.coordinators[0].error_code if version >= 4 else resp.error_code
        assert error == ErrorCode.COORDINATOR_NOT_AVAILABLE


@pytest.mark.parametrize(
    ("api_key", "body"),
    [
        (ApiKey.LIST_GROUPS, {"states_filter": []}),
        (ApiKey.DESCRIBE_GROUPS, {"groups": ["g", "nope"], "include_authorized_operations": True}),
        (ApiKey.DELETE_GROUPS, {"groups_names": ["g", "nope"]}),
        (ApiKey.OFFSET_DELETE, {"group_id": "g", "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]}),
    ],
)
def test_admin_group_apis_at_each_version(api_key: int, body: dict[str, Any]) -> None:
    async def each() -> None:
        for version in versions(api_key):
            h = Harness()
            h.coordinator.commit_offsets("g", "", None, -1, {("t", 0): CommittedOffset(1, -1, "", 0)})
            resp = await send(h, FakeBroker(h), api_key, version, body)
            assert resp is not None

    asyncio.run(each())
