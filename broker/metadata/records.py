"""Metadata records: what the KIP-595 metadata log carries, and their encoding as Raft entries.

KIP-595 "Motivation": the quorum replicates "the metadata log", a log of metadata
changes that every controller and broker applies in order to its in-memory image. The record
kinds follow Kafka's metadata records (``metadata/src/main/resources/common/metadata/*.json``),
by name and meaning:

=========================  ==================================================================
record                     effect on the image
=========================  ==================================================================
``ClusterIdRecord``        the cluster id the quorum was started with (pylog's own record)
``RegisterBrokerRecord``   a broker (re-)registers; its broker epoch is the record's offset
``FenceBrokerRecord``      the broker missed its heartbeats: out of Metadata, leads nothing
``UnfenceBrokerRecord``    the broker heartbeats again
``UnregisterBrokerRecord`` the broker's registration is removed (UnregisterBroker, a decommissioned
                           broker; a live one registers again with a new epoch)
``TopicRecord``            a topic exists with this name and id
``PartitionRecord``        one partition of a topic: replicas, ISR, leader, leader and partition epochs
``PartitionChangeRecord``  a partition's ISR and/or leader changed (AlterPartition, an election):
                           the partition epoch goes up by one, the leader epoch too when the
                           leader changes (KIP-497, KIP-631)
``ConfigRecord``           a topic config override is set (value) or removed (value None); with
                           resource type BROKER (4), a dynamic broker config of a broker id
                           or of the cluster default ``""`` (KIP-226, broker.dynamic_config)
``RemoveTopicRecord``      the topic and its partitions are gone
``AccessControlEntryRecord``        an ACL (Kafka's AccessControlEntryRecord, metadata apiKey 18):
                           its id, resource type/name/pattern type, principal, host,
                           operation and permission type
``RemoveAccessControlEntryRecord``  the ACL with this id is gone (metadata apiKey 19)
``ClientQuotaRecord``      a client quota of an entity is set (``remove`` false) or removed
                           (Kafka documentation §4.9 "Quotas"; Kafka's ClientQuotaRecord: entity, key, value, remove)
=========================  ==================================================================

Encoding (one Raft entry = one controller operation, applied atomically)::

    payload  = b"M" version:uint8 json        version = 1
    json     = {"records": [{"type": "<record name>", <fields>...}, ...]}   UTF-8, sorted keys

A whole operation (a topic with its partitions and configs) is one payload, so no node ever
applies half a topic: Kafka gets the same from atomic record batches. An operation with no
records is a no-op entry (a new active controller appends one to learn that it has applied
everything committed before its epoch). This is not Kafka's binary ``ApiMessage`` framing of
metadata records; see docs/compatibility.md ("KRaft metadata records").
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

MAGIC = b"M"
FORMAT_VERSION = 1
TOPIC_RESOURCE = 2  # Kafka's ConfigResource.Type.TOPIC
BROKER_RESOURCE = 4  # Kafka's ConfigResource.Type.BROKER (KIP-226 dynamic broker configs)


class MetadataRecordError(ValueError):
    """A payload that is not a metadata record batch of a known version."""


@dataclass(frozen=True, slots=True)
class ClusterIdRecord:
    cluster_id: str


@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord:
    broker_id: int
    incarnation_id: str
    host: str
    port: int
    rack: str | None = None
    endpoints: tuple[tuple[str, str, int], ...] = ()  # every listener: (name, host, port)


@dataclass(frozen=True, slots=True)
class FenceBrokerRecord:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class UnfenceBrokerRecord:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRecord:
    """UnregisterBroker (API 64, Kafka's UnregisterBrokerRecord): the registration of this epoch is gone."""

    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class TopicRecord:
    name: str
    topic_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    topic_id: uuid.UUID
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0


NO_CHANGE = -2  # PartitionChangeRecord.leader: the leader stays (Kafka's NO_LEADER_CHANGE)


@dataclass(frozen=True, slots=True)
class PartitionChangeRecord:
    """``isr`` None: unchanged; ``leader`` NO_CHANGE: unchanged, -1: no leader (offline).
    ``replicas``, ``adding_replicas``, ``removing_replicas`` (KIP-455 reassignment): None unchanged;
    while a partition moves, ``replicas`` is the union of the old and the new set."""

    topic_id: uuid.UUID
    partition: int
    isr: tuple[int, ...] | None = None
    leader: int = NO_CHANGE
    replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    resource_name: str
    name: str
    value: str | None
    resource_type: int = TOPIC_RESOURCE


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord:
    topic_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class UserScramCredentialRecord:
    """A user's salted SCRAM credential (Kafka's UserScramCredentialRecord): hex salt and keys,
    never the password."""

    name: str
    mechanism: str  # SCRAM-SHA-256 / SCRAM-SHA-512
    salt: str
    stored_key: str
    server_key: str
    iterations: int


@dataclass(frozen=True, slots=True)
class RemoveUserScramCredentialRecord:
    name: str
    mechanism: str


@dataclass(frozen=True, slots=True)
class ClientQuotaRecord:
    """``entity``: ``(entity_type, entity_name)`` pairs sorted by type, name None for the default
    entity (``broker.quota.entity``)."""

    entity: tuple[tuple[str, str | None], ...]
    key: str
    value: float = 0.0
    remove: bool = False


@dataclass(frozen=True, slots=True)
class AccessControlEntryRecord:
    """One ACL (Kafka's AccessControlEntryRecord; codes as ``broker.security.acl.binding``)."""

    id: uuid.UUID
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class RemoveAccessControlEntryRecord:
    id: uuid.UUID


MetadataRecord = (
    ClusterIdRecord
    | RegisterBrokerRecord
    | FenceBrokerRecord
    | UnfenceBrokerRecord
    | UnregisterBrokerRecord
    | TopicRecord
    | PartitionRecord
    | PartitionChangeRecord
    | ConfigRecord
    | RemoveTopicRecord
    | UserScramCredentialRecord
    | RemoveUserScramCredentialRecord
    | ClientQuotaRecord
    | AccessControlEntryRecord
    | RemoveAccessControlEntryRecord
)

RECORD_TYPES: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        ClusterIdRecord,
        RegisterBrokerRecord,
        FenceBrokerRecord,
        UnfenceBrokerRecord,
        UnregisterBrokerRecord,
        TopicRecord,
        PartitionRecord,
        PartitionChangeRecord,
        ConfigRecord,
        RemoveTopicRecord,
        UserScramCredentialRecord,
        RemoveUserScramCredentialRecord,
        ClientQuotaRecord,
        AccessControlEntryRecord,
        RemoveAccessControlEntryRecord,
    )
}
_UUID_FIELDS = frozenset({"topic_id", "id"})
_TUPLE_FIELDS = frozenset({"replicas", "isr", "adding_replicas", "removing_replicas"})
_OMITTED_WHEN_NONE = frozenset({"adding_replicas", "removing_replicas"})  # KIP-455 fields: old bytes kept


