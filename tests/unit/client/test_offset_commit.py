"""``offset_commit_topics``: the ``topics`` of OffsetCommit and TxnOffsetCommit, built once."""

from __future__ import annotations

from pyspark_log.client.groups import OffsetAndMetadata
from pyspark_log.client.offset_commit import offset_commit_topics
from pyspark_log.client.types import TopicPartition


def test_plain_offsets_and_offsets_with_metadata_grouped_by_topic_in_first_seen_order() -> None:
    offsets = {
        TopicPartition("b", 1): 7,
        TopicPartition("a", 0): OffsetAndMetadata(3, "m", 5),
        TopicPartition("b", 0): OffsetAndMetadata(9),
    }
    assert offset_commit_topics(offsets) == [
        {
            "name": "b",
            "partitions": [
                {"partition_index": 1, "committed_offset": 7, "committed_leader_epoch": -1, "committed_metadata": ""},
                {"partition_index": 0, "committed_offset": 9, "committed_leader_epoch": -1, "committed_metadata": ""},
            ],
        },
        {
            "name": "a",
            "partitions": [
                {"partition_index": 0, "committed_offset": 3, "committed_leader_epoch": 5, "committed_metadata": "m"}
            ],
        },
    ]


def test_an_offset_that_is_int_like_is_taken_as_an_int() -> None:
    class Offset:
        def __int__(self) -> int:
            return 42

    [topic] = offset_commit_topics({TopicPartition("t", 0): Offset()})
    assert topic["partitions"][0]["committed_offset"] == 42
