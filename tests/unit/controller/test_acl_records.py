"""ACLs in the metadata (Kafka's ``AccessControlEntryRecord`` / ``RemoveAccessControlEntryRecord``,
metadata apiKeys 18/19; ``AclControlManager``'s rules): record round trips, replay into the
image every node builds, CreateAcls / DeleteAcls as records, and the single-node metadata file
keeping them across a restart."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from pathlib import Path

import pytest

from broker.controller.acl_changes import create_acls, delete_acls
from broker.controller.local import LocalController
from broker.metadata.cluster_state import ClusterState, build_image
from broker.metadata.image import BrokerInfo
from broker.metadata.records import (
    AccessControlEntryRecord,
    RemoveAccessControlEntryRecord,
    decode_records,
    encode_records,
)
from broker.metadata.replay import apply_record
from broker.security.acl.binding import AclBinding, Operation, PatternType, Permission, ResourceType
from broker.security.acl.filters import AclFilter
from pyspark_log.wire.errors import ErrorCode

pytestmark = pytest.mark.unit

T, G = ResourceType.TOPIC, ResourceType.GROUP
READ = (T, "orders", PatternType.LITERAL, "User:alice", "*", Operation.READ, Permission.ALLOW)
PREFIXED_WRITE = (T, "logs-", PatternType.PREFIXED, "User:bob", "*", Operation.WRITE, Permission.DENY)
ANY_FILTER = AclFilter(ResourceType.ANY, None, PatternType.ANY, None, None, Operation.ANY, Permission.ANY)


def sequential() -> object:
    counter = itertools.count(1)
    return lambda: uuid.UUID(int=next(counter))


def replay(state: ClusterState, records: list) -> ClusterState:
    for offset, record in enumerate(records, start=state.applied_offset + 1):
        state = apply_record(state, offset, record)
    return state


def test_records_round_trip_through_the_metadata_log_encoding() -> None:
    records = [
        AccessControlEntryRecord(uuid.UUID(int=7), 2, "orders", 3, "User:alice", "*", 3, 3),
        RemoveAccessControlEntryRecord(uuid.UUID(int=7)),
    ]
    assert decode_records(encode_records(records)) == records


def test_create_appends_one_record_per_new_acl_and_replays_into_the_image() -> None:
    records, results = create_acls(ClusterState(), [READ, PREFIXED_WRITE], sequential())
    assert results == [(ErrorCode.NONE, None), (ErrorCode.NONE, None)]
    assert [type(r) for r in records] == [AccessControlEntryRecord, AccessControlEntryRecord]
    image = build_image(replay(ClusterState(), records), cluster_id="c", local_broker_id=None)
    assert set(image.acls.values()) == {AclBinding(*READ), AclBinding(*PREFIXED_WRITE)}


def test_an_existing_or_repeated_acl_succeeds_without_a_record() -> None:
    records, _ = create_acls(ClusterState(), [READ], sequential())
    state = replay(ClusterState(), records)
    again, results = create_acls(state, [READ, PREFIXED_WRITE, PREFIXED_WRITE], sequential())
    assert results == [(ErrorCode.NONE, None)] * 3
    assert len(again) == 1


def test_an_invalid_creation_is_invalid_request_and_the_others_are_made() -> None:
    bad = (T, "", PatternType.LITERAL, "User:alice", "*", Operation.READ, Permission.ALLOW)
    records, results = create_acls(ClusterState(), [bad, READ], sequential())
    assert results[0][0] == ErrorCode.INVALID_REQUEST
    assert "empty" in (results[0][1] or "")
    assert results[1] == (ErrorCode.NONE, None)
    assert len(records) == 1


def test_delete_removes_each_matched_acl_once_and_reports_it_per_filter() -> None:
    records, _ = create_acls(ClusterState(), [READ, PREFIXED_WRITE], sequential())
    state = replay(ClusterState(), records)
    by_topic = AclFilter(T, "orders", PatternType.MATCH, None, None, Operation.ANY, Permission.ANY)
    removals, results = delete_acls(state, [by_topic, ANY_FILTER])
    assert [len(matched) for _, _, matched in results] == [1, 1]  # the second filter no longer sees READ
    assert {b for _, _, matched in results for _, b in matched} == {AclBinding(*READ), AclBinding(*PREFIXED_WRITE)}
    assert all(isinstance(r, RemoveAccessControlEntryRecord) for r in removals)
    assert build_image(replay(state, removals), cluster_id="c", local_broker_id=None).acls == {}


def test_an_unknown_filter_is_invalid_request_and_deletes_nothing() -> None:
    records, _ = create_acls(ClusterState(), [READ], sequential())
    state = replay(ClusterState(), records)
    unknown = AclFilter(T, None, PatternType.UNKNOWN, None, None, Operation.ANY, Permission.ANY)
    removals, results = delete_acls(state, [unknown])
    assert removals == []
    assert results[0][0] == ErrorCode.INVALID_REQUEST


def test_the_single_node_metadata_file_keeps_acls_across_a_restart(tmp_path: Path) -> None:
    async def scenario() -> None:
        local = LocalController(tmp_path, "cid", BrokerInfo(1, "127.0.0.1", 9001))
        assert await local.create_acls([READ, PREFIXED_WRITE]) == [(ErrorCode.NONE, None)] * 2
        reopened = LocalController(tmp_path, "cid", BrokerInfo(1, "127.0.0.1", 9001))
        assert set(reopened.image().acls.values()) == {AclBinding(*READ), AclBinding(*PREFIXED_WRITE)}
        assert reopened.image().acls.keys() == local.image().acls.keys()
        by_group = AclFilter(G, None, PatternType.ANY, None, None, Operation.ANY, Permission.ANY)
        assert (await reopened.delete_acls([by_group]))[0][2] == []
        [(code, _, matched)] = await reopened.delete_acls([ANY_FILTER])
        assert code == ErrorCode.NONE
        assert len(matched) == 2
        assert LocalController(tmp_path, "cid", BrokerInfo(1, "127.0.0.1", 9001)).image().acls == {}

    asyncio.run(scenario())
