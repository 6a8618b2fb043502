"""The metadata workload and its checker (issue 31).

``MetadataWriter`` (confluent-kafka ``AdminClient``, one thread) cycles through operations, each
on names of its own so outcomes never interfere:

- ``create``: topic ``<prefix>-<n>`` (1 partition, replication factor 3);
- ``create-invalid``: a topic with replication factor 4 on 3 brokers — must fail
  (INVALID_REPLICATION_FACTOR) and never exist;
- ``grow``: the last created topic to 2 partitions (CreatePartitions);
- ``delete``: the topic created before it;
- ``acl``: an ALLOW READ ACL for ``User:chaos-<n>`` on topic ``<prefix>-acl-<n>``;
- ``acl-delete``: the ACL created before it.

Each is an ``Op`` (``value`` ``<kind>:<name>``): ``invoke`` then ``ok`` (the future's result),
``fail`` (a definite refusal: an error code saying the request was refused, e.g.
INVALID_REPLICATION_FACTOR, TOPIC_ALREADY_EXISTS for a create, UNKNOWN_TOPIC_OR_PART for a
grow/delete) or ``info`` (timeout, transport error, anything else: may or may not have happened).

``views(...)`` asks each broker on its own (a raw Metadata and DescribeAcls request) what it
sees; ``check_metadata`` (pure) compares each broker's view with the history after heal:

- ``missing``: an acknowledged create/grow/ACL not visible on some broker (a topic with fewer
  partitions than the acknowledged grow), or one acknowledged delete/ACL delete still visible;
- ``failed_visible``: a definitely failed create/grow/ACL visible on some broker.

Operations that were ``info`` may go either way; an operation that a later one undid (a created
topic later deleted) is judged by the last one whose outcome is known.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from pyspark_log.embedded_cluster import request
from pyspark_log.wire import ApiKey
from tests.chaos.checker import Op
from tests.chaos.workload import History, Worker

METADATA_ANOMALIES = ("missing", "failed_visible")
KINDS = ("create", "create-invalid", "grow", "acl", "delete", "acl-delete")
TIMEOUT_S = 15
# refusals that say the request was not carried out
DEFINITE = {
    KafkaError.INVALID_REPLICATION_FACTOR, KafkaError.INVALID_PARTITIONS, KafkaError.TOPIC_ALREADY_EXISTS,
    KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.INVALID_CONFIG, KafkaError.POLICY_VIOLATION,
}  # fmt: skip


def _acl(name: str) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, ResourcePatternType.LITERAL, f"User:chaos-{name}", "*",
                      AclOperation.READ, AclPermissionType.ALLOW)  # fmt: skip


class MetadataWriter(Worker):
    """See the module docstring; ``interval_s`` paces the operations."""

    kind = "metadata writer"

    def __init__(self, name: str, bootstrap: str, prefix: str, history: History, interval_s: float = 0.2) -> None:
        super().__init__(name)
        self.bootstrap, self.prefix, self.history, self.interval_s = bootstrap, prefix, history, interval_s

    def _run(self) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 2,
                             "topic.metadata.refresh.interval.ms": 1000})  # fmt: skip
        topics: list[str] = []
        acls: list[str] = []
        n = 0
        while not self.stop.is_set():
            kind = KINDS[n % len(KINDS)]
            name = f"{self.prefix}-{n}"
            if kind == "create":
                topics.append(name)
            elif kind == "grow" and topics:
                name = topics[-1]
            elif kind == "delete" and len(topics) >= 2:
                name = topics.pop(-2)
            elif kind == "acl":
                name = f"{self.prefix}-acl-{n}"
                acls.append(name)
            elif kind == "acl-delete" and len(acls) >= 2:
                name = acls.pop(-2)
            elif kind != "create-invalid":
                n += 1
                continue
            value = f"{kind}:{name}"
            self.history.add(self.name, "invoke", value, -1, n)
            outcome, error = self._outcome(admin, kind, name)
            self.history.add(self.name, outcome, value, -1, n, error=error)
            n += 1
            self.stop.wait(self.interval_s)

    @staticmethod
    def _submit(admin: AdminClient, kind: str, name: str) -> Any:
        if kind in ("create", "create-invalid"):
            rf = 3 if kind == "create" else 4
            return admin.create_topics([NewTopic(name, 1, rf)], request_timeout=TIMEOUT_S)[name]
        if kind == "grow":
            return admin.create_partitions([NewPartitions(name, 2)], request_timeout=TIMEOUT_S)[name]
        if kind == "delete":
            return admin.delete_topics([name], request_timeout=TIMEOUT_S)[name]
        binding = _acl(name)
        if kind == "acl":
            return admin.create_acls([binding], request_timeout=TIMEOUT_S)[binding]
        flt = AclBindingFilter(binding.restype, binding.name, binding.resource_pattern_type, binding.principal,
                               binding.host, binding.operation, binding.permission_type)  # fmt: skip
        return admin.delete_acls([flt], request_timeout=TIMEOUT_S)[flt]

    @classmethod
    def _outcome(cls, admin: AdminClient, kind: str, name: str) -> tuple[str, str | None]:
        try:
            result = cls._submit(admin, kind, name).result(TIMEOUT_S + 5)
        except KafkaException as exc:
            err = exc.args[0]
            return ("fail" if err.code() in DEFINITE else "info"), str(err)
        except Exception as exc:  # a future that timed out: unknown
            return "info", repr(exc)
        if isinstance(result, list) and not result:  # delete_acls matched nothing
            return "info", "no ACL matched"
        return "ok", None


def view(address: str, prefix: str) -> dict[str, Any]:
    """What one broker sees: ``{"topics": {name: partitions}, "acls": [resource names]}`` for the
    names starting with ``prefix``."""
    meta = request(address, ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})
    topics = {
        t.name: len(t.partitions) for t in meta.topics if t.name and t.name.startswith(prefix) and not t.error_code
    }
    acl_body = {"resource_type_filter": 2, "resource_name_filter": None, "pattern_type_filter": 3,
                "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}  # fmt: skip
    described = request(address, ApiKey.DESCRIBE_ACLS, 2, acl_body)
    acls = sorted(r.resource_name for r in described.resources if r.resource_name.startswith(prefix))
    return {"topics": topics, "acls": acls}


def expected(history: Iterable[Op]) -> dict[str, dict[str, Any]]:
    """Per name, the last operation with a known outcome: ``{"kind", "type"}`` (``info`` ones are
    kept only when nothing known follows, and then allow either state)."""
    last: dict[str, dict[str, Any]] = {}
    for op in history:
        if op.type == "invoke":
            continue
        kind, _, name = op.value.partition(":")
        last[name] = {"kind": kind, "type": op.type, "before": last.get(name)}
    return last


def check_metadata(history: Iterable[Op], views: Mapping[int, Mapping[str, Any]]) -> dict[str, list[Any]]:
    """``METADATA_ANOMALIES`` of each broker's view (see the module docstring)."""
    out: dict[str, list[Any]] = {a: [] for a in METADATA_ANOMALIES}
    for name, state in expected(history).items():
        kind, outcome = state["kind"], state["type"]
        for broker, seen in views.items():
            partitions = seen["topics"].get(name)
            acl = name in seen["acls"]
            where = {"name": name, "kind": kind, "outcome": outcome, "broker": broker, "partitions": partitions}
            if kind in ("create", "create-invalid"):
                if outcome == "ok" and partitions is None:
                    out["missing"].append(where)
                elif outcome == "fail" and partitions is not None and kind == "create-invalid":
                    out["failed_visible"].append(where)
            elif kind == "grow":
                if outcome == "ok" and (partitions or 0) < 2:  # (a refusal may answer a retry that did it)
                    out["missing"].append(where)
            elif kind == "delete":
                if outcome == "ok" and partitions is not None:
                    out["missing"].append(where)
            elif kind == "acl":
                if outcome == "ok" and not acl:
                    out["missing"].append(where)
                elif outcome == "fail" and acl:
                    out["failed_visible"].append(where)
            elif kind == "acl-delete" and outcome == "ok" and acl:
                out["missing"].append(where)
    return out


def converged_views(
    addresses: Mapping[int, str], prefix: str, history: list[Op], timeout_s: float = 90
) -> dict[int, Any]:
    """Each broker's view, polled until ``check_metadata`` finds nothing or ``timeout_s`` passed
    (metadata reaches brokers asynchronously; only a lasting difference is an anomaly)."""
    deadline = time.monotonic() + timeout_s
    while True:
        views: dict[int, Any] = {}
        for b, address in addresses.items():
            try:
                views[b] = view(address, prefix)
            except (OSError, ConnectionError):
                views[b] = None
        if all(v is not None for v in views.values()):
            found = check_metadata(history, views)
            if not any(found.values()) or time.monotonic() > deadline:
                return views
        elif time.monotonic() > deadline:
            raise TimeoutError(f"brokers not answering: {views}")
        time.sleep(0.5)
