"""``pyspark_log.cli.reassign_throttles``: what ``--throttle`` sets and ``--verify`` prints, as
kafka-reassign-partitions does (Kafka documentation §6 "Limiting Bandwidth Usage during Data
Migration")."""

from __future__ import annotations

from pyspark_log.cli import reassign_throttles as throttles
from pyspark_log.client import TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_only_partitions_whose_replicas_change_move() -> None:
    current = {A0: [1, 2], A1: [2, 3], B0: [1]}
    plan = {A0: [1, 2], A1: [3, 4], B0: [2]}
    assert throttles.moving(current, plan) == {A1: ([2, 3], [4]), B0: ([1], [2])}


def test_leaders_are_the_current_replicas_and_followers_the_new_ones() -> None:
    moves = {A0: ([1, 2], [3]), A1: ([2, 3], [4, 1]), B0: ([1], [2])}
    assert throttles.topic_throttles(moves) == {
        "a": {throttles.LEADER_REPLICAS: "0:1,0:2,1:2,1:3", throttles.FOLLOWER_REPLICAS: "0:3,1:4,1:1"},
        "b": {throttles.LEADER_REPLICAS: "0:1", throttles.FOLLOWER_REPLICAS: "0:2"},
    }
    assert throttles.reassigning_brokers(moves) == [1, 2, 3, 4]


def test_lines_are_kafkas() -> None:
    assert throttles.throttle_set_line(50_000_000) == "The inter-broker throttle limit was set to 50000000 B/s"
    assert throttles.clearing_lines([3, 1, 2], ["t"]) == [
        "Clearing broker-level throttles on brokers 1,2,3",
        "Clearing topic-level throttles on topic t",
    ]
    assert throttles.clearing_lines([1], ["b", "a", "b"])[1] == "Clearing topic-level throttles on topics a,b"
