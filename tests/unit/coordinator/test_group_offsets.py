"""Committed offsets in the coordinator (Kafka documentation §5.5 "Distribution"): appended to
``__consumer_offsets`` before the
answer, served from the cache, replayed into the cache on start-up, expired per
``offsets.retention.minutes``, deleted with the group or by OffsetDelete."""

from __future__ import annotations

from broker.coordinator.group import CommittedOffset, GroupState
from pyspark_log.wire.errors import ErrorCode

from .helpers import GROUP, Harness

S = GroupState


def commit(h: Harness, offsets: dict[tuple[str, int], int], *, member: str = "", generation: int = -1) -> dict:
    values = {tp: CommittedOffset(o, -1, f"m{o}", h.clock.now) for tp, o in offsets.items()}
    return h.coordinator.commit_offsets(GROUP, member, None, generation, values)


def test_a_commit_without_membership_is_stored_and_fetched() -> None:
    h = Harness()
    partition = h.coordinator.manager.partition_of(GROUP)
    assert partition is not None
    assert commit(h, {("t", 0): 5, ("t", 1): 7}) == {("t", 0): 0, ("t", 1): 0}
    assert h.log.log_end_offset(partition) == 2  # persisted before the answer
    code, found = h.coordinator.fetch_offsets(GROUP, [("t", 0), ("t", 9)])
    assert code == ErrorCode.NONE
    assert found[("t", 0)] == CommittedOffset(5, -1, "m5", h.clock.now)
    assert found[("t", 9)] is None
    assert set(h.coordinator.fetch_offsets(GROUP, None)[1]) == {("t", 0), ("t", 1)}
    assert h.coordinator.fetch_offsets("other", None) == (ErrorCode.NONE, {})


def test_a_commit_is_fetched_only_once_the_offsets_partition_isr_has_it() -> None:
    """A commit not yet below the offsets partition's high watermark may never reach the next
    coordinator: OffsetFetch answers the one before it (the chaos queue workload saw a committed
    offset move back when such a commit was lost with its coordinator)."""
    h = Harness()
    assert commit(h, {("t", 0): 10}) == {("t", 0): ErrorCode.NONE}
    h.log.replicated_to = h.log.log_end_offset(h.coordinator.manager.partition_of(GROUP))
    assert commit(h, {("t", 0): 20, ("t", 1): 5}) == {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.NONE}
    assert commit(h, {("t", 0): 30}) == {("t", 0): ErrorCode.NONE}
    fetched = h.coordinator.fetch_offsets(GROUP, [("t", 0), ("t", 1)])[1]
    assert {tp: v.offset if v else None for tp, v in fetched.items()} == {("t", 0): 10, ("t", 1): None}
    h.log.replicated_to += 1  # the second commit's batch is on the ISR, the third not yet
    group = h.coordinator.manager.groups[GROUP]
    seen = h.coordinator.manager.replicated_offsets(group)  # the metrics' read-only view
    assert {tp: v.offset for tp, v in seen.items()} == {("t", 0): 20, ("t", 1): 5}
    assert group.offsets[("t", 0)].offset == 10  # not changed by that view
    fetched = h.coordinator.fetch_offsets(GROUP, [("t", 0), ("t", 1)])[1]
    assert {tp: v.offset if v else None for tp, v in fetched.items()} == {("t", 0): 20, ("t", 1): 5}
    h.log.replicated_to = None
    assert h.coordinator.fetch_offsets(GROUP, [("t", 0)])[1][("t", 0)].offset == 30
    assert not h.coordinator.manager.groups[GROUP].unreplicated_offsets


def test_member_commits_are_checked_against_the_generation() -> None:
    h = Harness()
    (a,) = h.stable_group(1)
    assert commit(h, {("t", 0): 1}) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}  # the group has members
    assert commit(h, {("t", 0): 1}, member=a.member_id, generation=0) == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    assert commit(h, {("t", 0): 1}, member="x", generation=1) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    assert commit(h, {("t", 0): 3}, member=a.member_id, generation=1) == {("t", 0): ErrorCode.NONE}
    b = h.join_new()
    a2 = h.join(a.member_id)
    assert a2[0].generation_id == b[0].generation_id == 2
    # between JoinGroup and SyncGroup a commit must wait for the rebalance to finish
    assert commit(h, {("t", 0): 4}, member=a.member_id, generation=2) == {("t", 0): ErrorCode.REBALANCE_IN_PROGRESS}
    assert commit(h, {("t", 0): 4}, member="", generation=3) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}


