"""The ACL rules of the APIs that ``acl_checks.Special`` names: those that do not fit one check
on one field (Kafka's ``KafkaApis`` for each, cited per function).

Each rule takes the requester (``RequestAuth``), the request as the checks leave it
(``Pending``) and the broker; it raises ``Denied`` to refuse the whole request, or takes denied
items out of the request and adds an ``Amend`` that puts them back into the response.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.api.authz_base import (
    Body,
    Denied,
    Pending,
    RequestAuth,
    deny_all_topics,
    error_body,
    filter_topics,
)
from broker.api.context import Broker
from broker.api.fetch import follower_id
from broker.api.produce import has_transactional_batch
from broker.api.topics import auto_create_enabled
from broker.raft.rpc import is_metadata_fetch
from broker.security.acl_checks import ADD_PARTITIONS, EPOCHS, FETCH, PRODUCE
from broker.security.authorizer import SUPPORTED_OPERATIONS, Operation, ResourceType
from pyspark_log.wire.errors import ErrorCode
from pyspark_log.wire.message import Message

TOPIC_AUTH = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_AUTH = ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_AUTH = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
TXN_AUTH = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
NOT_REQUESTED_OPERATIONS = -(2**31)
TOPIC_RESOURCE, BROKER_RESOURCE, BROKER_LOGGER_RESOURCE = 2, 4, 8
AUTH_FAILED_MESSAGE = "Authorization failed."


def _version(pending: Pending) -> int:
    return pending.request.header.api_version


def _api(pending: Pending) -> int:
    return pending.request.header.api_key


def produce_transactional(auth: RequestAuth, pending: Pending, broker: Broker) -> None:
    """Transactional records need WRITE on the transactional id: else every partition is
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED (Kafka's handleProduceRequest)."""
    body = pending.body
    if not has_transactional_batch(body):
        return
    txn_id = body.get("transactional_id")
    if txn_id is None or not auth.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
        if body.get("acks") == 0:
            raise Denied(None)  # acks=0: no response; the records are dropped
        raise Denied(deny_all_topics(pending, auth, PRODUCE, TXN_AUTH))


def produce_create(auth: RequestAuth, pending: Pending, broker: Broker) -> None:
    """A topic that does not exist is created by pylog's Produce only with CREATE on the cluster
    or the topic; without it the partitions are UNKNOWN_TOPIC_OR_PARTITION, what Kafka (which
    never creates on Produce) answers."""
    if auth.cluster(Operation.CREATE):
        return
    topics = auth.image.topics
    filter_topics(pending, auth, PRODUCE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                  lambda name: name in topics or auth.topic(Operation.CREATE, name))  # fmt: skip


def fetch(auth: RequestAuth, pending: Pending, broker: Broker) -> None:
    """Raft replication of the metadata log needs CLUSTER_ACTION (Kafka's controller: the whole
    request CLUSTER_AUTHORIZATION_FAILED); a follower's fetch CLUSTER_ACTION (else every partition
    TOPIC_AUTHORIZATION_FAILED); a consumer's READ on each topic (handleFetchRequest)."""
    if broker.raft is not None and is_metadata_fetch(_version(pending), pending.body):
        if not auth.cluster(Operation.CLUSTER_ACTION):
            raise Denied(error_body(_api(pending), _version(pending), pending.body, CLUSTER_AUTH))
        return
    if follower_id(_version(pending), pending.body) >= 0:
        allowed = auth.cluster(Operation.CLUSTER_ACTION)
        filter_topics(pending, auth, FETCH, TOPIC_AUTH, lambda _name: allowed)
    else:
        filter_topics(pending, auth, FETCH, TOPIC_AUTH, lambda name: auth.topic(Operation.READ, name))


def offset_for_leader_epoch(auth: RequestAuth, pending: Pending, broker: Broker) -> None:
    """A replica's request needs CLUSTER_ACTION; a consumer's DESCRIBE on each topic."""
    if int(pending.body.get("replica_id", -2)) >= 0:
        if not auth.cluster(Operation.CLUSTER_ACTION):
            raise Denied(deny_all_topics(pending, auth, EPOCHS, CLUSTER_AUTH))
        return
    filter_topics(pending, auth, EPOCHS, TOPIC_AUTH, lambda name: auth.topic(Operation.DESCRIBE, name))


def metadata(auth: RequestAuth, pending: Pending, broker: Broker) -> None:
    """handleTopicMetadataRequest: all topics — those one may DESCRIBE; named topics one may not
    DESCRIBE — TOPIC_AUTHORIZATION_FAILED; a missing topic auto-created only with CREATE on the
    cluster or the topic (else TOPIC_AUTHORIZATION_FAILED); authorized operations when asked."""
    body = pending.body
    version = _version(pending)
    requested = body.get("topics")
    denied: list[str] = []
    if requested is not None and not (version == 0 and not requested):
        may_create = (body.get("allow_auto_topic_creation", True) if version >= 4 else True) and auto_create_enabled(
            broker
        )
        cluster_create = auth.cluster(Operation.CREATE)
        kept = []
        for wanted in requested:
            name = wanted.get("name")
            if name is None and wanted.get("topic_id") is not None:
                name = auth.image.topic_ids.get(wanted["topic_id"])
            if name is None:
                kept.append(wanted)
            elif not auth.topic(Operation.DESCRIBE, name) or (
                name not in auth.image.topics
                and may_create
                and not cluster_create
                and not auth.topic(Operation.CREATE, name)
            ):
                denied.append(name)
            else:
                kept.append(wanted)
        if denied:
            pending.replace(topics=kept)
    all_topics = requested is None or (version == 0 and not requested)
    with_topic_ops = bool(body.get("include_topic_authorized_operations")) and version >= 8
    with_cluster_ops = bool(body.get("include_cluster_authorized_operations")) and 8 <= version <= 10

    def amend(out: Body) -> Body:
        topics = list(out.get("topics") or [])
        if all_topics:
            topics = [t for t in topics if t.get("name") is None or auth.topic(Operation.DESCRIBE, t["name"])]
        topics += [{"error_code": TOPIC_AUTH, "name": n, "is_internal": False, "partitions": []} for n in denied]
        if with_topic_ops:
            topics = [
                {**t, "topic_authorized_operations": _ops(auth, ResourceType.TOPIC, t["name"])}
                if t.get("error_code") == 0 and t.get("name") is not None else t
                for t in topics
            ]  # fmt: skip
        out["topics"] = topics
        if with_cluster_ops:
            out["cluster_authorized_operations"] = _ops(auth, ResourceType.CLUSTER, "kafka-cluster")
        return out

    pending.amends.append(amend)


def _ops(auth: RequestAuth, resource_type: ResourceType, name: str) -> int:
    return auth.authorizer.authorized_operations(
        auth.principal, auth.host, resource_type, name, SUPPORTED_OPERATIONS[resource_type]
    )


def describe_cluster(auth: RequestAuth, pending: Pending, broker: Broker) -> None:
    """DescribeCluster's ``cluster_authorized_operations`` when asked (Kafka computes it)."""
    if not pending.body.get("include_cluster_authorized_operations"):
        return

    def amend(out: Body) -> Body:
        out["cluster_authorized_operations"] = _ops(auth, ResourceType.CLUSTER, "kafka-cluster")
        return out

    pending.amends.append(amend)


def _key_rule(key_type: int) -> tuple[ResourceType, int]:
    if key_type == 1:
        return ResourceType.TRANSACTIONAL_ID, TXN_AUTH
    return ResourceType.GROUP, GROUP_AUTH


def find_coordinator(auth: RequestAuth, pending: Pending, broker: Broker) -> None:
    """DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) or the transactional id
    (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), per key from v4."""
    body = pending.body
    resource_type, code = _key_rule(int(body.get("key_type", 0)))
    if _version(pending) < 4:
        if not auth.allowed(Operation.DESCRIBE, resource_type, body["key"]):
            raise Denied({"error_code": code, "error_message": AUTH_FAILED_MESSAGE, "node_id": -1, "host": "",
                          "port": -1})  # fmt: skip
        return
    keys = list(body.get("coordinator_keys") or [])
    denied = [k for k in keys if not auth.allowed(Operation.DESCRIBE, resource_type, k)]
    if not denied:
        return
    pending.replace(coordinator_keys=[k for k in keys if k not in denied])
    entries = [{"key": k, "node_id": -1, "host": "", "port": -1, "error_code": code,
                "error_message": AUTH_FAILED_MESSAGE} for k in denied]  # fmt: skip

    def amend(out: Body) -> Body:
        out["coordinators"] = list(out.get("coordinators") or []) + entries
        return out

    pending.amends.append(amend)


def offset_fetch(auth: RequestAuth, pending: Pending, broker: Broker) -> None:
    """handleOffsetFetchRequest: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED), DESCRIBE on
    each named topic (TOPIC_AUTHORIZATION_FAILED per partition); all topics — only those one may
    DESCRIBE."""
    body = pending.body
    if _version(pending) < 8:
        if not auth.allowed(Operation.DESCRIBE, ResourceType.GROUP, body["group_id"]):
            out = error_body(_api(pending), _version(pending), body, GROUP_AUTH)
            out["topics"] = [
                {"name": t["name"], "partitions": [
                    {"partition_index": p, "committed_offset": -1, "metadata": "", "error_code": GROUP_AUTH}
                    for p in t["partition_indexes"]]}
                for t in body.get("topics") or []
            ]  # fmt: skip
            raise Denied(out)
        _offset_fetch_topics(auth, pending, body.get("topics"))
        return
    groups = list(body.get("groups") or [])
    denied = [g for g in groups if not auth.allowed(Operation.DESCRIBE, ResourceType.GROUP, g["group_id"])]
    kept = [g for g in groups if g not in denied]
    replaced = []
    for group in kept:
        topics = group.get("topics")
        if topics is None:
            replaced.append(group)
            continue
        allowed = [t for t in topics if auth.topic(Operation.DESCRIBE, t["name"])]
        replaced.append(Message({**group, "topics": allowed}))  # handlers read attributes
    pending.replace(groups=replaced)
    denied_topics = {
        g["group_id"]: [t for t in g.get("topics") or [] if not auth.topic(Operation.DESCRIBE, t["name"])] for g in kept
    }
    all_topics = {g["group_id"] for g in kept if g.get("topics") is None}

    def amend(out: Body) -> Body:
        result = []
        for group in out.get("groups") or []:
            gid = group["group_id"]
            topics = list(group.get("topics") or [])
            if gid in all_topics:
                topics = [t for t in topics if auth.topic(Operation.DESCRIBE, t["name"])]
            topics += [_unauthorized_offsets(t) for t in denied_topics.get(gid, [])]
            result.append({**group, "topics": topics})
        result += [{"group_id": g["group_id"], "topics": [], "error_code": GROUP_AUTH} for g in denied]
        out["groups"] = result
        return out

    pending.amends.append(amend)


def _unauthorized_offsets(topic: Any) -> dict[str, Any]:
    return {"name": topic["name"], "partitions": [
        {"partition_index": p, "committed_offset": -1, "metadata": "", "error_code": TOPIC_AUTH}
        for p in topic["partition_indexes"]]}  # fmt: skip


def _offset_fetch_topics(auth: RequestAuth, pending: Pending, topics: Any) -> None:
    """OffsetFetch v0-7's topics: named ones one may not DESCRIBE answered per partition, all
    topics filtered."""
    if topics is None:

        def amend_all(out: Body) -> Body:
            out["topics"] = [t for t in out.get("topics") or [] if auth.topic(Operation.DESCRIBE, t["name"])]
            return out

        pending.amends.append(amend_all)
        return
    denied = [t for t in topics if not auth.topic(Operation.DESCRIBE, t["name"])]
    if not denied:
        return
    pending.replace(topics=[t for t in topics if t not in denied])

    def amend(out: Body) -> Body:
        out["topics"] = list(out.get("topics") or []) + [_unauthorized_offsets(t) for t in denied]
        return out

    pending.amends.append(amend)


def _group_entry(group_id: str, code: int) -> dict[str, Any]:
    return {"error_code": code, "group_id": group_id, "group_state": "", "protocol_type": "", "protocol_data": "",
            "members": [], "authorized_operations": NOT_REQUESTED_OPERATIONS}  # fmt: skip


def describe_groups(auth: RequestAuth, pending: Pending, broker: Broker) -> None:
    """DESCRIBE per group (GROUP_AUTHORIZATION_FAILED); the group's authorized operations when
    asked (v3+)."""
    body = pending.body
    groups = list(body.get("groups") or [])
    denied = [g for g in groups if not auth.allowed(Operation.DESCRIBE, ResourceType.GROUP, g)]
    if denied:
        pending.replace(groups=[g for g in groups if g not in denied])
    with_ops = bool(body.get("include_authorized_operations"))

    def amend(out: Body) -> Body:
        result = list(out.get("groups") or [])
        if with_ops:
            result = [{**g, "authorized_operations": _ops(auth, ResourceType.GROUP, g["group_id"])} for g in result]
        out["groups"] = result + [_group_entry(g, GROUP_AUTH) for g in denied]
        return out

    pending.amends.append(amend)


def consumer_group_heartbeat(auth: RequestAuth, pending: Pending, broker: Broker) -> None:
    """ConsumerGroupHeartbeat (KIP-848), after READ on the group: DESCRIBE on every name in
    ``SubscribedTopicNames``, else the heartbeat is answered TOPIC_AUTHORIZATION_FAILED with no
    message (Kafka 4.1 ``KafkaApis.handleConsumerGroupHeartbeat``). Regex subscriptions are not
    filtered by ACL (docs/compatibility.md)."""
    names = pending.body.get("subscribed_topic_names") or []
    if any(not auth.topic(Operation.DESCRIBE, name) for name in set(names)):
        raise Denied({"error_code": TOPIC_AUTH, "error_message": None, "member_epoch": 0,
                      "heartbeat_interval_ms": 0, "assignment": None})  # fmt: skip


DESCRIBED_TOPICS_MESSAGE = "The group has described topic(s) that the client is not authorized to describe."


def _described_topics_allowed(auth: RequestAuth, group: Body) -> bool:
    """Every topic in a described member's current and target assignment may be DESCRIBEd."""
    for member in group.get("members") or []:
        for field in ("assignment", "target_assignment"):
            for tp in (member.get(field) or {}).get("topic_partitions") or []:
                if not auth.topic(Operation.DESCRIBE, tp["topic_name"]):
                    return False
    return True


def consumer_group_describe(auth: RequestAuth, pending: Pending, broker: Broker) -> None:
    """ConsumerGroupDescribe (KIP-848): DESCRIBE per group, as DescribeGroups; a described group
    one of whose members' current or target assignment names a topic the client may not DESCRIBE
    is answered TOPIC_AUTHORIZATION_FAILED without its members (Kafka 4.1
    ``KafkaApis.handleConsumerGroupDescribe``; the same for ShareGroupDescribe)."""
    body = pending.body
    groups = list(body.get("group_ids") or [])
    denied = [g for g in groups if not auth.allowed(Operation.DESCRIBE, ResourceType.GROUP, g)]
    if denied:
        pending.replace(group_ids=[g for g in groups if g not in denied])
    with_ops = bool(body.get("include_authorized_operations"))

    def amend(out: Body) -> Body:
        result = list(out.get("groups") or [])
        if with_ops:
            result = [{**g, "authorized_operations": _ops(auth, ResourceType.GROUP, g["group_id"])} for g in result]
        result = [
            g if _described_topics_allowed(auth, g)
            else {**g, "error_code": TOPIC_AUTH, "error_message": DESCRIBED_TOPICS_MESSAGE, "members": []}
            for g in result
        ]  # fmt: skip
        refused = {"error_message": None, "group_epoch": 0, "assignment_epoch": 0, "assignor_name": ""}
        out["groups"] = result + [{**_group_entry(g, GROUP_AUTH), **refused} for g in denied]
        return out

    pending.amends.append(amend)


def list_groups(auth: RequestAuth, pending: Pending, broker: Broker) -> None:
    """DESCRIBE on the cluster lists every group; else only the groups one may DESCRIBE."""
    if auth.cluster(Operation.DESCRIBE):
        return

    def amend(out: Body) -> Body:
        out["groups"] = [
            g for g in out.get("groups") or [] if auth.allowed(Operation.DESCRIBE, ResourceType.GROUP, g["group_id"])
        ]
        return out

    pending.amends.append(amend)


def delete_groups(auth: RequestAuth, pending: Pending, broker: Broker) -> None:
    """DELETE per group (GROUP_AUTHORIZATION_FAILED)."""
    names = list(pending.body.get("groups_names") or [])
    denied = [g for g in names if not auth.allowed(Operation.DELETE, ResourceType.GROUP, g)]
    if not denied:
        return
    pending.replace(groups_names=[g for g in names if g not in denied])

    def amend(out: Body) -> Body:
        out["results"] = list(out.get("results") or []) + [{"group_id": g, "error_code": GROUP_AUTH} for g in denied]
        return out

    pending.amends.append(amend)


def init_producer_id(auth: RequestAuth, pending: Pending, broker: Broker) -> None:
    """A transactional producer needs WRITE on its transactional id; an idempotent one
    IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679, Kafka 3.0+)."""
    txn_id = pending.body.get("transactional_id")
    if txn_id is not None:
        if not auth.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
            raise Denied({"error_code": TXN_AUTH, "producer_id": -1, "producer_epoch": -1})
        return
    if auth.cluster(Operation.IDEMPOTENT_WRITE):
        return
    if auth.authorizer.authorize_by_resource_type(auth.principal, auth.host, Operation.WRITE, ResourceType.TOPIC):
        return
    raise Denied({"error_code": CLUSTER_AUTH, "producer_id": -1, "producer_epoch": -1})


def add_partitions_to_txn(auth: RequestAuth, pending: Pending, broker: Broker) -> None:
    """v0-3 (a producer): WRITE on the transactional id, WRITE on every topic; any denied topic is
    TOPIC_AUTHORIZATION_FAILED and the others OPERATION_NOT_ATTEMPTED. v4 (a broker verifying):
    CLUSTER_ACTION."""
    body = pending.body
    if _version(pending) >= 4:
        if not auth.cluster(Operation.CLUSTER_ACTION):
            raise Denied({"error_code": CLUSTER_AUTH})
        return
    if not auth.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, body["v3_and_below_transactional_id"]):
        raise Denied(deny_all_topics(pending, auth, ADD_PARTITIONS, TXN_AUTH))
    topics = body.get("v3_and_below_topics") or []
    denied = {t["name"] for t in topics if not auth.topic(Operation.WRITE, t["name"])}
    if denied:
        raise Denied({"results_by_topic_v3_and_below": [
            {"name": t["name"], "results_by_partition": [
                {"partition_index": p,
                 "partition_error_code": TOPIC_AUTH if t["name"] in denied else ErrorCode.OPERATION_NOT_ATTEMPTED}
                for p in t["partitions"]]}
            for t in topics
        ]})  # fmt: skip


