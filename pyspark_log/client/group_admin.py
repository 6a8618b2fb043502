"""Consumer groups through the admin client: the committed offsets of a group without joining it
(OffsetCommit / OffsetFetch with generation -1), and Kafka Admin's listConsumerGroups,
describeConsumerGroups, deleteConsumerGroups and deleteConsumerGroupOffsets (ListGroups,
DescribeGroups, DeleteGroups, OffsetDelete, each to the group's coordinator, ListGroups to every
broker).

``ConsumerGroupAdmin`` is a mixin of ``AsyncAdmin``: it uses the admin's cluster, its group
coordinator client (``GroupOffsets``), its retry loop and its default timeout.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pyspark_log.client.admin_items import raise_errors
from pyspark_log.client.cluster import BrokerNode, Cluster
from pyspark_log.client.errors import error_for
from pyspark_log.client.groups import GroupOffsets, OffsetAndMetadata
from pyspark_log.client.types import TopicPartition
from pyspark_log.wire import ApiKey, DecodeError, ErrorCode, KafkaError, Message
from pyspark_log.wire.consumer_protocol import PROTOCOL_TYPE, decode_assignment

T = TypeVar("T")


@dataclass(frozen=True)
class ConsumerGroupListing:
    """A group ``list_consumer_groups`` found. ``protocol_type`` is ``consumer``, or empty for a
    group that only has committed offsets (a "simple" group, e.g. a Spark query's groupId);
    ``state`` is None when the broker is too old to report it (ListGroups < v4)."""

    group_id: str
    protocol_type: str
    state: str | None
    type: str = "classic"  # ListGroups v5 GroupType: classic or consumer (KIP-848)

    @property
    def is_simple(self) -> bool:
        return not self.protocol_type


@dataclass(frozen=True)
class MemberDescription:
    """A group member; ``assignment`` is decoded from the consumer protocol (empty while the
    group rebalances, or when the group is not a consumer group)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...] = ()
    member_epoch: int | None = None  # KIP-848 members only (ConsumerGroupDescribe)
    target_assignment: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True)
class ConsumerGroupDescription:
    """What DescribeGroups says of a group. ``state`` is Kafka's name (``Stable``, ``Empty``,
    ``PreparingRebalance``, ``CompletingRebalance``, ``Dead`` for a group that does not exist);
    ``partition_assignor`` is the chosen protocol (``range``, ...), empty unless Stable."""

    group_id: str
    protocol_type: str
    state: str
    partition_assignor: str
    members: tuple[MemberDescription, ...]
    coordinator: BrokerNode | None
    type: str = "classic"  # "consumer": a KIP-848 group, described by ConsumerGroupDescribe
    group_epoch: int | None = None
    assignment_epoch: int | None = None

    @property
    def is_simple(self) -> bool:
        return not self.protocol_type


