"""Cross-check with a real client's encoder: kafka-python 3.x's own protocol classes.

For every API and version both implementations describe, random bodies are encoded by one side
and decoded by the other, both ways, for requests and responses: if a field were missing, out of
order, of the wrong width, compact where it should not be, or tagged differently, the decoded
values would differ. kafka-python's bundled schemas are Kafka 4.x's, so versions below their
``validVersions`` minimum (removed in 4.0) are not compared. Hand-picked requests at the
versions kafka-python actually sends (ApiVersions v3, Metadata v8, Produce v8, Fetch v10,
ListOffsets v5, JoinGroup v5) are checked byte for byte.
"""

from __future__ import annotations

import random
import uuid
import warnings

import pytest

from pyspark_log.wire import all_apis, get_api
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.message import to_plain
from tests.unit.wire.values import random_body

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from tests.unit.wire import kafka_python_bridge as bridge

    KP = bridge.kp_classes()


def _cases() -> list:
    cases = []
    for api in all_apis():
        for kind, schema in (("request", api.request), ("response", api.response)):
            cls = KP.get((int(api.key), kind))
            if cls is None:
                continue  # kafka-python has no Vote / BeginQuorumEpoch / EndQuorumEpoch
            lo, hi = bridge.kp_versions(cls)
            for version in range(max(lo, api.min_version), min(hi, api.max_version) + 1):
                cases.append(pytest.param(schema, cls, version, id=f"{schema.name}-v{version}"))
    return cases


CASES = _cases()
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python's resource loading


def _bodies(schema, version: int, seed: str):
    rnd = random.Random(seed)
    for _ in range(6):
        body, expected = random_body(schema.fields, version, rnd)
        if schema.name == "ApiVersionsResponse" and version > 0:
            body["error_code"] = expected["error_code"] = 0  # kafka-python reads error bodies as v0
        yield body, expected


def test_every_declared_api_kafka_python_knows_is_cross_checked():
    checked = {(c.values[0].name) for c in CASES}
    # no Vote/Begin-/EndQuorumEpoch, BrokerRegistration/-Heartbeat, AlterPartition in kafka-python,
    # nor KIP-848's ConsumerGroupHeartbeat/-Describe, nor KIP-932's six share group APIs and five
    # persister RPCs, nor UnregisterBroker, nor FetchSnapshot (KIP-630), nor KIP-853's Add-/Remove-/UpdateRaftVoter
    assert len(checked) == 2 * (len(all_apis()) - 8 - 6 - 5 - 1 - 1 - 3)


@pytest.mark.parametrize(("schema", "cls", "version"), CASES)
def test_ours_encode_kafka_python_decodes(schema, cls, version: int):
    for body, _ in _bodies(schema, version, f"ours/{schema.name}/{version}"):
        data = schema.encode(body, version)
        theirs = bridge.from_kp(cls._struct, cls.decode(data, version=version), version)
        assert bridge.restrict(to_plain(schema.decode(data, version)), theirs) == theirs


@pytest.mark.parametrize(("schema", "cls", "version"), CASES)
def test_kafka_python_encodes_ours_decode(schema, cls, version: int):
    for _, expected in _bodies(schema, version, f"theirs/{schema.name}/{version}"):
        data = bridge.to_kp(cls._struct, to_plain(expected), version, cls).encode(version=version)
        ours = to_plain(schema.decode(data, version))
        theirs = bridge.from_kp(cls._struct, cls.decode(data, version=version), version)
        assert bridge.restrict(ours, theirs) == theirs
        # every field (renamed bitfields too) survives our re-encoding; the bytes may differ where
        # kafka-python writes tagged fields whose value is the default (we omit those, KIP-482)
        again = schema.encode(schema.decode(data, version), version)
        assert to_plain(schema.decode(again, version)) == ours