def describe_transactions(auth: RequestAuth, pending: Pending, broker: Broker) -> None:
    """DESCRIBE per transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)."""
    ids = list(pending.body.get("transactional_ids") or [])
    denied = [i for i in ids if not auth.allowed(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, i)]
    if not denied:
        return
    pending.replace(transactional_ids=[i for i in ids if i not in denied])
    entries = [{"error_code": TXN_AUTH, "transactional_id": i, "transaction_state": "", "transaction_timeout_ms": 0,
                "transaction_start_time_ms": -1, "producer_id": -1, "producer_epoch": -1, "topics": []}
               for i in denied]  # fmt: skip

    def amend(out: Body) -> Body:
        out["transaction_states"] = list(out.get("transaction_states") or []) + entries
        return out

    pending.amends.append(amend)


def list_transactions(auth: RequestAuth, pending: Pending, broker: Broker) -> None:
    """Only the transactional ids one may DESCRIBE are listed."""

    def amend(out: Body) -> Body:
        out["transaction_states"] = [
            t for t in out.get("transaction_states") or []
            if auth.allowed(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t["transactional_id"])
        ]  # fmt: skip
        return out

    pending.amends.append(amend)


def _per_item(  # noqa: PLR0917
    pending: Pending, request_field: str, name_of: Callable[[Any], str | None], allowed: Callable[[str], bool],
    response_field: str, entry: Callable[[Any, str], dict[str, Any]],
) -> None:  # fmt: skip
    items = list(pending.body.get(request_field) or [])
    denied = [i for i in items if (n := name_of(i)) is not None and not allowed(n)]
    if not denied:
        return
    pending.replace(**{request_field: [i for i in items if i not in denied]})
    entries = [entry(i, name_of(i) or "") for i in denied]

    def amend(out: Body) -> Body:
        out[response_field] = list(out.get(response_field) or []) + entries
        return out

    pending.amends.append(amend)