def test_metadata_too_large_and_store_failures_are_per_partition_errors() -> None:
    h = Harness()
    big = CommittedOffset(1, -1, "x" * 5000, 0)
    assert h.coordinator.commit_offsets(GROUP, "", None, -1, {("t", 0): big}) == {
        ("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE
    }
    h.log.fail_with = ErrorCode.NOT_COORDINATOR
    assert commit(h, {("t", 0): 1}) == {("t", 0): ErrorCode.NOT_COORDINATOR}
    assert h.coordinator.fetch_offsets(GROUP, [("t", 0)])[1] == {("t", 0): None}  # cache unchanged


def test_offsets_and_groups_are_replayed_after_a_restart() -> None:
    h = Harness()
    a, b = h.stable_group(2)
    commit(h, {("t", 0): 10}, member=a.member_id, generation=1)
    commit(h, {("t", 0): 11, ("t", 1): 3}, member=b.member_id, generation=1)
    restarted = Harness(log=h.log, clock=h.clock)
    assert restarted.coordinator.fetch_offsets(GROUP, None)[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    restarted.coordinator.manager.load_all()
    code, found = restarted.coordinator.fetch_offsets(GROUP, None)
    assert code == ErrorCode.NONE
    assert {tp: v.offset for tp, v in found.items() if v} == {("t", 0): 11, ("t", 1): 3}
    group = restarted.group
    assert group.state is S.STABLE
    assert group.generation_id == 1
    assert set(group.members) == {a.member_id, b.member_id}
    assert group.get(a.member_id).assignment == a.member_id.encode()
    # the loaded members still heartbeat; one that does not expires after its session timeout
    for _ in range(4):
        restarted.advance(300)
        restarted.heartbeat(a.member_id, 1)
    assert not restarted.group.has(b.member_id)


def test_offsets_of_an_empty_group_expire_after_the_retention_and_the_group_dies() -> None:
    h = Harness()
    (a,) = h.stable_group(1)
    commit(h, {("t", 0): 9}, member=a.member_id, generation=1)
    h.coordinator.leave_group(GROUP, [(a.member_id, None)])
    assert h.group.state is S.EMPTY
    h.advance(9_000)
    assert h.coordinator.fetch_offsets(GROUP, [("t", 0)])[1][("t", 0)] is not None
    h.advance(2_000)  # 10 s after the group became empty, at the next expiry check
    assert h.coordinator.fetch_offsets(GROUP, [("t", 0)])[1][("t", 0)] is None
    assert GROUP not in h.coordinator.manager.groups
    restarted = Harness(log=h.log, clock=h.clock)  # the tombstones are in the log too
    restarted.coordinator.manager.load_all()
    assert GROUP not in restarted.coordinator.manager.groups


def test_a_standalone_commit_expires_from_its_commit_time() -> None:
    h = Harness()
    commit(h, {("t", 0): 1})
    h.advance(5_000)
    commit(h, {("t", 1): 2})
    h.advance(5_500)
    assert set(h.coordinator.fetch_offsets(GROUP, None)[1]) == {("t", 1)}


def test_delete_groups_and_offsets() -> None:
    h = Harness()
    (a,) = h.stable_group(1)
    commit(h, {("t", 0): 1, ("u", 0): 2}, member=a.member_id, generation=1)
    assert h.coordinator.delete_groups([GROUP, "missing"]) == {
        GROUP: ErrorCode.NON_EMPTY_GROUP,
        "missing": ErrorCode.GROUP_ID_NOT_FOUND,
    }
    # a Stable consumer group may drop offsets of topics it does not subscribe to ("t" only)
    code, results = h.coordinator.delete_offsets(GROUP, [("t", 0), ("u", 0)])
    assert code == ErrorCode.NONE
    assert results == {("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): ErrorCode.NONE}
    h.coordinator.leave_group(GROUP, [(a.member_id, None)])
    assert h.coordinator.delete_groups([GROUP]) == {GROUP: ErrorCode.NONE}
    assert h.coordinator.fetch_offsets(GROUP, None) == (ErrorCode.NONE, {})
    assert h.coordinator.describe_group(GROUP)[1].state == "Dead"


def test_describe_and_list_groups() -> None:
    h = Harness()
    a, b = h.stable_group(2)
    code, summary = h.coordinator.describe_group(GROUP)
    assert code == ErrorCode.NONE
    assert (summary.state, summary.protocol_type, summary.protocol) == ("Stable", "consumer", "range")
    assert {m.member_id: m.assignment for m in summary.members} == {
        a.member_id: a.member_id.encode(),
        b.member_id: b.member_id.encode(),
    }
    commit(h, {("t", 0): 1}, member=a.member_id, generation=1)
    assert h.coordinator.list_groups() == (ErrorCode.NONE, [(GROUP, "consumer", "Stable")])
    assert h.coordinator.list_groups(["empty"]) == (ErrorCode.NONE, [])
