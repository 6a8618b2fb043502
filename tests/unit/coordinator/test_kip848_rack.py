"""KIP-848 members that send a rack (``RackId`` in ConsumerGroupHeartbeat, KIP-881's rack-aware
idea carried to the broker-side assignors).

Fact checked against Kafka 4.1.1 itself (the reference in ``.refs/kafka/libs``): the bytecode of
``org.apache.kafka.coordinator.group.assignor.{UniformAssignor, UniformHomogeneousAssignmentBuilder,
UniformHeterogeneousAssignmentBuilder, RangeAssignor, SimpleAssignor}`` never calls
``SubscribedTopicDescriber.racksForPartition`` nor ``MemberSubscription.rackId``: Kafka 4.1's
server-side ``uniform`` and ``range`` assignors are not rack-aware. The member's rack is kept
(ConsumerGroupDescribe's ``RackId``, the ConsumerGroupMemberMetadata record) and a rack change is
not a subscription change (``GroupMetadataManager.hasMemberSubscriptionChanged`` compares topic
names and regex only), so it does not bump the group epoch. These tests pin that behaviour.
"""

from __future__ import annotations

import uuid

from broker.coordinator.consumer_group.config import ConsumerGroupConfig
from broker.coordinator.consumer_group.group import ConsumerGroup, HeartbeatRequest
from broker.coordinator.consumer_group.records import group_records, replay

CONFIG = ConsumerGroupConfig()
TOPICS = {"t": (uuid.uuid4(), 6)}


def join(group: ConsumerGroup, member: str, rack: str | None, assignor: str | None = None) -> object:
    req = HeartbeatRequest(
        member,
        0,
        rack_id=rack,
        rebalance_timeout_ms=60_000,
        subscribed_topic_names=("t",),
        owned={},
        server_assignor=assignor,
    )
    return group.heartbeat(req, TOPICS, CONFIG, 0, full_request=True)


def settle(group: ConsumerGroup) -> None:
    """Heartbeat every member with what it was given until no assignment changes."""
    for _ in range(10):
        before = {m: (g.member_epoch, g.assignment) for m, g in group.members.items()}
        for mid, member in sorted(group.members.items()):
            req = HeartbeatRequest(mid, member.member_epoch, owned=dict(member.assignment.assigned))
            group.heartbeat(req, TOPICS, CONFIG, 0, full_request=False)
        if before == {m: (g.member_epoch, g.assignment) for m, g in group.members.items()}:
            return
    raise AssertionError("the group did not settle")


def assignment(group: ConsumerGroup) -> dict[str, frozenset[int]]:
    return {m: g.assignment.assigned.get("t", frozenset()) for m, g in group.members.items()}


def test_the_racks_members_send_do_not_change_the_assignment() -> None:
    for assignor in ("uniform", "range"):
        with_racks, without = ConsumerGroup("g1"), ConsumerGroup("g2")
        for mid, rack in (("a", "rack-1"), ("b", "rack-2"), ("c", "rack-1")):
            join(with_racks, mid, rack, assignor)
            join(without, mid, None, assignor)
        settle(with_racks)
        settle(without)
        assert assignment(with_racks) == assignment(without), assignor
        assert sorted(p for ps in assignment(with_racks).values() for p in ps) == list(range(6))


def test_a_rack_change_is_kept_and_persisted_without_a_new_group_epoch() -> None:
    group = ConsumerGroup("g")
    join(group, "a", "rack-1")
    join(group, "b", None)
    settle(group)
    epoch, before = group.group_epoch, assignment(group)
    member = group.members["b"]
    req = HeartbeatRequest("b", member.member_epoch, rack_id="rack-2", owned=dict(member.assignment.assigned))
    group.heartbeat(req, TOPICS, CONFIG, 0, full_request=False)
    assert group.members["b"].rack_id == "rack-2"
    assert group.group_epoch == epoch
    assert assignment(group) == before
    # a heartbeat without RackId (null: unchanged) keeps it
    member = group.members["b"]
    group.heartbeat(
        HeartbeatRequest("b", member.member_epoch, owned=dict(member.assignment.assigned)),
        TOPICS,
        CONFIG,
        0,
        full_request=False,
    )
    assert group.members["b"].rack_id == "rack-2"
    (back,) = replay(list(group_records(group, TOPICS).items()), TOPICS).values()
    assert {m: back.members[m].rack_id for m in ("a", "b")} == {"a": "rack-1", "b": "rack-2"}
    assert back.group_epoch == epoch
