"""Partition reassignment decisions on the active controller (KIP-455,
``broker.controller.reassignment``): the union of old and new replicas while moving, completion
once the target is in the ISR, the leader moved off a removed replica, cancellation; plus a small
seeded simulation of a move under random ISR joins, leaves and broker fencing."""

from __future__ import annotations

import random
import uuid

import pytest

from broker.controller.errors import MetadataError
from broker.controller.partition_changes import IsrChange, alter_partition, fence_broker, unfence_broker
from broker.controller.reassignment import (
    alter_reassignment,
    complete_reassignments,
    completed_by,
    list_reassignments,
    original_replicas,
    target_replicas,
)
from broker.metadata.cluster_state import ClusterState
from broker.metadata.records import PartitionChangeRecord, decode_records, encode_records
from pyspark_log.wire.errors import ErrorCode
from tests.unit.controller.cluster_states import apply, cluster, with_topic


def part(state: ClusterState, index: int = 0):
    return state.topics["t"].partitions[index]


def join_isr(state: ClusterState, topic_id: uuid.UUID, broker: int) -> ClusterState:
    p = part(state)
    change = IsrChange(topic_id, 0, p.leader_epoch, (*p.isr, broker), p.partition_epoch)
    return apply(state, alter_partition(state, p.leader, change))


def test_change_record_with_reassignment_fields_round_trips_and_old_bytes_stay():
    tid = uuid.uuid4()
    rec = PartitionChangeRecord(tid, 0, replicas=(4, 5, 1), adding_replicas=(4, 5), removing_replicas=(1,))
    assert decode_records(encode_records([rec])) == [rec]
    plain = PartitionChangeRecord(tid, 0, isr=(1,))
    assert b"replicas" not in encode_records([plain])


def test_move_adds_then_completes_when_target_joins_the_isr_and_leader_moves_off():
    state, tid = with_topic(cluster(1, 2, 3, 4), [[1, 2]])
    epoch0 = part(state).leader_epoch
    state = apply(state, alter_reassignment(state, "t", 0, [3, 4]))
    p = part(state)
    assert p.replicas == (3, 4, 1, 2)
    assert p.adding_replicas == (3, 4)
    assert p.removing_replicas == (1, 2)
    assert p.leader == 1
    assert p.isr == (1, 2)
    assert p.leader_epoch == epoch0 + 1
    assert original_replicas(p) == (1, 2)
    assert target_replicas(p) == (3, 4)
    assert set(list_reassignments(state, None)) == {("t", 0)}
    assert complete_reassignments(state) == []
    state = join_isr(state, tid, 3)
    assert complete_reassignments(state) == []
    state = join_isr(state, tid, 4)
    done = complete_reassignments(state)
    state = apply(state, done)
    p = part(state)
    assert p.replicas == (3, 4)
    assert p.isr == (3, 4)
    assert p.leader == 3
    assert p.adding_replicas == ()
    assert p.removing_replicas == ()
    assert list_reassignments(state, None) == {}


def test_isr_change_that_completes_a_move_carries_the_completion_in_the_same_entry():
    state, tid = with_topic(cluster(1, 2, 3), [[1, 2]])
    state = apply(state, alter_reassignment(state, "t", 0, [2, 3]))
    p = part(state)
    records = alter_partition(state, p.leader, IsrChange(tid, 0, p.leader_epoch, (*p.isr, 3), p.partition_epoch))
    assert completed_by(state, []) == []
    state = apply(state, [*records, *completed_by(state, records)])
    p = part(state)
    assert (p.replicas, p.isr, p.leader) == ((2, 3), (2, 3), 2)
    assert p.adding_replicas == p.removing_replicas == ()


def test_leader_kept_when_it_stays_and_epoch_bumped_on_replica_change():
    state, tid = with_topic(cluster(1, 2, 3), [[1, 2]])
    state = apply(state, alter_reassignment(state, "t", 0, [1, 3]))
    state = join_isr(state, tid, 3)
    before = part(state).leader_epoch
    state = apply(state, complete_reassignments(state))
    p = part(state)
    assert p.replicas == (1, 3)
    assert p.isr == (1, 3)
    assert p.leader == 1
    assert p.leader_epoch == before + 1


def test_removal_only_completes_at_once():
    state, _ = with_topic(cluster(1, 2, 3), [[1, 2, 3]])
    state = apply(state, alter_reassignment(state, "t", 0, [2, 3]))
    p = part(state)
    assert p.replicas == (2, 3)
    assert p.isr == (2, 3)
    assert p.leader == 2
    assert p.removing_replicas == ()


