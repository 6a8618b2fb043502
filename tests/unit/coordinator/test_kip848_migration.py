"""KIP-848 "Upgrade & Downgrade" (Kafka 4.x ``GroupMetadataManager``): a classic group becomes a
consumer group when a member joins with ConsumerGroupHeartbeat, its classic members go on with
JoinGroup/SyncGroup/Heartbeat answered by the consumer group (REBALANCE_IN_PROGRESS tells them
to rejoin), and it becomes a classic group again when the last consumer-protocol member leaves;
``group.consumer.migration.policy`` gates both ways; a restarted coordinator replays the migrated
state from ``__consumer_offsets``. In-memory offsets log, manual clock."""

from __future__ import annotations

import random
import uuid
from dataclasses import replace

import pytest

from broker.coordinator.consumer_group.config import ConsumerGroupConfig, ConsumerGroupConfigError
from broker.coordinator.consumer_group.coordinator import ConsumerGroups
from broker.coordinator.consumer_group.group import HeartbeatRequest
from broker.coordinator.group import GroupState
from pyspark_log.wire.consumer_protocol import Assignment, decode_assignment, encode_assignment
from pyspark_log.wire.errors import ErrorCode
from tests.unit.coordinator.helpers import GROUP, Harness

TOPICS = {"t": (uuid.uuid4(), 4)}
CONFIG = ConsumerGroupConfig(
    session_timeout_ms=3000, min_session_timeout_ms=1000, heartbeat_interval_ms=500, min_heartbeat_interval_ms=100
)


def driver(h: Harness, config: ConsumerGroupConfig = CONFIG) -> ConsumerGroups:
    groups = ConsumerGroups(config, h.coordinator.manager, h.clock, rng=random.Random(3))
    groups.topics = TOPICS
    h.coordinator.consumer = groups
    return groups


def classic_pair(h: Harness) -> list:
    """Two classic members, Stable, with partitions 0-1 and 2-3 of ``t``."""
    pending = [h.join_new() for _ in range(2)]
    h.until_answered(*pending)
    joined = [p[0] for p in pending]
    leader = next(r for r in joined if r.leader_id == r.member_id)
    assignment = {
        joined[0].member_id: encode_assignment(Assignment((("t", 0), ("t", 1)))),
        joined[1].member_id: encode_assignment(Assignment((("t", 2), ("t", 3)))),
    }
    for r in joined:
        assert h.sync(r.member_id, r.generation_id, assignment if r is leader else None)[0].error == ErrorCode.NONE
    assert h.group.is_(GroupState.STABLE)
    return joined


def consumer_join(groups: ConsumerGroups, member: str):
    req = HeartbeatRequest(member, 0, rebalance_timeout_ms=5000, subscribed_topic_names=("t",), owned={})
    return groups.heartbeat(GROUP, req, TOPICS, 1)


def rejoin(h: Harness, member_id: str, owned: tuple = ()):
    from pyspark_log.wire.consumer_protocol import Subscription, encode_subscription

    sub = encode_subscription(Subscription(("t",), owned_partitions=owned))
    out = h.join(member_id, protocols=[("range", sub)])
    assert out, "a classic JoinGroup to a consumer group is answered at once"
    return out[0]


def settle(h: Harness, groups: ConsumerGroups, classic: dict[str, int], epoch: int) -> dict[str, tuple]:
    """Drive the classic members (heartbeat; rejoin reporting what they own and sync when told)
    and member ``c`` (heartbeats) until the group is Stable; returns what each member owns."""
    owned: dict[str, tuple] = dict.fromkeys([*classic, "c"], ())
    for _ in range(20):
        for mid, generation in list(classic.items()):
            if h.heartbeat(mid, generation) == ErrorCode.REBALANCE_IN_PROGRESS or not owned[mid]:
                joined = rejoin(h, mid, owned[mid])
                classic[mid] = joined.generation_id
                synced = h.sync(mid, joined.generation_id)[0]
                if synced.error == ErrorCode.NONE:
                    owned[mid] = decode_assignment(synced.assignment).partitions
        c = groups.heartbeat(GROUP, HeartbeatRequest("c", epoch, owned={"t": frozenset(p for _, p in owned["c"])}),
                             TOPICS, 1)  # fmt: skip
        assert c.error == ErrorCode.NONE
        epoch = c.member_epoch
        if c.assignment is not None:
            owned["c"] = tuple(("t", p) for p in sorted(c.assignment.get("t", ())))
        if groups.groups[GROUP].state.value == "Stable":
            return owned
    raise AssertionError("the mixed group did not become Stable")


