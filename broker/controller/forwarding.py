"""Calls to the active controller over the Kafka protocol: forwarded admin operations and the
broker's registration and heartbeats.

A node that is not the active controller (an observer broker, or a voter that follows) sends a
metadata change to the leader's endpoint from ``controller.quorum.voters`` as the ordinary
request (CreateTopics, DeleteTopics, CreatePartitions, IncrementalAlterConfigs,
AlterClientQuotas) under the client
id ``FORWARD_CLIENT_ID``. The receiving node runs its usual handler; the handler wrapper in
``broker.api.broker_registration`` sets ``forwarded_request`` so that a receiver which is not (or
no longer) the active controller answers NOT_CONTROLLER instead of forwarding again: a request
makes at most one hop, and the sender retries against the leader it learns next.

``send_alter_partition`` carries a partition leader's ISR change (AlterPartition, KIP-497);
``forward_elect_leaders`` an admin's ElectLeaders (KIP-460), forwarded like the admin requests.

``ControllerChannel``: one connection to one controller, one request at a time (these calls are
rare and small); any transport failure or timeout closes the connection and raises
``ControllerUnavailable``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from broker.controller.errors import MetadataError
from broker.controller.partition_changes import ElectionResult, ElectionType, IsrChange, TopicPartitionKey
from broker.controller.reassignment import Move
from broker.network.dial import Dialer
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.errors import ErrorCode, KafkaError
from pyspark_log.wire.headers import decode_response, encode_request
from pyspark_log.wire.message import Message
from pyspark_log.wire.types import INT32

FORWARD_CLIENT_ID = "pylog-controller-forward"
REGISTRATION_CLIENT_ID = "pylog-broker-lifecycle"
OP_SET, OP_DELETE = 0, 1
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4

# True while a handler serves a request that another node forwarded (see the module docstring).
forwarded_request: ContextVar[bool] = ContextVar("pylog_forwarded_request", default=False)


T = TypeVar("T")


class ControllerUnavailable(Exception):
    """The controller could not be reached or did not answer in time."""


class NotActive(Exception):
    """This node, or the one asked, stopped being the active controller during an operation."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """A forwarded operation's answer: Kafka error code, message, and the created topic's id."""

    error_code: int
    error_message: str | None = None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1


class ControllerChannel:
    """A lazily opened connection to one controller endpoint."""

    def __init__(self, host: str, port: int, dialer: Dialer | None = None) -> None:
        self.host = host
        self.port = port
        self._dial = dialer or Dialer()
        self._lock = asyncio.Lock()
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = itertools.count(1)

    async def request(
        self, api_key: int, version: int, body: Mapping[str, Any], *, client_id: str, timeout_ms: int
    ) -> Message:
        async with self._lock:
            try:
                return await asyncio.wait_for(self._roundtrip(api_key, version, body, client_id), timeout_ms / 1000)
            except (OSError, EOFError, TimeoutError, KafkaError) as exc:
                await self.close()
                raise ControllerUnavailable(f"controller {self.host}:{self.port}: {exc!r}") from exc
            except BaseException:
                await self.close()
                raise

    async def _roundtrip(self, api_key: int, version: int, body: Mapping[str, Any], client_id: str) -> Message:
        if self._writer is not None and self._dial.stale(self._writer):  # KIP-368: the session is ending
            await self.close()
        if self._writer is None:
            self._reader, self._writer = await self._dial(self.host, self.port)
        assert self._reader is not None
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        self._writer.write(encode_request(api_key, version, correlation_id, client_id, body))
        await self._writer.drain()
        (size,) = INT32.unpack(await self._reader.readexactly(4))
        frame = await self._reader.readexactly(size)
        got, message = decode_response(api_key, version, frame)
        if got != correlation_id:
            raise EOFError(f"response correlation id {got} does not match {correlation_id}")
        return message

    async def close(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


async def unless_leader_moves(call: Awaitable[T], epoch: Callable[[], int], poll_s: float = 0.2) -> T:
    """``call``'s result, unless ``epoch()`` (the quorum's) changes first, checked every
    ``poll_s``: then ``call`` is cancelled (its channel closes) and ``ControllerUnavailable`` is
    raised, so the caller retries at the leader it learns next instead of waiting out its whole
    timeout on a controller that stopped answering (paused or cut off), as Kafka's controller
    channel does when the controller node changes."""
    start = epoch()
    task = asyncio.ensure_future(call)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=poll_s)
            if done:
                return task.result()
            if epoch() != start:
                raise ControllerUnavailable("the quorum elected another leader while the request was in flight")
    finally:
        if not task.done():
            task.cancel()
            await asyncio.wait({task})


class ControllerChannels:
    """Channels by endpoint, reused across calls."""

    def __init__(self, dialer: Dialer | None = None) -> None:
        self._dialer = dialer  # the controller listener's security (broker.network.dial)
        self._channels: dict[tuple[str, int], ControllerChannel] = {}

    def get(self, host: str, port: int) -> ControllerChannel:
        channel = self._channels.get((host, port))
        if channel is None:
            channel = self._channels[(host, port)] = ControllerChannel(host, port, self._dialer)
        return channel

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()


# -- forwarded admin operations -------------------------------------------------------------------
async def forward_create_topic(
    channel: ControllerChannel, name: str, num_partitions: int, replication_factor: int,
    configs: Mapping[str, str], *, validate_only: bool, timeout_ms: int,
    assignments: Sequence[Sequence[int]] | None = None,
) -> Outcome:  # fmt: skip
    if assignments is not None:  # Kafka's rule: counts are -1 when replica lists are given
        num_partitions = replication_factor = -1
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": num_partitions,
                "replication_factor": replication_factor,
                "assignments": [
                    {"partition_index": i, "broker_ids": list(replicas)} for i, replicas in enumerate(assignments or ())
                ],
                "configs": [{"name": k, "value": v} for k, v in configs.items()],
            }
        ],
        "timeout_ms": timeout_ms,
        "validate_only": validate_only,
    }
    response = await channel.request(ApiKey.CREATE_TOPICS, 7, body, client_id=FORWARD_CLIENT_ID, timeout_ms=timeout_ms)
    topic = response.topics[0]
    return Outcome(topic.error_code, topic.error_message, topic.topic_id, topic.num_partitions)


async def forward_delete_topic(channel: ControllerChannel, name: str, *, timeout_ms: int) -> Outcome:
    body = {"topic_names": [name], "timeout_ms": timeout_ms}
    response = await channel.request(ApiKey.DELETE_TOPICS, 5, body, client_id=FORWARD_CLIENT_ID, timeout_ms=timeout_ms)
    result = response.responses[0]
    return Outcome(result.error_code, result.error_message)


async def forward_create_partitions(
    channel: ControllerChannel, name: str, total_count: int, *, validate_only: bool, timeout_ms: int,
    assignments: Sequence[Sequence[int]] | None = None,
) -> Outcome:  # fmt: skip
    lists = None if assignments is None else [{"broker_ids": list(replicas)} for replicas in assignments]
    body = {
        "topics": [{"name": name, "count": total_count, "assignments": lists}],
        "timeout_ms": timeout_ms,
        "validate_only": validate_only,
    }
    response = await channel.request(
        ApiKey.CREATE_PARTITIONS, 3, body, client_id=FORWARD_CLIENT_ID, timeout_ms=timeout_ms
    )
    result = response.results[0]
    return Outcome(result.error_code, result.error_message)


async def forward_alter_topic_configs(
    channel: ControllerChannel, name: str, changes: Mapping[str, str | None], *, validate_only: bool, timeout_ms: int
) -> Outcome:
    ops = [{"name": k, "config_operation": OP_DELETE if v is None else OP_SET, "value": v} for k, v in changes.items()]
    body = {
        "resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": name, "configs": ops}],
        "validate_only": validate_only,
    }
    response = await channel.request(
        ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body, client_id=FORWARD_CLIENT_ID, timeout_ms=timeout_ms
    )
    result = response.responses[0]
    return Outcome(result.error_code, result.error_message)


async def forward_alter_broker_configs(
    channel: ControllerChannel, resource_name: str, changes: Mapping[str, str | None],
    *, validate_only: bool, timeout_ms: int,
) -> Outcome:  # fmt: skip
    """IncrementalAlterConfigs of a BROKER resource (KIP-226) to the active controller."""
    ops = [{"name": k, "config_operation": OP_DELETE if v is None else OP_SET, "value": v} for k, v in changes.items()]
    body = {
        "resources": [{"resource_type": BROKER_RESOURCE, "resource_name": resource_name, "configs": ops}],
        "validate_only": validate_only,
    }
    response = await channel.request(
        ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body, client_id=FORWARD_CLIENT_ID, timeout_ms=timeout_ms
    )
    result = response.responses[0]
    return Outcome(result.error_code, result.error_message)


async def forward_alter_client_quotas(
    channel: ControllerChannel, entity: Sequence[tuple[str, str | None]], changes: Mapping[str, float | None],
    *, validate_only: bool, timeout_ms: int,
) -> Outcome:  # fmt: skip
    """AlterClientQuotas of one entity (value None: remove that key)."""
    body = {
        "entries": [
            {
                "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                "ops": [{"key": k, "value": 0.0 if v is None else v, "remove": v is None} for k, v in changes.items()],
            }
        ],
        "validate_only": validate_only,
    }
    response = await channel.request(
        ApiKey.ALTER_CLIENT_QUOTAS, 1, body, client_id=FORWARD_CLIENT_ID, timeout_ms=timeout_ms
    )
    result = response.entries[0]
    return Outcome(result.error_code, result.error_message)


ELECT_LEADERS_VERSION = 2
ACLS_VERSION = 3


async def forward_create_acls(
    channel: ControllerChannel, creations: Sequence[tuple[int, str, int, str, str, int, int]], *, timeout_ms: int
) -> list[tuple[int, str | None]]:
    """CreateAcls v3: one ``(error_code, message)`` per creation; NotActive when the receiver is
    not the active controller."""
    keys = ("resource_type", "resource_name", "resource_pattern_type", "principal", "host", "operation",
            "permission_type")  # fmt: skip
    body = {"creations": [dict(zip(keys, c, strict=True)) for c in creations]}
    response = await channel.request(ApiKey.CREATE_ACLS, ACLS_VERSION, body, client_id=FORWARD_CLIENT_ID,
                                     timeout_ms=timeout_ms)  # fmt: skip
    results = [(int(r.error_code), r.error_message) for r in response.results]
    if any(code == ErrorCode.NOT_CONTROLLER for code, _ in results):
        raise NotActive
    return results


async def forward_delete_acls(
    channel: ControllerChannel, filters: Sequence[Any], *, timeout_ms: int
) -> list[tuple[int, str | None, list[tuple[int, str, int, str, str, int, int]]]]:
    """DeleteAcls v3: per filter ``(error_code, message, [matched ACL as a creation tuple])``."""
    body = {
        "filters": [
            {"resource_type_filter": f.resource_type, "resource_name_filter": f.name,
             "pattern_type_filter": f.pattern_type, "principal_filter": f.principal, "host_filter": f.host,
             "operation": f.operation, "permission_type": f.permission}
            for f in filters
        ]
    }  # fmt: skip
    response = await channel.request(ApiKey.DELETE_ACLS, ACLS_VERSION, body, client_id=FORWARD_CLIENT_ID,
                                     timeout_ms=timeout_ms)  # fmt: skip
    results = []
    for r in response.filter_results:
        if r.error_code == ErrorCode.NOT_CONTROLLER:
            raise NotActive
        matched = [
            (int(m.resource_type), str(m.resource_name), int(m.pattern_type), str(m.principal), str(m.host),
             int(m.operation), int(m.permission_type))
            for m in r.matching_acls
        ]  # fmt: skip
        results.append((int(r.error_code), r.error_message, matched))
    return results


async def forward_alter_user_scram_credentials(
    channel: ControllerChannel, deletions: Sequence[Any], upsertions: Sequence[Any], *, timeout_ms: int
) -> dict[str, tuple[int, str | None]]:
    """AlterUserScramCredentials v0 (KIP-554): ``{user: (error_code, message)}``; NotActive when
    the receiver is not the active controller."""
    body = {
        "deletions": [{"name": d.name, "mechanism": d.mechanism} for d in deletions],
        "upsertions": [
            {"name": u.name, "mechanism": u.mechanism, "iterations": u.iterations, "salt": u.salt,
             "salted_password": u.salted_password}
            for u in upsertions
        ],
    }  # fmt: skip
    response = await channel.request(
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, body, client_id=FORWARD_CLIENT_ID, timeout_ms=timeout_ms
    )
    results = {r.user: (int(r.error_code), r.error_message) for r in response.results}
    if any(code == ErrorCode.NOT_CONTROLLER for code, _ in results.values()):
        raise NotActive
    return results


async def forward_elect_leaders(
    channel: ControllerChannel, election_type: ElectionType, partitions: Sequence[TopicPartitionKey] | None,
    *, timeout_ms: int,
) -> tuple[int, dict[TopicPartitionKey, ElectionResult]]:  # fmt: skip
    """ElectLeaders: ``(top-level error code, {(topic, partition): result})``."""
    topics: dict[str, list[int]] | None = None
    if partitions is not None:
        topics = {}
        for name, index in partitions:
            topics.setdefault(name, []).append(index)
    body = {
        "election_type": int(election_type),
        "topic_partitions": None if topics is None else [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        "timeout_ms": timeout_ms,
    }
    response = await channel.request(
        ApiKey.ELECT_LEADERS, ELECT_LEADERS_VERSION, body, client_id=FORWARD_CLIENT_ID, timeout_ms=timeout_ms
    )
    results = {
        (t.topic, p.partition_id): ElectionResult(p.error_code, p.error_message)
        for t in response.replica_election_results
        for p in t.partition_result
    }
    return response.error_code, results


# -- broker lifecycle -----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Registration:
    broker_id: int
    cluster_id: str
    incarnation_id: uuid.UUID
    host: str
    port: int
    rack: str | None = None
    endpoints: tuple[tuple[str, str, int], ...] = ()  # every client listener; host/port: inter-broker


async def send_registration(channel: ControllerChannel, reg: Registration, *, timeout_ms: int) -> tuple[int, int]:
    """BrokerRegistration v0: ``(error_code, broker_epoch)``."""
    body = {
        "broker_id": reg.broker_id,
        "cluster_id": reg.cluster_id,
        "incarnation_id": reg.incarnation_id,
        "listeners": [
            {"name": name, "host": host, "port": port, "security_protocol": 0}
            for name, host, port in reg.endpoints or (("PLAINTEXT", reg.host, reg.port),)
        ],
        "features": [],
        "rack": reg.rack,
    }
    response = await channel.request(
        ApiKey.BROKER_REGISTRATION, 0, body, client_id=REGISTRATION_CLIENT_ID, timeout_ms=timeout_ms
    )
    return response.error_code, response.broker_epoch


async def send_heartbeat(
    channel: ControllerChannel, broker_id: int, broker_epoch: int, metadata_offset: int,
    *, want_shut_down: bool, timeout_ms: int,
) -> tuple[int, bool]:  # fmt: skip
    """BrokerHeartbeat v0: ``(error_code, is_fenced)``."""
    body = {
        "broker_id": broker_id,
        "broker_epoch": broker_epoch,
        "current_metadata_offset": metadata_offset,
        "want_fence": False,
        "want_shut_down": want_shut_down,
    }
    response = await channel.request(
        ApiKey.BROKER_HEARTBEAT, 0, body, client_id=REGISTRATION_CLIENT_ID, timeout_ms=timeout_ms
    )
    return response.error_code, response.is_fenced


# -- partition reassignment (KIP-455) and UnregisterBroker (KIP-631) --------------------------------
ALTER_REASSIGNMENTS_VERSION = 1


async def forward_alter_partition_reassignments(
    channel: ControllerChannel, moves: Sequence[Move], *, allow_replication_factor_change: bool, timeout_ms: int
) -> tuple[Outcome, dict[TopicPartitionKey, tuple[int, str | None]]]:
    """AlterPartitionReassignments to the active controller: the top-level outcome and each
    partition's ``(error code, error message)``."""
    by_topic: dict[str, list[dict[str, object]]] = {}
    for move in moves:
        by_topic.setdefault(move.topic, []).append(
            {"partition_index": move.partition, "replicas": None if move.replicas is None else list(move.replicas)}
        )
    body = {
        "timeout_ms": timeout_ms,
        "allow_replication_factor_change": allow_replication_factor_change,
        "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()],
    }
    response = await channel.request(
        ApiKey.ALTER_PARTITION_REASSIGNMENTS, ALTER_REASSIGNMENTS_VERSION, body, client_id=FORWARD_CLIENT_ID,
        timeout_ms=timeout_ms,
    )  # fmt: skip
    outcome = Outcome(response.error_code, response.error_message)
    if response.error_code != ErrorCode.NONE:
        return outcome, {}
    return outcome, {(t.name, p.partition_index): (p.error_code, p.error_message) for t in response.responses
                     for p in t.partitions}  # fmt: skip


