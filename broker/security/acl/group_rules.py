"""The ACL rules of the group APIs whose checks do not fit one ``Named`` check (pure):
FindCoordinator (group and transactional-id keys), OffsetFetch, DescribeGroups, ListGroups,
DeleteGroups and the KIP-848 ConsumerGroupHeartbeat / ConsumerGroupDescribe (also
ShareGroupDescribe) (Kafka's ``KafkaApis`` for each, cited per function; Kafka documentation
§7.5 "Authorization and ACLs").

Each rule takes the requester (``RequestAuth``), the request as the checks leave it (``Pending``)
and the broker's facts (``BrokerFacts``, unused here); it raises ``Denied`` to refuse the whole
request, or takes denied groups and topics out of the request and adds an ``Amend`` that puts
them back into the response.
"""

from __future__ import annotations

from typing import Any

from broker.security.acl.binding import Operation, ResourceType
from broker.security.acl.request import (
    AUTH_FAILED_MESSAGE,
    GROUP_AUTH,
    TOPIC_AUTH,
    TXN_AUTH,
    Body,
    BrokerFacts,
    Denied,
    Pending,
    RequestAuth,
    error_body,
)
from pyspark_log.wire.message import Message

NOT_REQUESTED_OPERATIONS = -(2**31)


def _key_rule(key_type: int) -> tuple[ResourceType, int]:
    if key_type == 1:
        return ResourceType.TRANSACTIONAL_ID, TXN_AUTH
    return ResourceType.GROUP, GROUP_AUTH


def find_coordinator(auth: RequestAuth, pending: Pending, broker: BrokerFacts) -> None:
    """DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) or the transactional id
    (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), per key from v4."""
    body = pending.body
    resource_type, code = _key_rule(int(body.get("key_type", 0)))
    if pending.version < 4:
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


def offset_fetch(auth: RequestAuth, pending: Pending, broker: BrokerFacts) -> None:
    """handleOffsetFetchRequest: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED), DESCRIBE on
    each named topic (TOPIC_AUTHORIZATION_FAILED per partition); all topics — only those one may
    DESCRIBE."""
    body = pending.body
    if pending.version < 8:
        if not auth.allowed(Operation.DESCRIBE, ResourceType.GROUP, body["group_id"]):
            out = error_body(pending.api_key, pending.version, body, GROUP_AUTH)
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


def describe_groups(auth: RequestAuth, pending: Pending, broker: BrokerFacts) -> None:
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
            result = [
                {**g, "authorized_operations": auth.operations(ResourceType.GROUP, g["group_id"])} for g in result
            ]
        out["groups"] = result + [_group_entry(g, GROUP_AUTH) for g in denied]
        return out

    pending.amends.append(amend)


def consumer_group_heartbeat(auth: RequestAuth, pending: Pending, broker: BrokerFacts) -> None:
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


def consumer_group_describe(auth: RequestAuth, pending: Pending, broker: BrokerFacts) -> None:
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
            result = [
                {**g, "authorized_operations": auth.operations(ResourceType.GROUP, g["group_id"])} for g in result
            ]
        result = [
            g if _described_topics_allowed(auth, g)
            else {**g, "error_code": TOPIC_AUTH, "error_message": DESCRIBED_TOPICS_MESSAGE, "members": []}
            for g in result
        ]  # fmt: skip
        refused = {"error_message": None, "group_epoch": 0, "assignment_epoch": 0, "assignor_name": ""}
        out["groups"] = result + [{**_group_entry(g, GROUP_AUTH), **refused} for g in denied]
        return out

    pending.amends.append(amend)


def list_groups(auth: RequestAuth, pending: Pending, broker: BrokerFacts) -> None:
    """DESCRIBE on the cluster lists every group; else only the groups one may DESCRIBE."""
    if auth.cluster(Operation.DESCRIBE):
        return

    def amend(out: Body) -> Body:
        out["groups"] = [
            g for g in out.get("groups") or [] if auth.allowed(Operation.DESCRIBE, ResourceType.GROUP, g["group_id"])
        ]
        return out

    pending.amends.append(amend)


def delete_groups(auth: RequestAuth, pending: Pending, broker: BrokerFacts) -> None:
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