def test_cancel_reverts_to_the_original_replicas():
    state, tid = with_topic(cluster(1, 2, 3, 4), [[1, 2]])
    state = apply(state, alter_reassignment(state, "t", 0, [3, 4]))
    state = join_isr(state, tid, 3)
    state = apply(state, alter_reassignment(state, "t", 0, None))
    p = part(state)
    assert p.replicas == (1, 2)
    assert p.isr == (1, 2)
    assert p.leader == 1
    assert p.adding_replicas == ()
    assert p.removing_replicas == ()
    with pytest.raises(MetadataError) as err:
        alter_reassignment(state, "t", 0, None)
    assert err.value.code == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


def test_new_target_replaces_the_one_in_progress_from_the_original_set():
    state, tid = with_topic(cluster(1, 2, 3, 4), [[1, 2]])
    state = apply(state, alter_reassignment(state, "t", 0, [3, 4]))
    state = join_isr(state, tid, 3)
    state = apply(state, alter_reassignment(state, "t", 0, [2, 4]))
    p = part(state)
    assert p.replicas == (2, 4, 1)
    assert p.adding_replicas == (4,)
    assert p.removing_replicas == (1,)
    assert 3 not in p.isr


@pytest.mark.parametrize(
    ("target", "code", "allow"),
    [
        ([], ErrorCode.INVALID_REPLICA_ASSIGNMENT, True),
        ([1, 1], ErrorCode.INVALID_REPLICA_ASSIGNMENT, True),
        ([1, 9], ErrorCode.INVALID_REPLICA_ASSIGNMENT, True),
        ([1, 2, 3], ErrorCode.INVALID_REPLICATION_FACTOR, False),
    ],
)
def test_invalid_targets(target, code, allow):
    state, _ = with_topic(cluster(1, 2, 3), [[1, 2]])
    with pytest.raises(MetadataError) as err:
        alter_reassignment(state, "t", 0, target, allow_replication_factor_change=allow)
    assert err.value.code == code


def test_unknown_partition_and_no_op():
    state, _ = with_topic(cluster(1, 2, 3), [[1, 2]])
    with pytest.raises(MetadataError) as err:
        alter_reassignment(state, "t", 5, [1])
    assert err.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert alter_reassignment(state, "t", 0, [1, 2]) == []


@pytest.mark.parametrize("seed", range(300))
def test_seeded_move_under_isr_churn_never_loses_the_isr(seed):
    """Random ISR joins/leaves, fencing and re-targeting while a partition moves: the ISR is never
    empty, always within the replicas, the leader (when any) is in the ISR, and once every broker
    is live and caught up the move completes onto its last target."""
    rng = random.Random(seed)
    brokers = [1, 2, 3, 4, 5]
    state, tid = with_topic(cluster(*brokers), [[1, 2, 3]])
    target = rng.sample(brokers, 3)
    state = apply(state, alter_reassignment(state, "t", 0, target))
    for _ in range(40):
        p = part(state)
        action = rng.random()
        try:
            if action < 0.4 and p.leader >= 0:
                candidates = [b for b in p.replicas if b not in p.isr and b in state.live_brokers()]
                if candidates:
                    state = join_isr(state, tid, rng.choice(candidates))
            elif action < 0.55 and p.leader >= 0 and len(p.isr) > 1:
                drop = rng.choice([b for b in p.isr if b != p.leader])
                change = IsrChange(tid, 0, p.leader_epoch, tuple(b for b in p.isr if b != drop), p.partition_epoch)
                state = apply(state, alter_partition(state, p.leader, change))
            elif action < 0.65:
                state = apply(state, fence_broker(state, rng.choice(brokers)))
            elif action < 0.8:
                state = apply(state, unfence_broker(state, rng.choice(brokers)))
            elif action < 0.9:
                target = rng.sample(brokers, rng.randint(1, 4))
                state = apply(state, alter_reassignment(state, "t", 0, target))
            else:
                state = apply(state, alter_reassignment(state, "t", 0, None))
        except MetadataError:
            pass
        state = apply(state, complete_reassignments(state))
        p = part(state)
        assert p.isr, (seed, p)
        assert set(p.isr) <= set(p.replicas), (seed, p)
        assert set(p.adding_replicas) <= set(p.replicas)
        assert set(p.removing_replicas) <= set(p.replicas)
        assert p.leader < 0 or p.leader in p.isr, (seed, p)
    for b in brokers:
        state = apply(state, unfence_broker(state, b))
    final_target = target_replicas(part(state))
    for _ in range(10):
        p = part(state)
        missing = [b for b in p.replicas if b not in p.isr]
        if not missing or p.leader < 0:
            break
        state = join_isr(state, tid, missing[0])
        state = apply(state, complete_reassignments(state))
    p = part(state)
    if p.leader >= 0:
        assert p.replicas == final_target, (seed, p)
        assert p.adding_replicas == p.removing_replicas == (), (seed, p)
