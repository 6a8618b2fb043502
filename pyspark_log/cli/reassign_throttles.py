"""The replication throttles of ``pylog reassign-partitions --throttle`` (KIP-73), as
kafka-reassign-partitions sets and clears them (Kafka documentation §6 "Limiting Bandwidth Usage
during Data Migration").

``--execute --throttle R`` (bytes/s), before the moves start:

* each topic with a moving partition gets ``leader.replication.throttled.replicas`` = every
  ``partition:broker`` of the moving partitions' **current** replicas (the brokers that may send)
  and ``follower.replication.throttled.replicas`` = every ``partition:broker`` of their **new**
  replicas (target minus current: the brokers that receive);
* every broker among the current and new replicas gets ``leader.replication.throttled.rate`` and
  ``follower.replication.throttled.rate`` = R (dynamic broker configs, KIP-226).

``--verify`` clears them once no partition of the file is still moving: the two rates on every
broker of the cluster and the two lists on the file's topics (unless ``--preserve-throttles``).
The broker side is ``broker.quota.replication``. The decisions here are pure; the caller talks
to the cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from pyspark_log.client import TopicPartition

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
LOG_DIR_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
BROKER_RATE_KEYS = (LEADER_RATE, FOLLOWER_RATE)

VERIFY_WARNING = (
    "Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle is removed."
)

Assignment = Mapping[TopicPartition, Sequence[int]]


def moving(current: Assignment, plan: Assignment) -> dict[TopicPartition, tuple[list[int], list[int]]]:
    """The partitions whose replica set changes: ``(current replicas, new replicas)`` each."""
    moves = {}
    for tp, target in plan.items():
        now = list(current.get(tp, ()))
        if list(target) != now:
            moves[tp] = (now, [b for b in target if b not in now])
    return moves


def topic_throttles(moves: Mapping[TopicPartition, tuple[list[int], list[int]]]) -> dict[str, dict[str, str]]:
    """Per topic, the two throttled-replicas values (``partition:broker`` lists)."""
    leaders: dict[str, list[str]] = {}
    followers: dict[str, list[str]] = {}
    for tp, (sources, targets) in sorted(moves.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        leaders.setdefault(tp.topic, []).extend(f"{tp.partition}:{b}" for b in sources)
        followers.setdefault(tp.topic, []).extend(f"{tp.partition}:{b}" for b in targets)
    return {
        topic: {LEADER_REPLICAS: ",".join(leaders[topic]), FOLLOWER_REPLICAS: ",".join(followers.get(topic, []))}
        for topic in leaders
    }


def reassigning_brokers(moves: Mapping[TopicPartition, tuple[list[int], list[int]]]) -> list[int]:
    """Every broker that sends or receives a moving replica."""
    return sorted({b for sources, targets in moves.values() for b in (*sources, *targets)})


def throttle_set_line(rate: int) -> str:
    return f"The inter-broker throttle limit was set to {rate} B/s"


def clearing_lines(brokers: Iterable[int], topics: Iterable[str]) -> list[str]:
    """What ``--verify`` prints when it removes the throttles."""
    names = sorted(set(topics))
    return [
        f"Clearing broker-level throttles on brokers {','.join(str(b) for b in sorted(set(brokers)))}",
        f"Clearing topic-level throttles on topic{'s' if len(names) > 1 else ''} {','.join(names)}",
    ]
