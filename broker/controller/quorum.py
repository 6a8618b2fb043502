"""``QuorumController``: the cluster metadata on the KIP-595 quorum (``process.roles`` set).

It implements ``MetadataController`` over a ``RaftDriver`` (broker/raft/driver.py):

* **Reads.** Every node applies the committed entries of the metadata log, in order, to a
  ``ClusterState`` (``broker.metadata.replay``) and publishes the derived ``MetadataImage`` to listeners,
  as ``LocalController`` does after each change.
* **Changes on the active controller** (the Raft leader): validated against the state by
  ``operations`` (LocalController's errors), appended as one entry, and answered once the entry
  is committed and applied here. Changes are serialized by one lock, and the first change of
  each leader epoch appends a no-op entry first: once it commits, every entry of earlier epochs
  has been applied, so validation never reads a stale state (KIP-595: a new leader's entries
  are committed only with one of its own epoch).
* **Changes elsewhere** are forwarded to the leader over the Kafka protocol (``forwarding``),
  retried on NOT_CONTROLLER, transport failures and unknown leaders until
  ``request_timeout_ms``, and answered once this node's image shows the result.
* **Brokers** (``broker`` given) register with the active controller at ``start`` (the broker
  epoch is the offset of its ``RegisterBrokerRecord``), wait until their own image shows the
  registration, then heartbeat every ``heartbeat_interval_ms`` (the ``BrokerSession`` part,
  ``broker.controller.broker_session``). The active controller fences a
  broker whose heartbeats stop for ``session_timeout_ms`` (out of Metadata, out of every ISR that
  has another member, its leaderships moved to live ISR members: ``partition_changes.fence_broker``)
  and unfences it on its next heartbeat. A registration whose cluster id differs from
  the quorum's is refused with INCONSISTENT_CLUSTER_ID, which ``start`` raises as
  ``ClusterIdMismatchError``.
* **Partition leadership** — ISR changes (AlterPartition), ElectLeaders, preferred-leader
  rebalancing, unclean election — is the ``ReplicaLeadership`` part (``broker.controller.leadership``).
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from broker import state_change
from broker.clock import monotonic_ms
from broker.controller import operations
from broker.controller.broker_session import BrokerSession
from broker.controller.errors import MetadataError
from broker.controller.forwarding import (
    FORWARD_CLIENT_ID,
    ControllerChannel,
    ControllerChannels,
    ControllerUnavailable,
    NotActive,
    Outcome,
    Registration,
    forward_alter_broker_configs,
    forward_alter_client_quotas,
    forward_alter_topic_configs,
    forward_alter_user_scram_credentials,
    forward_create_partitions,
    forward_create_topic,
    forward_delete_topic,
    forwarded_request,
    raise_for,
    unless_leader_moves,
)
from broker.controller.leadership import ReplicaLeadership
from broker.controller.local import ImageListener
from broker.controller.operations import Assignments
from broker.controller.partition_changes import (
    fence_broker,
    register_broker,
    unfence_broker,
)
from broker.controller.quorum_acls import AclOperations
from broker.controller.scram_credentials import MECHANISM_NAMES, Deletion, Upsertion, alter_scram
from broker.controller.scram_credentials import Result as ScramResult
from broker.meta_properties import bootstrap_records
from broker.metadata.cluster_state import ClusterState, build_image
from broker.metadata.image import BrokerInfo, MetadataImage, PartitionImage, TopicImage
from broker.metadata.records import (
    ClusterIdRecord,
    MetadataRecord,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
    encode_records,
)
from broker.metadata.replay import apply_payload
from broker.metadata.snapshot_records import state_from_records, state_to_records
from broker.network.dial import Dialer
from broker.raft.core import NotLeaderError
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.errors import ErrorCode

if TYPE_CHECKING:
    from broker.config import BrokerConfig

log = logging.getLogger(__name__)

T = TypeVar("T")


class RaftDriverLike(Protocol):
    """What ``QuorumController`` uses of ``broker.raft.driver.RaftDriver`` (see the contract)."""

    @property
    def leader_id(self) -> int: ...

    @property
    def epoch(self) -> int: ...

    @property
    def is_leader(self) -> bool: ...

    def add_committed_listener(self, listener: Callable[[int, bytes], None]) -> None: ...

    async def append(self, payloads: Sequence[bytes]) -> int: ...

    def voter_endpoints(self) -> dict[int, tuple[str, int]]: ...


class QuorumController(AclOperations, BrokerSession, ReplicaLeadership):
    """``MetadataController`` on the metadata quorum; see the module docstring."""

    _driver: RaftDriverLike

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
        self._driver = driver
        self._bootstrap = tuple(bootstrap)
        self._cluster_id = cluster_id
        self._node_id = node_id
        self._broker = broker
        self._deletion_enabled = deletion_enabled
        self._unclean_default = unclean_leader_election
        self._heartbeat_interval_ms = heartbeat_interval_ms
        self._session_timeout_ms = session_timeout_ms
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._auto_leader_rebalance = auto_leader_rebalance
        self._imbalance_check_interval_ms = leader_imbalance_check_interval_ms
        self._imbalance_percentage = leader_imbalance_per_broker_percentage
        self._next_imbalance_check_ms: int | None = None
        self._clock_ms = clock_ms
        self._state = ClusterState()
        self._image = self._build()
        self._listeners: list[ImageListener] = []
        self._waiters: list[asyncio.Future[None]] = []
        self._lock: asyncio.Lock | None = None
        self._caught_up_epoch = -1
        self._last_heartbeat_ms: dict[int, int] = {}
        self._channels = ControllerChannels(dialer)  # registration, heartbeats, AlterPartition, forwarding
        self._tasks: list[asyncio.Task[None]] = []
        self._incarnation_id = uuid.uuid4()
        self._broker_epoch = -1
        self._voter_cursor = random.randrange(1 << 16)
        driver.add_committed_listener(self._on_committed)
        set_snapshot_handler = getattr(driver, "set_snapshot_handler", None)
        if set_snapshot_handler is not None:  # KIP-630 (broker.raft.driver)
            set_snapshot_handler(self._capture_snapshot, self._load_snapshot)

    # -- reads ------------------------------------------------------------------------------------
    def image(self) -> MetadataImage:
        return self._image

    def state(self) -> ClusterState:
        return self._state

    def add_listener(self, listener: ImageListener) -> None:
        self._listeners.append(listener)

    @property
    def broker_epoch(self) -> int:
        return self._broker_epoch

    @property
    def is_broker(self) -> bool:
        """Whether this node has the broker role (registers, leads and follows partitions)."""
        return self._broker is not None

    def _build(self) -> MetadataImage:
        local = self._broker.node_id if self._broker is not None else None
        return build_image(self._state, cluster_id=self._cluster_id, local_broker_id=local)

    def _capture_snapshot(self) -> Callable[[], list[bytes]]:
        """KIP-630: the state as of every delivered entry, frozen now (``ClusterState`` is
        immutable), encoded later off the event loop (``broker.metadata.snapshot_records``)."""
        state = self._state
        return lambda: state_to_records(state)

    def _load_snapshot(self, end_offset: int, records: Sequence[bytes]) -> None:
        """KIP-630 start-up: the state is the snapshot's; the log tail is applied after it."""
        self._state = state_from_records(tuple(records))
        self._publish(end_offset - 1)

    def _on_committed(self, offset: int, payload: bytes) -> None:
        """The driver's committed-entry listener: apply, publish, wake waiters."""
        before = self._state.cluster_id
        self._state = apply_payload(self._state, offset, payload)
        if before is None and self._state.cluster_id not in (None, self._cluster_id):
            log.error(
                "the metadata log belongs to cluster %s, but this node's cluster id is %s",
                self._state.cluster_id,
                self._cluster_id,
            )
        self._publish(offset)

    def _publish(self, offset: int) -> None:
        """Rebuild the image from ``self._state``, tell the listeners, wake the waiters."""
        new = self._build()
        old, self._image = self._image, new
        for listener in self._listeners:
            try:
                listener(old, new)
            except Exception:
                log.exception("metadata listener failed at offset %d", offset)
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def wait_until(self, predicate: Callable[[], bool], timeout_ms: int) -> bool:
        """Wait until ``predicate()`` holds after some applied entry (or now); False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while not predicate():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                await asyncio.wait_for(waiter, remaining)
            except TimeoutError:
                return predicate()
        return True

    # -- MetadataController -------------------------------------------------------------------------
    async def create_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str],
        *, validate_only: bool = False, assignments: Assignments | None = None,
    ) -> TopicImage:  # fmt: skip
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
            await self._await_image(lambda: self._has_topic(name, created), f"topic {name!r}")
            return self._image.topics[name]

        topic = await self._execute(local, remote)
        if validate_only:
            return topic
        return self._image.topics.get(name, topic)

    def _has_topic(self, name: str, topic_id: uuid.UUID | None) -> bool:
        topic = self._image.topics.get(name)
        return topic is not None and (topic_id is None or topic.topic_id == topic_id)

    async def delete_topic(self, name: str) -> None:
        gone_id = self._image.topics[name].topic_id if name in self._image.topics else None

        def local(state: ClusterState) -> tuple[list[MetadataRecord], None]:
            return operations.delete_topic(state, name, deletion_enabled=self._deletion_enabled), None

        async def remote(channel: ControllerChannel, timeout_ms: int) -> None:
            raise_for(await forward_delete_topic(channel, name, timeout_ms=timeout_ms))
            await self._await_image(
                lambda: name not in self._image.topics or self._image.topics[name].topic_id != gone_id,
                f"deletion of topic {name!r}",
            )

        await self._execute(local, remote)

    async def create_partitions(
        self, name: str, total_count: int, *, validate_only: bool = False, assignments: Assignments | None = None
    ) -> None:
        def local(state: ClusterState) -> tuple[list[MetadataRecord], None]:
            records = operations.create_partitions(state, name, total_count, assignments)
            return ([] if validate_only else records), None

        async def remote(channel: ControllerChannel, timeout_ms: int) -> None:
            outcome = await forward_create_partitions(
                channel, name, total_count, validate_only=validate_only, timeout_ms=timeout_ms, assignments=assignments
            )
            raise_for(outcome)
            if not validate_only:
                await self._await_image(
                    lambda: name in self._image.topics and len(self._image.topics[name].partitions) >= total_count,
                    f"partitions of topic {name!r}",
                )

        await self._execute(local, remote)

    async def alter_topic_configs(
        self, name: str, changes: dict[str, str | None], *, validate_only: bool = False
    ) -> None:
        def local(state: ClusterState) -> tuple[list[MetadataRecord], None]:
            records = operations.alter_topic_configs(state, name, changes)
            return ([] if validate_only else records), None

        def applied() -> bool:
            topic = self._image.topics.get(name)
            return topic is None or all(topic.configs.get(k) == v for k, v in changes.items())

        async def remote(channel: ControllerChannel, timeout_ms: int) -> None:
            outcome = await forward_alter_topic_configs(
                channel, name, changes, validate_only=validate_only, timeout_ms=timeout_ms
            )
            raise_for(outcome)
            if not validate_only:
                await self._await_image(applied, f"configs of topic {name!r}")

        await self._execute(local, remote)

    async def alter_broker_configs(
        self, resource_name: str, changes: dict[str, str | None], *, validate_only: bool = False
    ) -> None:
        """KIP-226: ConfigRecords of a BROKER resource through the metadata log (forwarded to the
        active controller); returns once this node's image shows them."""

        def local(state: ClusterState) -> tuple[list[MetadataRecord], None]:
            del state
            return ([] if validate_only else operations.alter_broker_configs(resource_name, changes)), None

        def applied() -> bool:
            values = self._image.broker_configs.get(resource_name, {})
            return all(values.get(k) == v for k, v in changes.items())

        async def remote(channel: ControllerChannel, timeout_ms: int) -> None:
            outcome = await forward_alter_broker_configs(
                channel, resource_name, changes, validate_only=validate_only, timeout_ms=timeout_ms
            )
            raise_for(outcome)
            if not validate_only:
                await self._await_image(applied, f"dynamic configs of broker {resource_name!r}")

        await self._execute(local, remote)

    async def alter_user_scram_credentials(
        self, deletions: Sequence[Deletion], upsertions: Sequence[Upsertion]
    ) -> dict[str, ScramResult]:
        """KIP-554 on the active controller (forwarded there); returns once this node's image
        shows every accepted change."""

        def local(state: ClusterState) -> tuple[list[MetadataRecord], dict[str, ScramResult]]:
            return alter_scram(state, deletions, upsertions)

        def applied(results: dict[str, ScramResult]) -> bool:
            ok = {name for name, (code, _) in results.items() if code == ErrorCode.NONE}
            gone = all(
                (d.name, MECHANISM_NAMES[d.mechanism]) not in self._image.scram for d in deletions if d.name in ok
            )
            there = all((u.name, MECHANISM_NAMES[u.mechanism]) in self._image.scram for u in upsertions if u.name in ok)
            return gone and there

        async def remote(channel: ControllerChannel, timeout_ms: int) -> dict[str, ScramResult]:
            results = await forward_alter_user_scram_credentials(channel, deletions, upsertions, timeout_ms=timeout_ms)
            await self._await_image(lambda: applied(results), "the SCRAM credentials")
            return results

        results = await self._execute(local, remote)
        await self._await_image(lambda: applied(results), "the SCRAM credentials")
        return results

    async def unregister_broker(self, broker_id: int) -> None:
        """UnregisterBroker (API 64, KIP-631): remove ``broker_id``'s registration, on the active
        controller (forwarded there). As Kafka 4.1 (checked with its ``kafka-cluster unregister``),
        an unknown id is BROKER_ID_NOT_REGISTERED "Broker ID N is not currently registered", and a
        live broker is unregistered too: it is fenced first in the same entry (its leaderships and
        ISR memberships move as for a missed heartbeat), and its next heartbeat is refused with
        STALE_BROKER_EPOCH, so a process still running registers again. The replica sets still
        name the broker until a reassignment moves its replicas (drain it first)."""

        def local(state: ClusterState) -> tuple[list[MetadataRecord], None]:
            reg = state.registrations.get(broker_id)
            if reg is None:
                raise MetadataError(
                    ErrorCode.BROKER_ID_NOT_REGISTERED, f"Broker ID {broker_id} is not currently registered"
                )
            records = [] if reg.fenced else fence_broker(state, broker_id, self._unclean)
            self._warn_unclean(records)
            self._last_heartbeat_ms.pop(broker_id, None)
            return [*records, UnregisterBrokerRecord(broker_id, reg.epoch)], None

        async def remote(channel: ControllerChannel, timeout_ms: int) -> None:
            response = await channel.request(
                ApiKey.UNREGISTER_BROKER, 0, {"broker_id": broker_id}, client_id=FORWARD_CLIENT_ID,
                timeout_ms=timeout_ms,
            )  # fmt: skip
            raise_for(Outcome(response.error_code, response.error_message))
            await self._await_image(
                lambda: broker_id not in self._state.registrations, f"broker {broker_id} unregistered"
            )

        await self._execute(local, remote)

    async def alter_client_quotas(
        self, entity: Sequence[tuple[str, str | None]], changes: dict[str, float | None], *, validate_only: bool = False
    ) -> None:
        """ClientQuotaRecords through the metadata log: every broker applies them in log order."""

        def local(state: ClusterState) -> tuple[list[MetadataRecord], None]:
            records = operations.alter_client_quotas(entity, changes)
            return ([] if validate_only else records), None

        def applied() -> bool:
            values = self._image.client_quotas.get(tuple(sorted(entity, key=lambda p: p[0])), {})
            return all(values.get(k) == v for k, v in changes.items())

        async def remote(channel: ControllerChannel, timeout_ms: int) -> None:
            outcome = await forward_alter_client_quotas(
                channel, entity, changes, validate_only=validate_only, timeout_ms=timeout_ms
            )
            raise_for(outcome)
            if not validate_only:
                await self._await_image(applied, "the client quota change")

        await self._execute(local, remote)

    async def _await_image(self, predicate: Callable[[], bool], what: str) -> None:
        if not await self.wait_until(predicate, self._request_timeout_ms):
            raise MetadataError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"the active controller accepted the change, but this node's metadata does not show {what} yet",
            )

    # -- running an operation where it belongs -------------------------------------------------------
    async def _execute(
        self,
        local: Callable[[ClusterState], tuple[list[MetadataRecord], T]],
        remote: Callable[[ControllerChannel, int], Awaitable[T]],
    ) -> T:
        """Run on the active controller (here, or forwarded there); see the module docstring."""
        deadline = self._clock_ms() + self._request_timeout_ms
        last_problem = "no active controller is known"
        while True:
            if self._driver.is_leader:
                try:
                    return await self._run_locally(local)
                except NotActive:
                    last_problem = "this node lost the leadership during the operation"
            elif forwarded_request.get():
                raise MetadataError(ErrorCode.NOT_CONTROLLER, f"node {self._node_id} is not the active controller")
            else:
                channel = self._leader_channel()
                if channel is not None:
                    remaining = max(1, deadline - self._clock_ms())
                    try:
                        return await unless_leader_moves(remote(channel, remaining), lambda: self._driver.epoch)
                    except NotActive:
                        last_problem = f"controller {channel.host}:{channel.port} is not the active controller"
                    except ControllerUnavailable as exc:
                        last_problem = str(exc)
            if self._clock_ms() >= deadline:
                raise MetadataError(ErrorCode.REQUEST_TIMED_OUT, f"no active controller completed it: {last_problem}")
            await asyncio.sleep(self._retry_backoff_ms / 1000)

    def _leader_channel(self) -> ControllerChannel | None:
        endpoint = self._driver.voter_endpoints().get(self._driver.leader_id)
        return self._channels.get(*endpoint) if endpoint is not None else None

    def _any_controller_channel(self) -> ControllerChannel | None:
        """The leader's channel, else the next voter in turn (to reach the quorum at all)."""
        channel = self._leader_channel()
        if channel is not None:
            return channel
        endpoints = [e for _, e in sorted(self._driver.voter_endpoints().items())]
        if not endpoints:
            return None
        self._voter_cursor += 1
        return self._channels.get(*endpoints[self._voter_cursor % len(endpoints)])

    async def _run_locally(self, op: Callable[[ClusterState], tuple[list[MetadataRecord], T]]) -> T:
        async with self._op_lock():
            await self._ensure_caught_up()
            records, result = op(self._state)
            if records:
                await self._append(records)
            return result

    def _op_lock(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def _append(self, records: Sequence[MetadataRecord]) -> int:
        state_change.controller_decided(self._node_id, self._state.topics, self._state.topic_ids, records)
        try:
            return await self._driver.append([encode_records(records)])
        except NotLeaderError as exc:
            raise NotActive from exc

    async def _ensure_caught_up(self) -> None:
        """First call of a leader epoch: commit a no-op so that every earlier entry is applied
        before validating against the state, then the cluster id if the log has none yet (the
        first leader of a new quorum). Caller holds the lock."""
        epoch = self._driver.epoch
        if self._caught_up_epoch == epoch:
            return
        await self._append([])
        if self._state.cluster_id is None:  # only known after the no-op: a stale state may lack it
            await self._append([ClusterIdRecord(self._cluster_id), *self._bootstrap])
        self._caught_up_epoch = epoch
        now = self._clock_ms()
        self._last_heartbeat_ms = dict.fromkeys(self._state.registrations, now)
        log.info("active controller for epoch %d; metadata applied up to offset %d", epoch, self._state.applied_offset)

    # -- served on the active controller: BrokerRegistration / BrokerHeartbeat ----------------------------
    async def handle_registration(self, reg: Registration) -> tuple[int, int]:
        """``(error_code, broker_epoch)`` for a BrokerRegistration request."""
        if reg.cluster_id != self._cluster_id:
            return ErrorCode.INCONSISTENT_CLUSTER_ID, -1
        if not self._driver.is_leader:
            return ErrorCode.NOT_CONTROLLER, -1
        try:
            async with self._op_lock():
                await self._ensure_caught_up()
                current = self._state.registrations.get(reg.broker_id)
                if current is not None and current.incarnation_id == str(reg.incarnation_id):
                    epoch = current.epoch  # a retried registration of the same process
                else:
                    record = RegisterBrokerRecord(
                        reg.broker_id, str(reg.incarnation_id), reg.host, reg.port, reg.rack, reg.endpoints
                    )
                    records = register_broker(self._state, record, self._unclean)
                    self._warn_unclean(records)
                    epoch = await self._append(records)
                    log.info(
                        "registered broker %d at %s:%d, epoch %d (%d partition change(s))",
                        reg.broker_id, reg.host, reg.port, epoch, len(records) - 1,
                    )  # fmt: skip
                self._last_heartbeat_ms[reg.broker_id] = self._clock_ms()
                return ErrorCode.NONE, epoch
        except NotActive:
            return ErrorCode.NOT_CONTROLLER, -1

    async def handle_heartbeat(self, broker_id: int, broker_epoch: int, *, want_shut_down: bool) -> tuple[int, bool]:
        """``(error_code, is_fenced)`` for a BrokerHeartbeat request."""
        if not self._driver.is_leader:
            return ErrorCode.NOT_CONTROLLER, True
        try:
            async with self._op_lock():
                await self._ensure_caught_up()
                current = self._state.registrations.get(broker_id)
                if current is None or current.epoch != broker_epoch:
                    return ErrorCode.STALE_BROKER_EPOCH, True
                self._last_heartbeat_ms[broker_id] = self._clock_ms()
                if want_shut_down and not current.fenced:
                    records = fence_broker(self._state, broker_id, self._unclean)
                    self._warn_unclean(records)
                    await self._append(records)
                    log.info("broker %d is shutting down: fenced, %d partition(s) changed", broker_id, len(records) - 1)
                elif not want_shut_down and current.fenced:
                    records = unfence_broker(self._state, broker_id, self._unclean)
                    self._warn_unclean(records)
                    await self._append(records)
                    log.info("broker %d heartbeats again: unfenced, %d leader(s) elected", broker_id, len(records) - 1)
                return ErrorCode.NONE, want_shut_down
        except NotActive:
            return ErrorCode.NOT_CONTROLLER, True

    async def fence_expired_brokers(self) -> list[int]:
        """On the active controller: fence every live broker silent for ``session_timeout_ms``."""
        if not self._driver.is_leader:
            return []
        fenced = []
        try:
            async with self._op_lock():
                await self._ensure_caught_up()
                now = self._clock_ms()
                for broker_id, reg in sorted(self._state.registrations.items()):
                    last = self._last_heartbeat_ms.setdefault(broker_id, now)
                    if not reg.fenced and now - last >= self._session_timeout_ms:
                        records = fence_broker(self._state, broker_id, self._unclean)
                        self._warn_unclean(records)
                        await self._append(records)
                        log.warning(
                            "fenced broker %d: no heartbeat for %d ms; %d partition(s) changed",
                            broker_id, now - last, len(records) - 1,
                        )  # fmt: skip
                        fenced.append(broker_id)
        except NotActive:
            pass
        return fenced

    # -- lifecycle --------------------------------------------------------------------------------
    async def start(self) -> None:
        """Start the controller duties; on a broker, register, start heartbeating at once (a
        registered broker that replays a long metadata log must not miss its session meanwhile),
        and wait until the own image shows the registration (raises ``ClusterIdMismatchError``
        when the quorum refuses the cluster id)."""
        self._tasks.append(asyncio.create_task(self._controller_loop(), name="quorum-controller"))
        if self._broker is None:
            return
        await self._send_until_registered()
        self._tasks.append(asyncio.create_task(self._heartbeat_loop(), name="broker-heartbeat"))
        await self._wait_registration_applied()

    async def _controller_loop(self) -> None:
        """Leader duties: catch up once per epoch (commits the cluster id), fence silent brokers,
        and rebalance leadership every ``leader_imbalance_check_interval_ms``."""
        # Fencing is late by at most one interval, and the target for a SIGKILLed leader is
        # broker.session.timeout.ms + 1 s end to end (clients still have to learn the new leader).
        interval_s = min(self._heartbeat_interval_ms, 100) / 1000
        while True:
            try:
                if self._driver.is_leader:
                    async with self._op_lock():
                        await self._ensure_caught_up()
                    await self.fence_expired_brokers()
                await self._check_imbalance()
            except NotActive:
                pass
            except Exception:
                log.exception("controller duties failed")
            await asyncio.sleep(interval_s)

    async def shutdown(self) -> None:
        """Stop the background tasks. A registered broker first asks to be fenced (best effort):
        the controller moves its leaderships to other ISR members in the same metadata entry
        (controlled shutdown, Kafka documentation §4.7 "Replication"), and the broker waits until its own
        metadata shows it
        leads nothing — at most ``session_timeout_ms`` — so clients are told NOT_LEADER_OR_FOLLOWER
        and move on while it still answers, instead of timing out on a closed port."""
        if self._broker is not None and self._broker_epoch >= 0:
            try:
                code = await asyncio.wait_for(
                    self._heartbeat_once(want_shut_down=True), self._heartbeat_interval_ms / 1000
                )
            except (TimeoutError, MetadataError, ControllerUnavailable):
                code = ErrorCode.REQUEST_TIMED_OUT
            if code != ErrorCode.NONE:
                log.info("could not tell the controller about the shutdown")
            elif not await self.wait_until(self._leads_nothing, self._session_timeout_ms):
                log.warning("shutting down while the metadata still names this broker a leader")
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
        await self._channels.close()


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
        request_timeout_ms=max(30_000, int(config["quorum.request.timeout.ms"])),
        retry_backoff_ms=max(10, int(config["quorum.retry.backoff.ms"])),
        auto_leader_rebalance=bool(config["auto.leader.rebalance.enable"]),
        leader_imbalance_check_interval_ms=int(config["leader.imbalance.check.interval.seconds"]) * 1000,
        leader_imbalance_per_broker_percentage=int(config["leader.imbalance.per.broker.percentage"]),
        dialer=dialer,
        bootstrap=bootstrap_records(config.log_dirs),
    )
