"""KIP-848 consumer groups, the pure core: assignors (``uniform``, ``range``), reconciliation
(revocation before assignment, member epochs) and the heartbeat decisions of one group
(KIP-848 "Group Epoch", "Target Assignment", "Reconciliation", "Member Expiration"; Kafka 4.1
``GroupMetadataManager.consumerGroupHeartbeat`` errors)."""

from __future__ import annotations

import uuid

import pytest

from broker.coordinator.consumer_group.assignors import range_, uniform
from broker.coordinator.consumer_group.config import ConsumerGroupConfig, ConsumerGroupConfigError
from broker.coordinator.consumer_group.group import (
    ConsumerGroup,
    ConsumerGroupState,
    HeartbeatError,
    HeartbeatRequest,
)
from broker.coordinator.consumer_group.reconcile import MemberAssignment, MemberState, reconcile
from broker.coordinator.consumer_group.regex import RegexError, matching_topics
from pyspark_log.wire.errors import ErrorCode

CONFIG = ConsumerGroupConfig()
T_ID = uuid.uuid4()


def fs(*ps: int) -> frozenset[int]:
    return frozenset(ps)


# -- assignors ------------------------------------------------------------------------------------


def test_uniform_balances_and_is_sticky() -> None:
    members = {"a": frozenset({"t"}), "b": frozenset({"t"})}
    first = uniform(members, {"t": 6}, {})
    assert sorted(len(first[m]["t"]) for m in members) == [3, 3]
    assert first["a"]["t"] | first["b"]["t"] == fs(*range(6))
    members["c"] = frozenset({"t"})
    second = uniform(members, {"t": 6}, first)
    assert [len(second[m]["t"]) for m in "abc"] == [2, 2, 2]
    # stickiness: a and b keep partitions they had; only c's two moved
    assert second["a"]["t"] <= first["a"]["t"]
    assert second["b"]["t"] <= first["b"]["t"]


def test_uniform_with_different_subscriptions_gives_each_topic_to_subscribers_only() -> None:
    members = {"a": frozenset({"x"}), "b": frozenset({"x", "y"}), "c": frozenset({"y"})}
    out = uniform(members, {"x": 4, "y": 2}, {})
    assert "y" not in out["a"]
    assert "x" not in out["c"]
    everything = [(t, p) for m in out.values() for t, ps in m.items() for p in ps]
    assert sorted(everything) == sorted([("x", p) for p in range(4)] + [("y", p) for p in range(2)])
    sizes = [sum(len(ps) for ps in out[m].values()) for m in "abc"]
    assert max(sizes) - min(sizes) <= 1


def test_range_gives_contiguous_ranges_in_member_order() -> None:
    out = range_({"b": frozenset({"t"}), "a": frozenset({"t"})}, {"t": 5}, {})
    assert out["a"]["t"] == fs(0, 1, 2)
    assert out["b"]["t"] == fs(3, 4)


# -- reconciliation -------------------------------------------------------------------------------


def test_revocation_comes_before_the_new_epoch() -> None:
    start = MemberAssignment(member_epoch=3, state=MemberState.STABLE, assigned={"t": fs(0, 1)})
    step = reconcile(start, 4, {"t": fs(0)}, lambda t, p: False, None)
    assert step.state is MemberState.UNREVOKED_PARTITIONS
    assert step.member_epoch == 3
    assert step.assigned == {"t": fs(0)}
    assert step.pending_revocation == {"t": fs(1)}
    # the member says nothing of what it owns: it still owns partition 1
    assert reconcile(step, 4, {"t": fs(0)}, lambda t, p: False, None) == step
    assert reconcile(step, 4, {"t": fs(0)}, lambda t, p: False, {"t": fs(0, 1)}) == step
    done = reconcile(step, 4, {"t": fs(0)}, lambda t, p: False, {"t": fs(0)})
    assert done.state is MemberState.STABLE
    assert done.member_epoch == 4
    assert done.previous_member_epoch == 3


