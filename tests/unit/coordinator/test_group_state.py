"""The group state machine (``Group.transition_to``): every legal move of its table succeeds, every
other move raises; protocol selection and KIP-345 member replacement."""

from __future__ import annotations

import itertools

import pytest

from broker.coordinator.group.group import (
    Group,
    GroupState,
    IllegalStateTransition,
    JoinResult,
    Member,
    SyncResult,
)
from pyspark_log.wire.errors import ErrorCode

S = GroupState
LEGAL = {
    (S.EMPTY, S.PREPARING_REBALANCE),
    (S.EMPTY, S.DEAD),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.PREPARING_REBALANCE, S.EMPTY),
    (S.PREPARING_REBALANCE, S.DEAD),
    (S.COMPLETING_REBALANCE, S.STABLE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.DEAD),
    (S.STABLE, S.PREPARING_REBALANCE),
    (S.STABLE, S.DEAD),
    (S.DEAD, S.DEAD),
}


@pytest.mark.parametrize(("source", "target"), sorted(LEGAL, key=str))
def test_legal_transitions(source: GroupState, target: GroupState) -> None:
    group = Group("g", state=source)
    group.transition_to(target)
    assert group.state is target


@pytest.mark.parametrize(("source", "target"), sorted(set(itertools.product(S, S)) - LEGAL, key=str))
def test_illegal_transitions_raise_and_leave_the_state(source: GroupState, target: GroupState) -> None:
    group = Group("g", state=source)
    with pytest.raises(IllegalStateTransition):
        group.transition_to(target)
    assert group.state is source


def test_the_docstring_table_matches_the_rules() -> None:
    doc = Group.transition_to.__doc__ or ""
    names = [s.value for s in S]
    rows = {
        line.split()[0]: line.split()[1:]
        for line in doc.splitlines()
        if line.split() and line.split()[0] in names and set(line.split()[1:]) <= {"-", "yes"}
    }
    table = {(S(src), S(names[i])) for src, cells in rows.items() for i, cell in enumerate(cells) if cell == "yes"}
    assert table == LEGAL


def member(member_id: str, *protocols: str, instance: str | None = None) -> Member:
    return Member(member_id, instance, "c", "/h", 1000, 1000, "consumer", [(p, b"") for p in protocols])


def test_can_rebalance_only_from_stable_completing_and_empty() -> None:
    assert {s for s in S if Group("g", state=s).can_rebalance} == {S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}


def test_protocol_selection_prefers_what_most_members_list_first_among_common_ones() -> None:
    group = Group("g")
    group.add(member("a", "roundrobin", "range", "sticky"))
    group.add(member("b", "range", "roundrobin"))
    group.add(member("c", "range", "roundrobin"))
    assert sorted(group.candidate_protocols()) == ["range", "roundrobin"]
    assert group.select_protocol() == "range"
    assert group.supports_protocols("consumer", ["roundrobin"])
    assert not group.supports_protocols("consumer", ["sticky"])
    assert not group.supports_protocols("connect", ["range"])


def test_first_member_needs_a_protocol_type_and_protocols_and_becomes_leader() -> None:
    group = Group("g")
    assert not group.supports_protocols("", ["range"])
    assert not group.supports_protocols("consumer", [])
    group.add(member("a", "range"))
    group.add(member("b", "range"))
    assert group.leader_id == "a"
    group.remove("a")
    assert group.leader_id == "b"
    assert group.protocol_type == "consumer"


def test_join_callbacks_are_counted_and_answered_once() -> None:
    group = Group("g")
    answers: list[JoinResult] = []
    a = member("a", "range")
    group.add(a, answers.append)
    group.add(member("b", "range"))
    assert group.num_awaiting_join == 1
    assert not group.has_all_members_joined()
    assert [m.member_id for m in group.not_yet_rejoined()] == ["b"]
    assert group.invoke_join(a, JoinResult(ErrorCode.NONE, "a"))
    assert not group.invoke_join(a, JoinResult(ErrorCode.NONE, "a"))
    assert len(answers) == 1
    assert group.num_awaiting_join == 0


def test_replacing_a_static_member_fences_the_old_member_id() -> None:
    group = Group("g")
    old = member("old-id", "range", instance="i-1")
    joins: list[JoinResult] = []
    syncs: list[SyncResult] = []
    group.add(old, joins.append)
    old.sync_callback = syncs.append
    replaced = group.replace_static_member("i-1", "old-id", "new-id")
    assert replaced is old
    assert replaced.member_id == "new-id"
    assert group.static_member_id("i-1") == "new-id"
    assert group.leader_id == "new-id"
    assert not group.has("old-id")
    assert joins[0].error == ErrorCode.FENCED_INSTANCE_ID
    assert syncs[0].error == ErrorCode.FENCED_INSTANCE_ID


def test_next_generation_with_and_without_members() -> None:
    group = Group("g", state=S.PREPARING_REBALANCE)
    group.add(member("a", "range"), lambda _r: None)
    group.init_next_generation(now_ms=5)
    assert (group.state, group.generation_id, group.protocol_name) == (S.COMPLETING_REBALANCE, 1, "range")
    group.transition_to(S.PREPARING_REBALANCE)
    group.remove("a")
    group.init_next_generation(now_ms=9)
    assert (group.state, group.generation_id, group.protocol_name) == (S.EMPTY, 2, None)
    assert group.current_state_timestamp_ms == 9
