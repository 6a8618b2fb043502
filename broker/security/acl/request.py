"""A request under the ACL checks (pure): who asks (``RequestAuth``), what is left of the request
(``Pending``), and the refusals (``Denied``, ``error_body``); what the rules share.

A check or rule (``broker.security.acl.rules``) either denies the whole request — it raises
``Denied`` with the response (every error field of the API carrying the check's code, Kafka's
``getErrorResponse``) and the handler does not run — or takes denied items (topics, groups,
transactional ids) out of the request and adds an ``Amend`` that puts them back into the handler's
response with their error code (Kafka's ``KafkaApis`` answers unauthorized items this way).

The principal is ``User:<name>`` after SASL, the certificate's ``User:CN=…`` with mTLS,
``User:ANONYMOUS`` otherwise, as Kafka (Kafka documentation §7.5 "Authorization and ACLs");
decisions are the ``Authorizer``'s, built once per metadata image (``authority``). What a rule
must know of the broker beyond the ACLs it asks through ``BrokerFacts``, which the API layer
(``broker.api.authz``) answers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from broker.metadata.image import MetadataImage
from broker.security.acl.authorizer import SUPPORTED_OPERATIONS, Authorizer
from broker.security.acl.binding import Operation, ResourceType
from broker.security.acl.checks import CHECKS, Topics, TopicShape
from pyspark_log.wire.acl_codes import CLUSTER_NAME
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.errors import ErrorCode
from pyspark_log.wire.headers import RequestHeader
from pyspark_log.wire.message import Message
from pyspark_log.wire.registry import get_api

Body = dict[str, Any]
Amend = Callable[[Body], Body]

TOPIC_AUTH = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_AUTH = ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_AUTH = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
TXN_AUTH = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
AUTH_FAILED_MESSAGE = "Authorization failed."


class BrokerFacts(Protocol):
    """What the rules ask of the broker and of request layouts the API handlers own."""

    def serves_metadata_quorum(self) -> bool:
        """Whether this node runs the KIP-595 metadata quorum (``process.roles`` set)."""
        ...

    def auto_creates_topics(self) -> bool:
        """``auto.create.topics.enable``."""
        ...

    def fetching_replica(self, version: int, body: Any) -> int:
        """The broker id of a Fetch request's replica, -1 for a consumer."""
        ...

    def has_transactional_batch(self, body: Any) -> bool:
        """Whether a Produce request carries transactional records."""
        ...


