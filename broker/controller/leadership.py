"""Partition leadership on the quorum controller: ISR changes asked by leaders (AlterPartition,
KIP-497), leader elections asked by admins (ElectLeaders), preferred-leader rebalancing and the
unclean-election setting (Kafka documentation §4.7 "Replication" "Replicated Logs", "Unclean leader election", "balance
of leadership").

``ReplicaLeadership`` is a part of ``QuorumController`` (``broker.controller.quorum``), kept apart
because it is one concern. It is a driver, not pure: every decision is a pure function of
``partition_changes``; these methods run them on the active controller (or forward them there)
under the controller's operation lock and wait until this node's metadata shows the result.
"""

from __future__ import annotations

import abc
import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar

from broker.controller.errors import MetadataError
from broker.controller.forwarding import (
    ControllerChannel,
    ControllerUnavailable,
    NotActive,
    Outcome,
    forward_elect_leaders,
    raise_for,
    send_alter_partition,
)
from broker.controller.partition_changes import (
    ElectionResult,
    ElectionType,
    IsrChange,
    TopicPartitionKey,
    alter_partition,
    elect_leaders,
    rebalance_leaders,
    unclean_elections,
)
from broker.controller.reassignment import completed_by
from broker.metadata.cluster_state import ClusterState
from broker.metadata.image import BrokerInfo, MetadataImage
from broker.metadata.records import MetadataRecord
from pyspark_log.wire.errors import ErrorCode

log = logging.getLogger(__name__)

T = TypeVar("T")


class _ActiveController(Protocol):
    """What this part reads of the Raft driver (``quorum.RaftDriverLike`` has more)."""

    @property
    def is_leader(self) -> bool: ...


