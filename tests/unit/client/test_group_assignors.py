"""Partition assignors (range, roundrobin, cooperative-sticky) and the member's state machine."""

from __future__ import annotations

import itertools

import pytest

from pyspark_log.client.group.assignors import (
    COOPERATIVE,
    EAGER,
    CooperativeStickyAssignor,
    MemberSubscription,
    RangeAssignor,
    RoundRobinAssignor,
    assignors_from_config,
    rebalance_protocol,
)
from pyspark_log.client.group.state import IllegalMemberTransition, Membership, MemberState
from pyspark_log.client.types import TopicPartition


def tps(topic: str, *parts: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in parts]


def members(*specs: tuple[str, tuple[str, ...]]) -> dict[str, MemberSubscription]:
    return {mid: MemberSubscription(mid, topics) for mid, topics in specs}


def test_range_gives_consecutive_ranges_per_topic_and_extras_to_the_first() -> None:
    subs = members(("c0", ("t", "u")), ("c1", ("t", "u")), ("c2", ("t",)))
    result = RangeAssignor().assign({"t": 7, "u": 3}, subs)
    assert result == {
        "c0": tps("t", 0, 1, 2) + tps("u", 0, 1),
        "c1": tps("t", 3, 4) + tps("u", 2),
        "c2": tps("t", 5, 6),
    }


def test_range_orders_members_by_group_instance_id_when_set() -> None:
    subs = {
        "a": MemberSubscription("a", ("t",), group_instance_id="z"),
        "b": MemberSubscription("b", ("t",), group_instance_id="y"),
    }
    assert RangeAssignor().assign({"t": 2}, subs) == {"b": tps("t", 0), "a": tps("t", 1)}


def test_roundrobin_deals_partitions_to_subscribed_members() -> None:
    subs = members(("c0", ("t", "u")), ("c1", ("t",)))
    result = RoundRobinAssignor().assign({"t": 3, "u": 2}, subs)
    assert result == {"c0": tps("t", 0, 2) + tps("u", 0, 1), "c1": tps("t", 1)}


def test_every_assignor_covers_each_partition_once() -> None:
    subs = members(*((f"c{i}", ("a", "b")) for i in range(3)))
    for assignor in (RangeAssignor(), RoundRobinAssignor(), CooperativeStickyAssignor()):
        result = assignor.assign({"a": 5, "b": 4}, subs)
        flat = list(itertools.chain.from_iterable(result.values()))
        assert sorted(flat) == sorted(tps("a", *range(5)) + tps("b", *range(4)))
        if not isinstance(assignor, RangeAssignor):  # range balances per topic only
            assert max(map(len, result.values())) - min(map(len, result.values())) <= 1


def test_cooperative_sticky_keeps_owned_partitions_and_defers_moves() -> None:
    """KIP-429: the new member gets nothing its peer still owns this round; the owner keeps a
    balanced share and revokes the rest, then the next round hands those out."""
    assignor = CooperativeStickyAssignor()
    all_six = tuple(tps("t", *range(6)))
    first = {
        "a": MemberSubscription("a", ("t",), owned=all_six, generation=1),
        "b": MemberSubscription("b", ("t",)),
    }
    round1 = assignor.assign({"t": 6}, first)
    assert len(round1["a"]) == 3
    assert set(round1["a"]) < set(all_six)
    assert round1["b"] == []
    second = {
        "a": MemberSubscription("a", ("t",), owned=tuple(round1["a"]), generation=2),
        "b": MemberSubscription("b", ("t",), generation=2),
    }
    round2 = assignor.assign({"t": 6}, second)
    assert round2["a"] == round1["a"]
    assert sorted(round2["b"]) == sorted(set(all_six) - set(round1["a"]))


def test_cooperative_sticky_resolves_double_claims_by_generation() -> None:
    subs = {
        "old": MemberSubscription("old", ("t",), owned=tuple(tps("t", 0)), generation=1),
        "new": MemberSubscription("new", ("t",), owned=tuple(tps("t", 0)), generation=2),
    }
    result = CooperativeStickyAssignor().assign({"t": 2}, subs)
    assert TopicPartition("t", 0) in result["new"]
    assert TopicPartition("t", 0) not in result["old"]


def test_assignors_from_config_accepts_kafka_and_java_names() -> None:
    names = [a.name for a in assignors_from_config(["org.apache.kafka.clients.consumer.RangeAssignor", "roundrobin"])]
    assert names == ["range", "roundrobin"]
    assert rebalance_protocol(assignors_from_config(["range", "cooperative-sticky"])) == EAGER
    assert rebalance_protocol(assignors_from_config(["cooperative-sticky"])) == COOPERATIVE
    with pytest.raises(ValueError, match="unknown"):
        assignors_from_config(["sticky-ish"])


M = MemberState
ALLOWED = {
    (M.UNJOINED, M.UNJOINED),
    (M.UNJOINED, M.PREPARING_REBALANCE),
    (M.PREPARING_REBALANCE, M.UNJOINED),
    (M.PREPARING_REBALANCE, M.PREPARING_REBALANCE),
    (M.PREPARING_REBALANCE, M.COMPLETING_REBALANCE),
    (M.COMPLETING_REBALANCE, M.UNJOINED),
    (M.COMPLETING_REBALANCE, M.PREPARING_REBALANCE),
    (M.COMPLETING_REBALANCE, M.STABLE),
    (M.STABLE, M.UNJOINED),
    (M.STABLE, M.PREPARING_REBALANCE),
}


@pytest.mark.parametrize(("source", "target"), sorted(itertools.product(M, M), key=str))
def test_member_state_transitions(source: MemberState, target: MemberState) -> None:
    m = Membership(state=source)
    if (source, target) in ALLOWED:
        m.transition_to(target)
        assert m.state is target
    else:
        with pytest.raises(IllegalMemberTransition):
            m.transition_to(target)


def test_membership_join_and_reset() -> None:
    m = Membership()
    m.transition_to(M.PREPARING_REBALANCE)
    m.join_answered(4, "member-1", "range", "member-1")
    assert m.has_generation
    m.transition_to(M.STABLE)
    m.reset(keep_member_id=True)
    assert (m.state, m.generation_id, m.member_id) == (M.UNJOINED, -1, "member-1")
    m.reset()
    assert m.member_id == ""
