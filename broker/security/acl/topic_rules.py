"""The ACL rules of the topic APIs whose checks do not fit one ``Topics`` check (pure): a
producer's topic creation, a fetch by a consumer or a replica, Metadata's topic listing and
auto-creation, CreateTopics, DeleteTopics, CreatePartitions (Kafka's ``KafkaApis`` for each,
cited per function; Kafka documentation §7.5 "Authorization and ACLs").

Each rule takes the requester (``RequestAuth``), the request as the checks leave it (``Pending``)
and what it needs of the broker (``BrokerFacts``); it raises ``Denied`` to refuse the whole
request, or takes denied topics out of the request and adds an ``Amend`` that puts them back
into the response.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.raft.rpc import is_metadata_fetch
from broker.security.acl.binding import Operation, ResourceType
from broker.security.acl.checks import EPOCHS, FETCH, PRODUCE
from broker.security.acl.request import (
    AUTH_FAILED_MESSAGE,
    CLUSTER_AUTH,
    TOPIC_AUTH,
    Body,
    BrokerFacts,
    Denied,
    Pending,
    RequestAuth,
    deny_all_topics,
    error_body,
    filter_topics,
)
from pyspark_log.wire.errors import ErrorCode


def produce_create(auth: RequestAuth, pending: Pending, broker: BrokerFacts) -> None:
    """A topic that does not exist is created by pylog's Produce only with CREATE on the cluster
    or the topic; without it the partitions are UNKNOWN_TOPIC_OR_PARTITION, what Kafka (which
    never creates on Produce) answers."""
    if auth.cluster(Operation.CREATE):
        return
    topics = auth.image.topics
    filter_topics(pending, auth, PRODUCE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                  lambda name: name in topics or auth.topic(Operation.CREATE, name))  # fmt: skip


def fetch(auth: RequestAuth, pending: Pending, broker: BrokerFacts) -> None:
    """Raft replication of the metadata log needs CLUSTER_ACTION (Kafka's controller: the whole
    request CLUSTER_AUTHORIZATION_FAILED); a follower's fetch CLUSTER_ACTION (else every partition
    TOPIC_AUTHORIZATION_FAILED); a consumer's READ on each topic (handleFetchRequest)."""
    if broker.serves_metadata_quorum() and is_metadata_fetch(pending.version, pending.body):
        if not auth.cluster(Operation.CLUSTER_ACTION):
            raise Denied(error_body(pending.api_key, pending.version, pending.body, CLUSTER_AUTH))
        return
    if broker.fetching_replica(pending.version, pending.body) >= 0:
        allowed = auth.cluster(Operation.CLUSTER_ACTION)
        filter_topics(pending, auth, FETCH, TOPIC_AUTH, lambda _name: allowed)
    else:
        filter_topics(pending, auth, FETCH, TOPIC_AUTH, lambda name: auth.topic(Operation.READ, name))


def offset_for_leader_epoch(auth: RequestAuth, pending: Pending, broker: BrokerFacts) -> None:
    """A replica's request needs CLUSTER_ACTION; a consumer's DESCRIBE on each topic."""
    if int(pending.body.get("replica_id", -2)) >= 0:
        if not auth.cluster(Operation.CLUSTER_ACTION):
            raise Denied(deny_all_topics(pending, auth, EPOCHS, CLUSTER_AUTH))
        return
    filter_topics(pending, auth, EPOCHS, TOPIC_AUTH, lambda name: auth.topic(Operation.DESCRIBE, name))


def metadata(auth: RequestAuth, pending: Pending, broker: BrokerFacts) -> None:
    """handleTopicMetadataRequest: all topics — those one may DESCRIBE; named topics one may not
    DESCRIBE — TOPIC_AUTHORIZATION_FAILED; a missing topic auto-created only with CREATE on the
    cluster or the topic (else TOPIC_AUTHORIZATION_FAILED); authorized operations when asked."""
    body = pending.body
    version = pending.version
    requested = body.get("topics")
    denied: list[str] = []
    if requested is not None and not (version == 0 and not requested):
        may_create = (
            body.get("allow_auto_topic_creation", True) if version >= 4 else True
        ) and broker.auto_creates_topics()
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
                {**t, "topic_authorized_operations": auth.operations(ResourceType.TOPIC, t["name"])}
                if t.get("error_code") == 0 and t.get("name") is not None else t
                for t in topics
            ]  # fmt: skip
        out["topics"] = topics
        if with_cluster_ops:
            out["cluster_authorized_operations"] = auth.operations(ResourceType.CLUSTER, "kafka-cluster")
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


def create_topics(auth: RequestAuth, pending: Pending, broker: BrokerFacts) -> None:
    """CREATE on the cluster, else CREATE on each topic (TOPIC_AUTHORIZATION_FAILED)."""
    if auth.cluster(Operation.CREATE):
        return
    _per_item(pending, "topics", lambda t: t["name"], lambda n: auth.topic(Operation.CREATE, n), "topics",
              _topic_error)  # fmt: skip


def delete_topics(auth: RequestAuth, pending: Pending, broker: BrokerFacts) -> None:
    """DELETE on each topic (TOPIC_AUTHORIZATION_FAILED); a topic id this broker does not know
    is left to the handler (UNKNOWN_TOPIC_ID)."""

    def allowed(name: str) -> bool:
        return auth.topic(Operation.DELETE, name)

    if pending.version < 6:
        _per_item(pending, "topic_names", lambda n: n, allowed, "responses", _topic_error)
        return

    def name_of(topic: Any) -> str | None:
        if topic.get("name") is not None:
            return str(topic["name"])
        return auth.image.topic_ids.get(topic.get("topic_id"))

    def entry(topic: Any, name: str) -> dict[str, Any]:
        return {**_topic_error(topic, name), "topic_id": topic.get("topic_id")}

    _per_item(pending, "topics", name_of, allowed, "responses", entry)


def create_partitions(auth: RequestAuth, pending: Pending, broker: BrokerFacts) -> None:
    """ALTER on each topic (TOPIC_AUTHORIZATION_FAILED)."""
    _per_item(pending, "topics", lambda t: t["name"], lambda n: auth.topic(Operation.ALTER, n), "results",
              _topic_error)  # fmt: skip
