"""The classic group protocol in the coordinator, driven by a manual clock: member ids (KIP-394),
the initial delay, generations and leaders, heartbeats and session expiry, rebalance and sync
timeouts, leaving, and static membership (KIP-345)."""

from __future__ import annotations

from broker.coordinator.group import GroupState
from pyspark_log.wire.errors import ErrorCode

from .helpers import GROUP, Harness, subscription

S = GroupState


def test_a_new_dynamic_member_must_rejoin_with_the_member_id_it_is_given() -> None:
    h = Harness()
    first = h.join()
    assert first[0].error == ErrorCode.MEMBER_ID_REQUIRED
    assert first[0].member_id.startswith("client-")
    assert h.group.pending_members == {first[0].member_id}
    # the pending id expires after the session timeout if the member never comes back
    h.advance(900)
    assert h.group.pending_members
    h.advance(200)
    group = h.coordinator.manager.groups.get(GROUP)
    assert group is None or not group.pending_members  # an empty group without offsets is dropped


def test_join_waits_the_initial_delay_then_completes_a_generation() -> None:
    h = Harness()
    a = h.join_new()
    assert not a
    assert h.group.state is S.PREPARING_REBALANCE
    h.advance(150)
    b = h.join_new()  # arrives during the delay: extends it
    h.advance(200)
    assert not a
    assert not b
    h.advance(400)
    assert a[0].error == b[0].error == ErrorCode.NONE
    assert a[0].generation_id == b[0].generation_id == 1
    assert a[0].protocol_name == "range"
    leader = a[0] if a[0].leader_id == a[0].member_id else b[0]
    follower = b[0] if leader is a[0] else a[0]
    assert {m[0] for m in leader.members} == {a[0].member_id, b[0].member_id}
    assert follower.members == ()
    assert h.group.state is S.COMPLETING_REBALANCE


def test_sync_hands_out_the_leaders_assignment_and_the_group_becomes_stable() -> None:
    h = Harness()
    a, b = h.join_new(), h.join_new()
    h.until_answered(a, b)
    leader = a[0] if a[0].leader_id == a[0].member_id else b[0]
    follower = b[0] if leader is a[0] else a[0]
    follower_sync = h.sync(follower.member_id, 1)
    assert not follower_sync  # waits for the leader
    leader_sync = h.sync(leader.member_id, 1, {leader.member_id: b"L", follower.member_id: b"F"})
    assert leader_sync[0].assignment == b"L"
    assert follower_sync[0].assignment == b"F"
    assert follower_sync[0].protocol_name == "range"
    assert h.group.state is S.STABLE
    # the group (with assignments) was persisted before the answer
    assert h.log.log_end_offset(h.coordinator.manager.partition_of(GROUP) or 0) >= 1
    # a Stable group hands the current assignment to a late SyncGroup
    assert h.sync(follower.member_id, 1)[0].assignment == b"F"
    assert h.sync(follower.member_id, 0)[0].error == ErrorCode.ILLEGAL_GENERATION


def test_a_new_member_triggers_a_rebalance_seen_through_heartbeats() -> None:
    h = Harness()
    (a,) = h.stable_group(1)
    assert h.heartbeat(a.member_id, 1) == ErrorCode.NONE
    b = h.join_new()
    assert h.group.state is S.PREPARING_REBALANCE
    assert h.heartbeat(a.member_id, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    assert h.sync(a.member_id, 1)[0].error == ErrorCode.REBALANCE_IN_PROGRESS
    a2 = h.join(a.member_id)  # every known member rejoined: completes at once
    assert a2[0].generation_id == b[0].generation_id == 2
    assert h.heartbeat(a.member_id, 1) == ErrorCode.ILLEGAL_GENERATION
    assert h.heartbeat("nobody", 2) == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_member_without_heartbeats_expires_after_its_session_timeout() -> None:
    h = Harness()
    a, b = h.stable_group(2)
    beats = []
    for _ in range(5):  # only a heartbeats
        h.advance(300)
        beats.append(h.heartbeat(a.member_id, 1))
    assert beats[:3] == [ErrorCode.NONE] * 3
    assert beats[-1] == ErrorCode.REBALANCE_IN_PROGRESS
    assert not h.group.has(b.member_id)
    assert h.group.state is S.PREPARING_REBALANCE
    rejoined = h.join(a.member_id)
    assert rejoined[0].generation_id == 2
    assert [m[0] for m in rejoined[0].members] == [a.member_id]


def test_members_that_do_not_rejoin_in_the_rebalance_timeout_are_removed() -> None:
    h = Harness()
    a, b = h.stable_group(2)
    c = h.join_new()
    a2 = h.join(a.member_id)
    for _ in range(7):  # b keeps heartbeating but never rejoins
        h.advance(300)
        assert h.heartbeat(b.member_id, 1) in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.UNKNOWN_MEMBER_ID)
    assert not h.group.has(b.member_id)
    assert a2[0].generation_id == c[0].generation_id == 2


