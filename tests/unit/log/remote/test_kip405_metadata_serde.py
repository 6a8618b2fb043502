"""``__remote_log_metadata`` values byte for byte as Kafka 4.1.1's ``RemoteLogMetadataSerde``
writes them. The golden hex was printed by Kafka's own serde (kafka-storage 4.1.1, a
RemoteLogSegmentMetadata with two leader epochs and an update to COPY_SEGMENT_FINISHED)."""

from __future__ import annotations

import uuid

import pytest

from broker.log.remote.metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from broker.log.remote.serde import UnsupportedRecordType, decode, encode

KAFKA_SEGMENT = bytes.fromhex(
    "010000076f72646572730102030405060708090a0b0c0d0e0f1000000003001112131415161718191a1b1c1d1e"
    "1f2000000000000000006400000000000000c7000000020000018bcfe5687b0000018bcfe569c8030000000000"
    "00000000000064000000000200000000000000960000001000000000"
)
KAFKA_UPDATE = bytes.fromhex(
    "010100076f72646572730102030405060708090a0b0c0d0e0f1000000003001112131415161718191a1b1c1d1e"
    "1f2000000000030000018bcfe56b15000100"
)
SID = RemoteLogSegmentId(
    TopicIdPartition(uuid.UUID("01020304-0506-0708-090a-0b0c0d0e0f10"), "orders", 3),
    uuid.UUID("11121314-1516-1718-191a-1b1c1d1e1f20"),
)
SEGMENT = RemoteLogSegmentMetadata(SID, 100, 199, 1700000000123, 2, 1700000000456, 4096, {0: 100, 2: 150})
UPDATE = RemoteLogSegmentMetadataUpdate(SID, 1700000000789, RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 3)


def test_segment_metadata_golden() -> None:
    assert encode(SEGMENT) == KAFKA_SEGMENT
    assert decode(KAFKA_SEGMENT) == SEGMENT


def test_update_golden() -> None:
    assert encode(UPDATE) == KAFKA_UPDATE
    assert decode(KAFKA_UPDATE) == UPDATE


def test_bad_input() -> None:
    with pytest.raises(UnsupportedRecordType):
        decode(b"\x01\x02\x00")
    with pytest.raises(ValueError, match="truncated"):
        decode(KAFKA_SEGMENT[:40])
