"""Every declared API, request and response, at every declared version: generated encoders and
decoders agree with each other and with the declaration (docs/architecture.md ("declare wire schemas once"))."""

from __future__ import annotations

import random
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyspark_log.wire import DecodeError, EncodeError, Message, all_apis, get_api
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.message import to_plain
from pyspark_log.wire.schema import Schema
from tests.unit.wire.values import random_body

CASES = [
    pytest.param(schema, version, id=f"{schema.name}-v{version}")
    for api in all_apis()
    for version in range(api.min_version, api.max_version + 1)
    for schema in (api.request, api.response)
]


def test_every_priority_api_is_declared():
    declared = {int(a.key) for a in all_apis()}
    wanted = {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 22, 23, 24, 25, 26, 27, 28}
    wanted |= {32, 37, 42, 44, 47, 52, 53, 54, 55, 60}
    assert wanted <= declared


@pytest.mark.parametrize(("schema", "version"), CASES)
def test_random_bodies_round_trip(schema: Schema, version: int):
    rnd = random.Random(f"{schema.name}/{version}")
    for _ in range(12):
        body, expected = random_body(schema.fields, version, rnd)
        data = schema.encode(body, version)
        decoded = schema.decode(data, version)
        assert to_plain(decoded) == to_plain(expected)
        assert schema.encode(decoded, version) == data  # canonical: re-encoding is stable


@pytest.mark.parametrize(("schema", "version"), CASES)
def test_defaults_round_trip_and_empty_body_encodes(schema: Schema, version: int):
    default = schema.default(version)
    assert schema.encode({}, version) == schema.encode(default, version)
    assert to_plain(schema.decode(schema.encode({}, version), version)) == to_plain(default)


@pytest.mark.parametrize(("schema", "version"), CASES[::7])
def test_every_truncation_is_a_decode_error(schema: Schema, version: int):
    rnd = random.Random(f"trunc/{schema.name}/{version}")
    body, _ = random_body(schema.fields, version, rnd)
    data = schema.encode(body, version)
    for cut in range(len(data)):  # the decoder follows the same path and runs out of bytes
        with pytest.raises(DecodeError):
            schema.decode(data[:cut], version)


def test_decoded_message_reads_as_attributes_and_as_dict():
    produce = get_api(ApiKey.PRODUCE).request
    body = {
        "acks": -1,
        "timeout_ms": 1000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 3, "records": b"abc"}]}],
    }
    req = produce.decode(produce.encode(body, 9), 9)
    assert isinstance(req, Message)
    assert req.topic_data[0].partition_data[0].index == 3
    assert req["topic_data"][0]["partition_data"][0]["index"] == 3
    assert bytes(req.topic_data[0].partition_data[0].records) == b"abc"
    assert req.transactional_id is None
    with pytest.raises(AttributeError):
        _ = req.no_such_field


def test_records_decode_as_zero_copy_memoryview():
    fetch = get_api(ApiKey.FETCH).response
    batch = bytes(range(256)) * 4
    frame = bytearray(fetch.encode({"responses": [{"topic": "t", "partitions": [{"records": batch}]}]}, 11))
    records = fetch.decode(frame, 11).responses[0].partitions[0].records
    assert isinstance(records, memoryview)
    assert records.obj is frame  # a view of the frame, not a copy
    assert records == batch


def test_encode_into_passes_records_objects_through_for_sendfile():
    class FileRegion:
        def __len__(self) -> int:
            return 1000

    region = FileRegion()
    out: list = []
    fetch = get_api(ApiKey.FETCH).response
    fetch.encode_into({"responses": [{"topic": "t", "partitions": [{"records": region}]}]}, 4, out)
    assert any(part is region for part in out)
    size = sum(len(p) for p in out)
    assert size == len(fetch.encode({"responses": [{"topic": "t", "partitions": [{"records": b"x" * 1000}]}]}, 4))


def test_fields_absent_in_a_version_are_ignored_on_encode_and_defaulted_on_decode():
    fetch = get_api(ApiKey.FETCH).request
    body = {"topics": [{"topic": "t", "topic_id": uuid.uuid4(), "partitions": [{"partition": 1}]}], "rack_id": "r"}
    v4 = fetch.decode(fetch.encode(body, 4), 4)
    assert v4.topics[0].topic == "t"
    assert v4.topics[0].topic_id == uuid.UUID(int=0)
    assert v4.rack_id == ""  # introduced in v11
    assert v4.topics[0].partitions[0].current_leader_epoch == -1  # v9+, declared default
    v13 = fetch.decode(fetch.encode(body, 13), 13)
    assert v13.topics[0].topic == ""  # names replaced by ids from v13
    assert v13.topics[0].topic_id == body["topics"][0]["topic_id"]
    assert v13.rack_id == "r"


def test_null_arrays_and_strings():
    metadata = get_api(ApiKey.METADATA).request
    assert metadata.encode({"topics": None}, 1) == b"\xff\xff\xff\xff"
    assert metadata.decode(b"\xff\xff\xff\xff", 1).topics is None
    assert metadata.encode({"topics": None}, 9) == b"\x00\x01\x00\x00\x00"  # compact null, bools, tags
    assert metadata.decode(b"\x00\x01\x00\x00\x00", 9).topics is None
    with pytest.raises(EncodeError, match="topics"):
        metadata.encode({"topics": None}, 0)  # v0 has no null array
    with pytest.raises(DecodeError):
        metadata.decode(b"\xff\xff\xff\xff", 0)
    produce = get_api(ApiKey.PRODUCE).request
    data = produce.encode({"transactional_id": None, "topic_data": []}, 3)
    assert data[:2] == b"\xff\xff"
    assert produce.decode(data, 3).transactional_id is None


