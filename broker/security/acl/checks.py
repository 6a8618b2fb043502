"""What each API checks before it runs, as Kafka's ``KafkaApis`` checks it (pure data).

``CHECKS[api_key]`` lists the checks of one API, applied in order by ``broker.security.acl.rules``
around the handlers (``broker.api.authz``); an API not listed checks nothing (ApiVersions,
SaslHandshake, SaslAuthenticate). The kinds:

* ``Cluster(op)`` — ``op`` on the CLUSTER resource ``kafka-cluster`` or the whole request fails
  with CLUSTER_AUTHORIZATION_FAILED (every error field of the response);
* ``Named(type, op, field, code)`` — ``op`` on the resource named by the request's ``field``
  (a group id, a transactional id) or the whole request fails with ``code``; skipped when the
  field is null (InitProducerId of an idempotent producer);
* ``Topics(op, shape, code)`` — ``op`` on each topic of the request: a denied topic is taken
  out of the request and answered with ``code`` on each of its partitions (Kafka's
  ``unauthorizedTopicResponses``); ``shape`` names the request's and response's fields;
* ``Rule(name)`` — an API whose rules do not fit these (Metadata, FindCoordinator,
  InitProducerId, CreateTopics, configs, group listings): the rule ``name`` of
  ``broker.security.acl.rules``, written in ``topic_rules``, ``group_rules``,
  ``transaction_rules`` or ``cluster_rules`` by what it decides.

Forwarded requests (a broker relays an admin request to the active controller, on the
controller listener) need CLUSTER_ACTION instead: the forwarding broker authorized the client.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.security.acl.binding import Operation, ResourceType
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.errors import ErrorCode


@dataclass(frozen=True)
class TopicShape:
    """Where the topics and partitions sit in a request and its response."""

    request_topics: str  # the request's topic array
    request_name: str  # a topic's name field (a topic id field is resolved through the image)
    request_partitions: str  # a topic's partitions: structs, or []int32 when ``request_index`` is None
    request_index: str | None
    response_topics: str
    response_name: str
    response_partitions: str
    response_index: str
    error_field: str = "error_code"
    partition_extra: tuple[tuple[str, object], ...] = ()  # fields of a denied partition's answer


@dataclass(frozen=True)
class Cluster:
    operation: Operation


@dataclass(frozen=True)
class Named:
    resource_type: ResourceType
    operation: Operation
    field: str
    code: ErrorCode


@dataclass(frozen=True)
class Topics:
    operation: Operation
    shape: TopicShape
    code: ErrorCode = ErrorCode.TOPIC_AUTHORIZATION_FAILED


@dataclass(frozen=True)
class Rule:
    name: str


Check = Cluster | Named | Topics | Rule

PRODUCE = TopicShape("topic_data", "name", "partition_data", "index", "responses", "name", "partition_responses",
                     "index", partition_extra=(("base_offset", -1),))  # fmt: skip
FETCH = TopicShape("topics", "topic", "partitions", "partition", "responses", "topic", "partitions", "partition_index",
                   partition_extra=(("high_watermark", -1), ("last_stable_offset", -1), ("log_start_offset", -1),
                                    ("aborted_transactions", None), ("records", b"")))  # fmt: skip
LIST_OFFSETS = TopicShape("topics", "name", "partitions", "partition_index", "topics", "name", "partitions",
                          "partition_index", partition_extra=(("timestamp", -1), ("offset", -1)))  # fmt: skip
EPOCHS = TopicShape("topics", "topic", "partitions", "partition", "topics", "topic", "partitions", "partition")
COMMIT = TopicShape("topics", "name", "partitions", "partition_index", "topics", "name", "partitions",
                    "partition_index")  # fmt: skip
DELETE_RECORDS = TopicShape("topics", "name", "partitions", "partition_index", "topics", "name", "partitions",
                            "partition_index")  # fmt: skip
ADD_PARTITIONS = TopicShape("v3_and_below_topics", "name", "partitions", None, "results_by_topic_v3_and_below",
                            "name", "results_by_partition", "partition_index", "partition_error_code")  # fmt: skip
PRODUCERS = TopicShape("topics", "name", "partition_indexes", None, "topics", "name", "partitions", "partition_index")
OFFSET_DELETE = TopicShape("topics", "name", "partitions", "partition_index", "topics", "name", "partitions",
                           "partition_index")  # fmt: skip

_GROUP_READ = Named(ResourceType.GROUP, Operation.READ, "group_id", ErrorCode.GROUP_AUTHORIZATION_FAILED)
_TXN_WRITE = Named(ResourceType.TRANSACTIONAL_ID, Operation.WRITE, "transactional_id",
                   ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)  # fmt: skip

CHECKS: dict[int, tuple[Check, ...]] = {
    # data plane
    # pylog auto-creates a missing topic on Produce (Kafka does not): that needs CREATE too
    ApiKey.PRODUCE: (Rule("produce_transactional"), Topics(Operation.WRITE, PRODUCE), Rule("produce_create")),
    ApiKey.FETCH: (Rule("fetch"),),  # READ per topic; a follower's fetch CLUSTER_ACTION
    ApiKey.LIST_OFFSETS: (Topics(Operation.DESCRIBE, LIST_OFFSETS),),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (Rule("offset_for_leader_epoch"),),  # DESCRIBE; a follower CLUSTER_ACTION
    ApiKey.METADATA: (Rule("metadata"),),
    ApiKey.DELETE_RECORDS: (Topics(Operation.DELETE, DELETE_RECORDS),),
    # consumer groups
    ApiKey.FIND_COORDINATOR: (Rule("find_coordinator"),),
    ApiKey.JOIN_GROUP: (_GROUP_READ,),
    ApiKey.SYNC_GROUP: (_GROUP_READ,),
    ApiKey.HEARTBEAT: (_GROUP_READ,),
    ApiKey.LEAVE_GROUP: (_GROUP_READ,),
    ApiKey.OFFSET_COMMIT: (_GROUP_READ, Topics(Operation.READ, COMMIT)),
    ApiKey.OFFSET_FETCH: (Rule("offset_fetch"),),  # DESCRIBE group, DESCRIBE topics
    ApiKey.OFFSET_DELETE: (
        Named(ResourceType.GROUP, Operation.DELETE, "group_id", ErrorCode.GROUP_AUTHORIZATION_FAILED),
        Topics(Operation.READ, OFFSET_DELETE),
    ),
    ApiKey.DESCRIBE_GROUPS: (Rule("describe_groups"),),  # DESCRIBE per group
    ApiKey.LIST_GROUPS: (Rule("list_groups"),),  # DESCRIBE cluster, else the groups one may DESCRIBE
    ApiKey.DELETE_GROUPS: (Rule("delete_groups"),),  # DELETE per group
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (_GROUP_READ, Rule("consumer_group_heartbeat")),  # KIP-848: + DESCRIBE topics
    ApiKey.CONSUMER_GROUP_DESCRIBE: (Rule("consumer_group_describe"),),  # DESCRIBE per group
    # KIP-932 share groups: READ of the group (Kafka also checks READ/DESCRIBE of the topics: not yet,
    # docs/compatibility.md); ShareGroupDescribe as ConsumerGroupDescribe (same fields)
    ApiKey.SHARE_GROUP_HEARTBEAT: (_GROUP_READ,),
    ApiKey.SHARE_GROUP_DESCRIBE: (Rule("consumer_group_describe"),),
    ApiKey.SHARE_FETCH: (_GROUP_READ,),
    ApiKey.SHARE_ACKNOWLEDGE: (_GROUP_READ,),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (_GROUP_READ,),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (Cluster(Operation.DESCRIBE),),  # stricter than Kafka's DESCRIBE per group
    # transactions
    ApiKey.INIT_PRODUCER_ID: (Rule("init_producer_id"),),
    ApiKey.ADD_PARTITIONS_TO_TXN: (Rule("add_partitions_to_txn"),),
    ApiKey.ADD_OFFSETS_TO_TXN: (_TXN_WRITE, _GROUP_READ),
    ApiKey.END_TXN: (_TXN_WRITE,),
    ApiKey.TXN_OFFSET_COMMIT: (_TXN_WRITE, _GROUP_READ, Topics(Operation.READ, COMMIT)),
    ApiKey.WRITE_TXN_MARKERS: (Cluster(Operation.CLUSTER_ACTION),),
    # KIP-932's persister RPCs, broker to share coordinator: CLUSTER_ACTION, as Kafka 4.1's KafkaApis
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: (Cluster(Operation.CLUSTER_ACTION),),
    ApiKey.READ_SHARE_GROUP_STATE: (Cluster(Operation.CLUSTER_ACTION),),
    ApiKey.WRITE_SHARE_GROUP_STATE: (Cluster(Operation.CLUSTER_ACTION),),
    ApiKey.DELETE_SHARE_GROUP_STATE: (Cluster(Operation.CLUSTER_ACTION),),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: (Cluster(Operation.CLUSTER_ACTION),),
    ApiKey.DESCRIBE_PRODUCERS: (Topics(Operation.READ, PRODUCERS),),
    ApiKey.DESCRIBE_TRANSACTIONS: (Rule("describe_transactions"),),  # DESCRIBE per transactional id
    ApiKey.LIST_TRANSACTIONS: (Rule("list_transactions"),),  # the ids one may DESCRIBE
    # administration
    ApiKey.CREATE_TOPICS: (Rule("create_topics"),),  # CREATE on the cluster or the topic
    ApiKey.DELETE_TOPICS: (Rule("delete_topics"),),  # DELETE per topic
    ApiKey.CREATE_PARTITIONS: (Rule("create_partitions"),),  # ALTER per topic
    ApiKey.DESCRIBE_CONFIGS: (Rule("describe_configs"),),  # DESCRIBE_CONFIGS on topic / cluster
    ApiKey.ALTER_CONFIGS: (Rule("alter_configs"),),  # ALTER_CONFIGS on topic / cluster
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (Rule("alter_configs"),),
    ApiKey.ELECT_LEADERS: (Cluster(Operation.ALTER),),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (Cluster(Operation.ALTER),),  # KIP-455
    ApiKey.UNREGISTER_BROKER: (Cluster(Operation.ALTER),),  # KIP-631
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (Cluster(Operation.DESCRIBE),),
    ApiKey.DESCRIBE_LOG_DIRS: (Cluster(Operation.DESCRIBE),),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (Cluster(Operation.ALTER),),  # KIP-113
    ApiKey.DESCRIBE_CLUSTER: (Cluster(Operation.DESCRIBE), Rule("describe_cluster")),  # + authorized operations
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (Cluster(Operation.DESCRIBE_CONFIGS),),
    ApiKey.ALTER_CLIENT_QUOTAS: (Cluster(Operation.ALTER_CONFIGS),),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (Cluster(Operation.DESCRIBE),),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (Cluster(Operation.ALTER),),
    ApiKey.DESCRIBE_ACLS: (Cluster(Operation.DESCRIBE),),
    ApiKey.CREATE_ACLS: (Cluster(Operation.ALTER),),
    ApiKey.DELETE_ACLS: (Cluster(Operation.ALTER),),
    # inter-broker and controller RPCs
    ApiKey.VOTE: (Cluster(Operation.CLUSTER_ACTION),),
    ApiKey.BEGIN_QUORUM_EPOCH: (Cluster(Operation.CLUSTER_ACTION),),
    ApiKey.END_QUORUM_EPOCH: (Cluster(Operation.CLUSTER_ACTION),),
    ApiKey.FETCH_SNAPSHOT: (Cluster(Operation.CLUSTER_ACTION),),
    ApiKey.DESCRIBE_QUORUM: (Cluster(Operation.DESCRIBE),),
    ApiKey.ADD_RAFT_VOTER: (Cluster(Operation.ALTER),),  # KIP-853, as Kafka's KafkaApis/ControllerApis
    ApiKey.REMOVE_RAFT_VOTER: (Cluster(Operation.ALTER),),
    ApiKey.UPDATE_RAFT_VOTER: (Cluster(Operation.CLUSTER_ACTION),),
    ApiKey.BROKER_REGISTRATION: (Cluster(Operation.CLUSTER_ACTION),),
    ApiKey.BROKER_HEARTBEAT: (Cluster(Operation.CLUSTER_ACTION),),
    ApiKey.ALTER_PARTITION: (Cluster(Operation.CLUSTER_ACTION),),
}
