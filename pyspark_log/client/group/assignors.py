"""Partition assignors: how a group's leader splits the subscribed partitions among members.

Pure functions of ``(partition counts per topic, member subscriptions)``; members are ordered by
``group.instance.id`` when set, else member id (as Kafka's assignors do), so every leader computes
the same assignment. Names are the protocol names Kafka and librdkafka use, so a group mixing
clients agrees on one:

* ``range`` — per topic, consecutive ranges: the first ``n % m`` members get one extra;
* ``roundrobin`` — every subscribed partition (sorted by topic, partition) dealt in turn to the
  members subscribed to its topic;
* ``cooperative-sticky`` — a balanced assignment (counts differ by at most one among members
  with the same subscriptions) that keeps each member's owned partitions where it can; under
  the cooperative protocol (KIP-429) a partition that changes owner is left out of this
  generation so its old owner revokes it first, and a follow-up rebalance assigns it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from pyspark_log.client.types import TopicPartition

EAGER, COOPERATIVE = "eager", "cooperative"


@dataclass(frozen=True)
class MemberSubscription:
    """What a member's JoinGroup metadata says (``pyspark_log.wire.consumer_protocol``)."""

    member_id: str
    topics: tuple[str, ...]
    group_instance_id: str | None = None
    owned: tuple[TopicPartition, ...] = ()
    generation: int = -1

    @property
    def sort_key(self) -> tuple[str, str]:
        return (self.group_instance_id or self.member_id, self.member_id)


@dataclass
class Assignor(ABC):
    """Base: ``assign`` returns every member's partitions (members with none included)."""

    name: str = ""
    protocols: tuple[str, ...] = field(default=(EAGER,))

    @abstractmethod
    def assign(
        self, partitions: Mapping[str, int], members: Mapping[str, MemberSubscription]
    ) -> dict[str, list[TopicPartition]]: ...


def _ordered(members: Mapping[str, MemberSubscription]) -> list[MemberSubscription]:
    return sorted(members.values(), key=lambda m: m.sort_key)


class RangeAssignor(Assignor):
    def __init__(self) -> None:
        super().__init__("range", (EAGER,))

    def assign(
        self, partitions: Mapping[str, int], members: Mapping[str, MemberSubscription]
    ) -> dict[str, list[TopicPartition]]:
        out: dict[str, list[TopicPartition]] = {m: [] for m in members}
        for topic in sorted({t for m in members.values() for t in m.topics}):
            count = partitions.get(topic, 0)
            subscribed = [m for m in _ordered(members) if topic in m.topics]
            if not count or not subscribed:
                continue
            each, extra = divmod(count, len(subscribed))
            for i, member in enumerate(subscribed):
                start = each * i + min(i, extra)
                length = each + (1 if i < extra else 0)
                out[member.member_id].extend(TopicPartition(topic, p) for p in range(start, start + length))
        return out


class RoundRobinAssignor(Assignor):
    def __init__(self) -> None:
        super().__init__("roundrobin", (EAGER,))

    def assign(
        self, partitions: Mapping[str, int], members: Mapping[str, MemberSubscription]
    ) -> dict[str, list[TopicPartition]]:
        out: dict[str, list[TopicPartition]] = {m: [] for m in members}
        ordered = _ordered(members)
        if not ordered:
            return out
        topics = sorted({t for m in ordered for t in m.topics})
        turn = 0
        for topic in topics:
            for p in range(partitions.get(topic, 0)):
                for _ in range(len(ordered)):
                    member = ordered[turn % len(ordered)]
                    turn += 1
                    if topic in member.topics:
                        out[member.member_id].append(TopicPartition(topic, p))
                        break
        return out