def test_non_nullable_string_rejects_null_both_ways():
    heartbeat = get_api(ApiKey.HEARTBEAT).request
    with pytest.raises(EncodeError, match="group_id"):
        heartbeat.encode({"group_id": None}, 0)
    with pytest.raises(DecodeError):
        heartbeat.decode(b"\xff\xff" + b"\x00" * 8, 0)


def test_unknown_tagged_fields_are_skipped():
    api_versions = get_api(ApiKey.API_VERSIONS).response
    plain = api_versions.encode({"api_keys": [{"api_key": 1, "min_version": 0, "max_version": 16}]}, 3)
    assert plain.endswith(b"\x00")  # empty top-level tagged section
    # Add unknown tag 9 (3 bytes) and known tag 1 (finalized_features_epoch = 5) at the top level.
    tagged = plain[:-1] + b"\x02" + b"\x01\x08" + (5).to_bytes(8, "big") + b"\x09\x03abc"
    decoded = api_versions.decode(tagged, 3)
    assert decoded.finalized_features_epoch == 5
    assert decoded.api_keys[0].max_version == 16
    # and inside a struct element: the api_keys entry gets an unknown tag 0 with 2 bytes
    entry_tagged = plain.replace(b"\x00\x01\x00\x00\x00\x10\x00", b"\x00\x01\x00\x00\x00\x10\x01\x00\x02zz")
    assert entry_tagged != plain
    assert api_versions.decode(entry_tagged, 3).api_keys[0].max_version == 16


def test_tagged_field_written_only_when_not_default():
    fetch = get_api(ApiKey.FETCH).request
    assert fetch.encode({}, 12).endswith(b"\x00")
    with_cluster = fetch.encode({"cluster_id": "c"}, 12)
    assert with_cluster.endswith(b"\x01\x00\x02\x02c")  # 1 field, tag 0, size 2, compact "c"
    assert fetch.decode(with_cluster, 12).cluster_id == "c"


def test_unsupported_version_is_refused():
    from pyspark_log.wire import UnsupportedVersionError

    with pytest.raises(UnsupportedVersionError):
        get_api(ApiKey.FETCH).request.encode({}, 18)
    with pytest.raises(UnsupportedVersionError):
        get_api(ApiKey.FETCH).request.decode(b"", -1)


def test_out_of_range_value_is_an_encode_error():
    with pytest.raises(EncodeError, match="FetchRequest v4"):
        get_api(ApiKey.FETCH).request.encode({"max_wait_ms": 1 << 40}, 4)


def test_generated_source_is_readable():
    source = get_api(ApiKey.FETCH).response.source(12)
    assert "def encode(m, out):" in source
    assert "def decode(buf, pos):" in source


_records = st.one_of(st.none(), st.binary(max_size=64))
_fetch_partition = st.fixed_dictionaries(
    {
        "partition_index": st.integers(0, 2**31 - 1),
        "error_code": st.integers(-1, 130),
        "high_watermark": st.integers(-1, 2**63 - 1),
        "aborted_transactions": st.one_of(
            st.none(),
            st.lists(
                st.fixed_dictionaries({"producer_id": st.integers(-1, 2**40), "first_offset": st.integers(0, 2**40)})
            ),
        ),
        "current_leader": st.fixed_dictionaries({"leader_id": st.integers(-1, 5), "leader_epoch": st.integers(-1, 9)}),
        "records": _records,
    }
)


@settings(max_examples=60, deadline=None)
@given(
    version=st.sampled_from([4, 7, 11, 12, 13, 16]),
    name=st.text(max_size=20),
    partitions=st.lists(_fetch_partition, max_size=4),
)
def test_fetch_response_round_trip_property(version: int, name: str, partitions: list):
    schema = get_api(ApiKey.FETCH).response
    body = {"responses": [{"topic": name, "partitions": partitions}]}
    decoded = schema.decode(schema.encode(body, version), version)
    got = decoded.responses[0].partitions
    assert len(got) == len(partitions)
    for g, p in zip(got, partitions, strict=True):
        assert g.high_watermark == p["high_watermark"]
        assert g.aborted_transactions == p["aborted_transactions"]
        assert (None if g.records is None else bytes(g.records)) == p["records"]
        if version >= 12:
            assert g.current_leader == p["current_leader"]
    if version < 13:
        assert decoded.responses[0].topic == name


@settings(max_examples=60, deadline=None)
@given(
    version=st.integers(3, 10),
    txn=st.one_of(st.none(), st.text(max_size=10)),
    batches=st.lists(st.tuples(st.integers(0, 1000), _records), max_size=5),
)
def test_produce_request_round_trip_property(version: int, txn: str | None, batches: list):
    schema = get_api(ApiKey.PRODUCE).request
    body = {
        "transactional_id": txn,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [{"name": "t", "partition_data": [{"index": i, "records": r} for i, r in batches]}],
    }
    decoded = schema.decode(schema.encode(body, version), version)
    assert decoded.transactional_id == txn
    got = [(p.index, None if p.records is None else bytes(p.records)) for p in decoded.topic_data[0].partition_data]
    assert got == batches