def test_a_partition_still_owned_elsewhere_is_unreleased() -> None:
    start = MemberAssignment(member_epoch=1, assigned={"t": fs(0)})
    held = {("t", 1)}
    step = reconcile(start, 2, {"t": fs(0, 1)}, lambda t, p: (t, p) in held, {"t": fs(0)})
    assert step.state is MemberState.UNRELEASED_PARTITIONS
    assert step.assigned == {"t": fs(0)}
    assert step.member_epoch == 2
    held.clear()
    done = reconcile(step, 2, {"t": fs(0, 1)}, lambda t, p: False, {"t": fs(0)})
    assert done.state is MemberState.STABLE
    assert done.assigned == {"t": fs(0, 1)}


# -- the group's heartbeat ------------------------------------------------------------------------


def join(group: ConsumerGroup, member: str, topics: dict, now: int = 0, **kw: object) -> object:
    req = HeartbeatRequest(member, 0, rebalance_timeout_ms=60_000, subscribed_topic_names=("t",), owned={}, **kw)  # type: ignore[arg-type]
    return group.heartbeat(req, topics, CONFIG, now, full_request=True)


def beat(group: ConsumerGroup, member: str, epoch: int, owned: dict | None, topics: dict, **kw: object) -> object:
    req = HeartbeatRequest(member, epoch, owned=owned, **kw)  # type: ignore[arg-type]
    return group.heartbeat(req, topics, CONFIG, 0, full_request=False)


def test_two_members_share_and_the_second_waits_for_the_revocation() -> None:
    topics = {"t": (T_ID, 4)}
    group = ConsumerGroup("g")
    first = join(group, "a", topics)
    assert first.member_epoch == 1
    assert first.assignment == {"t": fs(0, 1, 2, 3)}
    assert group.state is ConsumerGroupState.STABLE
    second = join(group, "b", topics)
    assert second.member_epoch == 2
    assert second.assignment == {}  # a still owns all four
    assert group.state is ConsumerGroupState.RECONCILING
    a = beat(group, "a", 1, {"t": fs(0, 1, 2, 3)}, topics)
    assert a.member_epoch == 1
    assert len(a.assignment["t"]) == 2  # keep two, revoke two
    assert a.revocation_deadline_ms is not None
    b = beat(group, "b", 2, {}, topics)
    assert b.assignment is None  # nothing released yet
    a = beat(group, "a", 1, a.assignment, topics)
    assert a.member_epoch == 2
    b = beat(group, "b", 2, {}, topics)
    assert b.assignment is not None
    assert b.assignment["t"] == fs(0, 1, 2, 3) - a_parts(group, "a")
    assert group.state is ConsumerGroupState.STABLE


def a_parts(group: ConsumerGroup, member: str) -> frozenset[int]:
    return group.members[member].assignment.assigned.get("t", frozenset())


def test_epoch_errors() -> None:
    topics = {"t": (T_ID, 2)}
    group = ConsumerGroup("g")
    join(group, "a", topics)
    with pytest.raises(HeartbeatError) as err:
        beat(group, "a", 5, {}, topics)
    assert err.value.code == ErrorCode.FENCED_MEMBER_EPOCH
    with pytest.raises(HeartbeatError) as err:
        beat(group, "nobody", 1, {}, topics)
    assert err.value.code == ErrorCode.UNKNOWN_MEMBER_ID
    join(group, "b", topics)
    beat(group, "a", 1, {"t": fs(0, 1)}, topics)
    beat(group, "a", 1, {"t": fs(*a_parts(group, "a"))}, topics)
    assert group.members["a"].member_epoch == 2
    # a lost response: the previous epoch with a subset of what it has is accepted
    assert beat(group, "a", 1, {"t": a_parts(group, "a")}, topics).member_epoch == 2
    with pytest.raises(HeartbeatError) as err:  # previous epoch without owned partitions: fenced
        beat(group, "a", 1, None, topics)
    assert err.value.code == ErrorCode.FENCED_MEMBER_EPOCH


def test_static_member_leave_and_rejoin_keeps_the_assignment() -> None:
    topics = {"t": (T_ID, 2)}
    group = ConsumerGroup("g")
    join(group, "a", topics, instance_id="i1")
    with pytest.raises(HeartbeatError) as err:
        join(group, "a2", topics, instance_id="i1")
    assert err.value.code == ErrorCode.UNRELEASED_INSTANCE_ID
    left = beat(group, "a", -2, None, topics, instance_id="i1")
    assert left.member_epoch == -2
    back = join(group, "a2", topics, instance_id="i1")
    assert back.member_epoch == 1
    assert back.assignment == {"t": fs(0, 1)}
    assert "a" not in group.members
    assert group.static_members["i1"] == "a2"
    # the same member id back after a temporary leave keeps its assignment too
    beat(group, "a2", -2, None, topics, instance_id="i1")
    again = join(group, "a2", topics, instance_id="i1")
    assert again.member_epoch == 1
    assert again.assignment == {"t": fs(0, 1)}


