"""Metadata records as Raft entry payloads (``broker.metadata.records``): every kind round-trips,
one payload is one atomic operation, and anything else is refused with MetadataRecordError."""

from __future__ import annotations

import json
import uuid

import pytest

from broker.metadata.records import (
    ClusterIdRecord,
    ConfigRecord,
    FenceBrokerRecord,
    MetadataRecordError,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    decode_records,
    encode_records,
)

TOPIC_ID = uuid.UUID("3f2b8a4e-1c6d-4f0e-9a7b-2d5c8e1f0a93")

ALL_KINDS = [
    ClusterIdRecord("MkU3OEVBNTcwNTJENDM2Qg"),
    RegisterBrokerRecord(2, "inc-1", "127.0.0.1", 9093, rack="r1"),
    FenceBrokerRecord(2, 17),
    UnfenceBrokerRecord(2, 17),
    TopicRecord("orders", TOPIC_ID),
    PartitionRecord(TOPIC_ID, 3, (2,), (2,), 2, leader_epoch=4),
    ConfigRecord("orders", "retention.ms", "1000"),
    ConfigRecord("orders", "retention.ms", None),
    RemoveTopicRecord(TOPIC_ID),
]


def test_every_record_kind_round_trips_in_one_payload():
    assert decode_records(encode_records(ALL_KINDS)) == ALL_KINDS


def test_payload_layout_is_magic_version_then_sorted_json():
    payload = encode_records([TopicRecord("t", TOPIC_ID)])
    assert payload[:2] == b"M\x01"
    doc = json.loads(payload[2:])
    assert doc == {"records": [{"type": "TopicRecord", "name": "t", "topic_id": str(TOPIC_ID)}]}
    assert encode_records([TopicRecord("t", TOPIC_ID)]) == payload  # deterministic bytes


def test_an_empty_operation_is_a_valid_no_op_entry():
    assert decode_records(encode_records([])) == []


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"X\x01{}",
        b'M\x02{"records": []}',
        b"M\x01not json",
        b'M\x01{"records": 5}',
        b'M\x01{"records": [{"type": "NoSuchRecord"}]}',
        b'M\x01{"records": [{"type": "TopicRecord", "name": "t", "topic_id": "zz"}]}',
        b'M\x01{"records": [{"type": "FenceBrokerRecord", "broker_id": 1}]}',
        b"M\x01[1]",
    ],
)
def test_anything_else_is_refused(payload: bytes):
    with pytest.raises(MetadataRecordError):
        decode_records(payload)
