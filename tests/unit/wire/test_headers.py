"""Request/response headers and whole frames, golden bytes built by hand from the protocol guide
("Headers", "ApiVersions API", "Metadata API") and KIP-482 / KIP-511."""

from __future__ import annotations

import pytest

from pyspark_log.wire import (
    ApiKey,
    DecodeError,
    ErrorCode,
    UnsupportedVersionError,
    decode_request,
    decode_request_header,
    decode_response,
    encode_api_versions_fallback,
    encode_request,
    encode_request_parts,
    encode_response,
    encode_response_parts,
    frame_chunks,
    peek_correlation_id,
)
from pyspark_log.wire.headers import request_header_version, response_header_version
from pyspark_log.wire.versions import SUPPORTED_VERSIONS


def _frame(hex_payload: str) -> bytes:
    payload = bytes.fromhex(hex_payload)
    return len(payload).to_bytes(4, "big") + payload


# ApiVersions v0 request: header v1 (key 18, version 0, correlation id 1, client id "test"), empty body
API_VERSIONS_V0 = "00120000000000010004" + b"test".hex()
# Metadata v1 request for topic "foo": header v1, body = int32 count 1, string "foo"
METADATA_V1 = "000300010000002a0004" + b"test".hex() + "000000010003" + b"foo".hex()
# ApiVersions v3 request: header v2 (tagged section), body = compact strings + empty tagged section
API_VERSIONS_V3 = (
    "0012" "0003" "00000007" "0004" + b"test".hex() + "00"
    "06" + b"pylog".hex() + "06" + b"0.1.0".hex() + "00"
)  # fmt: skip


def test_api_versions_v0_request_golden():
    frame = encode_request(ApiKey.API_VERSIONS, 0, 1, "test", {})
    assert frame == _frame(API_VERSIONS_V0)
    header, body = decode_request(frame[4:])
    assert header == (18, 0, 1, "test", 1)
    assert body == {"client_software_name": "", "client_software_version": ""}


def test_metadata_v1_request_golden():
    frame = encode_request(ApiKey.METADATA, 1, 42, "test", {"topics": [{"name": "foo"}]})
    assert frame == _frame(METADATA_V1)
    header, body = decode_request(frame[4:])
    assert (header.api_key, header.api_version, header.correlation_id) == (3, 1, 42)
    assert body.topics[0].name == "foo"
    assert body.allow_auto_topic_creation is True  # v4+ field: its declared default


def test_flexible_api_versions_v3_request_golden():
    body = {"client_software_name": "pylog", "client_software_version": "0.1.0"}
    frame = encode_request(ApiKey.API_VERSIONS, 3, 7, "test", body)
    assert frame == _frame(API_VERSIONS_V3)
    header, decoded = decode_request(frame[4:])
    assert header.header_version == 2
    assert header.client_id == "test"  # still an int16-length string in header v2
    assert decoded == body


def test_unknown_tagged_fields_in_header_and_body_are_skipped():
    payload = bytes.fromhex(
        "0012" "0003" "00000007" "0004" + b"test".hex()
        + "01" "05" "02" + b"hi".hex()  # header: one unknown tag 5 of 2 bytes
        + "06" + b"pylog".hex() + "06" + b"0.1.0".hex()
        + "02" "00" "01" "ff" "21" "00"  # body: unknown tags 0 (1 byte) and 33 (empty)
    )  # fmt: skip
    header, body = decode_request(payload)
    assert header.correlation_id == 7
    assert body.client_software_version == "0.1.0"


def test_null_client_id():
    frame = encode_request(ApiKey.API_VERSIONS, 0, 5, None, {})
    assert frame[4:] == bytes.fromhex("0012000000000005ffff")
    assert decode_request(frame[4:])[0].client_id is None


def test_header_versions_follow_first_flexible_version():
    assert request_header_version(ApiKey.FETCH, 11) == 1
    assert request_header_version(ApiKey.FETCH, 12) == 2
    assert response_header_version(ApiKey.FETCH, 11) == 0
    assert response_header_version(ApiKey.FETCH, 12) == 1
    assert request_header_version(ApiKey.API_VERSIONS, 3) == 2
    assert response_header_version(ApiKey.API_VERSIONS, 3) == 0  # KIP-511: always v0
    assert request_header_version(ApiKey.API_VERSIONS, 4) == 2  # above our max: still flexible
    assert request_header_version(ApiKey.OFFSET_DELETE, 0) == 1  # never flexible
    assert request_header_version(999, 0) == 1  # unknown API