def _topic_error(_item: Any, name: str) -> dict[str, Any]:
    return {"name": name, "error_code": TOPIC_AUTH, "error_message": AUTH_FAILED_MESSAGE}


def create_topics(auth: RequestAuth, pending: Pending, broker: Broker) -> None:
    """CREATE on the cluster, else CREATE on each topic (TOPIC_AUTHORIZATION_FAILED)."""
    if auth.cluster(Operation.CREATE):
        return
    _per_item(pending, "topics", lambda t: t["name"], lambda n: auth.topic(Operation.CREATE, n), "topics",
              _topic_error)  # fmt: skip


def delete_topics(auth: RequestAuth, pending: Pending, broker: Broker) -> None:
    """DELETE on each topic (TOPIC_AUTHORIZATION_FAILED); a topic id this broker does not know
    is left to the handler (UNKNOWN_TOPIC_ID)."""

    def allowed(name: str) -> bool:
        return auth.topic(Operation.DELETE, name)

    if _version(pending) < 6:
        _per_item(pending, "topic_names", lambda n: n, allowed, "responses", _topic_error)
        return

    def name_of(topic: Any) -> str | None:
        if topic.get("name") is not None:
            return str(topic["name"])
        return auth.image.topic_ids.get(topic.get("topic_id"))

    def entry(topic: Any, name: str) -> dict[str, Any]:
        return {**_topic_error(topic, name), "topic_id": topic.get("topic_id")}

    _per_item(pending, "topics", name_of, allowed, "responses", entry)


