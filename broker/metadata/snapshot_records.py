"""The metadata image as KIP-630 snapshot records, and back.

KIP-630: a snapshot holds *the state of the replicated state machine* at an offset, so a
replica can start from it instead of replaying the log. pylog's state is ``ClusterState``
(``broker.metadata.cluster_state``); replaying pylog's records cannot rebuild it exactly (a broker epoch is the
offset of its RegisterBrokerRecord, a partition epoch counts changes), so a snapshot does not
re-emit log records: each snapshot record is one piece of the state, ``b"S" 0x01`` + compact
JSON with a ``kind``::

    {"kind": "cluster", "cluster_id": ..., "applied_offset": ...}        first, exactly once
    {"kind": "broker", ...BrokerRegistration fields}                     one per registration
    {"kind": "topic", "name", "topic_id", "configs", "partitions": [...]} one per topic
    {"kind": "scram", "name", "mechanism", "salt", "stored_key", "server_key", "iterations"}
    {"kind": "quota", "entity": [[type, name], ...], "values": {...}}
    {"kind": "acl", "id", "resource_type", "name", "pattern_type", "principal", "host",
                    "operation", "permission"}
    {"kind": "broker_config", "resource": ..., "values": {...}}

``state_to_records`` / ``state_from_records`` are pure and inverse:
``state_from_records(state_to_records(s)) == s``. ``SnapshotRecordError`` on a malformed record.
The record layout inside the file is ``broker.raft.snapshot``'s.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from broker.metadata.cluster_state import BrokerRegistration, ClusterState
from broker.metadata.image import PartitionImage, TopicImage
from broker.security.acl.binding import AclBinding, Operation, Permission
from broker.security.sasl.scram import ScramCredential
from pyspark_log.wire.acl_codes import PatternType, ResourceType

MAGIC = b"S\x01"


class SnapshotRecordError(ValueError):
    """A snapshot record that is not one of the kinds above."""


def _encode(doc: dict[str, Any]) -> bytes:
    return MAGIC + json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


def state_to_records(state: ClusterState) -> list[bytes]:
    """Every piece of ``state`` as snapshot records (deterministic order)."""
    out = [_encode({"kind": "cluster", "cluster_id": state.cluster_id, "applied_offset": state.applied_offset})]
    for broker_id in sorted(state.registrations):
        r = state.registrations[broker_id]
        out.append(_encode({
            "kind": "broker", "broker_id": r.broker_id, "epoch": r.epoch, "incarnation_id": r.incarnation_id,
            "host": r.host, "port": r.port, "rack": r.rack, "fenced": r.fenced,
            "endpoints": [list(e) for e in r.endpoints],
        }))  # fmt: skip
    for name in sorted(state.topics):
        t = state.topics[name]
        partitions = [
            [p.partition, p.leader, p.leader_epoch, list(p.replicas), list(p.isr), p.partition_epoch,
             list(p.adding_replicas), list(p.removing_replicas)]
            for _, p in sorted(t.partitions.items())
        ]  # fmt: skip
        out.append(_encode({
            "kind": "topic", "name": t.name, "topic_id": str(t.topic_id), "configs": dict(t.configs),
            "partitions": partitions,
        }))  # fmt: skip
    for (name, mechanism), c in sorted(state.scram.items()):
        out.append(_encode({
            "kind": "scram", "name": name, "mechanism": mechanism, "salt": c.salt.hex(),
            "stored_key": c.stored_key.hex(), "server_key": c.server_key.hex(), "iterations": c.iterations,
        }))  # fmt: skip
    for entity, values in sorted(state.client_quotas.items(), key=lambda kv: json.dumps(kv[0])):
        out.append(_encode({"kind": "quota", "entity": [list(e) for e in entity], "values": dict(values)}))
    for acl_id, a in sorted(state.acls.items(), key=lambda kv: str(kv[0])):
        out.append(_encode({
            "kind": "acl", "id": str(acl_id), "resource_type": int(a.resource_type), "name": a.name,
            "pattern_type": int(a.pattern_type), "principal": a.principal, "host": a.host,
            "operation": int(a.operation), "permission": int(a.permission),
        }))  # fmt: skip
    for resource, configs in sorted(state.broker_configs.items()):
        out.append(_encode({"kind": "broker_config", "resource": resource, "values": dict(configs)}))
    return out


def state_from_records(records: list[bytes] | tuple[bytes, ...]) -> ClusterState:
    """The ``ClusterState`` that ``records`` describe; SnapshotRecordError if one is malformed."""
    try:
        return _state_from_records(records)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        if isinstance(exc, SnapshotRecordError):
            raise
        raise SnapshotRecordError(f"malformed snapshot record: {exc!r}") from exc


def _state_from_records(records: list[bytes] | tuple[bytes, ...]) -> ClusterState:
    if not records:
        raise SnapshotRecordError("a snapshot holds at least the cluster record")
    docs = []
    for raw in records:
        if raw[:2] != MAGIC:
            raise SnapshotRecordError("not a pylog snapshot record")
        docs.append(json.loads(raw[2:]))
    head = docs[0]
    if head["kind"] != "cluster":
        raise SnapshotRecordError("the first snapshot record is not the cluster record")
    registrations: dict[int, BrokerRegistration] = {}
    topics: dict[str, TopicImage] = {}
    topic_ids: dict[uuid.UUID, str] = {}
    scram: dict[tuple[str, str], ScramCredential] = {}
    quotas: dict[tuple[tuple[str, str | None], ...], dict[str, float]] = {}
    acls: dict[uuid.UUID, AclBinding] = {}
    broker_configs: dict[str, dict[str, str]] = {}
    for doc in docs[1:]:
        kind = doc["kind"]
        if kind == "broker":
            endpoints = tuple((str(n), str(h), int(p)) for n, h, p in doc["endpoints"])
            registrations[int(doc["broker_id"])] = BrokerRegistration(
                int(doc["broker_id"]), int(doc["epoch"]), str(doc["incarnation_id"]), str(doc["host"]),
                int(doc["port"]), doc["rack"], fenced=bool(doc["fenced"]), endpoints=endpoints,
            )  # fmt: skip
        elif kind == "topic":
            partitions = {
                int(p[0]): PartitionImage(
                    int(p[0]), int(p[1]), int(p[2]), tuple(p[3]), tuple(p[4]), int(p[5]), tuple(p[6]), tuple(p[7])
                )
                for p in doc["partitions"]
            }
            topic_id = uuid.UUID(doc["topic_id"])
            topics[doc["name"]] = TopicImage(doc["name"], topic_id, partitions, dict(doc["configs"]))
            topic_ids[topic_id] = doc["name"]
        elif kind == "scram":
            scram[(doc["name"], doc["mechanism"])] = ScramCredential(
                bytes.fromhex(doc["salt"]), bytes.fromhex(doc["stored_key"]), bytes.fromhex(doc["server_key"]),
                int(doc["iterations"]),
            )  # fmt: skip
        elif kind == "quota":
            entity = tuple((str(t), n) for t, n in doc["entity"])
            quotas[entity] = {k: float(v) for k, v in doc["values"].items()}
        elif kind == "acl":
            acls[uuid.UUID(doc["id"])] = AclBinding(
                ResourceType(doc["resource_type"]), doc["name"], PatternType(doc["pattern_type"]), doc["principal"],
                doc["host"], Operation(doc["operation"]), Permission(doc["permission"]),
            )  # fmt: skip
        elif kind == "broker_config":
            broker_configs[doc["resource"]] = dict(doc["values"])
        else:
            raise SnapshotRecordError(f"unknown snapshot record kind {kind!r}")
    return ClusterState(
        cluster_id=head["cluster_id"],
        registrations=registrations,
        topics=topics,
        topic_ids=topic_ids,
        applied_offset=int(head["applied_offset"]),
        scram=scram,
        client_quotas=quotas,
        acls=acls,
        broker_configs=broker_configs,
    )