class CooperativeStickyAssignor(Assignor):
    def __init__(self) -> None:
        super().__init__("cooperative-sticky", (COOPERATIVE, EAGER))

    def assign(
        self, partitions: Mapping[str, int], members: Mapping[str, MemberSubscription]
    ) -> dict[str, list[TopicPartition]]:
        ordered = _ordered(members)
        order = {m.member_id: i for i, m in enumerate(ordered)}
        all_parts = [TopicPartition(t, p) for t in sorted(partitions) for p in range(partitions[t])]
        eligible = {tp: [m.member_id for m in ordered if tp.topic in m.topics] for tp in all_parts}
        previous = _previous_owners(ordered)
        current: dict[str, list[TopicPartition]] = {m.member_id: [] for m in ordered}
        owner: dict[TopicPartition, str] = {}
        for tp in all_parts:  # keep what members own and may still read
            prev = previous.get(tp)
            if prev is not None and prev in current and prev in eligible[tp]:
                current[prev].append(tp)
                owner[tp] = prev
        for tp in all_parts:  # give the rest to the least loaded eligible member
            if tp not in owner and eligible[tp]:
                best = min(eligible[tp], key=lambda m: (len(current[m]), order[m]))
                current[best].append(tp)
                owner[tp] = best
        self._balance(current, owner, eligible, order)
        result = {m: sorted(tps) for m, tps in current.items()}
        # KIP-429: a partition moving between members is not handed out until its owner revoked it.
        for member_id, tps in result.items():
            result[member_id] = [tp for tp in tps if previous.get(tp) in (None, member_id)]
        return result

    @staticmethod
    def _balance(
        current: dict[str, list[TopicPartition]],
        owner: dict[TopicPartition, str],
        eligible: Mapping[TopicPartition, list[str]],
        order: Mapping[str, int],
    ) -> None:
        """Move partitions from the most to the least loaded eligible member until no move
        narrows the gap (bounded: each move lowers the sum of squared loads)."""
        moved = True
        while moved:
            moved = False
            for tp in sorted(owner, key=lambda t: (-len(current[owner[t]]), t)):
                src = owner[tp]
                dst = min(eligible[tp], key=lambda m: (len(current[m]), order[m]))
                if len(current[dst]) + 1 < len(current[src]):
                    current[src].remove(tp)
                    current[dst].append(tp)
                    owner[tp] = dst
                    moved = True
                    break


def _previous_owners(members: Iterable[MemberSubscription]) -> dict[TopicPartition, str]:
    """Who owned each partition; a partition claimed twice goes to the newer generation."""
    owners: dict[TopicPartition, tuple[int, str]] = {}
    for m in members:
        for tp in m.owned:
            known = owners.get(tp)
            if known is None or m.generation > known[0]:
                owners[tp] = (m.generation, m.member_id)
    return {tp: member for tp, (_, member) in owners.items()}


ASSIGNORS: dict[str, Callable[[], Assignor]] = {
    "range": RangeAssignor,
    "roundrobin": RoundRobinAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
}
_JAVA_NAMES = {
    "RangeAssignor": "range",
    "RoundRobinAssignor": "roundrobin",
    "CooperativeStickyAssignor": "cooperative-sticky",
}


def assignors_from_config(names: Iterable[str]) -> list[Assignor]:
    """``partition.assignment.strategy``: protocol names (``range``) or Java class names
    (``org.apache.kafka.clients.consumer.RangeAssignor``), in preference order."""
    out: list[Assignor] = []
    for raw in names:
        name = raw.strip()
        name = _JAVA_NAMES.get(name.rsplit(".", 1)[-1], name)
        cls = ASSIGNORS.get(name.lower())
        if cls is None:
            raise ValueError(f"unknown partition.assignment.strategy {raw!r} (use {', '.join(ASSIGNORS)})")
        assignor = cls()
        if all(a.name != assignor.name for a in out):
            out.append(assignor)
    if not out:
        raise ValueError("partition.assignment.strategy names no assignor")
    return out


def rebalance_protocol(assignors: Iterable[Assignor]) -> str:
    """COOPERATIVE only if every configured assignor supports it (as Kafka's consumer decides)."""
    return COOPERATIVE if all(COOPERATIVE in a.protocols for a in assignors) else EAGER