def create_partitions(auth: RequestAuth, pending: Pending, broker: Broker) -> None:
    """ALTER on each topic (TOPIC_AUTHORIZATION_FAILED)."""
    _per_item(pending, "topics", lambda t: t["name"], lambda n: auth.topic(Operation.ALTER, n), "results",
              _topic_error)  # fmt: skip


def _config_rule(auth: RequestAuth, operation: Operation) -> Callable[[Any], int]:
    """The error a config resource gets (0: allowed): topics need ``operation`` on the topic,
    brokers and broker loggers on the cluster."""

    def code(resource: Any) -> int:
        if int(resource["resource_type"]) == TOPIC_RESOURCE:
            return 0 if auth.topic(operation, resource["resource_name"]) else TOPIC_AUTH
        if int(resource["resource_type"]) in (BROKER_RESOURCE, BROKER_LOGGER_RESOURCE):
            return 0 if auth.cluster(operation) else CLUSTER_AUTH
        return 0

    return code


def _configs(
    pending: Pending, operation: Operation, auth: RequestAuth, response_field: str, with_configs: bool
) -> None:
    code_of = _config_rule(auth, operation)
    resources = list(pending.body.get("resources") or [])
    denied = [(r, code) for r in resources if (code := code_of(r))]
    if not denied:
        return
    pending.replace(resources=[r for r in resources if not code_of(r)])
    entries = []
    for resource, code in denied:
        entry = {"error_code": code, "error_message": AUTH_FAILED_MESSAGE,
                 "resource_type": resource["resource_type"], "resource_name": resource["resource_name"]}  # fmt: skip
        if with_configs:
            entry["configs"] = []
        entries.append(entry)

    def amend(out: Body) -> Body:
        out[response_field] = list(out.get(response_field) or []) + entries
        return out

    pending.amends.append(amend)


