"""Control batches (Kafka documentation §5.3.1 "Record Batch" "Control Batches"): "a single record called a
control record",
key "version: int16 (0), type: int16 (0 abort, 1 commit)", plus the KRaft control records of
KIP-595 (LeaderChangeMessage) and KIP-853 whose value layouts follow Kafka's message JSON."""

from __future__ import annotations

import warnings

import pytest

from pyspark_log.records.batch import decode_records
from pyspark_log.records.control import (
    ControlRecord,
    ControlType,
    Endpoint,
    EndTxnMarker,
    KRaftVersion,
    LeaderChange,
    SnapshotFooter,
    SnapshotHeader,
    Voter,
    Voters,
    decode_control_batch,
    decode_control_key,
    decode_control_value,
    encode_control_batch,
    encode_control_key,
    encode_control_value,
    first_control_type,
    is_abort_key,
)
from pyspark_log.records.errors import CorruptRecordError
from pyspark_log.records.header import HEADER_SIZE, read_header

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch as KafkaPythonBatch

TS = 1_700_000_000_000


def test_control_type_numbers_follow_kafka() -> None:
    assert [t.value for t in ControlType] == [0, 1, 2, 3, 4, 5, 6]
    assert ControlType.ABORT == 0
    assert ControlType.COMMIT == 1
    assert ControlType.LEADER_CHANGE == 2


@pytest.mark.parametrize(("kind", "key"), [(ControlType.ABORT, "00000000"), (ControlType.COMMIT, "00000001")])
def test_end_txn_marker_batch_golden(kind: ControlType, key: str) -> None:
    buf = encode_control_batch(kind, 4242, 7, 13, TS, base_offset=99)
    header, (record,) = decode_records(buf)
    assert header.is_control
    assert header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4242, 7, -1)
    assert (header.base_offset, header.records_count) == (99, 1)
    assert record.key == bytes.fromhex(key)
    assert record.value == bytes.fromhex("00000000000d")  # version 0, coordinatorEpoch 13
    assert record.timestamp == TS
    _, (control,) = decode_control_batch(buf)
    assert control == ControlRecord(99, TS, kind, EndTxnMarker(kind, 13))
    assert first_control_type(buf, 0, header) == kind
    assert is_abort_key(record.key) is (kind == ControlType.ABORT)


@pytest.mark.parametrize("kind", [ControlType.ABORT, ControlType.COMMIT])
def test_kafka_python_sees_our_markers(kind: ControlType) -> None:
    batch = KafkaPythonBatch(encode_control_batch(kind, 1, 0, 5, TS))
    assert batch.validate_crc()
    assert batch.is_control_batch
    assert batch.is_transactional
    (record,) = list(batch)
    assert (record.version, record.type) == (0, kind)


def test_leader_change_golden_bytes() -> None:
    message = LeaderChange(leader_id=1, voters=(1, 2, 3), granting_voters=(1, 2))
    golden = bytes.fromhex(
        "0000"  # Version
        "00000001"  # LeaderId
        "04"
        "0000000100"
        "0000000200"
        "0000000300"  # Voters: compact length 3 + 1, VoterId + no tags
        "03"
        "0000000100"
        "0000000200"  # GrantingVoters
        "00"  # no tagged fields
    )
    assert encode_control_value(message) == golden
    assert decode_control_value(ControlType.LEADER_CHANGE, golden) == message


def test_leader_change_batch_is_not_transactional() -> None:
    message = LeaderChange(3, (1, 2, 3), (3,))
    buf = encode_control_batch(ControlType.LEADER_CHANGE, -1, -1, 0, TS, base_offset=7, message=message)
    header = read_header(buf)
    assert header.is_control
    assert not header.is_transactional
    assert header.producer_id == -1
    _, (record,) = decode_control_batch(buf)
    assert record == ControlRecord(7, TS, ControlType.LEADER_CHANGE, message)
    assert first_control_type(buf, 0, header) == ControlType.LEADER_CHANGE


def test_unknown_tagged_fields_are_skipped() -> None:
    golden = bytes.fromhex("0000000000050101010502aabb")
    assert decode_control_value(ControlType.LEADER_CHANGE, golden) == LeaderChange(5, (), ())


VOTERS = Voters(
    (
        Voter(1, bytes(range(16)), (Endpoint("CONTROLLER", "localhost", 9093),), 0, 1),
        Voter(2, b"\xff" * 16, (), 0, 0),
    )
)


def test_voters_golden_bytes() -> None:
    golden = bytes.fromhex(
        "0000"  # Version
        "03"  # two voters
        "00000001" + bytes(range(16)).hex() + "02"  # VoterId, VoterDirectoryId, one endpoint
        "0b" + b"CONTROLLER".hex() + "0a" + b"localhost".hex() + "2385" + "00"  # Name, Host, Port 9093
        "0000"
        "0001"
        "00"  # KRaftVersionFeature min 0 max 1, no tags
        "00"  # voter tags
        "00000002" + "ff" * 16 + "01" + "0000"
        "0000"
        "00"
        "00"
        "00"  # top-level tags
    )
    assert encode_control_value(VOTERS) == golden
    assert decode_control_value(ControlType.KRAFT_VOTERS, golden) == VOTERS


