"""Which ``__remote_log_metadata`` partition holds a user partition's remote segment metadata:
Kafka's ``RemoteLogMetadataTopicPartitioner`` (KIP-405, "RemoteLogMetadataManager" over a
topic): ``toPositive(murmur2(int32be(Objects.hash(lsb, msb, partition)))) % partitions``,
with ``lsb``/``msb`` the topic id's halves as Java ``Long`` and ``Objects.hash`` Java's
``Arrays.hashCode``. Pure.
"""

from __future__ import annotations

import uuid

from pyspark_log.records.murmur2 import murmur2

_M32 = 0xFFFFFFFF


def _long_hash(value: int) -> int:
    """Java ``Long.hashCode`` of a 64-bit value (as unsigned bits), as 32 unsigned bits."""
    value &= 0xFFFFFFFFFFFFFFFF
    return (value ^ (value >> 32)) & _M32


def metadata_partition(topic_id: uuid.UUID, partition: int, num_partitions: int) -> int:
    """The ``__remote_log_metadata`` partition of ``(topic_id, partition)``."""
    msb, lsb = topic_id.int >> 64, topic_id.int & 0xFFFFFFFFFFFFFFFF
    h = 1
    for item in (_long_hash(lsb), _long_hash(msb), partition & _M32):
        h = (31 * h + item) & _M32
    return (murmur2(h.to_bytes(4, "big")) & 0x7FFFFFFF) % num_partitions
