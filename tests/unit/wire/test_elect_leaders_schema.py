"""ElectLeaders (43) as Kafka 3.7 declares it: v0 (KIP-183) without an election type, v1 with
``election_type`` and a top-level error, v2 flexible; null ``topic_partitions`` means all."""

from __future__ import annotations

import pytest

from pyspark_log.wire import ApiKey, get_api
from pyspark_log.wire.message import to_plain
from pyspark_log.wire.versions import SUPPORTED_VERSIONS

API = get_api(ApiKey.ELECT_LEADERS)


def test_advertised_as_kafka_3_7_does():
    assert SUPPORTED_VERSIONS[ApiKey.ELECT_LEADERS] == (0, 2)
    assert API.first_flexible_version == 2


@pytest.mark.parametrize("version", [0, 1, 2])
def test_request_round_trips_with_named_and_null_partitions(version: int):
    named = {"election_type": 1, "topic_partitions": [{"topic": "t", "partitions": [0, 2]}], "timeout_ms": 3000}
    decoded = API.request.decode(API.request.encode(named, version), version)
    assert decoded.topic_partitions[0].topic == "t"
    assert list(decoded.topic_partitions[0].partitions) == [0, 2]
    assert decoded.timeout_ms == 3000
    assert decoded.election_type == (1 if version >= 1 else 0)  # not on the wire in v0
    everything = API.request.decode(API.request.encode({"topic_partitions": None}, version), version)
    assert everything.topic_partitions is None
    assert everything.timeout_ms == 60000


def test_v0_request_bytes():
    body = {"topic_partitions": [{"topic": "t", "partitions": [1]}], "timeout_ms": 5}
    assert API.request.encode(body, 0) == (
        b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x05"
    )
    assert API.request.encode({"topic_partitions": None, "timeout_ms": 5}, 0) == b"\xff\xff\xff\xff\x00\x00\x00\x05"


@pytest.mark.parametrize("version", [0, 1, 2])
def test_response_round_trips(version: int):
    body = {
        "throttle_time_ms": 0,
        "error_code": 41,
        "replica_election_results": [
            {
                "topic": "t",
                "partition_result": [
                    {"partition_id": 0, "error_code": 0, "error_message": None},
                    {"partition_id": 1, "error_code": 84, "error_message": "already leads"},
                ],
            }
        ],
    }
    decoded = to_plain(API.response.decode(API.response.encode(body, version), version))
    assert decoded["replica_election_results"] == body["replica_election_results"]
    assert decoded["error_code"] == (41 if version >= 1 else 0)