def test_members_that_never_sync_are_removed_after_the_rebalance_timeout() -> None:
    h = Harness()
    a, b = h.join_new(session_ms=5000), h.join_new(session_ms=5000)  # sessions outlast the sync wait
    h.until_answered(a, b)
    leader = a[0] if a[0].leader_id == a[0].member_id else b[0]
    follower = b[0] if leader is a[0] else a[0]
    h.sync(leader.member_id, 1, {leader.member_id: b"L"})
    h.advance(2100)  # the follower sent no SyncGroup within the rebalance timeout (2000)
    assert not h.group.has(follower.member_id)
    assert h.group.state is S.PREPARING_REBALANCE


def test_leave_group_removes_members_and_rebalances() -> None:
    h = Harness()
    a, b = h.stable_group(2)
    top, results = h.coordinator.leave_group(GROUP, [(b.member_id, None), ("unknown", None)])
    assert top == ErrorCode.NONE
    assert [r[2] for r in results] == [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID]
    assert h.group.state is S.PREPARING_REBALANCE
    h.coordinator.leave_group(GROUP, [(a.member_id, None)])
    assert h.group.state is S.EMPTY
    assert h.group.generation_id == 2


def test_a_static_member_rejoining_a_stable_group_gets_its_assignment_without_a_rebalance() -> None:
    h = Harness()
    s = h.join(instance_id="inst-1")
    d = h.join_new()
    h.until_answered(s, d)
    leader = s[0] if s[0].leader_id == s[0].member_id else d[0]
    assignment = {s[0].member_id: b"S", d[0].member_id: b"D"}
    h.sync(s[0].member_id, 1, assignment if leader is s[0] else None, instance_id="inst-1")
    h.sync(d[0].member_id, 1, assignment if leader is d[0] else None)
    assert h.group.state is S.STABLE
    again = h.join(instance_id="inst-1")  # a restart: no member id
    assert again[0].error == ErrorCode.NONE
    assert again[0].member_id != s[0].member_id
    assert again[0].generation_id == 1
    assert again[0].leader_id != again[0].member_id  # it computes no assignment
    assert h.group.state is S.STABLE
    assert h.sync(again[0].member_id, 1, instance_id="inst-1")[0].assignment == b"S"
    # the old member id is fenced (Kafka documentation §4.5 "The Consumer": FencedInstanceIdException)
    assert h.heartbeat(s[0].member_id, 1, "inst-1") == ErrorCode.FENCED_INSTANCE_ID
    assert h.heartbeat(d[0].member_id, 1) == ErrorCode.NONE


def test_static_members_stay_through_a_rebalance_they_miss() -> None:
    h = Harness()
    s = h.join(instance_id="inst-1", session_ms=10_000)
    h.until_answered(s)
    h.sync(s[0].member_id, 1, {s[0].member_id: b"S"}, instance_id="inst-1")
    d = h.join_new()
    h.until_answered(d)  # after the rebalance timeout: the static member did not rejoin
    assert d[0].generation_id == 2
    assert h.group.has(s[0].member_id)  # a dynamic member would have been removed
    assert {m[0] for m in d[0].members} == {s[0].member_id, d[0].member_id}


def test_invalid_session_timeouts_and_unknown_members_are_refused() -> None:
    h = Harness()
    assert h.join(session_ms=10)[0].error == ErrorCode.INVALID_SESSION_TIMEOUT
    assert h.join("made-up-id")[0].error == ErrorCode.UNKNOWN_MEMBER_ID
    h.stable_group(1)
    other = h.join(protocols=[("roundrobin", subscription("t"))], require_known=False)
    assert other[0].error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_requests_for_groups_on_a_loading_partition_or_elsewhere() -> None:
    h = Harness()
    h.stable_group(1)
    other = Harness(log=h.log, clock=h.clock)  # a restart over the same log: loads first
    manager = other.coordinator.manager
    assert manager.status(GROUP) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert other.join()[0].error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert other.sync("m", 1)[0].error == ErrorCode.REBALANCE_IN_PROGRESS
    assert other.heartbeat("m", 1) == ErrorCode.NONE
    manager.load_all()
    assert manager.status(GROUP) is None
    assert manager.status("") == ErrorCode.INVALID_GROUP_ID
    manager.set_partitions(3, [])  # leadership moved away
    assert manager.status(GROUP) == ErrorCode.NOT_COORDINATOR
