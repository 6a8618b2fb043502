"""``AsyncAdmin``: topics, partitions, configs, offsets, quotas, ACLs, SCRAM users, consumer groups
(``group_admin``) and the cluster's description.

    async with AsyncAdmin({"bootstrap.servers": "..."}) as admin:
        await admin.create_topics([NewTopic("events", num_partitions=6, config={"retention.ms": "60000"})])

Topic and config changes go to the controller (``controller_id`` from Metadata; any broker if
none is named), others to the least loaded broker, broker configs to that broker. Retriable
failures (NOT_CONTROLLER, a broken connection, a timeout) refresh metadata and retry with backoff
until the call's ``timeout_ms`` (default ``default.api.timeout.ms``). Per-item errors are raised
as the ``KafkaError`` of the first failing item; the exception's ``errors`` attribute maps every
failing item to its error (``TopicAlreadyExistsError``, ``UnknownTopicOrPartitionError``, ...).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, TypeVar

from pyspark_log.client import acl_admin, reassignment_admin
from pyspark_log.client import config as cfg
from pyspark_log.client.admin_items import ITEM_RETRIABLE, item_errors, raise_errors, settle_throttled
from pyspark_log.client.backoff import ExponentialBackoff
from pyspark_log.client.clock import SYSTEM_CLOCK, Clock
from pyspark_log.client.cluster import BrokerNode, Cluster, TopicMetadata
from pyspark_log.client.connection import Connector, open_tcp
from pyspark_log.client.errors import (
    ClientClosedError,
    KafkaTimeoutError,
    UnknownTopicOrPartitionError,
    UnsupportedFeatureError,
    error_for,
)
from pyspark_log.client.group_admin import ConsumerGroupAdmin
from pyspark_log.client.groups import GroupOffsets
from pyspark_log.client.log_dirs import LogDirDescription, alter_replica_log_dirs, describe_log_dirs
from pyspark_log.client.offsets import list_offsets
from pyspark_log.client.quotas import ClientQuotaAlteration, ClientQuotaFilterComponent, EntityKey
from pyspark_log.client.quotas import alter_client_quotas as _alter_quotas
from pyspark_log.client.quotas import describe_client_quotas as _describe_quotas
from pyspark_log.client.scram_admin import alter_body, describe_results
from pyspark_log.client.types import IsolationLevel, OffsetAndTimestamp, TopicPartition
from pyspark_log.wire import ApiKey, ErrorCode, KafkaError, Message

T = TypeVar("T")


@dataclass(frozen=True)
class NewTopic:
    """A topic to create. -1 partitions / replication factor: the broker's defaults."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    replica_assignment: Mapping[int, list[int]] | None = None
    config: Mapping[str, str] = field(default_factory=dict)


class ElectionType(IntEnum):
    """ElectLeaders' election type (Kafka's ``ElectionType``): PREFERRED moves leadership to each
    partition's first replica; UNCLEAN gives a partition without a live leader one, possibly out
    of sync (records only the old ISR had are lost)."""

    PREFERRED = 0
    UNCLEAN = 1

    @classmethod
    def parse(cls, value: ElectionType | int | str) -> ElectionType:
        if isinstance(value, str):
            try:
                return cls[value.strip().upper()]
            except KeyError:
                raise ValueError(f"election type must be PREFERRED or UNCLEAN, got {value!r}") from None
        return cls(value)


class ResourceType(IntEnum):
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8


@dataclass(frozen=True)
class ConfigResource:
    type: ResourceType
    name: str


class AlterOp(IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True)
class AlterConfigOp:
    name: str
    value: str | None = None
    op: AlterOp = AlterOp.SET


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    is_default: bool
    read_only: bool
    is_sensitive: bool
    synonyms: tuple[tuple[str, str | None, int], ...] = ()


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerNode]


DEFAULT_CONFIG_SOURCE = 5