def test_kafka_python_requests_byte_for_byte():
    from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
    from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
    from kafka.protocol.producer import ProduceRequest

    topic_id = uuid.uuid4()
    batch = b"\x00" * 61
    pairs = [
        (
            ApiKey.API_VERSIONS,
            3,
            ApiVersionsRequest[3](client_software_name="kafka-python", client_software_version="3.0"),
        ),
        (
            ApiKey.METADATA,
            8,
            MetadataRequest[8](topics=[MetadataRequest.MetadataRequestTopic(name="t")], allow_auto_topic_creation=True),
        ),
        (ApiKey.METADATA, 1, MetadataRequest[1](topics=None)),
        (
            ApiKey.PRODUCE,
            8,
            ProduceRequest[8](
                transactional_id=None,
                acks=-1,
                timeout_ms=30000,
                topic_data=[
                    ProduceRequest.TopicProduceData(
                        name="t",
                        partition_data=[ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=batch)],
                    )
                ],
            ),
        ),
        (
            ApiKey.FETCH,
            10,
            FetchRequest[10](
                replica_id=-1,
                max_wait_ms=500,
                min_bytes=1,
                max_bytes=52428800,
                isolation_level=1,
                session_id=0,
                session_epoch=-1,
                topics=[
                    FetchRequest.FetchTopic(
                        topic="t",
                        partitions=[
                            FetchRequest.FetchTopic.FetchPartition(
                                partition=0, fetch_offset=42, log_start_offset=-1, partition_max_bytes=1048576
                            )
                        ],
                    )
                ],
                forgotten_topics_data=[],
            ),
        ),
        (
            ApiKey.FETCH,
            13,
            FetchRequest[13](
                replica_id=-1,
                max_wait_ms=500,
                min_bytes=1,
                topics=[
                    FetchRequest.FetchTopic(
                        topic_id=topic_id,
                        partitions=[
                            FetchRequest.FetchTopic.FetchPartition(partition=2, fetch_offset=7, partition_max_bytes=100)
                        ],
                    )
                ],
            ),
        ),
        (
            ApiKey.LIST_OFFSETS,
            5,
            ListOffsetsRequest[5](
                replica_id=-1,
                isolation_level=0,
                topics=[
                    ListOffsetsRequest.ListOffsetsTopic(
                        name="t",
                        partitions=[
                            ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                                partition_index=0, current_leader_epoch=-1, timestamp=-1
                            )
                        ],
                    )
                ],
            ),
        ),
    ]
    for key, version, request in pairs:
        theirs = request.encode(version=version)
        schema = get_api(key).request
        decoded = schema.decode(theirs, version)
        assert schema.encode(decoded, version) == theirs, (ApiKey(key).name, version)
    fetch13 = get_api(ApiKey.FETCH).request.decode(pairs[5][2].encode(version=13), 13)
    assert fetch13.topics[0].topic_id == topic_id
    assert fetch13.topics[0].partitions[0].fetch_offset == 7
    produce = get_api(ApiKey.PRODUCE).request.decode(pairs[3][2].encode(version=8), 8)
    assert bytes(produce.topic_data[0].partition_data[0].records) == batch


def test_kafka_python_reads_our_api_versions_and_metadata_responses():
    from kafka.protocol.broker_version_data import BrokerVersionData
    from kafka.protocol.metadata import ApiVersionsResponse, MetadataResponse

    from pyspark_log.wire.versions import api_versions_entries

    data = get_api(ApiKey.API_VERSIONS).response.encode({"api_keys": api_versions_entries()}, 3)
    resp = ApiVersionsResponse.decode(data, version=3)
    versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert BrokerVersionData(api_versions=versions).broker_version == (3, 7)

    body = {
        "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}],
        "cluster_id": "pylog",
        "controller_id": 1,
        "topics": [
            {
                "name": "t",
                "topic_id": uuid.uuid4(),
                "partitions": [
                    {"partition_index": 0, "leader_id": 1, "leader_epoch": 0, "replica_nodes": [1], "isr_nodes": [1]}
                ],
            }
        ],
    }
    for version in (1, 8, 12):
        meta = MetadataResponse.decode(get_api(ApiKey.METADATA).response.encode(body, version), version=version)
        assert meta.brokers[0].host == "127.0.0.1"
        assert meta.topics[0].partitions[0].isr_nodes == [1]
