"""``ReplicationControlManager``: topics, partitions and their leadership on the quorum controller,
as Kafka's ``ReplicationControlManager`` (``org.apache.kafka.controller``).

It runs the pure decisions on the active controller through the ``OperationRunner`` (forwarded
there from any other node) and answers once this node's metadata shows the result:

* topics and partitions: CreateTopics, DeleteTopics, CreatePartitions (``operations``);
* ISR changes asked by partition leaders (AlterPartition, KIP-497) and leader elections asked by
  admins (ElectLeaders, KIP-460), all in ``partition_changes``;
* preferred-leader rebalancing every ``leader.imbalance.check.interval.seconds`` while active
  (``auto.leader.rebalance.enable``; Kafka documentation §4.7 "Replication", "balance of leadership");
* the unclean-election setting (``unclean.leader.election.enable``, per topic over the broker
  default; Kafka documentation §4.7 "Unclean leader election") that every leader election here
  and in ``ClusterControlManager``'s fencing uses (``fence``, ``unfence``, ``register``);
* partition reassignment (KIP-455, ``reassignment``): AlterPartitionReassignments answered once
  this node's metadata shows each accepted partition moving (or moved) to its target, or back to
  its original replicas for a cancellation; ListPartitionReassignments from this node's applied
  metadata (every node applies the same log).

It holds the topic-deletion and unclean-election settings and the leader-balance schedule.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence

from broker.controller import operations
from broker.controller.errors import MetadataError
from broker.controller.forwarding import (
    ControllerChannel,
    ControllerUnavailable,
    NotActive,
    Outcome,
    forward_alter_partition_reassignments,
    forward_create_partitions,
    forward_create_topic,
    forward_delete_topic,
    forward_elect_leaders,
    raise_for,
    send_alter_partition,
)
from broker.controller.operation_runner import OperationRunner
from broker.controller.operations import Assignments
from broker.controller.partition_changes import (
    ElectionResult,
    ElectionType,
    IsrChange,
    TopicPartitionKey,
    alter_partition,
    elect_leaders,
    fence_broker,
    rebalance_leaders,
    register_broker,
    unclean_elections,
    unfence_broker,
)
from broker.controller.reassignment import (
    Move,
    MoveResult,
    Ongoing,
    alter_reassignment,
    completed_by,
    is_reassigning,
    list_reassignments,
    target_replicas,
)
from broker.metadata.cluster_state import ClusterState
from broker.metadata.image import PartitionImage, TopicImage
from broker.metadata.records import MetadataRecord, RegisterBrokerRecord
from pyspark_log.wire.errors import ErrorCode

log = logging.getLogger(__name__)


class ReplicationControlManager:
    """Topics, partitions, ISR, leader elections and reassignments; see the module docstring."""

    def __init__(
        self,
        runner: OperationRunner,
        *,
        deletion_enabled: bool,
        unclean_leader_election: bool,
        auto_leader_rebalance: bool,
        leader_imbalance_check_interval_ms: int,
        leader_imbalance_per_broker_percentage: int,
        clock_ms: Callable[[], int],
    ) -> None:
        self._runner = runner
        self._deletion_enabled = deletion_enabled
        self._unclean_default = unclean_leader_election
        self._auto_leader_rebalance = auto_leader_rebalance
        self._imbalance_check_interval_ms = leader_imbalance_check_interval_ms
        self._imbalance_percentage = leader_imbalance_per_broker_percentage
        self._next_imbalance_check_ms: int | None = None
        self._clock_ms = clock_ms

    # -- topics and partitions ------------------------------------------------------------------------
    async def create_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str],
        *, validate_only: bool = False, assignments: Assignments | None = None,
    ) -> TopicImage:  # fmt: skip
        runner = self._runner
        topic_id = uuid.uuid4()

        def local(state: ClusterState) -> tuple[list[MetadataRecord], TopicImage]:
            records, topic = operations.create_topic(
                state, name, num_partitions, replication_factor, configs, topic_id=topic_id, assignments=assignments
            )
            return ([] if validate_only else records), topic

        async def remote(channel: ControllerChannel, timeout_ms: int) -> TopicImage:
            outcome = await forward_create_topic(
                channel, name, num_partitions, replication_factor, configs,
                validate_only=validate_only, timeout_ms=timeout_ms, assignments=assignments,
            )  # fmt: skip
            raise_for(outcome)
            if validate_only:
                wanted = num_partitions if assignments is None else len(assignments)
                count = outcome.num_partitions if outcome.num_partitions > 0 else wanted
                parts = {p: PartitionImage(p, -1, 0, (), ()) for p in range(count)}
                return TopicImage(name, outcome.topic_id or topic_id, parts, dict(configs))
            created = outcome.topic_id
            await runner.await_image(lambda: self._has_topic(name, created), f"topic {name!r}")
            return runner.image.topics[name]

        topic = await runner.execute(local, remote)
        if validate_only:
            return topic
        return runner.image.topics.get(name, topic)

    def _has_topic(self, name: str, topic_id: uuid.UUID | None) -> bool:
        topic = self._runner.image.topics.get(name)
        return topic is not None and (topic_id is None or topic.topic_id == topic_id)

    async def delete_topic(self, name: str) -> None:
        runner = self._runner
        topics = runner.image.topics
        gone_id = topics[name].topic_id if name in topics else None

        def local(state: ClusterState) -> tuple[list[MetadataRecord], None]:
            return operations.delete_topic(state, name, deletion_enabled=self._deletion_enabled), None

        def gone() -> bool:
            topics = runner.image.topics
            return name not in topics or topics[name].topic_id != gone_id

        async def remote(channel: ControllerChannel, timeout_ms: int) -> None:
            raise_for(await forward_delete_topic(channel, name, timeout_ms=timeout_ms))
            await runner.await_image(gone, f"deletion of topic {name!r}")

        await runner.execute(local, remote)

    async def create_partitions(
        self, name: str, total_count: int, *, validate_only: bool = False, assignments: Assignments | None = None
    ) -> None:
        runner = self._runner

        def local(state: ClusterState) -> tuple[list[MetadataRecord], None]:
            records = operations.create_partitions(state, name, total_count, assignments)
            return ([] if validate_only else records), None

        def created() -> bool:
            topics = runner.image.topics
            return name in topics and len(topics[name].partitions) >= total_count

        async def remote(channel: ControllerChannel, timeout_ms: int) -> None:
            outcome = await forward_create_partitions(
                channel, name, total_count, validate_only=validate_only, timeout_ms=timeout_ms, assignments=assignments
            )
            raise_for(outcome)
            if not validate_only:
                await runner.await_image(created, f"partitions of topic {name!r}")

        await runner.execute(local, remote)

    # -- the unclean-election setting and the partitions of a broker's lifecycle ---------------------------
    def unclean(self, topic: str) -> bool:
        """``unclean.leader.election.enable`` of ``topic``: its override, else the broker default."""
        found = self._runner.state.topics.get(topic)
        value = found.configs.get("unclean.leader.election.enable") if found is not None else None
        return self._unclean_default if value is None else value.strip().lower() == "true"

    def _warn_unclean(self, records: Sequence[MetadataRecord]) -> None:
        for name in unclean_elections(records, self._runner.state):
            log.warning("unclean leader election for %s: records only the old ISR had are lost", name)

    def register(self, state: ClusterState, record: RegisterBrokerRecord) -> list[MetadataRecord]:
        """``record`` and the partition changes of a (re-)registration (``partition_changes.register_broker``)."""
        records = register_broker(state, record, self.unclean)
        self._warn_unclean(records)
        return records

    def fence(self, state: ClusterState, broker_id: int) -> list[MetadataRecord]:
        """Fence ``broker_id``: out of the ISRs, its leaderships moved (``partition_changes.fence_broker``)."""
        records = fence_broker(state, broker_id, self.unclean)
        self._warn_unclean(records)
        return records

    def unfence(self, state: ClusterState, broker_id: int) -> list[MetadataRecord]:
        """Unfence ``broker_id`` and elect leaders where it can lead (``partition_changes.unfence_broker``)."""
        records = unfence_broker(state, broker_id, self.unclean)
        self._warn_unclean(records)
        return records

    # -- leader elections (ElectLeaders, KIP-460) and leader balance ------------------------------------
    async def elect_leaders(
        self, election_type: ElectionType, partitions: Sequence[TopicPartitionKey] | None
    ) -> dict[TopicPartitionKey, ElectionResult]:
        """ElectLeaders (``partition_changes.elect_leaders``): run on the active controller, all
        elections in one entry; answered once this node's image shows the elected leaders."""
        runner = self._runner
        wanted = None if partitions is None else list(dict.fromkeys(partitions))

        def local(state: ClusterState) -> tuple[list[MetadataRecord], dict[TopicPartitionKey, ElectionResult]]:
            records, results = elect_leaders(state, election_type, wanted)
            self._warn_unclean(records)
            return records, results

        def elected(key: TopicPartitionKey) -> bool:
            topic = runner.image.topics.get(key[0])
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
            await runner.await_image(lambda: all(elected(key) for key in done), "the elected leaders")
            return results

        return await runner.execute(local, remote)

    async def rebalance_leaders(self) -> int:
        """On the active controller: preferred elections where leadership drifted (one entry);
        returns how many partitions moved."""
        runner = self._runner
        if not runner.is_leader:
            return 0
        try:
            async with runner.op_lock():
                await runner.ensure_caught_up()
                records = rebalance_leaders(runner.state, self._imbalance_percentage)
                if records:
                    await runner.append(records)
                    log.info("leader imbalance: moved %d partition(s) back to their preferred leader", len(records))
                return len(records)
        except NotActive:
            return 0

    async def check_imbalance(self) -> None:
        """The periodic part of the controller loop: ``rebalance_leaders`` every check interval
        while active (the first interval starts when this node becomes active)."""
        if not self._auto_leader_rebalance or not self._runner.is_leader:
            self._next_imbalance_check_ms = None
            return
        now = self._clock_ms()
        if self._next_imbalance_check_ms is None:
            self._next_imbalance_check_ms = now + self._imbalance_check_interval_ms
        elif now >= self._next_imbalance_check_ms:
            self._next_imbalance_check_ms = now + self._imbalance_check_interval_ms
            await self.rebalance_leaders()

    # -- ISR changes (AlterPartition, KIP-497) --------------------------------------------------------
    async def handle_alter_partition(
        self, broker_id: int, broker_epoch: int, changes: Sequence[IsrChange]
    ) -> tuple[int, list[tuple[IsrChange, int]]]:
        """On the active controller: ``(error_code, [(change, partition error code)])``; the
        changes that pass ``alter_partition`` are written in one entry and answered once committed."""
        runner = self._runner
        if not runner.is_leader:
            return ErrorCode.NOT_CONTROLLER, []
        try:
            async with runner.op_lock():
                await runner.ensure_caught_up()
                state = runner.state
                reg = state.registrations.get(broker_id)
                if reg is None or reg.epoch != broker_epoch:
                    return ErrorCode.STALE_BROKER_EPOCH, []
                records: list[MetadataRecord] = []
                results: list[tuple[IsrChange, int]] = []
                for change in changes:
                    try:
                        records.extend(alter_partition(state, broker_id, change))
                        results.append((change, ErrorCode.NONE))
                    except MetadataError as exc:
                        results.append((change, exc.code))
                if records:
                    records.extend(completed_by(state, records))  # KIP-455: a target now in the ISR
                    await runner.append(records)
                return ErrorCode.NONE, results
        except NotActive:
            return ErrorCode.NOT_CONTROLLER, []

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, changes: Sequence[IsrChange]
    ) -> dict[tuple[uuid.UUID, int], int]:
        """A partition leader's AlterPartition (``broker_id`` at ``broker_epoch``): sent to the
        active controller (or handled here when this node is it); returns each partition's error
        code once this node's image shows the change. Raises MetadataError when no controller answered."""
        runner = self._runner
        if runner.is_leader:
            code, results = await self.handle_alter_partition(broker_id, broker_epoch, changes)
        else:
            channel = runner.leader_channel()
            if channel is None:
                raise MetadataError(ErrorCode.NOT_CONTROLLER, "no active controller is known")
            try:
                code, results = await send_alter_partition(
                    channel, broker_id, broker_epoch, changes, timeout_ms=runner.request_timeout_ms
                )
            except ControllerUnavailable as exc:
                raise MetadataError(ErrorCode.NOT_CONTROLLER, str(exc)) from exc
        if code != ErrorCode.NONE:
            raise MetadataError(code, f"AlterPartition refused: error {code}")
        accepted = [c for c, err in results if err == ErrorCode.NONE]
        await runner.await_image(lambda: all(self._isr_applied(c) for c in accepted), "the ISR change")
        return {(c.topic_id, c.partition): err for c, err in results}

    def _isr_applied(self, change: IsrChange) -> bool:
        image = self._runner.image
        name = image.topic_ids.get(change.topic_id)
        topic = image.topics.get(name) if name is not None else None
        part = topic.partitions.get(change.partition) if topic is not None else None
        return part is None or part.partition_epoch > change.partition_epoch or set(part.isr) == set(change.new_isr)

    # -- partition reassignment (KIP-455) ------------------------------------------------------------
    async def alter_partition_reassignments(
        self, moves: Sequence[Move], *, allow_replication_factor_change: bool = True
    ) -> dict[TopicPartitionKey, MoveResult]:
        """Each partition's result; raises MetadataError when no active controller answered."""
        runner = self._runner

        def local(state: ClusterState) -> tuple[list[MetadataRecord], dict[TopicPartitionKey, MoveResult]]:
            records: list[MetadataRecord] = []
            results: dict[TopicPartitionKey, MoveResult] = {}
            for move in moves:
                key = (move.topic, move.partition)
                if key in results:
                    results[key] = (ErrorCode.INVALID_REQUEST, "the partition is named twice")
                    continue
                try:
                    records.extend(
                        alter_reassignment(
                            state, move.topic, move.partition, move.replicas,
                            allow_replication_factor_change=allow_replication_factor_change,
                        )
                    )  # fmt: skip
                    results[key] = (ErrorCode.NONE, None)
                except MetadataError as exc:
                    results[key] = (exc.code, exc.message)
            return records, results

        async def remote(channel: ControllerChannel, timeout_ms: int) -> dict[TopicPartitionKey, MoveResult]:
            outcome, results = await forward_alter_partition_reassignments(
                channel, moves, allow_replication_factor_change=allow_replication_factor_change, timeout_ms=timeout_ms
            )
            if outcome.error_code == ErrorCode.NOT_CONTROLLER:
                raise NotActive
            if outcome.error_code != ErrorCode.NONE:
                raise MetadataError(outcome.error_code, outcome.error_message or "the controller refused it")
            return results

        results = await runner.execute(local, remote)
        accepted = [m for m in moves if results.get((m.topic, m.partition), (1, None))[0] == ErrorCode.NONE]
        await runner.await_image(lambda: all(self._move_shown(m) for m in accepted), "the reassignment")
        return results

    def _move_shown(self, move: Move) -> bool:
        topic = self._runner.image.topics.get(move.topic)
        part = topic.partitions.get(move.partition) if topic is not None else None
        if part is None:
            return True
        if move.replicas is None:
            return not is_reassigning(part)
        return target_replicas(part) == move.replicas

    def list_partition_reassignments(
        self, partitions: Sequence[TopicPartitionKey] | None
    ) -> dict[TopicPartitionKey, Ongoing]:
        """The reassignments in progress this node's metadata shows (``partitions`` None: all)."""
        return list_reassignments(self._runner.state, partitions)