def test_leave_expiry_max_size_assignor_and_regex() -> None:
    topics = {"t": (T_ID, 2), "other": (uuid.uuid4(), 1)}
    group = ConsumerGroup("g")
    join(group, "a", topics)
    join(group, "b", topics)
    epoch = group.group_epoch
    assert beat(group, "b", -1, None, topics).member_epoch == -1
    assert group.group_epoch == epoch + 1
    assert "b" not in group.members
    assert group.expire_member("a")
    assert group.state is ConsumerGroupState.EMPTY
    small = ConsumerGroupConfig(max_size=1)
    group.heartbeat(HeartbeatRequest("x", 0, rebalance_timeout_ms=1, subscribed_topic_names=("t",)), topics, small, 0,
                    full_request=False)  # fmt: skip
    with pytest.raises(HeartbeatError) as err:
        group.heartbeat(HeartbeatRequest("y", 0, rebalance_timeout_ms=1, subscribed_topic_names=("t",)), topics,
                        small, 0, full_request=False)  # fmt: skip
    assert err.value.code == ErrorCode.GROUP_MAX_SIZE_REACHED
    with pytest.raises(HeartbeatError) as err:
        join(group, "z", topics, server_assignor="sticky")
    assert err.value.code == ErrorCode.UNSUPPORTED_ASSIGNOR
    with pytest.raises(HeartbeatError) as err:
        group.heartbeat(HeartbeatRequest("r", 0, rebalance_timeout_ms=1, subscribed_topic_regex="t("), topics, CONFIG,
                        0, full_request=False)  # fmt: skip
    assert err.value.code == ErrorCode.INVALID_REGULAR_EXPRESSION


def test_regex_subscription_picks_up_a_new_topic() -> None:
    group = ConsumerGroup("g")
    topics: dict = {"orders-1": (uuid.uuid4(), 1), "misc": (uuid.uuid4(), 1)}
    req = HeartbeatRequest("a", 0, rebalance_timeout_ms=1, subscribed_topic_regex="orders-.*", owned={})
    out = group.heartbeat(req, topics, CONFIG, 0, full_request=True)
    assert out.assignment == {"orders-1": fs(0)}
    topics["orders-2"] = (uuid.uuid4(), 2)
    epoch = group.group_epoch
    out = beat(group, "a", out.member_epoch, {"orders-1": fs(0)}, topics)
    assert group.group_epoch == epoch + 1
    assert out.assignment == {"orders-1": fs(0), "orders-2": fs(0, 1)}


def test_regex_is_re2_full_match_and_skips_internal_topics() -> None:
    names = frozenset({"a1", "a12", "ba1", "__consumer_offsets"})
    assert matching_topics("a[0-9]", names) == {"a1"}
    assert matching_topics(".*", names) == {"a1", "a12", "ba1"}
    with pytest.raises(RegexError):
        matching_topics("(?=a)a1", names)  # a look-ahead: not RE2


def test_config_bounds_follow_kafka() -> None:
    def conf(**kv: str) -> ConsumerGroupConfig:
        return ConsumerGroupConfig.from_properties(lambda key, default: kv.get(key.replace(".", "_"), default))

    assert conf().heartbeat_interval_ms == 5000
    assert conf().session_timeout_ms == 45000
    assert conf().assignors == ("uniform", "range")
    assert conf().enabled
    assert not conf(group_coordinator_rebalance_protocols="classic").enabled
    with pytest.raises(ConsumerGroupConfigError, match=r"group\.consumer\.heartbeat\.interval\.ms"):
        conf(group_consumer_heartbeat_interval_ms="1000")
    with pytest.raises(ConsumerGroupConfigError, match=r"group\.consumer\.session\.timeout\.ms"):
        conf(group_consumer_session_timeout_ms="90000")
    with pytest.raises(ConsumerGroupConfigError, match=r"group\.consumer\.assignors"):
        conf(group_consumer_assignors="sticky")
    picked = conf(group_consumer_assignors="org.apache.kafka.coordinator.group.assignor.RangeAssignor")
    assert picked.assignors == ("range",)


