"""KIP-848 server-side assignors: ``uniform`` and ``range`` (``group.consumer.assignors``).

Pure functions: no clock, no I/O, deterministic for the same input (members are taken in member-id
order, partitions in (topic, partition) order). An assignment maps member id -> topic name ->
partitions. Each assignor takes

* ``members``: member id -> the topic names it subscribes to (regexes already resolved),
* ``partitions``: topic name -> partition count, for the subscribed topics that exist,
* ``current``: the current target assignment (member id -> topic -> partitions), used for stickiness,

and returns a new target assignment in which every partition of every subscribed topic goes to
exactly one member that subscribes to its topic (when any does).

``uniform`` (Kafka's ``UniformAssignor``): balanced by partition count across the whole group
(the counts of members with the same subscription differ by at most one), sticky: a member keeps
the partitions it had while that stays balanced. ``range`` (Kafka's ``RangeAssignor``): per topic,
the subscribed members in member-id order get contiguous ranges; the first ``count % members``
get one more. Both are server-side assignors of KIP-848 ("Assignors").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

Assignment = dict[str, dict[str, frozenset[int]]]  # member id -> topic -> partitions
TopicPartition = tuple[str, int]


def uniform(
    members: Mapping[str, frozenset[str]],
    partitions: Mapping[str, int],
    current: Mapping[str, Mapping[str, frozenset[int]]],
) -> Assignment:
    """Balanced and sticky: keep what is still valid, hand out the rest to the least loaded
    eligible member, then move partitions from the most to the least loaded eligible member
    until no member has two more than another member that could take one of its partitions."""
    order = sorted(members)
    owned: dict[str, list[TopicPartition]] = {m: [] for m in order}
    taken: set[TopicPartition] = set()
    for member in order:
        for topic, parts in sorted(current.get(member, {}).items()):
            if topic not in members[member] or topic not in partitions:
                continue
            for p in sorted(parts):
                if p < partitions[topic] and (topic, p) not in taken:
                    taken.add((topic, p))
                    owned[member].append((topic, p))
    # members with the same subscription have equal quotas: trim what stickiness kept above it
    by_subscription: dict[frozenset[str], list[str]] = {}
    for member in order:
        by_subscription.setdefault(members[member], []).append(member)
    homogeneous = len(by_subscription) == 1
    if homogeneous and order:
        total = sum(partitions.get(t, 0) for t in members[order[0]])
        base, extra = divmod(total, len(order))
        # the members holding the most keep the +1 slots (fewest moves)
        ranked = sorted(order, key=lambda m: (-len(owned[m]), m))
        for rank, member in enumerate(ranked):
            quota = base + (1 if rank < extra else 0)
            while len(owned[member]) > quota:
                taken.discard(owned[member].pop())
    eligible: dict[str, list[str]] = {}
    for topic in sorted(partitions):
        eligible[topic] = [m for m in order if topic in members[m]]
    for topic in sorted(partitions):
        candidates = eligible[topic]
        if not candidates:
            continue
        for p in range(partitions[topic]):
            if (topic, p) in taken:
                continue
            target = min(candidates, key=lambda m: (len(owned[m]), m))
            owned[target].append((topic, p))
            taken.add((topic, p))
    _balance(order, owned, lambda member, tp: tp[0] in members[member])
    return _as_assignment(owned)


def _balance(
    order: list[str], owned: dict[str, list[TopicPartition]], can_take: Callable[[str, TopicPartition], bool]
) -> None:
    """Move one partition at a time from a heavier to a lighter member that may take it, while
    some pair differs by two or more (each move lowers the sum of squared loads: it ends)."""
    moved = True
    while moved:
        moved = False
        for heavy in sorted(order, key=lambda m: (-len(owned[m]), m)):
            for light in sorted(order, key=lambda m: (len(owned[m]), m)):
                if len(owned[heavy]) - len(owned[light]) < 2:
                    break
                movable = [tp for tp in owned[heavy] if can_take(light, tp)]
                if movable:
                    tp = movable[-1]
                    owned[heavy].remove(tp)
                    owned[light].append(tp)
                    moved = True
                    break
            if moved:
                break


def range_(
    members: Mapping[str, frozenset[str]],
    partitions: Mapping[str, int],
    current: Mapping[str, Mapping[str, frozenset[int]]],
) -> Assignment:
    """Per topic, contiguous ranges to the subscribed members in member-id order."""
    owned: dict[str, list[TopicPartition]] = {m: [] for m in sorted(members)}
    for topic in sorted(partitions):
        subscribers = sorted(m for m in members if topic in members[m])
        if not subscribers:
            continue
        base, extra = divmod(partitions[topic], len(subscribers))
        start = 0
        for i, member in enumerate(subscribers):
            size = base + (1 if i < extra else 0)
            owned[member].extend((topic, p) for p in range(start, start + size))
            start += size
    return _as_assignment(owned)


def _as_assignment(owned: Mapping[str, list[TopicPartition]]) -> Assignment:
    out: Assignment = {}
    for member, tps in owned.items():
        by_topic: dict[str, set[int]] = {}
        for topic, p in tps:
            by_topic.setdefault(topic, set()).add(p)
        out[member] = {t: frozenset(ps) for t, ps in by_topic.items()}
    return out


AssignorFn = Callable[
    [Mapping[str, frozenset[str]], Mapping[str, int], Mapping[str, Mapping[str, frozenset[int]]]], Assignment
]
ASSIGNORS: dict[str, AssignorFn] = {"uniform": uniform, "range": range_}
# Kafka's class names, accepted in group.consumer.assignors as well as the short names
CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}