class ConsumerGroupAdmin(abc.ABC):
    """The consumer-group calls of ``AsyncAdmin`` (see the module doc); the hooks are the admin's."""

    cluster: Cluster
    _groups: GroupOffsets
    default_api_timeout_ms: float

    @abc.abstractmethod
    def _check_open(self) -> None: ...

    @abc.abstractmethod
    async def _retrying(self, what: str, timeout_ms: float | None, attempt_fn: Callable[[], Awaitable[T]]) -> T: ...

    # -- consumer-group offsets (no membership) ------------------------------------------------

    async def alter_consumer_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        *,
        timeout_ms: float | None = None,
    ) -> None:
        """Commit ``offsets`` (next offset to read) for ``group_id`` with generation -1."""
        self._check_open()
        await self._groups.commit(group_id, offsets, timeout_ms or self.default_api_timeout_ms)

    async def list_consumer_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The committed offsets of ``group_id`` (omitting partitions with none). With
        ``require_stable`` (KIP-447) the broker answers UNSTABLE_OFFSET_COMMIT while a transaction
        has offsets pending for a partition, and this waits (retries) until they settle."""
        self._check_open()
        budget = timeout_ms or self.default_api_timeout_ms
        return await self._groups.fetch(group_id, partitions, budget, require_stable=require_stable)

    # -- consumer groups (Kafka Admin's list/describe/deleteConsumerGroups, deleteConsumerGroupOffsets)

    async def _group_admin_request(self, node: int, api_key: int, body: dict[str, Any]) -> Message:
        """Send a group admin API (ListGroups, DescribeGroups, DeleteGroups, OffsetDelete) to
        ``node`` at the highest version both sides speak."""
        conn = await self.cluster.connection(node)
        resp = await conn.request(api_key, body)
        assert resp is not None
        return resp

    async def _each_group(self, group_ids: Iterable[str], one: Callable[[str], Awaitable[T]]) -> dict[str, T]:
        """``one(group)`` for every group concurrently; failures raised as ``raise_errors`` does."""
        self._check_open()
        ids = list(dict.fromkeys(group_ids))
        results = await asyncio.gather(*(one(g) for g in ids), return_exceptions=True)
        errors: dict[Any, KafkaError] = {}
        out: dict[str, T] = {}
        for group_id, result in zip(ids, results, strict=True):
            if isinstance(result, KafkaError):
                errors[group_id] = result
            elif isinstance(result, BaseException):
                raise result
            else:
                out[group_id] = result
        raise_errors(errors)
        return out

    async def list_consumer_groups(
        self, states: Iterable[str] | None = None, *, timeout_ms: float | None = None
    ) -> list[ConsumerGroupListing]:
        """Every consumer group of the cluster, sorted by id: ListGroups to every broker, as each
        coordinates its own share. ``states`` keeps groups in those states (case-insensitive).
        Groups of other protocol types (Kafka Connect's, say) are left out, as Kafka's Admin
        ``listConsumerGroups`` leaves them out."""
        wanted = sorted({s.strip() for s in states or () if s.strip()})
        body = {"states_filter": wanted}

        async def attempt() -> dict[str, ConsumerGroupListing]:
            meta = await self.cluster.fetch_metadata([])
            found: dict[str, ConsumerGroupListing] = {}
            for node in sorted(meta.brokers):
                resp = await self._group_admin_request(node, ApiKey.LIST_GROUPS, body)
                if resp.error_code != ErrorCode.NONE:
                    raise error_for(resp.error_code, context=f"list groups on broker {node}")
                for g in resp.groups:
                    found[g.group_id] = ConsumerGroupListing(
                        g.group_id,
                        g.protocol_type or "",
                        getattr(g, "group_state", None) or None,
                        getattr(g, "group_type", None) or "classic",
                    )
            return found

        found = await self._retrying("ListGroups", timeout_ms, attempt)
        lowered = {s.lower() for s in wanted}
        return [
            listing
            for _, listing in sorted(found.items())
            if listing.protocol_type in {PROTOCOL_TYPE, ""}
            and (not lowered or listing.state is None or listing.state.lower() in lowered)
        ]

    async def describe_consumer_groups(
        self, group_ids: Iterable[str], *, timeout_ms: float | None = None
    ) -> dict[str, ConsumerGroupDescription]:
        """State, members (client id, host, decoded assignment), assignor and coordinator of each
        group, asked of its coordinator. A group that does not exist is described as ``Dead``
        with no members, as Kafka's Admin describes it."""
        budget = timeout_ms or self.default_api_timeout_ms

        async def one(group_id: str) -> ConsumerGroupDescription:
            body = {"groups": [group_id], "include_authorized_operations": False}

            async def attempt(node: int) -> ConsumerGroupDescription:
                described = await self._describe_kip848(node, group_id)
                if described is not None:
                    return described
                resp = await self._group_admin_request(node, ApiKey.DESCRIBE_GROUPS, body)
                group = next((g for g in resp.groups if g.group_id == group_id), None)
                if group is None:
                    raise error_for(ErrorCode.UNKNOWN_SERVER_ERROR, context=f"describe group {group_id!r}: no answer")
                if group.error_code != ErrorCode.NONE:
                    raise error_for(group.error_code, context=f"describe group {group_id!r}")
                return _group_description(group, self.cluster.metadata.brokers.get(node))

            return await self._groups._retrying(group_id, budget, attempt)

        return await self._each_group(group_ids, one)

    async def _describe_kip848(self, node: int, group_id: str) -> ConsumerGroupDescription | None:
        """ConsumerGroupDescribe (KIP-848) when the broker serves it, as Kafka's Admin asks first;
        None (describe with DescribeGroups) for a group that is not a KIP-848 group there."""
        conn = await self.cluster.connection(node)
        if not conn.supports(ApiKey.CONSUMER_GROUP_DESCRIBE):
            return None
        resp = await conn.request(
            ApiKey.CONSUMER_GROUP_DESCRIBE, {"group_ids": [group_id], "include_authorized_operations": False}
        )
        assert resp is not None
        group = next((g for g in resp.groups if g.group_id == group_id), None)
        if group is None or group.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            return None
        if group.error_code != ErrorCode.NONE:
            raise error_for(group.error_code, context=f"describe group {group_id!r}")

        def parts(assignment: Any) -> tuple[TopicPartition, ...]:
            return tuple(
                sorted(TopicPartition(tp.topic_name, p) for tp in assignment.topic_partitions for p in tp.partitions)
            )

        members = tuple(
            MemberDescription(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                parts(m.assignment),
                m.member_epoch,
                parts(m.target_assignment),
            )
            for m in group.members
        )
        return ConsumerGroupDescription(
            group.group_id, PROTOCOL_TYPE, group.group_state, group.assignor_name, members,
            self.cluster.metadata.brokers.get(node), "consumer", group.group_epoch, group.assignment_epoch,
        )  # fmt: skip

    async def delete_consumer_groups(self, group_ids: Iterable[str], *, timeout_ms: float | None = None) -> None:
        """Delete each group with its committed offsets. Only a group without members can go:
        NON_EMPTY_GROUP otherwise, GROUP_ID_NOT_FOUND for one that does not exist. Raises the
        first failure; its ``errors`` maps every failed group to its error."""
        budget = timeout_ms or self.default_api_timeout_ms

        async def one(group_id: str) -> None:
            body = {"groups_names": [group_id]}

            async def attempt(node: int) -> None:
                resp = await self._group_admin_request(node, ApiKey.DELETE_GROUPS, body)
                for result in resp.results:
                    if result.group_id == group_id and result.error_code != ErrorCode.NONE:
                        raise error_for(result.error_code, context=f"delete group {group_id!r}")

            await self._groups._retrying(group_id, budget, attempt)

        await self._each_group(group_ids, one)

    async def delete_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition], *, timeout_ms: float | None = None
    ) -> None:
        """Forget ``group_id``'s committed offsets of ``partitions`` (OffsetDelete): allowed for an
        empty group, and for topics a consumer group does not subscribe to
        (GROUP_SUBSCRIBED_TO_TOPIC otherwise). Partition failures are raised with ``errors``
        mapping each failed partition to its error; group failures (NON_EMPTY_GROUP,
        GROUP_ID_NOT_FOUND) are raised as they are."""
        self._check_open()
        by_topic: dict[str, list[int]] = {}
        for tp in dict.fromkeys(partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        body = {
            "group_id": group_id,
            "topics": [{"name": t, "partitions": [{"partition_index": p} for p in ps]} for t, ps in by_topic.items()],
        }

        async def attempt(node: int) -> dict[Any, KafkaError]:
            resp = await self._group_admin_request(node, ApiKey.OFFSET_DELETE, body)
            if resp.error_code != ErrorCode.NONE:
                raise error_for(resp.error_code, context=f"delete offsets of group {group_id!r}")
            errors: dict[Any, KafkaError] = {}
            for topic in resp.topics:
                for part in topic.partitions:
                    if part.error_code != ErrorCode.NONE:
                        tp = TopicPartition(topic.name, part.partition_index)
                        errors[tp] = error_for(part.error_code, context=f"delete offset of {tp} for {group_id!r}")
            return errors

        raise_errors(await self._groups._retrying(group_id, timeout_ms or self.default_api_timeout_ms, attempt))


def _assigned_partitions(raw: bytes | None) -> tuple[TopicPartition, ...]:
    """A member's assignment from consumer-protocol bytes (empty for none or undecodable bytes)."""
    if not raw:
        return ()
    try:
        assignment = decode_assignment(raw)
    except DecodeError:
        return ()
    return tuple(sorted(TopicPartition(t, p) for t, p in assignment.partitions))


def _group_description(group: Any, coordinator: BrokerNode | None) -> ConsumerGroupDescription:
    """A DescribeGroups entry; assignments are decoded only for protocol type ``consumer``."""
    consumer = group.protocol_type == PROTOCOL_TYPE
    members = tuple(
        MemberDescription(
            m.member_id,
            getattr(m, "group_instance_id", None),
            m.client_id,
            m.client_host,
            _assigned_partitions(m.member_assignment) if consumer else (),
        )
        for m in group.members
    )
    return ConsumerGroupDescription(
        group.group_id, group.protocol_type or "", group.group_state, group.protocol_data or "", members, coordinator
    )
