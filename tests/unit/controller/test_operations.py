"""The active controller's validation (``broker.controller.operations``) gives LocalController's
errors, and places partitions round-robin over the live brokers (replication factor 1)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from broker.controller import operations
from broker.controller.errors import MetadataError
from broker.controller.local import LocalController
from broker.metadata.cluster_state import ClusterState
from broker.metadata.image import BrokerInfo
from broker.metadata.records import FenceBrokerRecord, RegisterBrokerRecord, encode_records
from broker.metadata.replay import apply_payload
from pyspark_log.wire.errors import ErrorCode


def cluster(*brokers: int) -> ClusterState:
    state = ClusterState()
    for offset, b in enumerate(brokers):
        state = apply_payload(state, offset, encode_records([RegisterBrokerRecord(b, f"i{b}", "127.0.0.1", 9000 + b)]))
    return state


def create(state: ClusterState, name: str, partitions: int, rf: int = 1, configs=None) -> ClusterState:
    records, _ = operations.create_topic(state, name, partitions, rf, configs or {}, topic_id=uuid.uuid4())
    return apply_payload(state, state.applied_offset + 1, encode_records(records))


def leaders(state: ClusterState, name: str) -> list[int]:
    return [state.topics[name].partitions[p].leader for p in sorted(state.topics[name].partitions)]


def test_partitions_rotate_over_live_brokers_across_topics():
    state = create(cluster(1, 2, 3), "a", 4)
    assert leaders(state, "a") == [1, 2, 3, 1]
    state = create(state, "b", 2)
    assert leaders(state, "b") == [2, 3]  # continues after the 4 existing partitions
    records = operations.create_partitions(state, "b", 4)
    state = apply_payload(state, state.applied_offset + 1, encode_records(records))
    assert leaders(state, "b") == [2, 3, 1, 2]
    assert all(p.replicas == (p.leader,) and p.isr == (p.leader,) for p in state.topics["b"].partitions.values())


def test_fenced_brokers_get_no_new_partitions():
    state = cluster(1, 2)
    state = apply_payload(state, 2, encode_records([FenceBrokerRecord(2, 1)]))
    state = create(state, "a", 3)
    assert leaders(state, "a") == [1, 1, 1]


def test_no_live_broker_means_invalid_replication_factor():
    with pytest.raises(MetadataError) as info:
        operations.create_topic(ClusterState(), "a", 1, 1, {}, topic_id=uuid.uuid4())
    assert info.value.code == ErrorCode.INVALID_REPLICATION_FACTOR


def test_replication_factor_places_rotating_replica_lists_led_by_their_first_broker():
    """Kafka documentation §4.7 "Replication": "each partition has a single leader and zero or more followers"."""
    state = cluster(1, 2, 3)
    records, topic = operations.create_topic(state, "a", 3, 3, {}, topic_id=uuid.uuid4())
    assert [topic.partitions[p].replicas for p in range(3)] == [(1, 2, 3), (2, 3, 1), (3, 1, 2)]
    assert all(topic.partitions[p].isr == topic.partitions[p].replicas for p in range(3))
    state = apply_payload(state, state.applied_offset + 1, encode_records(records))
    assert leaders(state, "a") == [1, 2, 3]
    records = operations.create_partitions(state, "a", 4)
    state = apply_payload(state, state.applied_offset + 1, encode_records(records))
    assert len(state.topics["a"].partitions[3].replicas) == 3  # new partitions keep the topic's factor


def test_replication_factor_above_the_live_brokers_is_refused():
    with pytest.raises(MetadataError) as info:
        operations.create_topic(cluster(1, 2), "a", 1, 3, {}, topic_id=uuid.uuid4())
    assert info.value.code == ErrorCode.INVALID_REPLICATION_FACTOR


def test_explicit_replica_lists_place_the_partitions():
    state = cluster(1, 2, 3)
    records, topic = operations.create_topic(state, "a", -1, -1, {}, topic_id=uuid.uuid4(), assignments=[[3], [3], [1]])
    assert [topic.partitions[p].leader for p in range(3)] == [3, 3, 1]
    state = apply_payload(state, state.applied_offset + 1, encode_records(records))
    assert leaders(state, "a") == [3, 3, 1]
    records = operations.create_partitions(state, "a", 5, [[2], [2]])
    state = apply_payload(state, state.applied_offset + 1, encode_records(records))
    assert leaders(state, "a") == [3, 3, 1, 2, 2]
    assert state.topics["a"].partitions[4].replicas == (2,)


def test_a_fenced_broker_cannot_be_assigned():
    state = apply_payload(cluster(1, 2), 2, encode_records([FenceBrokerRecord(2, 1)]))
    with pytest.raises(MetadataError) as info:
        operations.create_topic(state, "a", -1, -1, {}, topic_id=uuid.uuid4(), assignments=[[2]])
    assert info.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert "includes broker 2, but no such broker is registered" in info.value.message  # Kafka's message


def test_assigned_replica_lists_of_several_brokers_are_accepted():
    _, topic = operations.create_topic(cluster(1, 2), "a", -1, -1, {}, topic_id=uuid.uuid4(), assignments=[[2, 1]])
    assert topic.partitions[0].replicas == (2, 1)
    assert topic.partitions[0].leader == 2


CASES = [
    ("create", ("bad name!", 1, 1, {})),
    ("create", ("", 1, 1, {})),
    ("create", ("exists", 1, 1, {})),
    ("create", ("new", 0, 1, {})),
    ("create", ("new", 1, 0, {})),
    ("create", ("new", 1, 5, {})),
    ("create", ("new", 1, 1, {"no.such.config": "1"})),
    ("create", ("new", 1, 1, {"retention.ms": "soon"})),
    ("delete", ("missing",)),
    ("partitions", ("missing", 3)),
    ("partitions", ("exists", 1)),
    ("alter", ("missing", {"retention.ms": "1"})),
    ("alter", ("exists", {"cleanup.policy": "shred"})),
]


# Explicit replica lists (CreateTopics / CreatePartitions assignments); broker 1 is the only one.
ASSIGNMENT_CASES = [
    ("create", ("new", -1, -1, {}), [[1], [2]]),  # unknown broker
    ("create", ("new", -1, -1, {}), [[1], []]),  # empty replica list
    ("create", ("new", -1, -1, {}), [[1, 1]]),  # repeated broker
    ("create", ("new", -1, -1, {}), [[1], [1, 2]]),  # uneven replication factors
    ("create", ("new", -1, -1, {}), []),
    ("partitions", ("exists", 4), [[1]]),  # two new partitions, one list
    ("partitions", ("exists", 3), [[7]]),
]


@pytest.mark.parametrize(("op", "args", "assignments"), [(*c, None) for c in CASES] + ASSIGNMENT_CASES)
def test_errors_match_the_local_controller(tmp_path: Path, op: str, args: tuple, assignments: list | None):
    local = LocalController(tmp_path, "cid", BrokerInfo(1, "127.0.0.1", 9001))
    asyncio.run(local.create_topic("exists", 2, 1, {}))
    state = create(cluster(1), "exists", 2)

    async def run_local():
        if op == "create":
            await local.create_topic(*args, assignments=assignments)
        elif op == "delete":
            await local.delete_topic(*args)
        elif op == "partitions":
            await local.create_partitions(*args, assignments=assignments)
        else:
            await local.alter_topic_configs(*args)

    def run_quorum():
        if op == "create":
            operations.create_topic(state, *args, topic_id=uuid.uuid4(), assignments=assignments)
        elif op == "delete":
            operations.delete_topic(state, *args, deletion_enabled=True)
        elif op == "partitions":
            operations.create_partitions(state, *args, assignments)
        else:
            operations.alter_topic_configs(state, *args)

    with pytest.raises(MetadataError) as expected:
        asyncio.run(run_local())
    with pytest.raises(MetadataError) as got:
        run_quorum()
    assert (got.value.code, got.value.message) == (expected.value.code, expected.value.message)


def test_deletion_disabled():
    with pytest.raises(MetadataError) as info:
        operations.delete_topic(create(cluster(1), "t", 1), "t", deletion_enabled=False)
    assert info.value.code == ErrorCode.TOPIC_DELETION_DISABLED