async def forward_unregister_broker(channel: ControllerChannel, broker_id: int, *, timeout_ms: int) -> Outcome:
    """UnregisterBroker (API 64, v0) to the active controller."""
    response = await channel.request(
        ApiKey.UNREGISTER_BROKER, 0, {"broker_id": broker_id}, client_id=FORWARD_CLIENT_ID, timeout_ms=timeout_ms
    )
    return Outcome(response.error_code, response.error_message)


# -- ISR changes (AlterPartition v2, KIP-497) -------------------------------------------------------
ALTER_PARTITION_VERSION = 2


async def send_alter_partition(
    channel: ControllerChannel, broker_id: int, broker_epoch: int, changes: Sequence[IsrChange], *, timeout_ms: int
) -> tuple[int, list[tuple[IsrChange, int]]]:
    """AlterPartition: ``(error_code, [(change, partition error code)])``."""
    by_topic: dict[uuid.UUID, list[IsrChange]] = {}
    for change in changes:
        by_topic.setdefault(change.topic_id, []).append(change)
    body = {
        "broker_id": broker_id,
        "broker_epoch": broker_epoch,
        "topics": [
            {
                "topic_id": topic_id,
                "partitions": [
                    {
                        "partition_index": c.partition,
                        "leader_epoch": c.leader_epoch,
                        "new_isr": list(c.new_isr),
                        "partition_epoch": c.partition_epoch,
                    }
                    for c in group
                ],
            }
            for topic_id, group in by_topic.items()
        ],
    }
    response = await channel.request(
        ApiKey.ALTER_PARTITION, ALTER_PARTITION_VERSION, body, client_id=REGISTRATION_CLIENT_ID, timeout_ms=timeout_ms
    )
    codes = {(t.topic_id, p.partition_index): p.error_code for t in response.topics for p in t.partitions}
    return response.error_code, [(c, codes.get((c.topic_id, c.partition), response.error_code)) for c in changes]


def raise_for(outcome: Outcome) -> None:
    """NotActive for NOT_CONTROLLER (the caller retries elsewhere), MetadataError for other errors."""
    if outcome.error_code == ErrorCode.NOT_CONTROLLER:
        raise NotActive
    if outcome.error_code != ErrorCode.NONE:
        raise MetadataError(outcome.error_code, outcome.error_message or f"error {outcome.error_code}")
