"""Preferred and unclean elections an admin asks for, and automatic leader rebalancing
(``partition_changes.elect_leaders`` / ``rebalance_leaders``).

Kafka documentation §4.7 "Replication" "Replica Management": "we also try to balance leadership so that each node is the
leader for a proportional share of its partitions" — the "balance of leadership" a restarted
broker loses until leadership moves back to the preferred (first) replicas.
"""

from __future__ import annotations

from broker.controller.partition_changes import (
    ElectionResult,
    ElectionType,
    elect_leaders,
    fence_broker,
    imbalanced_partitions,
    rebalance_leaders,
    unfence_broker,
)
from broker.metadata.cluster_state import ClusterState
from broker.metadata.records import (
    FenceBrokerRecord,
    PartitionChangeRecord,
)
from pyspark_log.wire.errors import ErrorCode
from tests.unit.controller.cluster_states import apply, cluster, with_topic

PREFERRED, UNCLEAN = ElectionType.PREFERRED, ElectionType.UNCLEAN


def leaders(state: ClusterState, name: str = "t") -> dict[int, int]:
    return {i: p.leader for i, p in state.topics[name].partitions.items()}


def bounced(state: ClusterState, broker: int) -> ClusterState:
    """``broker`` fenced (its leaderships move) and unfenced again, back in every ISR."""
    state = apply(state, fence_broker(state, broker))
    state = apply(state, unfence_broker(state, broker))
    for topic in state.topics.values():
        for index, part in topic.partitions.items():
            if broker not in part.isr:
                isr = tuple(b for b in part.replicas if b in {*part.isr, broker})
                state = apply(state, [PartitionChangeRecord(topic.topic_id, index, isr=isr)])
    return state


