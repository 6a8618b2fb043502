"""``QuorumController``: the cluster metadata on the KIP-595 quorum (``process.roles`` set).

It implements ``MetadataController`` over a ``RaftDriver`` (broker/raft/driver.py) the way Kafka's
``QuorumController`` does: it owns the collaborators, each holding one concern's state, and
delegates every request to the one that owns it:

=============================== ==============================================================
collaborator                    concern (Kafka's counterpart)
=============================== ==============================================================
``MetadataLoader``              this node's applied ``ClusterState`` and ``MetadataImage``,
                                snapshots, listeners (``broker.metadata.loader``; Kafka's
                                ``MetadataLoader``)
``OperationRunner``             the write path: run on the active controller under one lock
                                after catching up with the epoch, else forward there; wait
                                until this node's image shows the result
``ReplicationControlManager``   topics, partitions, ISR changes (AlterPartition), leader
                                elections and balance, unclean elections, reassignments
``ClusterControlManager``       broker registrations, heartbeats, session expiry, UnregisterBroker
``ConfigurationControlManager`` topic configs and KIP-226 dynamic broker configs
``ClientQuotaControlManager``   client quotas
``ScramControlManager``         SCRAM credentials (KIP-554)
``AclControlManager``           ACLs
``BrokerSession``               on a node with the ``broker`` role: its registration, heartbeats
                                and controlled shutdown (Kafka's ``BrokerLifecycleManager``)
=============================== ==============================================================

* **Reads.** Every node applies the committed entries of the metadata log, in order, to a
  ``ClusterState`` (``broker.metadata.replay``) and publishes the derived ``MetadataImage`` to
  listeners, as ``LocalController`` does after each change.
* **Changes** run on the active controller (the Raft leader), validated against the state by the
  pure decisions (``operations``, ``partition_changes``, ``reassignment``, ``acl_changes``,
  ``scram_credentials``: LocalController's errors), appended as one entry and answered once it is
  committed and applied here; elsewhere they are forwarded to the leader (``forwarding``) and
  answered once this node's image shows the result (``operation_runner``).
* **Brokers** (``broker`` given) register with the active controller at ``start``, then heartbeat
  (``broker_session``); the active controller fences a broker whose heartbeats stop for
  ``session_timeout_ms`` and unfences it on its next heartbeat (``cluster_control``). A
  registration whose cluster id differs from the quorum's is refused with
  INCONSISTENT_CLUSTER_ID, which ``start`` raises as ``ClusterIdMismatchError``.
* **The controller loop**, while this node is the active controller: catch up once per epoch
  (commits the cluster id), fence silent brokers, rebalance leadership every
  ``leader_imbalance_check_interval_ms``.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from broker.clock import monotonic_ms
from broker.controller.acl_changes import CreateResult, Creation, DeleteResult
from broker.controller.acl_control import AclControlManager
from broker.controller.broker_session import BrokerSession, session_lease_ms
from broker.controller.cluster_control import ClusterControlManager
from broker.controller.config_control import ConfigurationControlManager
from broker.controller.forwarding import NotActive, Registration
from broker.controller.operation_runner import OperationRunner, RaftDriverLike
from broker.controller.operations import Assignments
from broker.controller.partition_changes import ElectionResult, ElectionType, IsrChange, TopicPartitionKey
from broker.controller.quota_control import ClientQuotaControlManager
from broker.controller.reassignment import Move, MoveResult, Ongoing
from broker.controller.replication_control import ReplicationControlManager
from broker.controller.scram_control import ScramControlManager
from broker.controller.scram_credentials import Deletion, Upsertion
from broker.controller.scram_credentials import Result as ScramResult
from broker.meta_properties import bootstrap_records
from broker.metadata.cluster_state import ClusterState
from broker.metadata.image import BrokerInfo, MetadataImage, TopicImage
from broker.metadata.loader import ImageListener, MetadataLoader
from broker.metadata.records import MetadataRecord
from broker.network.dial import Dialer
from broker.security.acl.filters import AclFilter

if TYPE_CHECKING:
    from broker.config import BrokerConfig

log = logging.getLogger(__name__)


class QuorumController:
    """``MetadataController`` on the metadata quorum; see the module docstring."""

    def __init__(
        self,
        driver: RaftDriverLike,
        *,
        cluster_id: str,
        node_id: int,
        broker: BrokerInfo | None,
        deletion_enabled: bool = True,
        unclean_leader_election: bool = False,
        heartbeat_interval_ms: int = 2000,
        session_timeout_ms: int = 9000,
        quorum_fetch_timeout_ms: int = 2000,
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 50,
        auto_leader_rebalance: bool = True,
        leader_imbalance_check_interval_ms: int = 300_000,
        leader_imbalance_per_broker_percentage: int = 10,
        clock_ms: Callable[[], int] = monotonic_ms,
        dialer: Dialer | None = None,
        bootstrap: Sequence[MetadataRecord] = (),
    ) -> None:
        """``bootstrap``: records the first active controller of a new quorum appends after the
        cluster id (``pylog storage format --add-scram``'s credentials; ``broker.meta_properties``)."""
        self._heartbeat_interval_ms = heartbeat_interval_ms
        self._session_timeout_ms = session_timeout_ms
        self._loader = MetadataLoader(
            cluster_id=cluster_id, local_broker_id=broker.node_id if broker is not None else None
        )
        self._runner = OperationRunner(
            driver, self._loader, cluster_id=cluster_id, node_id=node_id, request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms, clock_ms=clock_ms, dialer=dialer, bootstrap=bootstrap,
        )  # fmt: skip
        self._replication = ReplicationControlManager(
            self._runner,
            deletion_enabled=deletion_enabled,
            unclean_leader_election=unclean_leader_election,
            auto_leader_rebalance=auto_leader_rebalance,
            leader_imbalance_check_interval_ms=leader_imbalance_check_interval_ms,
            leader_imbalance_per_broker_percentage=leader_imbalance_per_broker_percentage,
            clock_ms=clock_ms,
        )
        self._cluster = ClusterControlManager(
            self._runner, self._replication, cluster_id=cluster_id, session_timeout_ms=session_timeout_ms,
            clock_ms=clock_ms,
        )  # fmt: skip
        self._configs = ConfigurationControlManager(self._runner)
        self._quotas = ClientQuotaControlManager(self._runner)
        self._scram = ScramControlManager(self._runner)
        self._acls = AclControlManager(self._runner)
        self._session = (
            None
            if broker is None
            else BrokerSession(
                self._runner,
                self._cluster,
                broker,
                cluster_id=cluster_id,
                heartbeat_interval_ms=heartbeat_interval_ms,
                lease_ms=session_lease_ms(session_timeout_ms, quorum_fetch_timeout_ms, heartbeat_interval_ms),
                clock_ms=clock_ms,
            )
        )
        self._tasks: list[asyncio.Task[None]] = []
        add_batch_listener = getattr(driver, "add_batch_listener", None)
        if add_batch_listener is not None:  # broker.raft.driver: one image per committed batch
            add_batch_listener(self._loader.apply_batch)
        else:
            driver.add_committed_listener(self._loader.apply_committed)
        set_snapshot_handler = getattr(driver, "set_snapshot_handler", None)
        if set_snapshot_handler is not None:  # KIP-630 (broker.raft.driver)
            set_snapshot_handler(self._loader.capture_snapshot, self._loader.load_snapshot)

    # -- reads (MetadataLoader) ---------------------------------------------------------------------
    def image(self) -> MetadataImage:
        return self._loader.image

    def state(self) -> ClusterState:
        return self._loader.state

    def add_listener(self, listener: ImageListener) -> None:
        self._loader.add_listener(listener)

    @property
    def broker_epoch(self) -> int:
        return self._session.broker_epoch if self._session is not None else -1

    @property
    def is_broker(self) -> bool:
        """Whether this node has the broker role (registers, leads and follows partitions)."""
        return self._session is not None

    async def wait_until(self, predicate: Callable[[], bool], timeout_ms: int) -> bool:
        """Wait until ``predicate()`` holds after some applied entry (or now); False on timeout."""
        return await self._runner.wait_until(predicate, timeout_ms)

    # -- topics, partitions, leadership, reassignments (ReplicationControlManager) ---------------------
    async def create_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str],
        *, validate_only: bool = False, assignments: Assignments | None = None,
    ) -> TopicImage:  # fmt: skip
        return await self._replication.create_topic(
            name, num_partitions, replication_factor, configs, validate_only=validate_only, assignments=assignments
        )

    async def delete_topic(self, name: str) -> None:
        await self._replication.delete_topic(name)

    async def create_partitions(
        self, name: str, total_count: int, *, validate_only: bool = False, assignments: Assignments | None = None
    ) -> None:
        await self._replication.create_partitions(
            name, total_count, validate_only=validate_only, assignments=assignments
        )

    async def elect_leaders(
        self, election_type: ElectionType, partitions: Sequence[TopicPartitionKey] | None
    ) -> dict[TopicPartitionKey, ElectionResult]:
        return await self._replication.elect_leaders(election_type, partitions)

    async def rebalance_leaders(self) -> int:
        return await self._replication.rebalance_leaders()

    async def handle_alter_partition(
        self, broker_id: int, broker_epoch: int, changes: Sequence[IsrChange]
    ) -> tuple[int, list[tuple[IsrChange, int]]]:
        return await self._replication.handle_alter_partition(broker_id, broker_epoch, changes)

    async def alter_partition(self, changes: Sequence[IsrChange]) -> dict[tuple[uuid.UUID, int], int]:
        """This broker's AlterPartition as a partition leader (``ReplicationControlManager.alter_partition``)."""
        assert self._session is not None, "only a broker leads partitions"
        return await self._replication.alter_partition(self._session.broker_id, self._session.broker_epoch, changes)

    async def alter_partition_reassignments(
        self, moves: Sequence[Move], *, allow_replication_factor_change: bool = True
    ) -> dict[TopicPartitionKey, MoveResult]:
        return await self._replication.alter_partition_reassignments(
            moves, allow_replication_factor_change=allow_replication_factor_change
        )

    def list_partition_reassignments(
        self, partitions: Sequence[TopicPartitionKey] | None
    ) -> dict[TopicPartitionKey, Ongoing]:
        return self._replication.list_partition_reassignments(partitions)

    # -- brokers (ClusterControlManager) ------------------------------------------------------------
    async def handle_registration(self, reg: Registration) -> tuple[int, int]:
        return await self._cluster.handle_registration(reg)

    async def handle_heartbeat(
        self, broker_id: int, broker_epoch: int, *, want_shut_down: bool, metadata_offset: int | None = None
    ) -> tuple[int, bool]:
        return await self._cluster.handle_heartbeat(
            broker_id, broker_epoch, want_shut_down=want_shut_down, metadata_offset=metadata_offset
        )

    def holds_session_lease(self) -> bool:
        """Whether this broker may still answer from state that only its partition leaderships
        make current (``BrokerSession.holds_lease``); always True on a controller-only node."""
        return self._session is None or self._session.holds_lease()

    async def fence_expired_brokers(self) -> list[int]:
        return await self._cluster.fence_expired_brokers()

    async def unregister_broker(self, broker_id: int) -> None:
        await self._cluster.unregister_broker(broker_id)

    # -- configs, quotas, SCRAM, ACLs -----------------------------------------------------------------
    async def alter_topic_configs(
        self, name: str, changes: dict[str, str | None], *, validate_only: bool = False
    ) -> None:
        await self._configs.alter_topic_configs(name, changes, validate_only=validate_only)

    async def alter_broker_configs(
        self, resource_name: str, changes: dict[str, str | None], *, validate_only: bool = False
    ) -> None:
        await self._configs.alter_broker_configs(resource_name, changes, validate_only=validate_only)

    async def alter_client_quotas(
        self, entity: Sequence[tuple[str, str | None]], changes: dict[str, float | None], *, validate_only: bool = False
    ) -> None:
        await self._quotas.alter_client_quotas(entity, changes, validate_only=validate_only)

    async def alter_user_scram_credentials(
        self, deletions: Sequence[Deletion], upsertions: Sequence[Upsertion]
    ) -> dict[str, ScramResult]:
        return await self._scram.alter_user_scram_credentials(deletions, upsertions)

    async def create_acls(self, creations: Sequence[Creation]) -> list[CreateResult]:
        return await self._acls.create_acls(creations)

    async def delete_acls(self, filters: Sequence[AclFilter]) -> list[DeleteResult]:
        return await self._acls.delete_acls(filters)

    # -- lifecycle --------------------------------------------------------------------------------
    async def start(self) -> None:
        """Start the controller duties; on a broker, register, start heartbeating at once (a
        registered broker that replays a long metadata log must not miss its session meanwhile),
        and wait until the own image shows the registration (raises ``ClusterIdMismatchError``
        when the quorum refuses the cluster id)."""
        self._tasks.append(asyncio.create_task(self._controller_loop(), name="quorum-controller"))
        if self._session is None:
            return
        await self._session.send_until_registered()
        self._tasks.append(asyncio.create_task(self._session.heartbeat_loop(), name="broker-heartbeat"))
        await self._session.wait_registration_applied()

    async def _controller_loop(self) -> None:
        """Leader duties: catch up once per epoch (commits the cluster id), fence silent brokers,
        and rebalance leadership every ``leader_imbalance_check_interval_ms``."""
        # Fencing is late by at most one interval, and the target for a SIGKILLed leader is
        # broker.session.timeout.ms + 1 s end to end (clients still have to learn the new leader).
        interval_s = min(self._heartbeat_interval_ms, 100) / 1000
        runner = self._runner
        while True:
            try:
                if runner.is_leader:
                    async with runner.op_lock():
                        await runner.ensure_caught_up()
                    await self._cluster.fence_expired_brokers()
                await self._replication.check_imbalance()
            except NotActive:
                pass
            except Exception:
                log.exception("controller duties failed")
            await asyncio.sleep(interval_s)

    async def shutdown(self) -> None:
        """Stop the background tasks. A registered broker first asks to be fenced (best effort):
        the controller moves its leaderships to other ISR members in the same metadata entry
        (controlled shutdown, Kafka documentation §4.7 "Replication"), and the broker waits until its own
        metadata shows it leads nothing — at most ``session_timeout_ms`` — so clients are told
        NOT_LEADER_OR_FOLLOWER and move on while it still answers, instead of timing out on a closed port."""
        if self._session is not None:
            await self._session.controlled_shutdown(self._session_timeout_ms)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception:
                log.exception("controller task failed")
        self._tasks.clear()
        await self._runner.close()


