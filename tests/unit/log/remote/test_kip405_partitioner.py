"""``__remote_log_metadata`` partitioning is Kafka's ``RemoteLogMetadataTopicPartitioner``:
golden values printed by Kafka 4.1.1's own class (50 partitions) and ``Utils.murmur2``."""

from __future__ import annotations

import base64
import uuid

import pytest

from broker.log.remote.partitioner import metadata_partition
from pyspark_log.records.murmur2 import murmur2

# (topic id as Kafka prints it, partition) -> Kafka 4.1.1's metadataPartition with 50 partitions
GOLDEN = {
    ("AAAAAAAAAAAAAAAAAAAAAQ", 0): 35, ("AAAAAAAAAAAAAAAAAAAAAQ", 1): 6,
    ("AAAAAAAAAAAAAAAAAAAAAQ", 2): 18, ("AAAAAAAAAAAAAAAAAAAAAQ", 3): 29,
    ("x1Yz0hLjRkK8m5fYq2b7Ag", 0): 48, ("x1Yz0hLjRkK8m5fYq2b7Ag", 1): 37,
    ("x1Yz0hLjRkK8m5fYq2b7Ag", 2): 27, ("x1Yz0hLjRkK8m5fYq2b7Ag", 3): 36,
    ("_____________________w", 0): 6, ("_____________________w", 1): 30,
    ("_____________________w", 2): 28, ("_____________________w", 3): 46,
}  # fmt: skip


def _uuid(kafka_text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(kafka_text + "=="))


@pytest.mark.parametrize(("key", "expected"), sorted(GOLDEN.items()))
def test_metadata_partition_matches_kafka(key: tuple[str, int], expected: int) -> None:
    assert metadata_partition(_uuid(key[0]), key[1], 50) == expected


def test_murmur2_matches_kafka() -> None:
    assert murmur2(b"hello") & 0x7FFFFFFF == 2132663229
