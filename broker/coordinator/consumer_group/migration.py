"""Online migration between a classic group and a KIP-848 consumer group (KIP-848 "Upgrade &
Downgrade"; Kafka 4.x ``GroupMetadataManager.convertToConsumerGroup`` / ``convertToClassicGroup``,
``ConsumerGroup.fromClassicGroup``, ``ClassicGroup.fromConsumerGroup``).

Pure conversions, no I/O: the driver (``coordinator.py``) decides when, writes the records and
moves the timers.

* **upgrade** (``from_classic``): a classic group of protocol type ``consumer`` whose members
  upgrade one by one. The first ConsumerGroupHeartbeat turns it into a consumer group whose group
  epoch and target assignment epoch are the classic generation; every classic member becomes a
  STABLE member at that epoch owning the partitions of its last SyncGroup assignment (its target
  too), subscribed to the topics of its subscription, and keeps its session timeout and protocols
  (``ClassicMetadata``) so it goes on with JoinGroup/SyncGroup/Heartbeat, answered by the consumer
  group. Malformed embedded subscriptions or assignments refuse the upgrade (``DecodeError``).
* **downgrade** (``to_classic``): when the last consumer-protocol member leaves a group whose
  other members all use the classic protocol, the group becomes a Stable classic group at the
  group epoch, with those members, the protocol they all support, and each member's target
  assignment encoded with its protocol's version; the driver then starts a rebalance.
"""

from __future__ import annotations

from broker.coordinator.consumer_group.group import ClassicMetadata, ConsumerGroup, ConsumerMember, TopicsView
from broker.coordinator.consumer_group.reconcile import MemberAssignment, MemberState, normalize
from broker.coordinator.group.group import Group, GroupState, Member
from pyspark_log.wire.consumer_protocol import (
    PROTOCOL_TYPE,
    Assignment,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from pyspark_log.wire.errors import DecodeError


def from_classic(classic: Group, topics: TopicsView) -> ConsumerGroup:
    """The consumer group a classic group becomes (see the module docstring); raises
    ``DecodeError`` when a member's embedded protocol bytes cannot be read."""
    epoch = classic.generation_id
    group = ConsumerGroup(classic.group_id, group_epoch=epoch, assignment_epoch=epoch)
    protocol = classic.protocol_name
    for m in classic.members.values():
        try:
            metadata = m.metadata(protocol) if protocol is not None else m.protocols[0][1]
        except (KeyError, IndexError) as exc:
            raise DecodeError(f"member {m.member_id} has no metadata of protocol {protocol}") from exc
        subscription = decode_subscription(metadata)
        parts: dict[str, set[int]] = {}
        for topic, partition in decode_assignment(m.assignment).partitions:
            if topic in topics:
                parts.setdefault(topic, set()).add(partition)
        assigned = normalize(parts)
        member = ConsumerMember(
            m.member_id,
            instance_id=m.group_instance_id,
            rack_id=subscription.rack_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            subscribed_topic_names=tuple(sorted(set(subscription.topics))),
            classic=ClassicMetadata(m.session_timeout_ms, tuple((n, bytes(b)) for n, b in m.protocols)),
        )
        group.members[m.member_id] = member
        if m.group_instance_id is not None:
            group.static_members[m.group_instance_id] = m.member_id
        group.target[m.member_id] = assigned
        group._set_assignment(
            member, MemberAssignment(member_epoch=epoch, previous_member_epoch=epoch, state=MemberState.STABLE,
                                     assigned=assigned)
        )  # fmt: skip
    wanted = frozenset().union(*group.subscribed_topics(topics).values()) if group.members else frozenset()
    group.subscription_metadata = {t: topics[t] for t in sorted(wanted)}
    return group


def assignment_bytes(member: ConsumerMember, parts: dict[str, frozenset[int]]) -> bytes:
    """``parts`` as a ConsumerProtocol assignment in the version of the member's first protocol's
    subscription (Kafka's ``prepareAssignment``)."""
    version = 0
    if member.classic is not None and member.classic.protocols:
        raw = member.classic.protocols[0][1]
        version = int.from_bytes(raw[:2], "big", signed=True) if len(raw) >= 2 else 0
    pairs = tuple((t, p) for t in sorted(parts) for p in sorted(parts[t]))
    return encode_assignment(Assignment(pairs), max(0, min(version, 3)))


def to_classic(group: ConsumerGroup, leaving_member_id: str, now_ms: int) -> Group:
    """The Stable classic group a consumer group becomes without ``leaving_member_id`` (see the
    module docstring); every remaining member must use the classic protocol."""
    classic = Group(group.group_id, generation_id=group.group_epoch, current_state_timestamp_ms=now_ms)
    for mid, m in group.members.items():
        if mid == leaving_member_id:
            continue
        assert m.classic is not None, "a downgrade keeps only classic-protocol members"
        classic.add(
            Member(
                mid,
                m.instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.classic.session_timeout_ms,
                PROTOCOL_TYPE,
                list(m.classic.protocols),
                assignment_bytes(m, group.target.get(mid, {})),
            )
        )
    classic.protocol_type = PROTOCOL_TYPE
    classic.protocol_name = classic.select_protocol()
    classic.state = GroupState.STABLE
    classic.subscribed_topics = classic._compute_subscribed_topics()
    return classic