def test_upgrade_mixed_members_then_downgrade_and_replay() -> None:
    h = Harness()
    groups = driver(h)
    a, b = classic_pair(h)
    generation = a.generation_id

    answer = consumer_join(groups, "c")  # the first consumer-protocol member: the group upgrades
    assert answer.error == ErrorCode.NONE
    group = groups.groups[GROUP]
    assert group.group_epoch == generation + 1
    assert {m.member_id: m.classic is not None for m in group.members.values()} == {
        a.member_id: True, b.member_id: True, "c": False
    }  # fmt: skip
    assert answer.assignment == {}  # every partition is still owned by the classic members
    assert not h.group.members  # the classic entry keeps the offsets only

    # the classic members hear REBALANCE_IN_PROGRESS and rejoin the consumer group (eager: owning nothing)
    for m in (a, b):
        assert h.heartbeat(m.member_id, generation) == ErrorCode.REBALANCE_IN_PROGRESS
    ja, jb = rejoin(h, a.member_id), rejoin(h, b.member_id)
    assert ja.error == jb.error == ErrorCode.NONE
    assert ja.generation_id == group.group_epoch
    assert ja.leader_id == ""  # no classic leader: the group assigns
    owned = settle(h, groups, {a.member_id: ja.generation_id, b.member_id: jb.generation_id}, answer.member_epoch)
    assert sorted(p for parts in owned.values() for p in parts) == [("t", p) for p in range(4)]  # each once
    assert all(owned.values())
    ja = replace(ja, generation_id=group.members[a.member_id].member_epoch)
    assert h.heartbeat(a.member_id, ja.generation_id) == ErrorCode.NONE
    # commits of classic members carry their generation (the member epoch)
    assert groups.validate_offset_commit(GROUP, a.member_id, ja.generation_id, 8, [("t", 0)]) == {
        ("t", 0): ErrorCode.NONE
    }
    assert groups.validate_offset_commit(GROUP, a.member_id, generation, 8, [("t", 0)]) == {
        ("t", 0): ErrorCode.ILLEGAL_GENERATION
    }

    # failover: a new coordinator replays the mixed group, classic members included
    again = Harness(log=h.log, clock=h.clock)
    replayed = driver(again)
    again.coordinator.manager.load_all()
    back = replayed.groups[GROUP]
    assert back.group_epoch == group.group_epoch
    assert back.members[a.member_id].classic == group.members[a.member_id].classic
    assert back.members["c"].classic is None
    assert again.heartbeat(a.member_id, ja.generation_id) == ErrorCode.NONE

    # the last consumer-protocol member leaves: the group is classic again and rebalances
    left = groups.heartbeat(GROUP, HeartbeatRequest("c", -1), TOPICS, 1)
    assert left.error == ErrorCode.NONE
    assert left.member_epoch == -1
    assert GROUP not in groups.groups
    classic = h.group
    assert classic.is_(GroupState.PREPARING_REBALANCE)
    assert set(classic.members) == {a.member_id, b.member_id}
    assert h.heartbeat(a.member_id, classic.generation_id) == ErrorCode.REBALANCE_IN_PROGRESS
    pa, pb = h.join(a.member_id), h.join(b.member_id)
    h.until_answered(pa, pb)
    assert pa[0].error == pb[0].error == ErrorCode.NONE
    # and a restarted coordinator sees a classic group, no consumer group
    third = Harness(log=h.log, clock=h.clock)
    third_groups = driver(third)
    third.coordinator.manager.load_all()
    assert GROUP not in third_groups.groups
    assert set(third.group.members) == {a.member_id, b.member_id}


def test_policy_disabled_refuses_upgrade_and_downgrade() -> None:
    h = Harness()
    groups = driver(h, replace(CONFIG, migration_policy="disabled"))
    classic_pair(h)
    assert consumer_join(groups, "c").error == ErrorCode.GROUP_ID_NOT_FOUND
    assert h.group.is_(GroupState.STABLE)

    h2 = Harness()
    groups2 = driver(h2, replace(CONFIG, migration_policy="upgrade"))
    a, b = classic_pair(h2)
    c = consumer_join(groups2, "c")
    assert c.error == ErrorCode.NONE
    groups2.heartbeat(GROUP, HeartbeatRequest("c", -1), TOPICS, 1)
    assert GROUP in groups2.groups  # no downgrade: the classic members stay in the consumer group
    assert set(groups2.groups[GROUP].members) == {a.member_id, b.member_id}


def test_policy_values() -> None:
    def get(value: str):
        return lambda key, default: value if key == "group.consumer.migration.policy" else default

    assert ConsumerGroupConfig.from_properties(get("BIDIRECTIONAL")).migration_policy == "bidirectional"
    assert ConsumerGroupConfig.from_properties(lambda k, d: d).migration_policy == "bidirectional"
    with pytest.raises(ConsumerGroupConfigError, match=r"group\.consumer\.migration\.policy"):
        ConsumerGroupConfig.from_properties(get("sideways"))


def test_classic_member_session_expiry_and_sync_errors() -> None:
    h = Harness()
    groups = driver(h)
    a, b = classic_pair(h)
    c = consumer_join(groups, "c")
    assert c.error == ErrorCode.NONE
    ja = rejoin(h, a.member_id)
    assert h.sync(a.member_id, ja.generation_id + 5)[0].error == ErrorCode.ILLEGAL_GENERATION
    assert h.sync("nobody", ja.generation_id)[0].error == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.sync(a.member_id, ja.generation_id)[0].error == ErrorCode.NONE
    # b never rejoins nor heartbeats: its session (1 s) ends and it is fenced
    for _ in range(13):
        h.advance(100)
        groups.heartbeat(GROUP, HeartbeatRequest("c", groups.groups[GROUP].members["c"].member_epoch, owned={}),
                         TOPICS, 1)  # fmt: skip
        h.heartbeat(a.member_id, groups.groups[GROUP].members[a.member_id].member_epoch)
    assert b.member_id not in groups.groups[GROUP].members
    # the group epoch moved: a is told to rejoin, and is fenced if it does not within its rebalance timeout
    epoch = groups.groups[GROUP].members[a.member_id].member_epoch
    assert h.heartbeat(a.member_id, epoch) == ErrorCode.REBALANCE_IN_PROGRESS
    h.advance(2100)
    assert a.member_id not in groups.groups[GROUP].members