def test_a_preferred_election_moves_leadership_back_to_the_first_replica_with_a_new_epoch():
    state, _ = with_topic(cluster(1, 2, 3), [[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    state = bounced(state, 1)
    assert leaders(state) == {0: 2, 1: 2, 2: 3}
    epoch = state.topics["t"].partitions[0].leader_epoch
    records, results = elect_leaders(state, PREFERRED, [("t", 0), ("t", 1)])
    assert results == {("t", 0): ElectionResult(ErrorCode.NONE), ("t", 1): results[("t", 1)]}
    assert results[("t", 1)].error_code == ErrorCode.ELECTION_NOT_NEEDED
    assert len(records) == 1
    state = apply(state, records)
    assert leaders(state) == {0: 1, 1: 2, 2: 3}
    assert state.topics["t"].partitions[0].leader_epoch == epoch + 1
    assert state.topics["t"].partitions[0].isr == (1, 2, 3)


def test_a_preferred_replica_that_is_fenced_or_out_of_the_isr_is_not_available():
    state, _ = with_topic(cluster(1, 2, 3), [[1, 2, 3], [2, 3, 1]])
    state = apply(state, fence_broker(state, 1))  # leaves the ISR of both, stops leading 0
    _, results = elect_leaders(state, PREFERRED, [("t", 0)])
    assert results[("t", 0)].error_code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    state = apply(state, unfence_broker(state, 1))  # live again, but not yet back in the ISR
    records, results = elect_leaders(state, PREFERRED, [("t", 0)])
    assert records == []
    assert results[("t", 0)].error_code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert "ISR" in (results[("t", 0)].error_message or "")


def test_unknown_topics_and_partitions_are_reported_and_all_partitions_skips_the_balanced():
    state, _ = with_topic(cluster(1, 2, 3), [[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    _, results = elect_leaders(state, PREFERRED, [("t", 7), ("nope", 0)])
    assert {k: r.error_code for k, r in results.items()} == {
        ("t", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    records, results = elect_leaders(state, PREFERRED, None)
    assert records == []
    assert results == {}  # Kafka leaves out ELECTION_NOT_NEEDED for "all partitions"
    state = bounced(state, 1)
    records, results = elect_leaders(state, PREFERRED, None)
    assert {k: r.error_code for k, r in results.items()} == {("t", 0): ErrorCode.NONE}
    assert len(records) == 1


def test_every_election_of_one_request_is_one_batch_of_records():
    state, _ = with_topic(cluster(1, 2, 3), [[1, 2, 3]] * 4)
    state = bounced(state, 1)
    records, results = elect_leaders(state, PREFERRED, None)
    assert len(records) == 4
    assert all(r.error_code == ErrorCode.NONE for r in results.values())
    assert leaders(apply(state, records)) == dict.fromkeys(range(4), 1)


def test_unclean_election_only_for_a_partition_without_a_live_leader():
    """§4.7 "Unclean leader election: What if they all die?": on request, "choose the first
    replica (not necessarily in the ISR) that comes back to life as the leader"."""
    state, _ = with_topic(cluster(1, 2, 3), [[1, 2]])
    _, results = elect_leaders(state, UNCLEAN, [("t", 0)])
    assert results[("t", 0)].error_code == ErrorCode.ELECTION_NOT_NEEDED
    state = apply(state, fence_broker(state, 2))  # 2 leaves the ISR
    state = apply(state, fence_broker(state, 1))  # 1, the last ISR member, dies: no leader
    assert state.topics["t"].partitions[0].leader == -1
    assert state.topics["t"].partitions[0].isr == (1,)
    _, results = elect_leaders(state, UNCLEAN, [("t", 0)])
    assert results[("t", 0)].error_code == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    state = apply(state, unfence_broker(state, 2))  # 2 is back, but was not in the ISR: no clean leader
    assert state.topics["t"].partitions[0].leader == -1
    records, results = elect_leaders(state, UNCLEAN, [("t", 0)])
    assert results[("t", 0)].error_code == ErrorCode.NONE
    state = apply(state, records)
    part = state.topics["t"].partitions[0]
    assert (part.leader, part.isr) == (2, (2,))


def test_unclean_election_prefers_a_live_isr_member():
    state, topic_id = with_topic(cluster(1, 2, 3), [[1, 2, 3]])
    state = apply(state, [PartitionChangeRecord(topic_id, 0, leader=-1)])  # offline, ISR intact
    records, results = elect_leaders(state, UNCLEAN, [("t", 0)])
    assert results[("t", 0)].error_code == ErrorCode.NONE
    part = apply(state, records).topics["t"].partitions[0]
    assert (part.leader, part.isr) == (1, (1, 2, 3))


def test_rebalancing_waits_until_a_broker_has_more_than_the_allowed_share_led_elsewhere():
    """Kafka documentation §4.7 "Replication": "balance leadership so that each node is the leader for a
    proportional share
    of its partitions"; ``leader.imbalance.per.broker.percentage`` is how much drift is tolerated."""
    state, _ = with_topic(cluster(1, 2, 3), [[1, 2, 3]] * 10 + [[2, 3, 1]] * 10)
    assert rebalance_leaders(state, 10) == []
    topic_id = state.topics["t"].topic_id
    state = apply(state, [PartitionChangeRecord(topic_id, 0, leader=2)])  # 1 of broker 1's 10: 10%
    assert imbalanced_partitions(state, 10) == []
    state = apply(state, [PartitionChangeRecord(topic_id, 1, leader=3)])  # 2 of 10: 20% > 10%
    assert imbalanced_partitions(state, 10) == [("t", 0), ("t", 1)]
    assert imbalanced_partitions(state, 20) == []
    records = rebalance_leaders(state, 10)
    assert len(records) == 2
    assert leaders(apply(state, records)) == {i: 1 if i < 10 else 2 for i in range(20)}


def test_rebalancing_skips_preferred_replicas_that_are_down_or_out_of_the_isr():
    state, topic_id = with_topic(cluster(1, 2, 3), [[1, 2, 3], [1, 2, 3], [2, 3, 1]])
    state = apply(state, fence_broker(state, 1))
    assert leaders(state) == {0: 2, 1: 2, 2: 2}
    assert rebalance_leaders(state, 10) == []  # broker 1 is down
    state = apply(state, unfence_broker(state, 1))
    assert rebalance_leaders(state, 10) == []  # back, but not in the ISR yet
    state = apply(state, [PartitionChangeRecord(topic_id, 0, isr=(1, 2, 3))])
    records = rebalance_leaders(state, 10)
    assert records == [PartitionChangeRecord(topic_id, 0, leader=1)]
    assert not isinstance(records[0], FenceBrokerRecord)
