"""The API version ranges pylog advertises in ApiVersions: exactly those of Apache Kafka 3.7.

Why 3.7 (checked against Kafka 3.7.0's message schemas and kafka-python 3.0's recorded
``BROKER_API_VERSIONS[(3, 7)]``, which match these ranges key for key):

* it is the newest 3.x release still serving every old version aiokafka uses (Kafka 4.0 drops
  Fetch < 4, JoinGroup < 2, OffsetCommit < 2, ...; KIP-896);
* it covers librdkafka 2.x's maxima for Produce (10) and Fetch (16, topic ids from 13); Metadata
  tops out at 12 in every 3.x release (librdkafka negotiates down from 13); ListOffsets 8 >= 7;
  record batch v2 (Produce >= 3, Fetch >= 4) and zstd (Produce >= 7, Fetch >= 10) are on;
* Produce is advertised from v0, as Kafka does (KAFKA-18659: old librdkafka disables
  gzip/snappy/lz4 unless Produce v0 is listed); the broker rejects v0-v2 requests
  (message format v0/v1) with UNSUPPORTED_VERSION. ``PRODUCE_MIN_ACCEPTED`` says so.

What kafka-python infers: kafka-python 3.x (``kafka/protocol/broker_version_data.py``,
``infer_broker_version_from_api_versions``) walks its test cases from the newest down and picks
the first whose (api, version) is inside our range: (4,3) DescribeLogDirs 5, (4,2) ListOffsets
11, (4,1) Produce 13, (4,0) ListOffsets 10, (3,9) Fetch 17, (3,8) Produce 11 all miss; (3,7)
Fetch 16 hits -> broker version **3.7**, and it then uses min(its max, our max) per API.
kafka-python sends ApiVersions v4 first: we answer UNSUPPORTED_VERSION with a v0 body listing
these ranges (KIP-511) and it retries with v3.

KIP-595 APIs: in Kafka 3.7 Vote, BeginQuorumEpoch and EndQuorumEpoch are served only on the
controller listener (``KRAFT_CONTROLLER_APIS``) and DescribeQuorum on both. pylog's Raft runs
on the broker port, so they are listed here; clients ignore keys they do not know.
BrokerRegistration (62) and BrokerHeartbeat (63) are controller-only in Kafka too; pylog serves
them (pinned at v0) only when ``process.roles`` is set, and AlterPartition (56) likewise.

ListTransactions (66) is the one range above Kafka 3.7's (0-0): pylog serves v1, KIP-994's
``DurationFilter`` (Kafka 3.8), so ``pylog transactions list --duration-filter`` can ask the
coordinator for long-running transactions. A client that knows only v0 negotiates v0; kafka-python
infers the broker version from other APIs, so it still infers 3.7 (docs/compatibility.md).
"""

from __future__ import annotations

from pyspark_log.wire.api_keys import ApiKey

KAFKA_RELEASE = "3.7.0"
KAFKA_PYTHON_INFERS = (3, 7)

SUPPORTED_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (0, 10),
    ApiKey.FETCH: (0, 16),
    ApiKey.LIST_OFFSETS: (0, 8),
    ApiKey.METADATA: (0, 12),
    ApiKey.OFFSET_COMMIT: (0, 9),
    ApiKey.OFFSET_FETCH: (0, 9),
    ApiKey.FIND_COORDINATOR: (0, 4),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 5),  # v5: KIP-848 group types (Kafka 3.8+)
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_TOPICS: (0, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 4),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 3),
    ApiKey.WRITE_TXN_MARKERS: (0, 1),
    ApiKey.TXN_OFFSET_COMMIT: (0, 3),
    ApiKey.DESCRIBE_CONFIGS: (0, 4),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (0, 4),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.VOTE: (0, 0),
    ApiKey.BEGIN_QUORUM_EPOCH: (0, 0),
    ApiKey.END_QUORUM_EPOCH: (0, 0),
    ApiKey.DESCRIBE_QUORUM: (0, 2),  # v2 (KIP-853 directory ids and voter nodes): Kafka 4.1's range
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.BROKER_REGISTRATION: (0, 0),
    ApiKey.BROKER_HEARTBEAT: (0, 0),
    ApiKey.ALTER_PARTITION: (0, 3),
    ApiKey.UNREGISTER_BROKER: (0, 0),  # Kafka 4.1's range (KIP-631): pylog cluster unregister
    ApiKey.FETCH_SNAPSHOT: (0, 1),  # KIP-630, Kafka 4.1's range
    # SASL: after SaslHandshake v0 the tokens follow as raw size-prefixed frames; from v1 inside
    # SaslAuthenticate requests (KIP-152)
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),  # v1 (KIP-994 duration filter) is Kafka 3.8's; see the docstring
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.DESCRIBE_ACLS: (0, 3),
    # KIP-848 consumer groups at Kafka 4.1's ranges (see docs/compatibility.md)
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
    ApiKey.CREATE_ACLS: (0, 3),
    ApiKey.DELETE_ACLS: (0, 3),
    # KIP-455 reassignment at Kafka 4.1's ranges (Alter v1: KIP-860 allow_replication_factor_change)
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    # KIP-932 share groups at Kafka 4.1.1's ranges (v1 only; see docs/compatibility.md)
    ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
    ApiKey.SHARE_FETCH: (1, 1),
    ApiKey.SHARE_ACKNOWLEDGE: (1, 1),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    # KIP-932's persister RPCs (broker to share coordinator), v0 as Kafka 4.1.1
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.READ_SHARE_GROUP_STATE: (0, 0),
    ApiKey.WRITE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.DELETE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: (0, 0),
    # KIP-853 dynamic quorum at Kafka 4.1.1's ranges (UpdateRaftVoter: controller listener only)
    ApiKey.ADD_RAFT_VOTER: (0, 0),
    ApiKey.REMOVE_RAFT_VOTER: (0, 0),
    ApiKey.UPDATE_RAFT_VOTER: (0, 0),
}

# Produce v0-v2 carry message format v0/v1, which pylog does not store (see docs/compatibility.md).
PRODUCE_MIN_ACCEPTED = 3

# Served only on a Kafka 3.7 controller listener; a broker may leave them out of ApiVersions.
KRAFT_CONTROLLER_APIS: frozenset[int] = frozenset(
    {
        ApiKey.VOTE,
        ApiKey.BEGIN_QUORUM_EPOCH,
        ApiKey.END_QUORUM_EPOCH,
        ApiKey.FETCH_SNAPSHOT,
        ApiKey.BROKER_REGISTRATION,
        ApiKey.BROKER_HEARTBEAT,
        ApiKey.ALTER_PARTITION,
        ApiKey.UPDATE_RAFT_VOTER,
    }
)


def api_versions_entries(include_controller_apis: bool = True) -> list[dict[str, int]]:
    """The ``api_keys`` array of an ApiVersions response body, sorted by key."""
    return [
        {"api_key": int(key), "min_version": lo, "max_version": hi}
        for key, (lo, hi) in sorted(SUPPORTED_VERSIONS.items())
        if include_controller_apis or key not in KRAFT_CONTROLLER_APIS
    ]