@dataclass(frozen=True)
class RequestAuth:
    """Who asks, and the authorizer that answers."""

    principal: str
    host: str
    authorizer: Authorizer
    image: MetadataImage

    def allowed(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        return self.authorizer.authorize(self.principal, self.host, operation, resource_type, name)

    def cluster(self, operation: Operation) -> bool:
        return self.allowed(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def topic(self, operation: Operation, name: str) -> bool:
        return self.allowed(operation, ResourceType.TOPIC, name)

    def operations(self, resource_type: ResourceType, name: str) -> int:
        """Kafka's authorized-operations bit field of the resource (KIP-430)."""
        return self.authorizer.authorized_operations(
            self.principal, self.host, resource_type, name, SUPPORTED_OPERATIONS[resource_type]
        )


class Denied(Exception):
    """The whole request is refused; ``body`` is the response (None: no response, acks=0)."""

    def __init__(self, body: Mapping[str, Any] | None) -> None:
        super().__init__("denied")
        self.body = body


@dataclass
class Pending:
    """A request as the checks leave it: its (possibly reduced) body and the amendments to make
    to the handler's response."""

    header: RequestHeader
    body: Any
    amends: list[Amend]

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def api_key(self) -> int:
        return self.header.api_key

    def replace(self, **fields: Any) -> Message:
        body = Message(self.body)
        body.update(fields)
        self.body = body
        return body


# -- topics ---------------------------------------------------------------------------------------
def topic_name(auth: RequestAuth, topic: Any, shape: TopicShape) -> str | None:
    """The topic's name; a request that names topics by id (Fetch v13+, absent names decode as
    ``""``) is resolved through the image (None: an id this broker does not know)."""
    name = topic.get(shape.request_name)
    topic_id = topic.get("topic_id")
    if not name and topic_id is not None and topic_id.int != 0:
        return auth.image.topic_ids.get(topic_id)
    return name or None


def filter_topics(
    pending: Pending, auth: RequestAuth, shape: TopicShape, code: int, allowed: Callable[[str], bool]
) -> None:
    """Take the topics ``allowed`` refuses out of the request; answer each partition with ``code``.
    A topic id this broker does not know stays in (the handler answers UNKNOWN_TOPIC_ID)."""
    kept, denied = [], []
    for topic in pending.body.get(shape.request_topics) or []:
        name = topic_name(auth, topic, shape)
        if name is None or allowed(name):
            kept.append(topic)
        else:
            denied.append(topic)
    if not denied:
        return
    pending.replace(**{shape.request_topics: kept})
    entries = [_denied_topic(topic, shape, code, auth) for topic in denied]

    def amend(body: Body) -> Body:
        body[shape.response_topics] = list(body.get(shape.response_topics) or []) + entries
        return body

    pending.amends.append(amend)


def _denied_topic(topic: Any, shape: TopicShape, code: int, auth: RequestAuth) -> dict[str, Any]:
    return {**_denied_topic_named(topic, shape, code), shape.response_name: topic_name(auth, topic, shape)}


def _denied_topic_named(topic: Any, shape: TopicShape, code: int) -> dict[str, Any]:
    if shape.request_index is None:
        indexes = [int(p) for p in topic.get(shape.request_partitions) or []]
    else:
        indexes = [int(p[shape.request_index]) for p in topic.get(shape.request_partitions) or []]
    entry: dict[str, Any] = {
        shape.response_name: topic.get(shape.request_name),
        shape.response_partitions: [
            {shape.response_index: i, shape.error_field: code, **dict(shape.partition_extra)} for i in indexes
        ],
    }
    if topic.get("topic_id") is not None:
        entry["topic_id"] = topic["topic_id"]
    return entry


def deny_all_topics(pending: Pending, auth: RequestAuth, shape: TopicShape, code: int) -> Body:
    """The response with every topic of the request denied with ``code``."""
    return {shape.response_topics: [_denied_topic(t, shape, code, auth) for t in pending.body.get(
        shape.request_topics) or []]}  # fmt: skip


# -- whole-request refusals -----------------------------------------------------------------------
_TOPIC_SHAPED: dict[int, TopicShape] = {}
for _key, _checks in CHECKS.items():
    for _check in _checks:
        if isinstance(_check, Topics):
            _TOPIC_SHAPED.setdefault(_key, _check.shape)


def error_body(api_key: int, version: int, body: Any, code: int) -> Body:
    """A response to ``body`` in which every error field carries ``code`` (Kafka's
    ``getErrorResponse``): top-level error codes, each topic's partitions, each item of the
    APIs that answer per item."""
    out: Body = {}
    fields = {f.name: f for f in get_api(api_key).response.fields if f.present(version)}
    if "error_code" in fields:
        out["error_code"] = code
    if "error_message" in fields:
        out["error_message"] = ErrorCode(code).name.replace("_", " ").capitalize() + "."
    shape = _TOPIC_SHAPED.get(api_key)
    if shape is not None and shape.response_topics in fields:
        out[shape.response_topics] = [_denied_topic_named(t, shape, code) for t in body.get(shape.request_topics) or []]
    per_item = _PER_ITEM.get(api_key)
    if per_item is not None:
        out.update(per_item(body, code))
    return out


def _quota_entries(body: Any, code: int) -> Body:
    return {"entries": [{"error_code": code, "error_message": None, "entity": e.entity} for e in body.entries]}


def _scram_results(body: Any, code: int) -> Body:
    names = dict.fromkeys([str(d.name) for d in body.deletions] + [str(u.name) for u in body.upsertions])
    return {"results": [{"user": n, "error_code": code, "error_message": None} for n in names]}


def _log_dir_moves(body: Any, code: int) -> Body:
    parts: dict[str, list[dict[str, int]]] = {}
    for target in body.dirs:
        for topic in target.topics:
            parts.setdefault(str(topic.name), []).extend(
                {"partition_index": p, "error_code": code} for p in topic.partitions
            )
    return {"results": [{"topic_name": name, "partitions": items} for name, items in parts.items()]}


def _markers(body: Any, code: int) -> Body:
    return {"markers": [
        {"producer_id": m.producer_id, "topics": [
            {"name": t.name, "partitions": [{"partition_index": p, "error_code": code} for p in t.partition_indexes]}
            for t in m.topics]}
        for m in body.markers
    ]}  # fmt: skip


_PER_ITEM: dict[int, Callable[[Any, int], Body]] = {
    ApiKey.CREATE_ACLS: lambda body, code: {"results": [{"error_code": code} for _ in body.creations]},
    ApiKey.DELETE_ACLS: lambda body, code: {"filter_results": [{"error_code": code} for _ in body.filters]},
    ApiKey.ALTER_CLIENT_QUOTAS: _quota_entries,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _scram_results,
    ApiKey.WRITE_TXN_MARKERS: _markers,
    ApiKey.ALTER_REPLICA_LOG_DIRS: _log_dir_moves,
}