class AsyncAdmin(ConsumerGroupAdmin):
    """The admin core; all methods run on the loop ``start`` ran on."""

    def __init__(
        self,
        config: Mapping[str, Any],
        *,
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
        connector: Connector = open_tcp,
    ) -> None:
        self.config = cfg.parse(cfg.ADMIN, config, "admin")
        self._rng = rng or random.Random()
        self.cluster = Cluster(self.config, clock=clock, rng=self._rng, connector=connector)
        self._backoff = ExponentialBackoff(
            self.config["retry.backoff.ms"], self.config["retry.backoff.max.ms"], rng=self._rng
        )
        self.default_api_timeout_ms: float = self.config["default.api.timeout.ms"]
        self._groups = GroupOffsets(self.cluster, self._backoff)
        self._started = False
        self._closed = False

    async def start(self) -> AsyncAdmin:
        if not self._started:
            await self.cluster.start(self.default_api_timeout_ms)
            self._started = True
        return self

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            await self.cluster.close()

    async def __aenter__(self) -> AsyncAdmin:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- plumbing ------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed or not self._started:
            raise ClientClosedError("the admin client is closed" if self._closed else "the admin client is not started")

    def _controller(self) -> int | None:
        ctrl = self.cluster.metadata.controller_id
        return ctrl if ctrl in self.cluster.metadata.brokers else None

    async def _retrying(self, what: str, timeout_ms: float | None, attempt_fn: Callable[[], Awaitable[T]]) -> T:
        """Run ``attempt_fn`` until it returns, retrying retriable KafkaErrors with backoff."""
        self._check_open()
        loop = asyncio.get_running_loop()
        budget = timeout_ms or self.default_api_timeout_ms
        deadline = loop.time() + budget / 1000.0
        attempt = 0
        while True:
            try:
                remaining_ms = max((deadline - loop.time()) * 1000.0, 1.0)
                async with asyncio.timeout(remaining_ms / 1000.0):
                    return await attempt_fn()
            except TimeoutError:
                raise KafkaTimeoutError(f"{what} did not complete within {budget:.0f} ms") from None
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                self.cluster.request_update()
                throttled_s = getattr(exc, "throttle_time_ms", 0) / 1000.0
                wait_s = max(self._backoff.backoff_ms(attempt) / 1000.0, throttled_s)
                attempt += 1
                if loop.time() + wait_s >= deadline:
                    if throttled_s:
                        raise  # as the Java admin: the quota's error once its throttle outlasts the call
                    raise KafkaTimeoutError(f"{what} did not complete within {budget:.0f} ms: {exc}") from exc
                await asyncio.sleep(wait_s)

    async def _to_controller(self, api_key: int, body: dict[str, Any], timeout_ms: float) -> Message:
        node = self._controller()
        if node is None:
            return await self.cluster.send_any(api_key, body, timeout_ms=timeout_ms + 5000)
        return await self.cluster.send(node, api_key, body, timeout_ms=timeout_ms + 5000)

    # -- SCRAM users (KIP-554) -----------------------------------------------------------------

    async def alter_user_scram_credentials(
        self,
        upsertions: Iterable[tuple[str, str, str, int]] = (),
        deletions: Iterable[tuple[str, str]] = (),
        *,
        timeout_ms: float | None = None,
    ) -> dict[str, KafkaError | None]:
        """AlterUserScramCredentials: ``upsertions`` of ``(user, mechanism, password, iterations)``
        and ``deletions`` of ``(user, mechanism)`` (mechanism ``SCRAM-SHA-256``/``SCRAM-SHA-512``).
        The password is salted here, as Kafka's admin client does (``scram_admin.alter_body``):
        only the salted password leaves this process. Per user: None or the error."""
        body = await alter_body(upsertions, deletions)
        budget = timeout_ms or self.default_api_timeout_ms

        async def attempt() -> dict[str, KafkaError | None]:
            resp = await self._to_controller(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, body, budget)
            errors = item_errors(resp.results, lambda r: r.user, "SCRAM credentials of user")
            return {str(r.user): errors.get(r.user) for r in resp.results}

        return await self._retrying("AlterUserScramCredentials", timeout_ms, attempt)

    async def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None, *, timeout_ms: float | None = None
    ) -> dict[str, list[tuple[str, int]] | KafkaError]:
        """DescribeUserScramCredentials: per user, ``[(mechanism, iterations)]`` or the error
        (RESOURCE_NOT_FOUND for a user without credentials); ``users`` None: every user."""
        body = {"users": None if users is None else [{"name": u} for u in users]}
        budget = timeout_ms or self.default_api_timeout_ms

        async def attempt() -> dict[str, list[tuple[str, int]] | KafkaError]:
            resp = await self.cluster.send_any(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, body, timeout_ms=budget + 5000)
            return describe_results(resp)

        return await self._retrying("DescribeUserScramCredentials", timeout_ms, attempt)

    # -- topics --------------------------------------------------------------------------------

    async def create_topics(
        self, new_topics: Iterable[NewTopic], *, validate_only: bool = False, timeout_ms: float | None = None
    ) -> None:
        topics = list(new_topics)
        budget = timeout_ms or self.default_api_timeout_ms
        body: dict[str, Any] = {
            "topics": [
                {
                    "name": t.name,
                    "num_partitions": t.num_partitions if not t.replica_assignment else -1,
                    "replication_factor": t.replication_factor if not t.replica_assignment else -1,
                    "assignments": [
                        {"partition_index": p, "broker_ids": list(ids)}
                        for p, ids in (t.replica_assignment or {}).items()
                    ],
                    "configs": [{"name": k, "value": v} for k, v in t.config.items()],
                }
                for t in topics
            ],
            "timeout_ms": int(budget),
            "validate_only": validate_only,
        }

        pending = {t["name"]: t for t in body["topics"]}
        errors: dict[Any, KafkaError] = {}

        async def attempt() -> dict[Any, KafkaError]:
            resp = await self._to_controller(ApiKey.CREATE_TOPICS, {**body, "topics": list(pending.values())}, budget)
            settle_throttled(resp, resp.topics, lambda t: t.name, "create topic", pending=pending, done=errors)
            return errors

        raise_errors(await self._retrying("CreateTopics", timeout_ms, attempt))
        if not validate_only:
            self.cluster.add_topics(t.name for t in topics)
            self.cluster.request_update()

    async def delete_topics(self, names: Iterable[str], *, timeout_ms: float | None = None) -> None:
        topics = list(names)
        budget = timeout_ms or self.default_api_timeout_ms
        body = {"topics": [{"name": n} for n in topics], "topic_names": topics, "timeout_ms": int(budget)}

        pending = {n: n for n in topics}
        errors: dict[Any, KafkaError] = {}

        async def attempt() -> dict[Any, KafkaError]:
            names = list(pending)
            resp = await self._to_controller(
                ApiKey.DELETE_TOPICS, {**body, "topics": [{"name": n} for n in names], "topic_names": names}, budget
            )
            settle_throttled(resp, resp.responses, lambda t: t.name, "delete topic", pending=pending, done=errors)
            return errors

        raise_errors(await self._retrying("DeleteTopics", timeout_ms, attempt))
        self.cluster.request_update()

    async def create_partitions(
        self,
        new_counts: Mapping[str, int],
        *,
        assignments: Mapping[str, list[list[int]]] | None = None,
        validate_only: bool = False,
        timeout_ms: float | None = None,
    ) -> None:
        """Grow each topic to the given total partition count."""
        budget = timeout_ms or self.default_api_timeout_ms
        body: dict[str, Any] = {
            "topics": [
                {
                    "name": name,
                    "count": count,
                    "assignments": None
                    if not assignments or name not in assignments
                    else [{"broker_ids": ids} for ids in assignments[name]],
                }
                for name, count in new_counts.items()
            ],
            "timeout_ms": int(budget),
            "validate_only": validate_only,
        }

        pending = {t["name"]: t for t in body["topics"]}
        errors: dict[Any, KafkaError] = {}

        async def attempt() -> dict[Any, KafkaError]:
            resp = await self._to_controller(
                ApiKey.CREATE_PARTITIONS, {**body, "topics": list(pending.values())}, budget
            )
            settle_throttled(
                resp, resp.results, lambda t: t.name, "create partitions for", pending=pending, done=errors
            )
            return errors

        raise_errors(await self._retrying("CreatePartitions", timeout_ms, attempt))
        self.cluster.request_update()

    async def list_topics(self, *, include_internal: bool = False, timeout_ms: float | None = None) -> list[str]:
        meta = await self._retrying("Metadata", timeout_ms, lambda: self.cluster.fetch_metadata(None))
        return sorted(
            name
            for name, t in meta.topics.items()
            if t.error_code == ErrorCode.NONE and (include_internal or not t.is_internal)
        )

    async def describe_topics(
        self, names: Iterable[str] | None = None, *, timeout_ms: float | None = None
    ) -> dict[str, TopicMetadata]:
        """Partitions, leaders, replicas and ISR of each topic (all topics when ``names`` is None)."""
        wanted = None if names is None else list(names)
        meta = await self._retrying("Metadata", timeout_ms, lambda: self.cluster.fetch_metadata(wanted))
        selected = meta.topics if wanted is None else {n: meta.topics[n] for n in wanted if n in meta.topics}
        errors = {
            n: error_for(t.error_code, context=f"describe topic {n}")
            for n, t in selected.items()
            if t.error_code != ErrorCode.NONE
        }
        if wanted is not None:
            errors.update({n: UnknownTopicOrPartitionError(f"topic {n!r}") for n in wanted if n not in selected})
        raise_errors(errors)
        return dict(selected)

    async def describe_cluster(self, *, timeout_ms: float | None = None) -> ClusterDescription:
        meta = await self._retrying("Metadata", timeout_ms, lambda: self.cluster.fetch_metadata([]))
        return ClusterDescription(
            meta.cluster_id, meta.controller_id, sorted(meta.brokers.values(), key=lambda b: b.node_id)
        )

    async def describe_log_dirs(
        self, broker_ids: Iterable[int] | None = None, *, timeout_ms: float | None = None
    ) -> dict[int, dict[str, LogDirDescription]]:
        """Every log dir of each broker (all brokers when None) with its replicas (``log_dirs.py``)."""
        budget = timeout_ms or self.default_api_timeout_ms
        return await describe_log_dirs(self.cluster, self._retrying, broker_ids, budget)

    async def alter_replica_log_dirs(
        self, moves: Mapping[tuple[str, int, int], str], *, timeout_ms: float | None = None
    ) -> dict[tuple[str, int, int], KafkaError | None]:
        """Move replicas ``(topic, partition, broker id)`` to another log dir of their broker
        (AlterReplicaLogDirs; Kafka Admin's ``alterReplicaLogDirs``): each one's outcome, None
        when accepted (``log_dirs.py``)."""
        budget = timeout_ms or self.default_api_timeout_ms
        return await alter_replica_log_dirs(self.cluster, self._retrying, dict(moves), budget)

    # -- leader elections ----------------------------------------------------------------------

    async def elect_leaders(
        self,
        election_type: ElectionType | int | str,
        partitions: Iterable[TopicPartition] | None,
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, KafkaError | None]:
        """ElectLeaders on the controller (Kafka Admin's ``electLeaders``): each partition's
        outcome, None for an elected leader, else a ``KafkaError`` whose ``code`` says why:
        ELECTION_NOT_NEEDED when the wanted leader already leads, PREFERRED_LEADER_NOT_AVAILABLE,
        ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION. ``partitions``
        None asks for every partition of the cluster; then, as in Kafka, partitions that need no
        election are left out. A request-level error is raised (retriable ones retried)."""
        kind = ElectionType.parse(election_type)
        wanted = None if partitions is None else list(dict.fromkeys(partitions))
        by_topic: dict[str, list[int]] = {}
        for tp in wanted or ():
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        budget = timeout_ms or self.default_api_timeout_ms
        named = [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]
        body = {
            "election_type": int(kind),
            "topic_partitions": None if wanted is None else named,
            "timeout_ms": int(budget),
        }

        async def attempt() -> dict[TopicPartition, KafkaError | None]:
            node = self._controller()
            if node is None:
                node = min(self.cluster.metadata.brokers, default=None)
            if node is None:
                raise error_for(ErrorCode.LEADER_NOT_AVAILABLE, context="elect leaders: no broker is known")
            conn = await self.cluster.connection(node)
            version = conn.version_for(ApiKey.ELECT_LEADERS)
            if version < 1 and kind != ElectionType.PREFERRED:
                raise UnsupportedFeatureError("the broker supports only preferred elections (ElectLeaders v0)")
            resp = await conn.request(ApiKey.ELECT_LEADERS, body, timeout_ms=budget + 5000, version=version)
            assert resp is not None
            if resp.error_code != ErrorCode.NONE:
                raise error_for(resp.error_code, context="elect leaders")
            out: dict[TopicPartition, KafkaError | None] = {}
            for topic in resp.replica_election_results:
                for part in topic.partition_result:
                    tp = TopicPartition(topic.topic, part.partition_id)
                    if part.error_code == ErrorCode.NONE:
                        out[tp] = None
                        continue
                    exc = error_for(part.error_code, part.error_message, context=f"elect leader of {tp}")
                    if exc.code in ITEM_RETRIABLE:
                        raise exc
                    out[tp] = exc
            return out

        results = await self._retrying("ElectLeaders", timeout_ms, attempt)
        self.cluster.request_update()
        return results

    # -- configs -------------------------------------------------------------------------------

    async def describe_configs(
        self, resources: Iterable[ConfigResource], *, timeout_ms: float | None = None
    ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        wanted = list(resources)
        out: dict[ConfigResource, dict[str, ConfigEntry]] = {}
        errors: dict[Any, KafkaError] = {}
        groups: dict[int | None, list[ConfigResource]] = {}
        for res in wanted:
            node = int(res.name) if res.type in (ResourceType.BROKER, ResourceType.BROKER_LOGGER) and res.name else None
            groups.setdefault(node, []).append(res)
        for node, group in groups.items():
            body = {
                "resources": [
                    {"resource_type": int(r.type), "resource_name": r.name, "configuration_keys": None} for r in group
                ],
                "include_synonyms": True,
            }

            async def attempt(node: int | None = node, body: dict[str, Any] = body) -> Message:
                if node is None:
                    return await self.cluster.send_any(ApiKey.DESCRIBE_CONFIGS, body)
                return await self.cluster.send(node, ApiKey.DESCRIBE_CONFIGS, body)

            resp = await self._retrying("DescribeConfigs", timeout_ms, attempt)
            for result in resp.results:
                res = ConfigResource(ResourceType(result.resource_type), result.resource_name)
                if result.error_code != ErrorCode.NONE:
                    errors[res] = error_for(
                        result.error_code, result.error_message, context=f"describe configs {res.name}"
                    )
                    continue
                out[res] = {
                    c.name: ConfigEntry(
                        c.name,
                        c.value,
                        c.config_source,
                        c.config_source == DEFAULT_CONFIG_SOURCE,
                        c.read_only,
                        c.is_sensitive,
                        tuple((s.name, s.value, s.source) for s in c.synonyms or ()),
                    )
                    for c in result.configs
                }
        raise_errors(errors)
        return out

    async def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Iterable[AlterConfigOp]],
        *,
        validate_only: bool = False,
        timeout_ms: float | None = None,
    ) -> None:
        budget = timeout_ms or self.default_api_timeout_ms
        # a broker's loggers and configs are its own (KIP-412, KIP-226): that broker is asked, as
        # the Java admin does; everything else (and the cluster default "") goes to any node
        groups: dict[int | None, list[tuple[ConfigResource, Iterable[AlterConfigOp]]]] = {}
        for res, ops in changes.items():
            per_broker = res.type in (ResourceType.BROKER, ResourceType.BROKER_LOGGER) and res.name.isdigit()
            node = int(res.name) if per_broker else None
            groups.setdefault(node, []).append((res, ops))
        errors: dict[Any, KafkaError] = {}
        for node, group in groups.items():
            body = {
                "resources": [
                    {
                        "resource_type": int(res.type),
                        "resource_name": res.name,
                        "configs": [{"name": op.name, "config_operation": int(op.op), "value": op.value} for op in ops],
                    }
                    for res, ops in group
                ],
                "validate_only": validate_only,
            }

            async def attempt(node: int | None = node, body: dict[str, Any] = body) -> dict[Any, KafkaError]:
                if node is not None:
                    resp = await self.cluster.send(node, ApiKey.INCREMENTAL_ALTER_CONFIGS, body)
                else:
                    resp = await self._to_controller(ApiKey.INCREMENTAL_ALTER_CONFIGS, body, budget)
                return item_errors(resp.responses, lambda r: r.resource_name, "alter configs")

            errors.update(await self._retrying("IncrementalAlterConfigs", timeout_ms, attempt))
        raise_errors(errors)

    # -- client quotas (pyspark_log.client.quotas) ----------------------------------------------

    async def describe_client_quotas(
        self, components: Iterable[ClientQuotaFilterComponent] = (), *, strict: bool = False,
        timeout_ms: float | None = None,
    ) -> dict[EntityKey, dict[str, float]]:  # fmt: skip
        budget = timeout_ms or self.default_api_timeout_ms
        comps = list(components)

        async def attempt() -> dict[EntityKey, dict[str, float]]:
            return await _describe_quotas(self._send_any, comps, strict=strict, timeout_ms=budget)

        return await self._retrying("DescribeClientQuotas", timeout_ms, attempt)

    async def alter_client_quotas(
        self, alterations: Iterable[ClientQuotaAlteration], *, validate_only: bool = False,
        timeout_ms: float | None = None,
    ) -> None:  # fmt: skip
        budget = timeout_ms or self.default_api_timeout_ms
        items = list(alterations)

        async def attempt() -> dict[Any, KafkaError]:
            errors = await _alter_quotas(self._send_controller, items, validate_only=validate_only, timeout_ms=budget)
            for exc in errors.values():
                if exc.code in ITEM_RETRIABLE:
                    raise exc
            return dict(errors)

        raise_errors(await self._retrying("AlterClientQuotas", timeout_ms, attempt))

    # -- ACLs (``acl_admin``) -------------------------------------------------------------------
    async def create_acls(self, bindings: Iterable[acl_admin.AclBinding], *, timeout_ms: float | None = None) -> None:
        items, budget = list(bindings), timeout_ms or self.default_api_timeout_ms
        await self._retrying(
            "CreateAcls", timeout_ms, lambda: acl_admin.create_acls(self._send_any, items, timeout_ms=budget)
        )

    async def describe_acls(
        self, acl_filter: acl_admin.AclBindingFilter, *, timeout_ms: float | None = None
    ) -> list[acl_admin.AclBinding]:
        budget = timeout_ms or self.default_api_timeout_ms
        return await self._retrying(
            "DescribeAcls", timeout_ms, lambda: acl_admin.describe_acls(self._send_any, acl_filter, timeout_ms=budget)
        )

    async def delete_acls(
        self, filters: Iterable[acl_admin.AclBindingFilter], *, timeout_ms: float | None = None
    ) -> list[acl_admin.AclBinding]:
        items, budget = list(filters), timeout_ms or self.default_api_timeout_ms
        return await self._retrying(
            "DeleteAcls", timeout_ms, lambda: acl_admin.delete_acls(self._send_any, items, timeout_ms=budget)
        )

    # -- partition reassignment (KIP-455) ------------------------------------------------------

    async def alter_partition_reassignments(
        self, targets: Mapping[TopicPartition, Sequence[int] | None], *, timeout_ms: float | None = None
    ) -> dict[TopicPartition, KafkaError | None]:
        """Move partitions to new replicas (None: cancel the move in progress); each partition's
        outcome (``reassignment_admin.alter_partition_reassignments``)."""
        items, budget = dict(targets), timeout_ms or self.default_api_timeout_ms
        return await self._retrying(
            "AlterPartitionReassignments", timeout_ms,
            lambda: reassignment_admin.alter_partition_reassignments(self._send_any, items, timeout_ms=budget),
        )  # fmt: skip

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None, *, timeout_ms: float | None = None
    ) -> dict[TopicPartition, reassignment_admin.PartitionReassignment]:
        """The moves in progress (``reassignment_admin.list_partition_reassignments``)."""
        wanted, budget = None if partitions is None else list(partitions), timeout_ms or self.default_api_timeout_ms
        return await self._retrying(
            "ListPartitionReassignments", timeout_ms,
            lambda: reassignment_admin.list_partition_reassignments(self._send_any, wanted, timeout_ms=budget),
        )  # fmt: skip

    async def _send_any(self, api_key: int, body: dict[str, Any], timeout_ms: float) -> Message:
        return await self.cluster.send_any(api_key, body, timeout_ms=timeout_ms + 5000)

    async def _send_controller(self, api_key: int, body: dict[str, Any], timeout_ms: float) -> Message:
        return await self._to_controller(api_key, body, timeout_ms)

    # -- offsets -------------------------------------------------------------------------------

    async def list_offsets(
        self,
        specs: Mapping[TopicPartition, int],
        *,
        isolation_level: IsolationLevel | str = IsolationLevel.READ_UNCOMMITTED,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """``{tp: OffsetSpec.EARLIEST | LATEST | MAX_TIMESTAMP | timestamp_ms}`` -> offsets
        (None: no record at or after that timestamp)."""
        self._check_open()
        results = await list_offsets(
            self.cluster,
            specs,
            isolation_level=IsolationLevel.parse(isolation_level),
            timeout_ms=timeout_ms or self.default_api_timeout_ms,
            backoff=self._backoff,
        )
        errors = {tp: r for tp, r in results.items() if isinstance(r, KafkaError)}
        raise_errors(errors)
        return {tp: r for tp, r in results.items() if not isinstance(r, KafkaError)}
