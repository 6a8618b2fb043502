"""ISR changes and leader elections on the active controller (``broker.controller.partition_changes``).

Kafka documentation §4.7 "Replication" "Replica Management": the controller "detects broker-level failures and is
responsible for changing the leader of all affected partitions in a failed broker"; KIP-497: the
leader asks for ISR changes, the controller validates and writes them.
"""

from __future__ import annotations

import uuid

import pytest

from broker.controller.errors import MetadataError
from broker.controller.partition_changes import (
    IsrChange,
    alter_partition,
    fence_broker,
    register_broker,
    unclean_elections,
    unfence_broker,
)
from broker.metadata.cluster_state import ClusterState
from broker.metadata.records import (
    FenceBrokerRecord,
    PartitionChangeRecord,
    RegisterBrokerRecord,
    decode_records,
    encode_records,
)
from pyspark_log.wire.errors import ErrorCode
from tests.unit.controller.cluster_states import apply, cluster, with_topic


def part(state: ClusterState, index: int = 0):
    return state.topics["t"].partitions[index]


def test_partition_change_records_round_trip_and_bump_the_partition_epoch():
    topic_id = uuid.uuid4()
    records = [PartitionChangeRecord(topic_id, 3, isr=(1, 2)), PartitionChangeRecord(topic_id, 4, leader=-1)]
    assert decode_records(encode_records(records)) == records
    state, topic_id = with_topic(cluster(1, 2, 3), [[1, 2, 3]])
    state = apply(state, [PartitionChangeRecord(topic_id, 0, isr=(1, 2))])
    assert (part(state).isr, part(state).leader_epoch, part(state).partition_epoch) == ((1, 2), 0, 1)
    state = apply(state, [PartitionChangeRecord(topic_id, 0, leader=2)])
    assert (part(state).leader, part(state).leader_epoch, part(state).partition_epoch) == (2, 1, 2)


def test_the_leader_shrinks_and_expands_the_isr_at_its_current_epochs():
    """§4.7: "the leader will remove it from the list of in sync replicas"."""
    state, topic_id = with_topic(cluster(1, 2, 3), [[1, 2, 3]])
    records = alter_partition(state, 1, IsrChange(topic_id, 0, 0, (1, 3), 0))
    state = apply(state, records)
    assert part(state).isr == (1, 3)
    assert part(state).partition_epoch == 1
    state = apply(state, alter_partition(state, 1, IsrChange(topic_id, 0, 0, (3, 1, 2), 1)))
    assert part(state).isr == (1, 2, 3)  # kept in replica order
    assert alter_partition(state, 1, IsrChange(topic_id, 0, 0, (1, 2, 3), 2)) == []  # no change


@pytest.mark.parametrize(
    ("broker", "change", "code"),
    [
        (2, (0, (1, 2), 0), ErrorCode.FENCED_LEADER_EPOCH),  # not the leader
        (1, (5, (1, 2), 0), ErrorCode.FENCED_LEADER_EPOCH),  # another leader epoch
        (1, (0, (1, 2), 7), ErrorCode.INVALID_UPDATE_VERSION),  # stale partition epoch
        (1, (0, (2, 3), 0), ErrorCode.INVALID_REQUEST),  # the leader left out
        (1, (0, (1, 9), 0), ErrorCode.INVALID_REQUEST),  # not a replica
        (1, (0, (1, 1), 0), ErrorCode.INVALID_REQUEST),
    ],
)
def test_invalid_isr_changes_are_refused(broker: int, change: tuple, code: int):
    state, topic_id = with_topic(cluster(1, 2, 3), [[1, 2, 3]])
    with pytest.raises(MetadataError) as info:
        alter_partition(state, broker, IsrChange(topic_id, 0, *change))
    assert info.value.code == code


def test_a_fenced_broker_cannot_join_the_isr():
    state, topic_id = with_topic(cluster(1, 2, 3), [[1, 2, 3]])
    state = apply(state, alter_partition(state, 1, IsrChange(topic_id, 0, 0, (1, 2), 0)))
    state = apply(state, [FenceBrokerRecord(3, 2)])
    with pytest.raises(MetadataError) as info:
        alter_partition(state, 1, IsrChange(topic_id, 0, 0, (1, 2, 3), 1))
    assert info.value.code == ErrorCode.INELIGIBLE_REPLICA
    with pytest.raises(MetadataError) as unknown:
        alter_partition(state, 1, IsrChange(uuid.uuid4(), 0, 0, (1,), 1))
    assert unknown.value.code == ErrorCode.UNKNOWN_TOPIC_ID


