"""The advertised version table: one real Kafka release (3.7), what clients infer from it, and
the error-code and api-key tables."""

from __future__ import annotations

import pytest

from pyspark_log.wire import ApiKey, ErrorCode, KafkaError, all_apis, get_api
from pyspark_log.wire.versions import (
    KAFKA_PYTHON_INFERS,
    KRAFT_CONTROLLER_APIS,
    PRODUCE_MIN_ACCEPTED,
    SUPPORTED_VERSIONS,
    api_versions_entries,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python's resource loading


def test_advertised_ranges_are_declared():
    for key, (lo, hi) in SUPPORTED_VERSIONS.items():
        api = get_api(key)
        assert api.min_version <= lo <= hi <= api.max_version, api.name
    assert set(SUPPORTED_VERSIONS) == {int(a.key) for a in all_apis()}


KIP932_APIS = {76, 77, 78, 79, 83, 84, 85, 86, 87, 90, 91}  # with the persister RPCs (83-87)


def test_ranges_match_kafka_3_7_as_recorded_by_kafka_python():
    from kafka.protocol.broker_version_data import BROKER_API_VERSIONS

    recorded = BROKER_API_VERSIONS[(3, 7)]
    # served at Kafka 4.1's ranges: KIP-848's two APIs, AlterPartitionReassignments v1 (KIP-860)
    KAFKA_41_ONLY = {  # noqa: N806
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
    }
    for key, versions in SUPPORTED_VERSIONS.items():
        if key == ApiKey.LIST_TRANSACTIONS:  # v1 (KIP-994) is Kafka 3.8's, served on purpose
            assert versions == BROKER_API_VERSIONS[(3, 8)][key] == (0, 1)
        elif key == ApiKey.LIST_GROUPS:  # v5 (KIP-848 group types) is Kafka 3.8's, served on purpose
            assert versions == BROKER_API_VERSIONS[(3, 8)][key] == (0, 5)
        elif key in KAFKA_41_ONLY:
            assert versions == BROKER_API_VERSIONS[(4, 1)][key] == (0, 1)
        elif key == ApiKey.UNREGISTER_BROKER:  # KIP-631, not in 3.7's broker list: Kafka 4.1's range
            assert versions == BROKER_API_VERSIONS[(4, 1)][key] == (0, 0)
        elif key in KIP932_APIS or key in (ApiKey.DESCRIBE_QUORUM, ApiKey.ADD_RAFT_VOTER, ApiKey.REMOVE_RAFT_VOTER):
            # share groups (v1 of 76-79, v0 of 83-87 and 90-91) and KIP-853: Kafka 4.1's ranges
            assert versions == BROKER_API_VERSIONS[(4, 1)][key], ApiKey(key).name
        elif key == ApiKey.UPDATE_RAFT_VOTER:  # KIP-853, controller listener only in Kafka 4.1
            assert versions == (0, 0)
        elif key in recorded:  # the KIP-595 quorum APIs live on the controller listener there
            assert recorded[key] == versions, ApiKey(key).name
    # + KRaft broker registration, ConsumerGroupDescribe (not in 3.7)
    assert (
        set(SUPPORTED_VERSIONS) - set(recorded) == {52, 53, 54, 55, 59, 62, 63, 64, 69, 80, 81, 82} | KIP932_APIS
    )  # 59: KIP-630


def test_kafka_python_infers_kafka_3_7():
    from kafka.protocol.broker_version_data import infer_broker_version_from_api_versions

    assert infer_broker_version_from_api_versions(SUPPORTED_VERSIONS) == KAFKA_PYTHON_INFERS == (3, 7)
    assert infer_broker_version_from_api_versions(dict(api_versions_entry_pairs(False))) == (3, 7)


def api_versions_entry_pairs(include: bool):
    return ((e["api_key"], (e["min_version"], e["max_version"])) for e in api_versions_entries(include))


def test_librdkafka_feature_gates_are_open():
    produce, fetch = SUPPORTED_VERSIONS[ApiKey.PRODUCE], SUPPORTED_VERSIONS[ApiKey.FETCH]
    assert produce[0] == 0  # KAFKA-18659: advertise Produce v0 so old librdkafka keeps codecs
    assert produce[1] >= 3
    assert fetch[1] >= 4
    assert produce[1] >= 7
    assert fetch[1] >= 10
    assert fetch[1] >= 13  # topic ids in Fetch
    assert SUPPORTED_VERSIONS[ApiKey.FIND_COORDINATOR][1] >= 1  # transactions need key type 1
    assert ApiKey.INIT_PRODUCER_ID in SUPPORTED_VERSIONS  # idempotence
    assert PRODUCE_MIN_ACCEPTED == 3


def test_controller_only_apis_can_be_left_out():
    keys = {e["api_key"] for e in api_versions_entries(include_controller_apis=False)}
    assert not keys & KRAFT_CONTROLLER_APIS
    assert ApiKey.DESCRIBE_QUORUM in keys


def test_api_key_titles_match_declared_names():
    for api in all_apis():
        assert ApiKey(api.key).title == api.name
        assert api.request.name == f"{api.name}Request"
    assert ApiKey.OFFSET_FOR_LEADER_EPOCH.title == "OffsetForLeaderEpoch"
    assert ApiKey.DESCRIBE_CLUSTER == 60
    assert ApiKey.VOTE == 52
    assert ApiKey.DESCRIBE_QUORUM == 55


def test_first_flexible_versions():
    assert get_api(ApiKey.PRODUCE).first_flexible_version == 9
    assert get_api(ApiKey.FETCH).first_flexible_version == 12
    assert get_api(ApiKey.METADATA).first_flexible_version == 9
    assert get_api(ApiKey.API_VERSIONS).first_flexible_version == 3
    assert get_api(ApiKey.DESCRIBE_CLUSTER).first_flexible_version == 0
    assert get_api(ApiKey.OFFSET_DELETE).first_flexible_version is None
    assert get_api(ApiKey.BEGIN_QUORUM_EPOCH).first_flexible_version is None


@pytest.mark.parametrize(
    ("name", "code", "retriable"),
    [
        ("UNKNOWN_SERVER_ERROR", -1, False),
        ("NONE", 0, False),
        ("OFFSET_OUT_OF_RANGE", 1, False),
        ("CORRUPT_MESSAGE", 2, True),
        ("UNKNOWN_TOPIC_OR_PARTITION", 3, True),
        ("NOT_LEADER_OR_FOLLOWER", 6, True),
        ("MESSAGE_TOO_LARGE", 10, False),
        ("NOT_COORDINATOR", 16, True),
        ("UNSUPPORTED_VERSION", 35, False),
        ("TOPIC_ALREADY_EXISTS", 36, False),
        ("INVALID_PARTITIONS", 37, False),
        ("INVALID_REQUEST", 42, False),
        ("CONCURRENT_TRANSACTIONS", 51, True),
        ("FENCED_LEADER_EPOCH", 74, True),
        ("PRODUCER_FENCED", 90, False),
        ("POSITION_OUT_OF_RANGE", 99, False),
        ("UNKNOWN_TOPIC_ID", 100, True),
        ("TRANSACTION_ABORTABLE", 120, False),
    ],
)
def test_error_codes(name: str, code: int, retriable: bool):
    assert ErrorCode[name] == code
    assert ErrorCode(code).retriable is retriable


def test_error_table_is_complete_and_exception_carries_code():
    import kafka.errors as kerr

    theirs = {
        c.errno for c in vars(kerr).values() if isinstance(c, type) and isinstance(getattr(c, "errno", None), int)
    }
    assert {code for code in theirs if code <= 128} <= {int(c) for c in ErrorCode}
    assert {int(c) for c in ErrorCode} == set(range(-1, 129))
    assert ErrorCode.of(9999) is ErrorCode.UNKNOWN_SERVER_ERROR
    err = KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "moved")
    assert err.code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert err.retriable
    assert "NOT_LEADER_OR_FOLLOWER (6): moved" in str(err)
    assert KafkaError(3).code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_compile_all_generates_every_codec():
    from pyspark_log.wire import compile_all

    expected = sum(4 * (a.max_version - a.min_version + 1) for a in all_apis())
    assert compile_all() == expected


def test_errors_pickle_with_their_code_and_attributes():
    import pickle

    from pyspark_log.wire import DecodeError, UnsupportedVersionError

    for err in (KafkaError(6, "moved"), DecodeError("short"), UnsupportedVersionError(18, 4, header=("h",))):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err)
        assert back.code == err.code
        assert str(back) == str(err)
    assert pickle.loads(pickle.dumps(UnsupportedVersionError(18, 4))).api_version == 4


def test_messages_pickle_and_copy_as_the_dicts_they_are():
    """A decoded Message crosses to Spark executors: every pickle protocol and ``copy`` keep the
    type (nested ones too) and the items; attribute access works on what comes back."""
    import copy
    import pickle

    from pyspark_log.wire import Message

    msg = Message(name="t", partitions=[Message(partition_index=0, records=b"\x00")], error_code=0)
    copies = [pickle.loads(pickle.dumps(msg, proto)) for proto in range(pickle.HIGHEST_PROTOCOL + 1)]
    for back in [*copies, copy.copy(msg), copy.deepcopy(msg)]:
        assert type(back) is Message
        assert back == msg
        assert type(back.partitions[0]) is Message
        assert back.partitions[0].records == b"\x00"