# -- persistence: Kafka's consumer group records --------------------------------------------------


def test_group_records_replay_to_the_same_epochs_and_assignments() -> None:
    from broker.coordinator.consumer_group.records import (
        CURRENT_ASSIGNMENT,
        MEMBER_METADATA,
        decode_key,
        group_records,
        key,
        replay,
    )

    topics = {"t": (T_ID, 4), "gone": (uuid.uuid4(), 1)}
    group = ConsumerGroup("g")
    join(group, "a", topics, instance_id="i1", rack_id="r1")
    join(group, "b", topics)
    beat(group, "a", 1, {"t": fs(0, 1, 2, 3)}, topics)  # a revokes two: UNREVOKED_PARTITIONS
    records = group_records(group, topics)
    assert decode_key(key(MEMBER_METADATA, "g", "a")) == (MEMBER_METADATA, "g", "a")
    assert key(CURRENT_ASSIGNMENT, "g", "a") in records
    assert records[key(3, "g")][:2] == b"\x00\x00"  # value version 0
    log = list(records.items())
    log += [(key(MEMBER_METADATA, "g", "old"), b"\x00\x00junk-overwritten"), (key(MEMBER_METADATA, "g", "old"), None)]
    (back,) = replay(log, topics).values()
    assert (back.group_epoch, back.assignment_epoch) == (group.group_epoch, group.assignment_epoch)
    assert set(back.members) == {"a", "b"}
    for mid in ("a", "b"):
        assert back.members[mid].assignment == group.members[mid].assignment
        assert back.target[mid] == group.target[mid]
    assert back.members["a"].instance_id == "i1"
    assert back.members["a"].rack_id == "r1"
    assert back.static_members == {"i1": "a"}
    assert back.owners == group.owners
    assert back.subscription_metadata == group.subscription_metadata
    assert back.state is group.state
    # the reloaded group goes on: a finishes revoking and b gets the released partitions
    a = beat(back, "a", 1, back.members["a"].assignment.assigned, topics)
    assert a.member_epoch == back.assignment_epoch


def test_assignment_epochs_are_written_and_a_record_without_them_counts_them_at_the_member_epoch() -> None:
    """KIP-1251's AssignmentEpochs (tag 0, aligned with the partitions) survive a replay; a record
    of a writer before it (Kafka 4.1) replays with every owned partition at the member's epoch, so
    only that epoch commits until the partition is reassigned (the strict check, never looser)."""
    from broker.coordinator.consumer_group.records import CURRENT_ASSIGNMENT, _value, group_records, key, replay

    topics = {"t": (T_ID, 4)}
    group = ConsumerGroup("g")
    join(group, "a", topics)
    first = group.members["a"].member_epoch
    join(group, "b", topics)
    beat(group, "a", first, {"t": fs(0, 1, 2, 3)}, topics)  # a must revoke two
    a = group.members["a"].assignment
    assert a.state is MemberState.UNREVOKED_PARTITIONS
    assert {a.assignment_epoch("t", p) for p in range(4)} == {first}  # assigned or pending revocation
    (back,) = replay(group_records(group, topics).items(), topics).values()
    assert back.members["a"].assignment.assigned_at == a.assigned_at
    before_kip1251 = _value(CURRENT_ASSIGNMENT, {
        "member_epoch": 7, "previous_member_epoch": 6, "state": 0,
        "assigned_partitions": [{"topic_id": T_ID, "partitions": [0, 1]}], "partitions_pending_revocation": [],
    })  # fmt: skip
    records = [*group_records(group, topics).items(), (key(CURRENT_ASSIGNMENT, "g", "a"), before_kip1251)]
    (old,) = replay(records, topics).values()
    assert old.members["a"].assignment.assigned_at == {}
    assert old.members["a"].assignment.assignment_epoch("t", 0) == 7
    assert old.members["a"].assignment.assignment_epoch("t", 3) is None