def test_fencing_moves_every_leadership_of_the_broker_in_one_entry():
    """§4.7 Replica Management: the controller changes "the leader of all affected partitions"."""
    state, _ = with_topic(cluster(1, 2, 3), [[1, 2, 3], [2, 1, 3], [1, 3, 2], [3, 2, 1]])
    records = fence_broker(state, 1)
    assert isinstance(records[0], FenceBrokerRecord)
    state = apply(state, records)
    assert [part(state, p).leader for p in range(4)] == [2, 2, 3, 3]
    assert [part(state, p).isr for p in range(4)] == [(2, 3), (2, 3), (3, 2), (3, 2)]
    assert [part(state, p).leader_epoch for p in range(4)] == [1, 0, 1, 0]  # bumped where the leader moved


def test_the_last_isr_member_keeps_the_isr_and_the_partition_waits_for_it():
    """§4.7 "Unclean leader election: What if they all die?" — with unclean election off, wait for
    a replica in the ISR to come back."""
    state, _ = with_topic(cluster(1, 2), [[1, 2]])
    state = apply(state, fence_broker(state, 2))
    assert (part(state).leader, part(state).isr) == (1, (1,))
    state = apply(state, fence_broker(state, 1))
    assert (part(state).leader, part(state).isr) == (-1, (1,))  # offline; broker 2 is not eligible
    state = apply(state, unfence_broker(state, 2))
    assert part(state).leader == -1
    state = apply(state, unfence_broker(state, 1))
    assert (part(state).leader, part(state).isr, part(state).leader_epoch) == (1, (1,), 2)  # -1, then 1 again


def test_unclean_election_picks_the_first_live_replica_and_resets_the_isr():
    """§4.7 "Unclean leader election: What if they all die?": with it enabled, "choose the first
    replica (not necessarily in the ISR) that comes back to life as the leader"."""
    state, topic_id = with_topic(cluster(1, 2, 3), [[1, 2, 3]])
    state = apply(state, alter_partition(state, 1, IsrChange(topic_id, 0, 0, (1,), 0)))  # 2, 3 fell behind
    records = fence_broker(state, 1, unclean=lambda topic: topic == "t")
    assert unclean_elections(records, state) == ["t-0"]
    state = apply(state, records)
    assert (part(state).leader, part(state).isr) == (2, (2,))


def test_unclean_election_when_a_replica_outside_the_isr_returns_first():
    state, _ = with_topic(cluster(1, 2), [[1, 2]])
    state = apply(state, fence_broker(state, 2))
    state = apply(state, fence_broker(state, 1))
    assert part(state).leader == -1
    assert unfence_broker(state, 2)[1:] == []  # clean: broker 2 is not in the ISR, wait for broker 1
    state = apply(state, unfence_broker(state, 2, unclean=lambda _: True))
    assert (part(state).leader, part(state).isr) == (2, (2,))


def test_a_broker_restarted_before_its_session_expired_gives_up_its_leaderships_first():
    """The sim's defect 1: a leader that crashed (losing its unflushed tail) and registered again
    within the session timeout must not lead on at the same epoch; its old incarnation is fenced in
    the same entry, so it follows, truncates where it diverges, and rejoins the ISR."""
    state, _ = with_topic(cluster(1, 2, 3), [[1, 2, 3], [2, 1, 3]])
    again = RegisterBrokerRecord(1, "i1-restarted", "127.0.0.1", 9001)
    records = register_broker(state, again)
    state = apply(state, records)
    assert (part(state, 0).leader, part(state, 0).isr, part(state, 0).leader_epoch) == (2, (2, 3), 1)
    assert part(state, 1).isr == (2, 3)
    assert not state.registrations[1].fenced  # the new incarnation is live
    assert state.registrations[1].incarnation_id == "i1-restarted"


def test_a_restarted_sole_isr_member_leads_again_at_a_new_epoch():
    state, _ = with_topic(cluster(1, 2), [[1, 2]])
    state = apply(state, fence_broker(state, 2))  # broker 2 gone: broker 1 alone in the ISR
    state = apply(state, register_broker(state, RegisterBrokerRecord(1, "again", "127.0.0.1", 9001)))
    assert (part(state).leader, part(state).isr) == (1, (1,))
    assert part(state).leader_epoch == 2  # offline at 1, elected again at 2: nobody mistakes the epoch