def _to_json(record: MetadataRecord) -> dict[str, Any]:
    doc: dict[str, Any] = {"type": type(record).__name__}
    for key, value in asdict(record).items():
        if value is None and (
            key in _OMITTED_WHEN_NONE or (key == "replicas" and isinstance(record, PartitionChangeRecord))
        ):
            continue
        if key in _UUID_FIELDS:
            value = str(value)
        elif key in _TUPLE_FIELDS and value is not None:
            value = list(value)
        elif key == "endpoints":
            if not value:
                continue  # records without listeners keep their old bytes
            value = [list(endpoint) for endpoint in value]
        elif key == "entity":
            value = [list(pair) for pair in value]
        doc[key] = value
    return doc


def _converter(name: str) -> Callable[[Any], Any] | None:
    """How a JSON value of field ``name`` becomes the record's value (None: as decoded)."""
    if name in _UUID_FIELDS:
        return uuid.UUID
    if name in _TUPLE_FIELDS:
        return lambda value: None if value is None else tuple(int(v) for v in value)
    if name == "endpoints":
        return lambda value: tuple((str(n), str(h), int(p)) for n, h, p in value)
    if name == "entity":
        return lambda value: tuple((str(t), None if n is None else str(n)) for t, n in value)
    return None


# Per record type, once: each field's name and converter (decoding is on the replay path).
_DECODE_PLANS: dict[type[Any], tuple[tuple[str, Callable[[Any], Any] | None], ...]] = {
    cls: tuple((f.name, _converter(f.name)) for f in fields(cls)) for cls in RECORD_TYPES.values()
}


def _from_json(doc: Any) -> MetadataRecord:
    if not isinstance(doc, dict):
        raise MetadataRecordError(f"a record must be an object, got {type(doc).__name__}")
    cls = RECORD_TYPES.get(doc.get("type", ""))
    if cls is None:
        raise MetadataRecordError(f"unknown metadata record type {doc.get('type')!r}")
    kwargs: dict[str, Any] = {}
    try:
        for name, convert in _DECODE_PLANS[cls]:
            if name in doc:
                kwargs[name] = doc[name] if convert is None else convert(doc[name])
        record: MetadataRecord = cls(**kwargs)
    except (TypeError, ValueError, AttributeError) as exc:
        raise MetadataRecordError(f"bad {cls.__name__}: {exc}") from None
    return record


def encode_records(records: Sequence[MetadataRecord]) -> bytes:
    """One Raft entry payload holding ``records`` (applied together, in order)."""
    body = json.dumps({"records": [_to_json(r) for r in records]}, sort_keys=True, separators=(",", ":"))
    return MAGIC + bytes([FORMAT_VERSION]) + body.encode("utf-8")


def decode_records(payload: bytes | memoryview) -> list[MetadataRecord]:
    """The records of one payload; raises MetadataRecordError for anything else."""
    data = bytes(payload)
    if len(data) < 2 or data[:1] != MAGIC:
        raise MetadataRecordError("not a metadata record payload")
    if data[1] != FORMAT_VERSION:
        raise MetadataRecordError(f"metadata record format version {data[1]} is not supported")
    try:
        doc = json.loads(data[2:].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MetadataRecordError(f"undecodable metadata records: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("records"), list):
        raise MetadataRecordError("a metadata payload must be an object with a 'records' list")
    return [_from_json(item) for item in doc["records"]]
