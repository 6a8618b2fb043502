"""The single-node metadata controller: a ``MetadataImage`` persisted as a JSON snapshot.

It implements ``MetadataController`` for a broker that is its own controller with no quorum.
Changes are decided by the quorum controller's pure operations (``operations``: the same
validation, placement and errors) and applied as their metadata records would be
(``broker.metadata.replay.apply_record``); every change is written to ``pylog-metadata.json``
in the first log dir (temp file, fsync, rename) and only then published to the in-memory image
and to listeners — a change a client was told succeeded survives a crash. The Raft issue
replaces this with the KIP-595 quorum behind the same interface.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from broker.controller import operations
from broker.controller.acl_changes import CreateResult, Creation, DeleteResult, create_acls, delete_acls
from broker.controller.operations import Assignments
from broker.controller.partition_changes import ElectionResult, ElectionType, TopicPartitionKey
from broker.controller.scram_credentials import Deletion, Upsertion, alter_scram
from broker.controller.scram_credentials import Result as ScramResult
from broker.metadata.cluster_state import BrokerRegistration, ClusterState
from broker.metadata.image import BrokerInfo, MetadataImage, PartitionImage, TopicImage
from broker.metadata.loader import ImageListener
from broker.metadata.records import AccessControlEntryRecord, MetadataRecord
from broker.metadata.replay import acl_binding, apply_records
from broker.security.acl.filters import AclFilter
from broker.security.sasl.scram import ScramCredential
from pyspark_log.wire.errors import ErrorCode

SNAPSHOT_NAME = "pylog-metadata.json"


class MetadataController(Protocol):
    """What the broker's handlers may ask of the cluster metadata (local or quorum-backed)."""

    def image(self) -> MetadataImage: ...

    def add_listener(self, listener: ImageListener) -> None: ...

    def holds_session_lease(self) -> bool:
        """Whether this broker may answer from state that only its current leaderships make
        current (``broker_session``, "Session lease")."""
        ...

    async def create_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str],
        *, validate_only: bool = False, assignments: Assignments | None = None,
    ) -> TopicImage: ...  # fmt: skip

    async def delete_topic(self, name: str) -> None: ...

    async def create_partitions(
        self, name: str, total_count: int, *, validate_only: bool = False, assignments: Assignments | None = None
    ) -> None: ...

    async def alter_topic_configs(
        self, name: str, changes: dict[str, str | None], *, validate_only: bool = False
    ) -> None: ...

    async def elect_leaders(
        self, election_type: ElectionType, partitions: Sequence[TopicPartitionKey] | None
    ) -> dict[TopicPartitionKey, ElectionResult]: ...

    async def alter_user_scram_credentials(
        self, deletions: Sequence[Deletion], upsertions: Sequence[Upsertion]
    ) -> dict[str, ScramResult]: ...

    async def alter_broker_configs(
        self, resource_name: str, changes: dict[str, str | None], *, validate_only: bool = False
    ) -> None: ...

    async def alter_client_quotas(
        self, entity: Sequence[tuple[str, str | None]], changes: dict[str, float | None], *, validate_only: bool = False
    ) -> None: ...

    async def create_acls(self, creations: Sequence[Creation]) -> list[CreateResult]: ...

    async def delete_acls(self, filters: Sequence[AclFilter]) -> list[DeleteResult]: ...