class ReplicaLeadership(abc.ABC):
    """The leadership part of ``QuorumController`` (see the module docstring)."""

    _driver: _ActiveController
    _state: ClusterState
    _image: MetadataImage
    _broker: BrokerInfo | None
    _broker_epoch: int
    _request_timeout_ms: int
    _clock_ms: Callable[[], int]
    _unclean_default: bool
    _auto_leader_rebalance: bool
    _imbalance_check_interval_ms: int
    _imbalance_percentage: int
    _next_imbalance_check_ms: int | None

    @abc.abstractmethod
    def _op_lock(self) -> asyncio.Lock: ...

    @abc.abstractmethod
    async def _ensure_caught_up(self) -> None: ...

    @abc.abstractmethod
    async def _append(self, records: Sequence[MetadataRecord]) -> int: ...

    @abc.abstractmethod
    async def _execute(
        self,
        local: Callable[[ClusterState], tuple[list[MetadataRecord], T]],
        remote: Callable[[ControllerChannel, int], Awaitable[T]],
    ) -> T: ...

    @abc.abstractmethod
    async def _await_image(self, predicate: Callable[[], bool], what: str) -> None: ...

    @abc.abstractmethod
    def _leader_channel(self) -> ControllerChannel | None: ...

    async def elect_leaders(
        self, election_type: ElectionType, partitions: Sequence[TopicPartitionKey] | None
    ) -> dict[TopicPartitionKey, ElectionResult]:
        """ElectLeaders (``partition_changes.elect_leaders``): run on the active controller, all
        elections in one entry; answered once this node's image shows the elected leaders."""
        wanted = None if partitions is None else list(dict.fromkeys(partitions))

        def local(state: ClusterState) -> tuple[list[MetadataRecord], dict[TopicPartitionKey, ElectionResult]]:
            records, results = elect_leaders(state, election_type, wanted)
            self._warn_unclean(records)
            return records, results

        def elected(key: TopicPartitionKey) -> bool:
            topic = self._image.topics.get(key[0])
            part = topic.partitions.get(key[1]) if topic is not None else None
            if part is None:
                return True
            if election_type == ElectionType.PREFERRED:
                return bool(part.replicas) and part.leader == part.replicas[0]
            return part.leader >= 0

        async def remote(channel: ControllerChannel, timeout_ms: int) -> dict[TopicPartitionKey, ElectionResult]:
            code, results = await forward_elect_leaders(channel, election_type, wanted, timeout_ms=timeout_ms)
            raise_for(Outcome(code))
            done = [key for key, result in results.items() if result.error_code == ErrorCode.NONE]
            await self._await_image(lambda: all(elected(key) for key in done), "the elected leaders")
            return results

        return await self._execute(local, remote)

    async def rebalance_leaders(self) -> int:
        """On the active controller: preferred elections where leadership drifted (one entry);
        returns how many partitions moved."""
        if not self._driver.is_leader:
            return 0
        try:
            async with self._op_lock():
                await self._ensure_caught_up()
                records = rebalance_leaders(self._state, self._imbalance_percentage)
                if records:
                    await self._append(records)
                    log.info("leader imbalance: moved %d partition(s) back to their preferred leader", len(records))
                return len(records)
        except NotActive:
            return 0

    async def _check_imbalance(self) -> None:
        """The periodic part of ``_controller_loop``: every check interval while active."""
        if not self._auto_leader_rebalance or not self._driver.is_leader:
            self._next_imbalance_check_ms = None
            return
        now = self._clock_ms()
        if self._next_imbalance_check_ms is None:
            self._next_imbalance_check_ms = now + self._imbalance_check_interval_ms
        elif now >= self._next_imbalance_check_ms:
            self._next_imbalance_check_ms = now + self._imbalance_check_interval_ms
            await self.rebalance_leaders()

    def _unclean(self, topic: str) -> bool:
        """``unclean.leader.election.enable`` of ``topic``: its override, else the broker default."""
        found = self._state.topics.get(topic)
        value = found.configs.get("unclean.leader.election.enable") if found is not None else None
        return self._unclean_default if value is None else value.strip().lower() == "true"

    def _warn_unclean(self, records: Sequence[MetadataRecord]) -> None:
        for name in unclean_elections(records, self._state):
            log.warning("unclean leader election for %s: records only the old ISR had are lost", name)

    # -- ISR changes (AlterPartition, KIP-497) --------------------------------------------------------
    async def handle_alter_partition(
        self, broker_id: int, broker_epoch: int, changes: Sequence[IsrChange]
    ) -> tuple[int, list[tuple[IsrChange, int]]]:
        """On the active controller: ``(error_code, [(change, partition error code)])``; the
        changes that pass ``alter_partition`` are written in one entry and answered once committed."""
        if not self._driver.is_leader:
            return ErrorCode.NOT_CONTROLLER, []
        try:
            async with self._op_lock():
                await self._ensure_caught_up()
                reg = self._state.registrations.get(broker_id)
                if reg is None or reg.epoch != broker_epoch:
                    return ErrorCode.STALE_BROKER_EPOCH, []
                records: list[MetadataRecord] = []
                results: list[tuple[IsrChange, int]] = []
                for change in changes:
                    try:
                        records.extend(alter_partition(self._state, broker_id, change))
                        results.append((change, ErrorCode.NONE))
                    except MetadataError as exc:
                        results.append((change, exc.code))
                if records:
                    records.extend(completed_by(self._state, records))  # KIP-455: a target now in the ISR
                    await self._append(records)
                return ErrorCode.NONE, results
        except NotActive:
            return ErrorCode.NOT_CONTROLLER, []

    async def alter_partition(self, changes: Sequence[IsrChange]) -> dict[tuple[uuid.UUID, int], int]:
        """A partition leader's AlterPartition: sent to the active controller (or handled here when
        this node is it); returns each partition's error code once this node's image shows the
        change. Raises MetadataError when no controller answered."""
        assert self._broker is not None, "only a broker leads partitions"
        broker_id = self._broker.node_id
        if self._driver.is_leader:
            code, results = await self.handle_alter_partition(broker_id, self._broker_epoch, changes)
        else:
            channel = self._leader_channel()
            if channel is None:
                raise MetadataError(ErrorCode.NOT_CONTROLLER, "no active controller is known")
            try:
                code, results = await send_alter_partition(
                    channel, broker_id, self._broker_epoch, changes, timeout_ms=self._request_timeout_ms
                )
            except ControllerUnavailable as exc:
                raise MetadataError(ErrorCode.NOT_CONTROLLER, str(exc)) from exc
        if code != ErrorCode.NONE:
            raise MetadataError(code, f"AlterPartition refused: error {code}")
        accepted = [c for c, err in results if err == ErrorCode.NONE]
        await self._await_image(lambda: all(self._isr_applied(c) for c in accepted), "the ISR change")
        return {(c.topic_id, c.partition): err for c, err in results}

    def _isr_applied(self, change: IsrChange) -> bool:
        name = self._image.topic_ids.get(change.topic_id)
        topic = self._image.topics.get(name) if name is not None else None
        part = topic.partitions.get(change.partition) if topic is not None else None
        return part is None or part.partition_epoch > change.partition_epoch or set(part.isr) == set(change.new_isr)
