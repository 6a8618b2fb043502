"""KIP-630: the metadata state written as snapshot records reads back identical, and a node that
loads the snapshot then replays the log tail reaches the same state as one that replayed it all."""

from __future__ import annotations

import uuid

import pytest

from broker.metadata.cluster_state import ClusterState, build_image
from broker.metadata.records import (
    BROKER_RESOURCE,
    AccessControlEntryRecord,
    ClientQuotaRecord,
    ConfigRecord,
    FenceBrokerRecord,
    PartitionChangeRecord,
    UserScramCredentialRecord,
    encode_records,
)
from broker.metadata.replay import apply_payload
from broker.metadata.snapshot_records import SnapshotRecordError, state_from_records, state_to_records
from broker.raft.snapshot import SnapshotId, decode_snapshot, encode_snapshot
from tests.unit.controller.cluster_states import apply, cluster, with_topic


def busy_state() -> tuple[ClusterState, uuid.UUID]:
    state = cluster(1, 2, 3)
    state, topic_id = with_topic(state, [[1, 2, 3], [2, 3, 1]], name="orders")
    state, _ = with_topic(state, [[3, 1, 2]], name="audit")
    state = apply(state, [ConfigRecord("orders", "retention.ms", "1000")])
    state = apply(state, [ConfigRecord("", "log.cleaner.threads", "2", resource_type=BROKER_RESOURCE)])
    state = apply(state, [PartitionChangeRecord(topic_id, 0, isr=(1, 2), leader=2)])
    state = apply(state, [FenceBrokerRecord(3, state.registrations[3].epoch)])
    state = apply(state, [ClientQuotaRecord((("user", "alice"),), "producer_byte_rate", 1024.0)])
    state = apply(state, [UserScramCredentialRecord("alice", "SCRAM-SHA-256", "00ff", "aa", "bb", 4096)])
    state = apply(state, [AccessControlEntryRecord(uuid.uuid4(), 2, "orders", 3, "User:alice", "*", 3, 3)])
    return state, topic_id


def test_state_round_trips() -> None:
    state, _ = busy_state()
    assert state.acls
    assert state.scram
    assert state.client_quotas
    assert state.broker_configs
    assert state.registrations[3].fenced
    records = state_to_records(state)
    assert state_from_records(records) == state
    assert state_to_records(state_from_records(records)) == records  # deterministic


def test_snapshot_plus_tail_equals_full_replay() -> None:
    state, topic_id = busy_state()
    sid = SnapshotId(state.applied_offset + 1, 4)
    data = encode_snapshot(sid, state_to_records(state), 0, timestamp_ms=0, max_batch_records=3)
    loaded = state_from_records(decode_snapshot(sid, data).records)
    tail = [
        encode_records([PartitionChangeRecord(topic_id, 1, leader=3)]),
        encode_records([ConfigRecord("audit", "cleanup.policy", "compact")]),
    ]
    full, resumed = state, loaded
    for i, payload in enumerate(tail):
        offset = sid.end_offset + i
        full = apply_payload(full, offset, payload)
        resumed = apply_payload(resumed, offset, payload)
    assert resumed == full
    assert build_image(resumed, cluster_id="c", local_broker_id=1) == build_image(
        full, cluster_id="c", local_broker_id=1
    )


@pytest.mark.parametrize("records", [[], [b"S\x01{}"], [b"nope"], [b'S\x01{"kind":"cluster"}']])
def test_malformed_snapshot_records(records: list[bytes]) -> None:
    with pytest.raises(SnapshotRecordError):
        state_from_records(records)
