"""The broker side of a node's session with the metadata quorum (part of ``QuorumController``, on
nodes with the ``broker`` role): register with the active controller (the broker epoch is the
offset of the ``RegisterBrokerRecord``), wait until the node's own image shows the registration,
heartbeat every ``heartbeat_interval_ms``, register again when the controller calls the epoch
stale, and, for a controlled shutdown (Kafka documentation §4.7 "Replication"), ask to be fenced and wait
until the image
shows this broker leads nothing. The active controller's side of the same requests
(``handle_registration``, ``handle_heartbeat``, fencing silent brokers) is in ``quorum``."""

from __future__ import annotations

import abc
import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Protocol

from broker.controller.errors import MetadataError
from broker.controller.forwarding import (
    ControllerChannel,
    ControllerUnavailable,
    Registration,
    send_heartbeat,
    send_registration,
)
from broker.metadata.cluster_state import ClusterState
from broker.metadata.image import BrokerInfo, MetadataImage
from pyspark_log.wire.errors import ErrorCode

log = logging.getLogger(__name__)


class ClusterIdMismatchError(RuntimeError):
    """The quorum belongs to another cluster than this node's ``meta.properties``."""


class _Driver(Protocol):
    @property
    def is_leader(self) -> bool: ...


class BrokerSession(abc.ABC):
    """Registration and heartbeats of ``QuorumController`` on a broker (see the module doc)."""

    _driver: _Driver
    _broker: BrokerInfo | None
    _broker_epoch: int
    _cluster_id: str
    _incarnation_id: uuid.UUID
    _image: MetadataImage
    _state: ClusterState
    _heartbeat_interval_ms: int
    _request_timeout_ms: int
    _retry_backoff_ms: int

    @abc.abstractmethod
    async def wait_until(self, predicate: Callable[[], bool], timeout_ms: int) -> bool: ...

    @abc.abstractmethod
    async def handle_registration(self, reg: Registration) -> tuple[int, int]: ...

    @abc.abstractmethod
    async def handle_heartbeat(
        self, broker_id: int, broker_epoch: int, *, want_shut_down: bool
    ) -> tuple[int, bool]: ...

    @abc.abstractmethod
    def _leader_channel(self) -> ControllerChannel | None: ...

    @abc.abstractmethod
    def _any_controller_channel(self) -> ControllerChannel | None: ...

    def _leads_nothing(self) -> bool:
        assert self._broker is not None
        me = self._broker.node_id
        return not any(p.leader == me for t in self._image.topics.values() for p in t.partitions.values())

    async def _register(self) -> None:
        await self._send_until_registered()
        await self._wait_registration_applied()

    async def _send_until_registered(self) -> None:
        assert self._broker is not None
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
            fatal = getattr(self._driver, "fatal_error", None)
            if fatal:
                raise RuntimeError(f"the metadata quorum replica failed before broker registration: {fatal}")
            code, epoch = await self._send_registration(reg)
            if code == ErrorCode.INCONSISTENT_CLUSTER_ID:
                raise ClusterIdMismatchError(
                    f"the metadata quorum refused broker {broker.node_id}: its cluster id {self._cluster_id} "
                    "is not the quorum's (INCONSISTENT_CLUSTER_ID); check cluster.id and meta.properties"
                )
            if code == ErrorCode.NONE:
                self._broker_epoch = epoch
                break
            if attempts % 40 == 0:
                log.warning("broker %d still waiting to register (last error %s)", broker.node_id, code)
            await asyncio.sleep(self._retry_backoff_ms * 4 / 1000)

    async def _wait_registration_applied(self) -> None:
        assert self._broker is not None
        broker = self._broker
        epoch = self._broker_epoch
        while not await self.wait_until(self._own_registration_applied, self._request_timeout_ms):
            log.warning("broker %d: waiting for the metadata log to catch up to epoch %d", broker.node_id, epoch)
        log.info("broker %d registered with broker epoch %d", broker.node_id, self._broker_epoch)

    def _own_registration_applied(self) -> bool:
        assert self._broker is not None
        reg = self._state.registrations.get(self._broker.node_id)
        return reg is not None and reg.epoch >= self._broker_epoch

    async def _send_registration(self, reg: Registration) -> tuple[int, int]:
        if self._driver.is_leader:
            return await self.handle_registration(reg)
        channel = self._any_controller_channel()
        if channel is None:
            return ErrorCode.NOT_CONTROLLER, -1
        try:
            return await send_registration(channel, reg, timeout_ms=self._request_timeout_ms)
        except ControllerUnavailable as exc:
            log.debug("registration: %s", exc)
            return ErrorCode.NOT_CONTROLLER, -1

    async def _heartbeat_once(self, *, want_shut_down: bool = False) -> int:
        assert self._broker is not None
        broker_id = self._broker.node_id
        if self._driver.is_leader:
            code, _ = await self.handle_heartbeat(broker_id, self._broker_epoch, want_shut_down=want_shut_down)
            return code
        channel = self._leader_channel()
        if channel is None:
            return ErrorCode.NOT_CONTROLLER
        try:
            code, _ = await send_heartbeat(
                channel, broker_id, self._broker_epoch, self._state.applied_offset,
                want_shut_down=want_shut_down, timeout_ms=self._heartbeat_interval_ms * 2,
            )  # fmt: skip
        except ControllerUnavailable as exc:
            log.debug("heartbeat: %s", exc)
            return ErrorCode.NOT_CONTROLLER
        return code

    async def _heartbeat_loop(self) -> None:
        while True:
            try:
                code = await self._heartbeat_once()
                if code == ErrorCode.STALE_BROKER_EPOCH:
                    log.warning("broker epoch %d is stale: registering again", self._broker_epoch)
                    await self._register()
                    continue
                delay_ms = self._heartbeat_interval_ms if code == ErrorCode.NONE else self._retry_backoff_ms * 4
            except (MetadataError, ClusterIdMismatchError):
                log.exception("broker heartbeat failed")
                delay_ms = self._heartbeat_interval_ms
            await asyncio.sleep(delay_ms / 1000)