def describe_configs(auth: RequestAuth, pending: Pending, broker: Broker) -> None:
    """DESCRIBE_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED) or the cluster for a broker
    (CLUSTER_AUTHORIZATION_FAILED)."""
    _configs(pending, Operation.DESCRIBE_CONFIGS, auth, "results", True)


def alter_configs(auth: RequestAuth, pending: Pending, broker: Broker) -> None:
    """ALTER_CONFIGS, as describe_configs (AlterConfigs and IncrementalAlterConfigs)."""
    _configs(pending, Operation.ALTER_CONFIGS, auth, "responses", False)


Rule = Callable[[RequestAuth, Pending, Broker], None]
SPECIAL: dict[str, Rule] = {
    "produce_transactional": produce_transactional,
    "produce_create": produce_create,
    "fetch": fetch,
    "offset_for_leader_epoch": offset_for_leader_epoch,
    "metadata": metadata,
    "find_coordinator": find_coordinator,
    "describe_cluster": describe_cluster,
    "offset_fetch": offset_fetch,
    "describe_groups": describe_groups,
    "consumer_group_heartbeat": consumer_group_heartbeat,
    "consumer_group_describe": consumer_group_describe,
    "list_groups": list_groups,
    "delete_groups": delete_groups,
    "init_producer_id": init_producer_id,
    "add_partitions_to_txn": add_partitions_to_txn,
    "describe_transactions": describe_transactions,
    "list_transactions": list_transactions,
    "create_topics": create_topics,
    "delete_topics": delete_topics,
    "create_partitions": create_partitions,
    "describe_configs": describe_configs,
    "alter_configs": alter_configs,
}
