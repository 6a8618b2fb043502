"""``SimController``: the active controller of ``quorum.py`` over an in-memory metadata log (see ``model``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.controller.errors import MetadataError
from broker.controller.partition_changes import (
    IsrChange,
    alter_partition,
    fence_broker,
    register_broker,
    unfence_broker,
)
from broker.metadata.cluster_state import ClusterState
from broker.metadata.records import MetadataRecord, RegisterBrokerRecord, encode_records
from broker.metadata.replay import apply_payload
from pyspark_log.wire.errors import ErrorCode
from tests.sim.replication.config import CONTROLLER

if TYPE_CHECKING:
    from tests.sim.replication.model import Simulation


# -- the active controller (quorum.py, controller side) ------------------------------------------------
class SimController:
    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.state = ClusterState()
        self.log: list[bytes] = []
        self.last_heartbeat_ms: dict[int, int] = {}

    def append(self, records: list[MetadataRecord]) -> int:
        offset = len(self.log)
        payload = encode_records(records)
        self.log.append(payload)
        self.state = apply_payload(self.state, offset, payload)
        self.sim.trace(f"controller appends {offset}: {records}")
        self.sim.invariants.on_metadata(self.state)
        for broker in self.sim.brokers.values():  # the brokers' metadata fetches are answered at once
            if broker.running:
                self.serve_metadata(broker.node_id)
        return offset

    def serve_metadata(self, broker_id: int) -> None:
        target = len(self.log) - 1
        broker = self.sim.brokers[broker_id]
        if broker.meta_applied < target:
            self.sim.send(CONTROLLER, broker_id, lambda: broker.catch_up(target))

    def handle_registration(self, broker_id: int, incarnation_id: str) -> tuple[int, int]:
        current = self.state.registrations.get(broker_id)
        if current is not None and current.incarnation_id == incarnation_id:
            epoch = current.epoch
        else:
            record = RegisterBrokerRecord(broker_id, incarnation_id, "sim", 9092 + broker_id)
            epoch = self.append(register_broker(self.state, record))
        self.last_heartbeat_ms[broker_id] = self.sim.now_ms
        return ErrorCode.NONE, epoch

    def handle_heartbeat(self, broker_id: int, broker_epoch: int) -> int:
        current = self.state.registrations.get(broker_id)
        if current is None or current.epoch != broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH
        self.last_heartbeat_ms[broker_id] = self.sim.now_ms
        if current.fenced:
            self.append(unfence_broker(self.state, broker_id))
        return ErrorCode.NONE

    def fence_expired_brokers(self) -> None:
        now = self.sim.now_ms
        for broker_id, reg in sorted(self.state.registrations.items()):
            last = self.last_heartbeat_ms.setdefault(broker_id, now)
            if not reg.fenced and now - last >= self.sim.config.session_timeout_ms:
                self.append(fence_broker(self.state, broker_id))

    def handle_alter_partition(
        self, broker_id: int, broker_epoch: int, changes: list[IsrChange]
    ) -> tuple[int, list[tuple[IsrChange, int]]]:
        reg = self.state.registrations.get(broker_id)
        if reg is None or reg.epoch != broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH, []
        records: list[MetadataRecord] = []
        results: list[tuple[IsrChange, int]] = []
        for change in changes:
            try:
                records.extend(alter_partition(self.state, broker_id, change))
                results.append((change, ErrorCode.NONE))
            except MetadataError as exc:
                results.append((change, exc.code))
        if records:
            self.append(records)
        return ErrorCode.NONE, results
