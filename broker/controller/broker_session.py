"""``BrokerSession``: the broker side of a node's session with the metadata quorum, on nodes with
the ``broker`` role, as Kafka's ``BrokerLifecycleManager`` (KIP-631).

It registers with the active controller (the broker epoch is the offset of the
``RegisterBrokerRecord``), waits until the node's own image shows the registration, heartbeats
every ``broker.heartbeat.interval.ms``, registers again when the controller calls the epoch stale,
and, for a controlled shutdown (Kafka documentation §4.7 "Replication"), asks to be fenced and
waits until the image shows this broker leads nothing. When this node is itself the active
controller the requests go straight to its ``ClusterControlManager`` (the controller's side of
the same requests).

It holds the broker's identity (id, listeners, incarnation id) and its current broker epoch.

**Session lease.** The active controller fences a broker ``broker.session.timeout.ms`` after
the last heartbeat it received, and only then moves the broker's leaderships; a new active
controller starts every session afresh. A deposed controller may still answer heartbeats until
it misses a majority's fetches for ``quorum.fetch.timeout.ms`` (KIP-595 "Leader Progress
Timeout"), so a heartbeat answered NONE and not fenced, sent at time ``t``, proves that no other
broker leads this broker's partitions before ``t + broker.session.timeout.ms -
quorum.fetch.timeout.ms``. ``holds_lease`` is true until ``t`` plus the lease of
``session_lease_ms`` (10 % of the session timeout less, for clock-rate differences and the
controller's tick). A fenced broker is unfenced, and its lease renewed, only once it reports
that it applied its fencing (``cluster_control``), so it has already dropped the leaderships it
lost. The group coordinator answers OffsetFetch from its cache only under the lease
(``broker.api.offset_commit``): a broker cut off from the quorum but not from clients would
otherwise serve committed offsets that another coordinator has since advanced (found by the
chaos queue workload, ``tests/chaos``). Kafka's brokers hold no lease (docs/compatibility.md).
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from broker.clock import Clock, monotonic_ms
from broker.controller.cluster_control import ClusterControlManager
from broker.controller.errors import MetadataError
from broker.controller.forwarding import ControllerUnavailable, Registration, send_heartbeat, send_registration
from broker.controller.operation_runner import OperationRunner
from broker.metadata.image import BrokerInfo
from pyspark_log.wire.errors import ErrorCode

log = logging.getLogger(__name__)

LEASE_MARGIN = 0.1  # of broker.session.timeout.ms, kept off the session lease (module docstring)


def session_lease_ms(session_timeout_ms: int, fetch_timeout_ms: int, heartbeat_interval_ms: int) -> int | None:
    """How long a heartbeat's answer keeps the session lease (module docstring); None when the
    configuration leaves less than two heartbeat intervals for it: there is no lease then and
    ``holds_lease`` is always true (Kafka's behaviour)."""
    lease_ms = int(session_timeout_ms * (1 - LEASE_MARGIN)) - fetch_timeout_ms
    return lease_ms if lease_ms >= 2 * heartbeat_interval_ms else None


class ClusterIdMismatchError(RuntimeError):
    """The quorum belongs to another cluster than this node's ``meta.properties``."""


class BrokerSession:
    """Registration and heartbeats of one broker; see the module docstring."""

    def __init__(
        self,
        runner: OperationRunner,
        cluster: ClusterControlManager,
        broker: BrokerInfo,
        *,
        cluster_id: str,
        heartbeat_interval_ms: int,
        lease_ms: int | None = None,
        clock_ms: Clock = monotonic_ms,
    ) -> None:
        """``lease_ms``: ``session_lease_ms`` of the configuration (None: no lease)."""
        self._runner = runner
        self._cluster = cluster
        self._broker = broker
        self._cluster_id = cluster_id
        self._heartbeat_interval_ms = heartbeat_interval_ms
        self._lease_ms = lease_ms
        self._clock_ms = clock_ms
        self._lease_until_ms = -1
        self._incarnation_id = uuid.uuid4()
        self.broker_epoch = -1  # set by the active controller's answer to the registration

    def holds_lease(self) -> bool:
        """Whether the session lease (module docstring) holds now."""
        return self._lease_ms is None or self._clock_ms() < self._lease_until_ms

    @property
    def broker_id(self) -> int:
        return self._broker.node_id

    def leads_nothing(self) -> bool:
        me = self._broker.node_id
        return not any(p.leader == me for t in self._runner.image.topics.values() for p in t.partitions.values())

    async def register(self) -> None:
        """Register (until the controller accepts) and wait until the own image shows it."""
        await self.send_until_registered()
        await self.wait_registration_applied()

    async def send_until_registered(self) -> None:
        """Send BrokerRegistration until accepted; raises ``ClusterIdMismatchError`` on
        INCONSISTENT_CLUSTER_ID and RuntimeError when the Raft replica failed."""
        broker = self._broker
        reg = Registration(
            broker.node_id,
            self._cluster_id,
            self._incarnation_id,
            broker.host,
            broker.port,
            broker.rack,
            broker.endpoints,
        )
        attempts = 0
        while True:
            attempts += 1
            fatal = self._runner.fatal_error
            if fatal:
                raise RuntimeError(f"the metadata quorum replica failed before broker registration: {fatal}")
            code, epoch = await self._send_registration(reg)
            if code == ErrorCode.INCONSISTENT_CLUSTER_ID:
                raise ClusterIdMismatchError(
                    f"the metadata quorum refused broker {broker.node_id}: its cluster id {self._cluster_id} "
                    "is not the quorum's (INCONSISTENT_CLUSTER_ID); check cluster.id and meta.properties"
                )
            if code == ErrorCode.NONE:
                self.broker_epoch = epoch
                break
            if attempts % 40 == 0:
                log.warning("broker %d still waiting to register (last error %s)", broker.node_id, code)
            await asyncio.sleep(self._runner.retry_backoff_ms * 4 / 1000)

    async def wait_registration_applied(self) -> None:
        broker = self._broker
        epoch = self.broker_epoch
        while not await self._runner.wait_until(self._own_registration_applied, self._runner.request_timeout_ms):
            log.warning("broker %d: waiting for the metadata log to catch up to epoch %d", broker.node_id, epoch)
        log.info("broker %d registered with broker epoch %d", broker.node_id, self.broker_epoch)

    def _own_registration_applied(self) -> bool:
        reg = self._runner.state.registrations.get(self._broker.node_id)
        return reg is not None and reg.epoch >= self.broker_epoch

    async def _send_registration(self, reg: Registration) -> tuple[int, int]:
        runner = self._runner
        if runner.is_leader:
            return await self._cluster.handle_registration(reg)
        channel = runner.any_controller_channel()
        if channel is None:
            return ErrorCode.NOT_CONTROLLER, -1
        try:
            return await send_registration(channel, reg, timeout_ms=runner.request_timeout_ms)
        except ControllerUnavailable as exc:
            log.debug("registration: %s", exc)
            return ErrorCode.NOT_CONTROLLER, -1

    async def heartbeat_once(self, *, want_shut_down: bool = False) -> int:
        """One BrokerHeartbeat; its error code (NOT_CONTROLLER when no controller answered).
        An answer NONE and not fenced renews the lease from the time the heartbeat was sent."""
        runner = self._runner
        broker_id = self._broker.node_id
        sent_ms = self._clock_ms()
        applied = runner.state.applied_offset
        if runner.is_leader:
            code, fenced = await self._cluster.handle_heartbeat(
                broker_id, self.broker_epoch, want_shut_down=want_shut_down, metadata_offset=applied
            )
        else:
            channel = runner.leader_channel()
            if channel is None:
                return ErrorCode.NOT_CONTROLLER
            try:
                code, fenced = await send_heartbeat(
                    channel, broker_id, self.broker_epoch, applied,
                    want_shut_down=want_shut_down, timeout_ms=self._heartbeat_interval_ms * 2,
                )  # fmt: skip
            except ControllerUnavailable as exc:
                log.debug("heartbeat: %s", exc)
                return ErrorCode.NOT_CONTROLLER
        if code == ErrorCode.NONE and not fenced and self._lease_ms is not None:
            self._lease_until_ms = max(self._lease_until_ms, sent_ms + self._lease_ms)
        return code

    async def heartbeat_loop(self) -> None:
        """Heartbeat every interval until cancelled; register again on STALE_BROKER_EPOCH."""
        while True:
            try:
                code = await self.heartbeat_once()
                if code == ErrorCode.STALE_BROKER_EPOCH:
                    log.warning("broker epoch %d is stale: registering again", self.broker_epoch)
                    await self.register()
                    continue
                delay_ms = self._heartbeat_interval_ms if code == ErrorCode.NONE else self._runner.retry_backoff_ms * 4
            except (MetadataError, ClusterIdMismatchError):
                log.exception("broker heartbeat failed")
                delay_ms = self._heartbeat_interval_ms
            await asyncio.sleep(delay_ms / 1000)

    async def controlled_shutdown(self, wait_ms: int) -> None:
        """Ask to be fenced (best effort) and wait up to ``wait_ms`` until this node's metadata
        shows it leads nothing (Kafka documentation §4.7 "Replication", controlled shutdown)."""
        if self.broker_epoch < 0:
            return
        try:
            code = await asyncio.wait_for(self.heartbeat_once(want_shut_down=True), self._heartbeat_interval_ms / 1000)
        except (TimeoutError, MetadataError, ControllerUnavailable):
            code = ErrorCode.REQUEST_TIMED_OUT
        if code != ErrorCode.NONE:
            log.info("could not tell the controller about the shutdown")
        elif not await self._runner.wait_until(self.leads_nothing, wait_ms):
            log.warning("shutting down while the metadata still names this broker a leader")