def test_response_header_v0_and_v1_golden():
    v0 = encode_response(ApiKey.HEARTBEAT, 0, 9, {"error_code": 0})
    assert v0 == _frame("000000090000")
    v1 = encode_response(ApiKey.HEARTBEAT, 4, 9, {"error_code": 27})
    assert v1 == _frame("000000090000000000001b00")
    assert decode_response(ApiKey.HEARTBEAT, 4, v1[4:]) == (9, {"throttle_time_ms": 0, "error_code": 27})
    assert peek_correlation_id(v1[4:]) == 9


def test_api_versions_v3_response_uses_header_v0():
    frame = encode_response(
        ApiKey.API_VERSIONS, 3, 1, {"api_keys": [{"api_key": 18, "min_version": 0, "max_version": 3}]}
    )
    # correlation id, then straight into the body: error_code, compact array of 1, entry, throttle, tags
    assert frame == _frame("00000001000002001200000003000000000000")
    corr, body = decode_response(ApiKey.API_VERSIONS, 3, frame[4:])
    assert corr == 1
    assert body.api_keys[0].max_version == 3


def test_kip511_unsupported_api_versions_fallback():
    # kafka-python sends ApiVersions v4, which we do not declare: the broker sees the header...
    payload = encode_request(ApiKey.API_VERSIONS, 3, 11, "kp", {})[4:]
    payload = payload[:2] + b"\x00\x04" + payload[4:]
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(payload)
    header = info.value.header
    assert (header.api_key, header.api_version, header.correlation_id) == (18, 4, 11)
    assert info.value.code == ErrorCode.UNSUPPORTED_VERSION
    # ...and answers with a v0 body listing its ranges, which the client reads whatever it asked.
    reply = encode_api_versions_fallback(header.correlation_id)
    corr, body = decode_response(ApiKey.API_VERSIONS, 3, reply[4:])
    assert corr == 11
    assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert {e.api_key: (e.min_version, e.max_version) for e in body.api_keys} == SUPPORTED_VERSIONS
    for asked in (1, 2):
        assert decode_response(ApiKey.API_VERSIONS, asked, reply[4:])[1].error_code == 35


def test_unknown_api_key_is_unsupported():
    payload = bytes.fromhex("03e7000000000001ffff")
    header, _ = decode_request_header(payload)
    assert header.api_key == 999
    with pytest.raises(UnsupportedVersionError):
        decode_request(payload)


def test_truncated_frames_are_decode_errors():
    with pytest.raises(DecodeError):
        decode_request(b"\x00\x12\x00")
    with pytest.raises(DecodeError):
        decode_request(bytes.fromhex("001200000000000100096162"))
    with pytest.raises(DecodeError):
        peek_correlation_id(b"\x00")


def test_response_parts_carry_size_and_records_objects():
    class Region:
        def __len__(self) -> int:
            return 5

    region = Region()
    body = {"responses": [{"topic": "t", "partitions": [{"records": region}]}]}
    parts = encode_response_parts(ApiKey.FETCH, 4, 3, body)
    assert int.from_bytes(parts[0], "big") == sum(len(p) for p in parts[1:])
    assert region in parts
    plain = encode_response(ApiKey.FETCH, 4, 3, {"responses": [{"topic": "t", "partitions": [{"records": b"12345"}]}]})
    assert len(plain) == sum(len(p) for p in parts)


class _Pieces:
    """A records value in pieces (as ``records.batch.BatchParts``): ``parts`` and ``len``."""

    def __init__(self, *parts: bytes | memoryview) -> None:
        self.parts = parts

    def __len__(self) -> int:
        return sum(map(len, self.parts))


def test_request_parts_pass_records_pieces_through_and_chunks_keep_big_ones_unjoined():
    """A Produce request whose records value is in pieces: the frame's chunks are its bytes in
    order; pieces of at least ``direct_bytes`` stay as they are (written without a copy), the
    rest is joined; joined, the chunks are the frame ``decode_request`` reads back."""
    big = memoryview(b"R" * 5000)
    records = _Pieces(b"H" * 61, big)
    body = {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 30000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 2, "records": records}]}],
    }
    parts = encode_request_parts(ApiKey.PRODUCE, 9, 5, "c", body)
    assert records in parts
    chunks = frame_chunks(parts, 4096)
    assert len(chunks) == 3
    assert chunks[1] is big
    assert frame_chunks(parts) == [b"".join(frame_chunks(parts, 4096))]  # no threshold: one chunk
    frame = b"".join(chunks)
    assert frame == encode_request(ApiKey.PRODUCE, 9, 5, "c", body)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    _, got = decode_request(frame[4:])
    assert bytes(got.topic_data[0].partition_data[0].records) == b"H" * 61 + b"R" * 5000