@pytest.mark.parametrize(
    ("kind", "message", "golden"),
    [
        (ControlType.SNAPSHOT_HEADER, SnapshotHeader(TS), "00000000018bcfe5680000"),
        (ControlType.SNAPSHOT_FOOTER, SnapshotFooter(), "000000"),
        (ControlType.KRAFT_VERSION, KRaftVersion(1), "0000000100"),
    ],
)
def test_kraft_records_golden(kind: ControlType, message: object, golden: str) -> None:
    assert encode_control_value(message) == bytes.fromhex(golden)  # type: ignore[arg-type]
    assert decode_control_value(kind, bytes.fromhex(golden)) == message
    buf = encode_control_batch(kind, -1, -1, 0, TS, message=message)  # type: ignore[arg-type]
    assert decode_control_batch(buf)[1][0].message == message


def test_key_parsing() -> None:
    assert encode_control_key(ControlType.COMMIT) == b"\x00\x00\x00\x01"
    assert decode_control_key(b"\x00\x00\x00\x06") == ControlType.KRAFT_VOTERS
    assert decode_control_key(b"\x00\x03\x00\x01extra") == ControlType.COMMIT  # newer key version
    with pytest.raises(CorruptRecordError, match="version"):
        decode_control_key(b"\xff\xff\x00\x01")
    for bad in (None, b"", b"\x00\x00\x00"):
        with pytest.raises(CorruptRecordError):
            decode_control_key(bad)


def test_unknown_control_type_is_kept_not_rejected() -> None:
    assert decode_control_value(42, b"whatever") is None


def test_end_txn_marker_value_errors() -> None:
    with pytest.raises(CorruptRecordError, match="6"):
        decode_control_value(ControlType.COMMIT, b"\x00\x00\x00")
    with pytest.raises(CorruptRecordError, match="version"):
        decode_control_value(ControlType.ABORT, b"\xff\xff\x00\x00\x00\x01")
    assert decode_control_value(ControlType.ABORT, b"\x00\x01\x00\x00\x00\x02extra") == EndTxnMarker(
        ControlType.ABORT, 2, 1
    )
    with pytest.raises(CorruptRecordError, match="null"):
        decode_control_value(ControlType.ABORT, None)


@pytest.mark.parametrize("kind", [ControlType.LEADER_CHANGE, ControlType.KRAFT_VOTERS, ControlType.SNAPSHOT_HEADER])
def test_truncated_kraft_values(kind: ControlType) -> None:
    message = {
        ControlType.LEADER_CHANGE: LeaderChange(1, (1, 2), (1,)),
        ControlType.KRAFT_VOTERS: VOTERS,
        ControlType.SNAPSHOT_HEADER: SnapshotHeader(5),
    }[kind]
    value = encode_control_value(message)
    for cut in range(len(value)):
        with pytest.raises(CorruptRecordError):
            decode_control_value(kind, value[:cut])
    with pytest.raises(CorruptRecordError, match="unexpected bytes"):
        decode_control_value(kind, value + b"\x00")


def test_encode_errors() -> None:
    with pytest.raises(ValueError, match="matching message"):
        encode_control_batch(ControlType.LEADER_CHANGE, -1, -1, 0, TS)
    with pytest.raises(ValueError, match="matching message"):
        encode_control_batch(ControlType.SNAPSHOT_FOOTER, -1, -1, 0, TS, message=SnapshotHeader(1))
    with pytest.raises(ValueError, match="ABORT or COMMIT"):
        encode_control_value(EndTxnMarker(ControlType.LEADER_CHANGE, 1))
    with pytest.raises(ValueError, match="16 bytes"):
        encode_control_value(Voters((Voter(1, b"short", (), 0, 0),)))


def test_decode_control_batch_rejects_data_batches() -> None:
    from pyspark_log.records.batch import ProducerRecord, encode_batch

    buf = encode_batch([ProducerRecord(b"\x00\x00\x00\x00", b"x", TS)])
    with pytest.raises(CorruptRecordError, match="not a control batch"):
        decode_control_batch(buf)
    assert first_control_type(buf, 0, read_header(buf)) is None


def test_first_control_type_of_a_compressed_control_batch() -> None:
    from pyspark_log.records.batch import ProducerRecord, encode_batch

    buf = encode_batch(
        [
            ProducerRecord(
                encode_control_key(ControlType.ABORT), encode_control_value(EndTxnMarker(ControlType.ABORT, 1)), TS
            )
        ],
        codec=1,
        control=True,
        transactional=True,
        producer_id=1,
        producer_epoch=0,
    )
    assert first_control_type(buf, 0, read_header(buf)) == ControlType.ABORT
    assert len(buf) > HEADER_SIZE
