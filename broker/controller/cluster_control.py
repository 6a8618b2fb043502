"""``ClusterControlManager``: broker registrations, heartbeats and fencing on the active
controller, as Kafka's ``ClusterControlManager`` with its ``BrokerHeartbeatManager``
(``org.apache.kafka.controller``; KIP-631).

* **BrokerRegistration**: a registration whose cluster id differs from the quorum's is refused
  with INCONSISTENT_CLUSTER_ID; otherwise the ``RegisterBrokerRecord`` is appended and its
  offset is the broker epoch. A retried registration of the same process (same incarnation id)
  gets its epoch back without a new record.
* **BrokerHeartbeat**: a heartbeat of another epoch is STALE_BROKER_EPOCH; one that asks to shut
  down fences the broker (controlled shutdown, Kafka documentation §4.7 "Replication": its
  leaderships move to other ISR members in the same entry); a fenced broker's next heartbeat
  unfences it once the broker reports (``current_metadata_offset``) that it applied the entry
  that fenced it. Until then it is answered ``is_fenced`` and stays fenced: a broker that missed
  its fencing (cut off from the quorum, paused) still believes it leads partitions that moved,
  and its session lease (``broker_session``) must not be renewed before it has learnt otherwise.
* **Session expiry**: ``fence_expired_brokers`` fences every live broker silent for
  ``broker.session.timeout.ms`` (out of Metadata, out of every ISR that has another member, its
  leaderships moved to live ISR members: ``partition_changes.fence_broker``). The clock of every
  registration restarts when this node becomes the active controller.
* **UnregisterBroker** (API 64, KIP-631): the registration is removed, the broker fenced first.

The partition side of each change (which leaders move, unclean elections) is the
``ReplicationControlManager``'s. This manager holds the last heartbeat time of every broker and
the offset of the entry that last fenced (or registered) it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from broker.controller.errors import MetadataError
from broker.controller.forwarding import (
    ControllerChannel,
    NotActive,
    Registration,
    forward_unregister_broker,
    raise_for,
)
from broker.controller.operation_runner import OperationRunner
from broker.controller.replication_control import ReplicationControlManager
from broker.metadata.cluster_state import ClusterState
from broker.metadata.records import MetadataRecord, RegisterBrokerRecord, UnregisterBrokerRecord
from pyspark_log.wire.errors import ErrorCode

log = logging.getLogger(__name__)


class ClusterControlManager:
    """Registrations, heartbeats and fencing; see the module docstring."""

    def __init__(
        self,
        runner: OperationRunner,
        replication: ReplicationControlManager,
        *,
        cluster_id: str,
        session_timeout_ms: int,
        clock_ms: Callable[[], int],
    ) -> None:
        self._runner = runner
        self._replication = replication
        self._cluster_id = cluster_id
        self._session_timeout_ms = session_timeout_ms
        self._clock_ms = clock_ms
        self._last_heartbeat_ms: dict[int, int] = {}
        self._fenced_at: dict[int, int] = {}  # broker id -> offset of the entry that fenced it
        runner.on_activation(self._restart_sessions)

    def _restart_sessions(self) -> None:
        """A new active controller counts every registered broker's session from now; a fenced
        broker must have applied everything this controller found in the log before it is
        unfenced (the offset of its fencing entry is not known here)."""
        now = self._clock_ms()
        state = self._runner.state
        self._last_heartbeat_ms = dict.fromkeys(state.registrations, now)
        self._fenced_at = {b: state.applied_offset for b, reg in state.registrations.items() if reg.fenced}

    async def handle_registration(self, reg: Registration) -> tuple[int, int]:
        """``(error_code, broker_epoch)`` for a BrokerRegistration request."""
        runner = self._runner
        if reg.cluster_id != self._cluster_id:
            return ErrorCode.INCONSISTENT_CLUSTER_ID, -1
        if not runner.is_leader:
            return ErrorCode.NOT_CONTROLLER, -1
        try:
            async with runner.op_lock():
                await runner.ensure_caught_up()
                current = runner.state.registrations.get(reg.broker_id)
                if current is not None and current.incarnation_id == str(reg.incarnation_id):
                    epoch = current.epoch  # a retried registration of the same process
                else:
                    record = RegisterBrokerRecord(
                        reg.broker_id, str(reg.incarnation_id), reg.host, reg.port, reg.rack, reg.endpoints
                    )
                    records = self._replication.register(runner.state, record)
                    epoch = self._fenced_at[reg.broker_id] = await runner.append(records)
                    log.info(
                        "registered broker %d at %s:%d, epoch %d (%d partition change(s))",
                        reg.broker_id, reg.host, reg.port, epoch, len(records) - 1,
                    )  # fmt: skip
                self._last_heartbeat_ms[reg.broker_id] = self._clock_ms()
                return ErrorCode.NONE, epoch
        except NotActive:
            return ErrorCode.NOT_CONTROLLER, -1

    async def handle_heartbeat(
        self, broker_id: int, broker_epoch: int, *, want_shut_down: bool, metadata_offset: int | None = None
    ) -> tuple[int, bool]:
        """``(error_code, is_fenced)`` for a BrokerHeartbeat request; ``metadata_offset`` is the
        last metadata entry the broker applied (its ``current_metadata_offset``; None: not known,
        as for the simulation's brokers)."""
        runner = self._runner
        if not runner.is_leader:
            return ErrorCode.NOT_CONTROLLER, True
        try:
            async with runner.op_lock():
                await runner.ensure_caught_up()
                current = runner.state.registrations.get(broker_id)
                if current is None or current.epoch != broker_epoch:
                    return ErrorCode.STALE_BROKER_EPOCH, True
                self._last_heartbeat_ms[broker_id] = self._clock_ms()
                if want_shut_down and not current.fenced:
                    records = self._replication.fence(runner.state, broker_id)
                    self._fenced_at[broker_id] = await runner.append(records)
                    log.info("broker %d is shutting down: fenced, %d partition(s) changed", broker_id, len(records) - 1)
                elif not want_shut_down and current.fenced:
                    fenced_at = self._fenced_at.get(broker_id, -1)
                    if metadata_offset is not None and metadata_offset < fenced_at:
                        return ErrorCode.NONE, True  # it has not learnt of its fencing yet
                    records = self._replication.unfence(runner.state, broker_id)
                    await runner.append(records)
                    log.info("broker %d heartbeats again: unfenced, %d leader(s) elected", broker_id, len(records) - 1)
                return ErrorCode.NONE, want_shut_down
        except NotActive:
            return ErrorCode.NOT_CONTROLLER, True

    async def fence_expired_brokers(self) -> list[int]:
        """On the active controller: fence every live broker silent for ``session_timeout_ms``."""
        runner = self._runner
        if not runner.is_leader:
            return []
        fenced = []
        try:
            async with runner.op_lock():
                await runner.ensure_caught_up()
                now = self._clock_ms()
                for broker_id, reg in sorted(runner.state.registrations.items()):
                    last = self._last_heartbeat_ms.setdefault(broker_id, now)
                    if not reg.fenced and now - last >= self._session_timeout_ms:
                        records = self._replication.fence(runner.state, broker_id)
                        self._fenced_at[broker_id] = await runner.append(records)
                        log.warning(
                            "fenced broker %d: no heartbeat for %d ms; %d partition(s) changed",
                            broker_id, now - last, len(records) - 1,
                        )  # fmt: skip
                        fenced.append(broker_id)
        except NotActive:
            pass
        return fenced

    async def unregister_broker(self, broker_id: int) -> None:
        """UnregisterBroker (API 64, KIP-631): remove ``broker_id``'s registration, on the active
        controller (forwarded there). As Kafka 4.1 (checked with its ``kafka-cluster unregister``),
        an unknown id is BROKER_ID_NOT_REGISTERED "Broker ID N is not currently registered", and a
        live broker is unregistered too: it is fenced first in the same entry (its leaderships and
        ISR memberships move as for a missed heartbeat), and its next heartbeat is refused with
        STALE_BROKER_EPOCH, so a process still running registers again. The replica sets still
        name the broker until a reassignment moves its replicas (drain it first)."""
        runner = self._runner

        def local(state: ClusterState) -> tuple[list[MetadataRecord], None]:
            reg = state.registrations.get(broker_id)
            if reg is None:
                raise MetadataError(
                    ErrorCode.BROKER_ID_NOT_REGISTERED, f"Broker ID {broker_id} is not currently registered"
                )
            records = [] if reg.fenced else self._replication.fence(state, broker_id)
            self._last_heartbeat_ms.pop(broker_id, None)
            return [*records, UnregisterBrokerRecord(broker_id, reg.epoch)], None

        async def remote(channel: ControllerChannel, timeout_ms: int) -> None:
            raise_for(await forward_unregister_broker(channel, broker_id, timeout_ms=timeout_ms))
            await runner.await_image(
                lambda: broker_id not in runner.state.registrations, f"broker {broker_id} unregistered"
            )

        await runner.execute(local, remote)
