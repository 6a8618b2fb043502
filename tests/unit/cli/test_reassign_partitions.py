"""``pylog reassign-partitions``' pure parts: kafka-reassign-partitions' JSON files, its
validation messages, and the --generate placement."""

from __future__ import annotations

import json

import pytest

from pyspark_log.cli.errors import UsageError
from pyspark_log.cli.reassign_partitions import assignment_json, parse_log_dirs, parse_reassignment, propose
from pyspark_log.client import TopicPartition


def test_reassignment_file_round_trips_in_kafkas_format():
    doc = {"version": 1, "partitions": [{"topic": "t", "partition": 1, "replicas": [3, 1], "log_dirs": ["any", "any"]},
                                        {"topic": "t", "partition": 0, "replicas": [2, 3]}]}  # fmt: skip
    plan = parse_reassignment(doc, "f")
    assert plan == {TopicPartition("t", 1): [3, 1], TopicPartition("t", 0): [2, 3]}
    text = assignment_json(plan)
    assert text == (
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3],"log_dirs":["any","any"]},'
        '{"topic":"t","partition":1,"replicas":[3,1],"log_dirs":["any","any"]}]}'
    )
    assert parse_reassignment(json.loads(text), "f") == plan


@pytest.mark.parametrize(
    ("partitions", "message"),
    [
        ([], "Partition reassignment list cannot be empty"),
        ([{"topic": "t", "partition": 0, "replicas": []}], "Partition replica list cannot be empty"),
        ([{"topic": "t", "partition": 0, "replicas": [1, 1]}], "may not contain duplicate entries"),
        ([{"topic": "t", "partition": 0, "replicas": [1]}] * 2, "contains duplicate topic partitions: t-0"),
        ([{"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["/d"]}], "one dir per replica"),
        ([{"topic": "t", "replicas": [1]}], "not a reassignment file"),
    ],
)
def test_bad_files_are_usage_errors(partitions, message):
    with pytest.raises(UsageError, match=message):
        parse_reassignment({"version": 1, "partitions": partitions}, "f")


def test_log_dirs_name_the_replicas_to_move():
    doc = {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["/mnt/b", "any"]},
        {"topic": "t", "partition": 1, "replicas": [2, 3]},
    ]}  # fmt: skip
    assert parse_log_dirs(doc) == {("t", 0, 1): "/mnt/b"}
    doc["partitions"][0]["log_dirs"] = ["relative/dir", "any"]
    with pytest.raises(UsageError, match="absolute path"):
        parse_log_dirs(doc)


def test_generate_places_each_partition_round_robin_on_the_broker_list():
    current = {TopicPartition("t", p): [1, 2, 3] for p in range(4)}
    proposed = propose(current, [4, 5, 6])
    assert proposed == {
        TopicPartition("t", 0): [4, 5, 6],
        TopicPartition("t", 1): [5, 6, 4],
        TopicPartition("t", 2): [6, 4, 5],
        TopicPartition("t", 3): [4, 5, 6],
    }
    assert propose({TopicPartition("t", 0): [1, 2, 3]}, [7, 8]) == {TopicPartition("t", 0): [7, 8]}
