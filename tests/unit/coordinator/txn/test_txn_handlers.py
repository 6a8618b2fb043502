"""The transaction API handlers at every version pylog advertises (Kafka 3.7's ranges): each
request decodes, is answered, and the answer encodes through the generated codecs; a whole
transaction with offsets (InitProducerId → AddPartitionsToTxn → AddOffsetsToTxn → TxnOffsetCommit
→ EndTxn) works per version, and the PRODUCER_FENCED / INVALID_PRODUCER_EPOCH split follows KIP-588."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Mapping
from types import SimpleNamespace
from typing import Any

import pytest

from broker.api.context import Request
from broker.api.groups import group_handlers
from broker.api.txn import txn_handlers
from broker.coordinator.group import OFFSETS_TOPIC, CommittedOffset
from broker.coordinator.group import partition_for as offsets_partition_for
from broker.coordinator.group.manager import PartitionStatus
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
from tests.unit.coordinator.helpers import Harness as GroupHarness

from .helpers import TXN_ID, Harness, topic_image

HANDLERS = {**group_handlers(), **txn_handlers()}
GROUP = "g"


class FakeBroker:
    """What the transaction handlers use of ``broker.api.context.Broker``."""

    def __init__(self) -> None:
        self.h = Harness()
        self.group_harness = GroupHarness()
        self.h.add_topic(topic_image(OFFSETS_TOPIC, self.group_harness.partitions))
        self.txn = self.h.coordinator
        self.groups = self.group_harness.coordinator
        self.clock_ms = self.h.clock
        self.config: dict[str, Any] = {}
        self.controller = SimpleNamespace(holds_session_lease=lambda: True)  # a single node
        self.replicas = SimpleNamespace(get_partition=lambda _topic, _partition: None)  # nothing to wait for

    def image(self) -> Any:
        return self.h.image


def call(broker: FakeBroker, api_key: int, version: int, body: Mapping[str, Any]) -> Message:
    decoded = decode_request_body(api_key, version, encode_request_body(api_key, version, body))
    header = RequestHeader(api_key, version, 1, "client", 2 if get_api(api_key).is_flexible(version) else 1)
    request = Request(header, decoded, ConnectionContext("127.0.0.1:5000", "PLAINTEXT", 1))
    result = HANDLERS[api_key](broker, request)  # type: ignore[arg-type]
    if inspect.isawaitable(result):  # the coordinator's writes wait for replication
        result = asyncio.run(_answer(result))
    assert isinstance(result, dict)
    return decode_response_body(api_key, version, encode_response_body(api_key, version, result))


async def _answer(result: Awaitable[Any]) -> Any:
    return await result


def versions(api_key: int) -> list[int]:
    lo, hi = SUPPORTED_VERSIONS[api_key]
    return list(range(lo, hi + 1))


def add_partitions(broker: FakeBroker, version: int, pid: int, epoch: int, parts: list[tuple[str, int]]) -> list:
    topics: dict[str, list[int]] = {}
    for t, p in parts:
        topics.setdefault(t, []).append(p)
    topic_list = [{"name": t, "partitions": ps} for t, ps in topics.items()]
    if version >= 4:
        txn = {"transactional_id": TXN_ID, "producer_id": pid, "producer_epoch": epoch, "topics": topic_list}
        resp = call(broker, ApiKey.ADD_PARTITIONS_TO_TXN, version, {"transactions": [txn]})
        results = resp.results_by_transaction[0].topic_results
    else:
        body = {
            "v3_and_below_transactional_id": TXN_ID,
            "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": topic_list,
        }
        results = call(broker, ApiKey.ADD_PARTITIONS_TO_TXN, version, body).results_by_topic_v3_and_below
    return sorted((t.name, r.partition_index, r.partition_error_code) for t in results for r in t.results_by_partition)


@pytest.mark.parametrize("version", versions(ApiKey.INIT_PRODUCER_ID))
def test_init_producer_id_at_each_version(version: int) -> None:
    broker = FakeBroker()
    body = {"transactional_id": None, "transaction_timeout_ms": 1000}
    resp = call(broker, ApiKey.INIT_PRODUCER_ID, version, body)
    assert (resp.error_code, resp.producer_epoch) == (0, 0)
    first = call(broker, ApiKey.INIT_PRODUCER_ID, version, {**body, "transactional_id": TXN_ID})
    assert (first.error_code, first.producer_epoch) == (0, 0)
    too_long = call(
        broker, ApiKey.INIT_PRODUCER_ID, version, {"transactional_id": TXN_ID, "transaction_timeout_ms": 10**8}
    )
    assert (too_long.error_code, too_long.producer_id) == (ErrorCode.INVALID_TRANSACTION_TIMEOUT, -1)
    if version >= 3:  # KIP-360: a fenced producer id/epoch
        stale = call(
            broker,
            ApiKey.INIT_PRODUCER_ID,
            version,
            {**body, "transactional_id": TXN_ID, "producer_id": first.producer_id + 7, "producer_epoch": 0},
        )
        assert stale.error_code == (ErrorCode.PRODUCER_FENCED if version >= 4 else ErrorCode.INVALID_PRODUCER_EPOCH)


@pytest.mark.parametrize("version", versions(ApiKey.ADD_PARTITIONS_TO_TXN))
def test_add_partitions_at_each_version(version: int) -> None:
    broker = FakeBroker()
    result = broker.h.init(TXN_ID, 10_000)
    pid = result.producer_id
    assert add_partitions(broker, version, pid, 0, [("t", 0), ("u", 1)]) == [("t", 0, 0), ("u", 1, 0)]
    unknown = add_partitions(broker, version, pid, 0, [("t", 1), ("nope", 0)])
    assert unknown == [("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), ("t", 1, ErrorCode.OPERATION_NOT_ATTEMPTED)]
    fenced = ErrorCode.PRODUCER_FENCED if version >= 2 else ErrorCode.INVALID_PRODUCER_EPOCH
    assert add_partitions(broker, version, pid, 5, [("t", 2)]) == [("t", 2, fenced)]
    if version < 4:
        internal = add_partitions(broker, version, pid, 0, [(OFFSETS_TOPIC, 0)])
        assert internal == [(OFFSETS_TOPIC, 0, ErrorCode.TOPIC_AUTHORIZATION_FAILED)]


def test_add_partitions_v4_verify_only() -> None:
    broker = FakeBroker()
    pid = broker.h.init(TXN_ID, 10_000).producer_id
    add_partitions(broker, 3, pid, 0, [("t", 0)])
    txn = {
        "transactional_id": TXN_ID,
        "producer_id": pid,
        "producer_epoch": 0,
        "verify_only": True,
        "topics": [{"name": "t", "partitions": [0, 1]}],
    }
    resp = call(broker, ApiKey.ADD_PARTITIONS_TO_TXN, 4, {"transactions": [txn]})
    results = resp.results_by_transaction[0].topic_results[0].results_by_partition
    assert [(r.partition_index, r.partition_error_code) for r in results] == [(0, 0), (1, ErrorCode.INVALID_TXN_STATE)]


@pytest.mark.parametrize("version", versions(ApiKey.END_TXN))
def test_transaction_with_offsets_at_each_end_txn_version(version: int) -> None:
    """EndTxn at ``version`` (and AddOffsetsToTxn/TxnOffsetCommit at the nearest version they have)."""
    broker = FakeBroker()
    pid = broker.h.init(TXN_ID, 10_000).producer_id
    add_partitions(broker, min(version, 3), pid, 0, [("t", 0)])
    ids = {"transactional_id": TXN_ID, "producer_id": pid, "producer_epoch": 0}
    added = call(broker, ApiKey.ADD_OFFSETS_TO_TXN, min(version, 3), {**ids, "group_id": GROUP})
    assert added.error_code == 0
    offsets_tp = (OFFSETS_TOPIC, offsets_partition_for(GROUP, broker.group_harness.partitions))
    assert offsets_tp in broker.h.txn.partitions
    commit = {
        **ids,
        "group_id": GROUP,
        "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 9, "committed_metadata": None}]}
        ],
    }
    resp = call(broker, ApiKey.TXN_OFFSET_COMMIT, min(version, 3), commit)
    assert resp.topics[0].partitions[0].error_code == 0
    fenced = call(broker, ApiKey.END_TXN, version, {**ids, "producer_epoch": 3, "committed": True})
    assert fenced.error_code == (ErrorCode.PRODUCER_FENCED if version >= 2 else ErrorCode.INVALID_PRODUCER_EPOCH)
    assert call(broker, ApiKey.END_TXN, version, {**ids, "committed": True}).error_code == 0
    markers = {(m.topic, m.partition) for m in broker.h.appender.markers}
    assert markers == {("t", 0), offsets_tp}


@pytest.mark.parametrize("version", versions(ApiKey.ADD_OFFSETS_TO_TXN))
def test_add_offsets_at_each_version(version: int) -> None:
    broker = FakeBroker()
    pid = broker.h.init(TXN_ID, 10_000).producer_id
    ids = {"transactional_id": TXN_ID, "producer_id": pid, "group_id": GROUP}
    assert call(broker, ApiKey.ADD_OFFSETS_TO_TXN, version, {**ids, "producer_epoch": 0}).error_code == 0
    fenced = call(broker, ApiKey.ADD_OFFSETS_TO_TXN, version, {**ids, "producer_epoch": 2}).error_code
    assert fenced == (ErrorCode.PRODUCER_FENCED if version >= 2 else ErrorCode.INVALID_PRODUCER_EPOCH)


@pytest.mark.parametrize("version", versions(ApiKey.TXN_OFFSET_COMMIT))
def test_txn_offset_commit_at_each_version(version: int) -> None:
    broker = FakeBroker()
    body = {
        "transactional_id": TXN_ID,
        "group_id": GROUP,
        "producer_id": 77,
        "producer_epoch": 0,
        "generation_id": -1,
        "member_id": "",
        "topics": [
            {"name": "t", "partitions": [{"partition_index": 1, "committed_offset": 5, "committed_metadata": "x"}]},
            {"name": "nope", "partitions": [{"partition_index": 0, "committed_offset": 5, "committed_metadata": ""}]},
        ],
    }
    resp = call(broker, ApiKey.TXN_OFFSET_COMMIT, version, body)
    codes = {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}
    assert codes == {("t", 1): 0, ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    broker.groups.manager.partitions[offsets_partition_for(GROUP, broker.group_harness.partitions)] = (
        PartitionStatus.LOADING
    )
    loading = call(broker, ApiKey.TXN_OFFSET_COMMIT, version, body).topics[0].partitions[0].error_code
    assert loading == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if version >= 2 else ErrorCode.COORDINATOR_NOT_AVAILABLE)


@pytest.mark.parametrize("version", [v for v in versions(ApiKey.OFFSET_FETCH) if v >= 7])
def test_offset_fetch_require_stable(version: int) -> None:
    broker = FakeBroker()
    broker.groups.commit_txn_offsets(GROUP, 77, 0, "", None, -1, {("t", 0): CommittedOffset(5, -1, "", 0)})
    if version >= 8:
        body: dict[str, Any] = {"groups": [{"group_id": GROUP, "topics": [{"name": "t", "partition_indexes": [0]}]}]}
    else:
        body = {"group_id": GROUP, "topics": [{"name": "t", "partition_indexes": [0]}]}

    def error(stable: bool) -> int:
        resp = call(broker, ApiKey.OFFSET_FETCH, version, {**body, "require_stable": stable})
        topics = resp.groups[0].topics if version >= 8 else resp.topics
        return int(topics[0].partitions[0].error_code)

    assert error(True) == ErrorCode.UNSTABLE_OFFSET_COMMIT
    assert error(False) == 0