class LocalController:
    """Single-node ``MetadataController``; see the module docstring for durability."""

    def __init__(
        self, data_dir: str | Path, cluster_id: str, broker: BrokerInfo, *, deletion_enabled: bool = True,
        bootstrap: Sequence[MetadataRecord] = (),
    ) -> None:  # fmt: skip
        """``bootstrap``: records applied once, when there is no metadata file yet (``pylog storage
        format --add-scram``'s credentials; ``broker.meta_properties``)."""
        self._path = Path(data_dir) / SNAPSHOT_NAME
        self._listeners: list[ImageListener] = []
        self._deletion_enabled = deletion_enabled
        self._broker = broker
        fresh = not self._path.exists()
        self._image = MetadataImage.empty(cluster_id, broker.node_id) if fresh else self._load(cluster_id)
        # This broker's address may change between runs; it is not persisted.
        self._image = self._image.with_broker(broker)
        if fresh and bootstrap:
            self._apply(bootstrap)

    def image(self) -> MetadataImage:
        return self._image

    def holds_session_lease(self) -> bool:
        return True  # the only node: its leaderships cannot move elsewhere

    def add_listener(self, listener: ImageListener) -> None:
        self._listeners.append(listener)

    async def create_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str],
        *, validate_only: bool = False, assignments: Assignments | None = None,
    ) -> TopicImage:  # fmt: skip
        records, topic = operations.create_topic(
            self._state(), name, num_partitions, replication_factor, configs,
            topic_id=uuid.uuid4(), assignments=assignments,
        )  # fmt: skip
        if validate_only:
            return topic
        self._apply(records)
        return self._image.topics[name]

    async def delete_topic(self, name: str) -> None:
        self._apply(operations.delete_topic(self._state(), name, deletion_enabled=self._deletion_enabled))

    async def create_partitions(
        self, name: str, total_count: int, *, validate_only: bool = False, assignments: Assignments | None = None
    ) -> None:
        records = operations.create_partitions(self._state(), name, total_count, assignments)
        if not validate_only:
            self._apply(records)

    async def alter_topic_configs(
        self, name: str, changes: dict[str, str | None], *, validate_only: bool = False
    ) -> None:
        records = operations.alter_topic_configs(self._state(), name, changes)
        if not validate_only:
            self._apply(records)

    async def alter_broker_configs(
        self, resource_name: str, changes: dict[str, str | None], *, validate_only: bool = False
    ) -> None:
        """KIP-226 dynamic broker configs of this broker or the cluster default."""
        if not validate_only:
            self._apply(operations.alter_broker_configs(resource_name, changes))

    async def alter_user_scram_credentials(
        self, deletions: Sequence[Deletion], upsertions: Sequence[Upsertion]
    ) -> dict[str, ScramResult]:
        records, results = alter_scram(self._state(), deletions, upsertions)
        if records:
            self._apply(records)
        return results

    async def alter_client_quotas(
        self, entity: Sequence[tuple[str, str | None]], changes: dict[str, float | None], *, validate_only: bool = False
    ) -> None:
        """Set (value) or remove (None) quotas of one entity; persisted like topic configs."""
        records = operations.alter_client_quotas(entity, changes)
        if not validate_only:
            self._apply(records)

    async def create_acls(self, creations: Sequence[Creation]) -> list[CreateResult]:
        records, results = create_acls(self._state(), creations)
        if records:
            self._apply(records)
        return results

    async def delete_acls(self, filters: Sequence[AclFilter]) -> list[DeleteResult]:
        records, results = delete_acls(self._state(), filters)
        if records:
            self._apply(records)
        return results

    def _state(self) -> ClusterState:
        """The image as the quorum controller's operations see a cluster: this one broker, live."""
        b = self._broker
        registration = BrokerRegistration(b.node_id, 0, "local", b.host, b.port, b.rack, endpoints=b.endpoints)
        return ClusterState(
            self._image.cluster_id, {b.node_id: registration}, self._image.topics, self._image.topic_ids,
            scram=self._image.scram,
            client_quotas=self._image.client_quotas,
            acls=self._image.acls,
            broker_configs=self._image.broker_configs,
        )  # fmt: skip

    def _apply(self, records: Sequence[MetadataRecord]) -> None:
        """Apply an operation's records as every quorum node would, persist, then publish."""
        state = self._state()
        state = apply_records(state, state.applied_offset, records)
        quotas = {entity: dict(values) for entity, values in state.client_quotas.items()}
        topics, topic_ids = dict(state.topics), dict(state.topic_ids)
        self._publish(
            replace(
                self._image,
                topics=topics,
                topic_ids=topic_ids,
                epoch=self._image.epoch + 1,
                client_quotas=quotas,
                scram=dict(state.scram),
                acls=state.acls,
                broker_configs={level: dict(values) for level, values in state.broker_configs.items()},
            )
        )

    async def elect_leaders(
        self, election_type: ElectionType, partitions: Sequence[TopicPartitionKey] | None
    ) -> dict[TopicPartitionKey, ElectionResult]:
        """Every partition has one replica, this broker, which leads it: ELECTION_NOT_NEEDED for
        each named partition (all partitions: nothing to report), UNKNOWN_TOPIC_OR_PARTITION for
        one that does not exist. Nothing changes."""
        results: dict[TopicPartitionKey, ElectionResult] = {}
        for name, index in partitions or ():
            topic = self._image.topics.get(name)
            if topic is None or index not in topic.partitions:
                results[(name, index)] = ElectionResult(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {name}-{index} does not exist"
                )
            else:
                results[(name, index)] = ElectionResult(
                    ErrorCode.ELECTION_NOT_NEEDED, f"broker {self._broker.node_id} already leads"
                )
        return results

    def _publish(self, new: MetadataImage) -> None:
        self._persist(new)
        old, self._image = self._image, new
        for listener in self._listeners:
            listener(old, new)

    def _persist(self, image: MetadataImage) -> None:
        doc: dict[str, Any] = {
            "version": 1,
            "cluster_id": image.cluster_id,
            "topics": [
                {
                    "name": t.name,
                    "topic_id": str(t.topic_id),
                    "partitions": len(t.partitions),
                    "leader_epochs": [t.partitions[p].leader_epoch for p in sorted(t.partitions)],
                    "configs": t.configs,
                }
                for t in image.topics.values()
            ],
            # salted SCRAM credentials (salt, StoredKey, ServerKey; never a password)
            "scram": [
                {
                    "user": user,
                    "mechanism": mechanism,
                    "salt": c.salt.hex(),
                    "stored_key": c.stored_key.hex(),
                    "server_key": c.server_key.hex(),
                    "iterations": c.iterations,
                }
                for (user, mechanism), c in sorted(image.scram.items())
            ],
            "client_quotas": [
                {"entity": [list(pair) for pair in entity], "values": values}
                for entity, values in image.client_quotas.items()
            ],
            # KIP-226 dynamic broker configs: "" (cluster default) or broker id -> {key: value}
            "broker_configs": image.broker_configs,
            # ACLs, as their AccessControlEntryRecords
            "acls": [
                {"id": str(acl_id), "resource_type": int(a.resource_type), "resource_name": a.name,
                 "pattern_type": int(a.pattern_type), "principal": a.principal, "host": a.host,
                 "operation": int(a.operation), "permission_type": int(a.permission)}
                for acl_id, a in sorted(image.acls.items(), key=lambda item: str(item[0]))
            ],
        }  # fmt: skip
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
        dir_fd = os.open(self._path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def _load(self, cluster_id: str) -> MetadataImage:
        doc = json.loads(self._path.read_text(encoding="utf-8"))
        image = MetadataImage.empty(doc.get("cluster_id", cluster_id), self._broker.node_id)
        for t in doc["topics"]:
            epochs = t.get("leader_epochs") or [0] * t["partitions"]
            parts = {
                p: PartitionImage(p, self._broker.node_id, epochs[p], (self._broker.node_id,), (self._broker.node_id,))
                for p in range(t["partitions"])
            }
            image = image.with_topic(TopicImage(t["name"], uuid.UUID(t["topic_id"]), parts, dict(t["configs"])))
        scram = {
            (c["user"], c["mechanism"]): ScramCredential(
                bytes.fromhex(c["salt"]),
                bytes.fromhex(c["stored_key"]),
                bytes.fromhex(c["server_key"]),
                c["iterations"],
            )
            for c in doc.get("scram", [])
        }
        quotas = {
            tuple((str(kind), name) for kind, name in q["entity"]): {k: float(v) for k, v in q["values"].items()}
            for q in doc.get("client_quotas", [])
        }
        acls = {}
        for a in doc.get("acls", []):
            record = AccessControlEntryRecord(
                uuid.UUID(a["id"]), a["resource_type"], a["resource_name"], a["pattern_type"], a["principal"],
                a["host"], a["operation"], a["permission_type"],
            )  # fmt: skip
            acls[record.id] = acl_binding(record)
        broker_configs = {str(level): dict(values) for level, values in doc.get("broker_configs", {}).items()}
        return replace(image, client_quotas=quotas, scram=scram, acls=acls, broker_configs=broker_configs)