def from_config(
    driver: RaftDriverLike,
    config: BrokerConfig,
    cluster_id: str,
    address: tuple[str, int],
    endpoints: tuple[tuple[str, str, int], ...] = (),
    *,
    dialer: Dialer | None = None,
) -> QuorumController:
    """The controller of a node with ``process.roles``: it registers as a broker (at ``address``,
    the inter-broker listener, with ``endpoints``, every client listener) only with the ``broker`` role."""
    roles = list(config["process.roles"])
    broker = BrokerInfo(config.node_id, *address, endpoints=endpoints) if "broker" in roles else None
    return QuorumController(
        driver,
        cluster_id=cluster_id,
        node_id=config.node_id,
        broker=broker,
        deletion_enabled=bool(config["delete.topic.enable"]),
        unclean_leader_election=bool(config["unclean.leader.election.enable"]),
        heartbeat_interval_ms=int(config["broker.heartbeat.interval.ms"]),
        session_timeout_ms=int(config["broker.session.timeout.ms"]),
        quorum_fetch_timeout_ms=int(config["quorum.fetch.timeout.ms"]),
        request_timeout_ms=max(30_000, int(config["quorum.request.timeout.ms"])),
        retry_backoff_ms=max(10, int(config["quorum.retry.backoff.ms"])),
        auto_leader_rebalance=bool(config["auto.leader.rebalance.enable"]),
        leader_imbalance_check_interval_ms=int(config["leader.imbalance.check.interval.seconds"]) * 1000,
        leader_imbalance_per_broker_percentage=int(config["leader.imbalance.per.broker.percentage"]),
        dialer=dialer,
        bootstrap=bootstrap_records(config.log_dirs),
    )
