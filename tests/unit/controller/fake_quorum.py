"""An in-memory stand-in for ``RaftDriver`` (unit tests only): one shared committed log, a leader
chosen by the test, and delivery to followers deferred to later event-loop steps, as over a network.

Forwarding between nodes is routed in memory too: ``route_forwarding`` replaces the functions of
``broker.controller.forwarding`` that ``QuorumController``'s control managers call with ones that run the target
node's controller with ``forwarded_request`` set, as its request handlers would."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import pytest

from broker.controller import broker_session as session_module
from broker.controller import config_control as config_module
from broker.controller import quota_control as quota_module
from broker.controller import replication_control as replication_module
from broker.controller.errors import MetadataError
from broker.controller.forwarding import Outcome, forwarded_request
from broker.controller.quorum import QuorumController
from broker.metadata.image import BrokerInfo
from broker.raft.core import NotLeaderError


class FakeQuorum:
    def __init__(self) -> None:
        self.entries: list[bytes] = []
        self.drivers: dict[int, FakeDriver] = {}
        self.leader = -1
        self.epoch = 0

    def elect(self, node_id: int) -> None:
        self.leader = node_id
        self.epoch += 1

    def driver(self, node_id: int) -> FakeDriver:
        self.drivers[node_id] = FakeDriver(self, node_id)
        return self.drivers[node_id]


class FakeDriver:
    def __init__(self, quorum: FakeQuorum, node_id: int) -> None:
        self.quorum = quorum
        self.node_id = node_id
        self.listeners: list[Callable[[int, bytes], None]] = []
        self.delivered = 0
        self.believed_leader: int | None = None  # a stale view of the leader, when set
        self.appends = 0

    @property
    def leader_id(self) -> int:
        return self.quorum.leader if self.believed_leader is None else self.believed_leader

    @property
    def epoch(self) -> int:
        return self.quorum.epoch

    @property
    def is_leader(self) -> bool:
        return self.quorum.leader == self.node_id

    def add_committed_listener(self, listener: Callable[[int, bytes], None]) -> None:
        self.listeners.append(listener)

    def voter_endpoints(self) -> dict[int, tuple[str, int]]:
        return {n: ("fake", n) for n in sorted(self.quorum.drivers)}

    def catch_up(self) -> None:
        while self.delivered < len(self.quorum.entries):
            offset = self.delivered
            self.delivered += 1
            for listener in self.listeners:
                listener(offset, self.quorum.entries[offset])

    async def append(self, payloads: Sequence[bytes]) -> int:
        if not self.is_leader:
            raise NotLeaderError(self.leader_id, self.epoch)
        self.appends += 1
        self.quorum.entries.extend(payloads)
        self.catch_up()
        loop = asyncio.get_running_loop()
        for other in self.quorum.drivers.values():
            if other is not self:
                loop.call_soon(other.catch_up)
        return len(self.quorum.entries) - 1


def controller(quorum: FakeQuorum, node_id: int, *, broker: bool = True, cluster_id: str = "cid", **kwargs):
    info = BrokerInfo(node_id, "127.0.0.1", 9000 + node_id) if broker else None
    kwargs.setdefault("retry_backoff_ms", 1)
    kwargs.setdefault("request_timeout_ms", 2000)
    return QuorumController(quorum.driver(node_id), cluster_id=cluster_id, node_id=node_id, broker=info, **kwargs)


def route_forwarding(monkeypatch: pytest.MonkeyPatch, controllers: dict[int, QuorumController]) -> list[str]:
    """Route forwarded calls to ``controllers[channel.port]``; returns the log of calls made."""
    calls: list[str] = []

    async def as_forwarded(channel, fn):
        calls.append(f"{fn.__name__}->{channel.port}")
        token = forwarded_request.set(True)
        try:
            return await fn(controllers[channel.port])
        finally:
            forwarded_request.reset(token)

    async def create(channel, name, n, rf, configs, *, validate_only, timeout_ms, assignments=None):
        async def create_topic(target):
            try:
                topic = await target.create_topic(
                    name, n, rf, dict(configs), validate_only=validate_only, assignments=assignments
                )
            except MetadataError as exc:
                return Outcome(exc.code, exc.message)
            return Outcome(0, None, topic.topic_id, len(topic.partitions))

        return await as_forwarded(channel, create_topic)

    async def delete(channel, name, *, timeout_ms):
        async def delete_topic(target):
            try:
                await target.delete_topic(name)
            except MetadataError as exc:
                return Outcome(exc.code, exc.message)
            return Outcome(0)

        return await as_forwarded(channel, delete_topic)

    async def partitions(channel, name, count, *, validate_only, timeout_ms, assignments=None):
        async def create_partitions(target):
            try:
                await target.create_partitions(name, count, validate_only=validate_only, assignments=assignments)
            except MetadataError as exc:
                return Outcome(exc.code, exc.message)
            return Outcome(0)

        return await as_forwarded(channel, create_partitions)

    async def alter(channel, name, changes, *, validate_only, timeout_ms):
        async def alter_topic_configs(target):
            try:
                await target.alter_topic_configs(name, dict(changes), validate_only=validate_only)
            except MetadataError as exc:
                return Outcome(exc.code, exc.message)
            return Outcome(0)

        return await as_forwarded(channel, alter_topic_configs)

    async def quotas(channel, entity, changes, *, validate_only, timeout_ms):
        async def alter_client_quotas(target):
            try:
                await target.alter_client_quotas(entity, dict(changes), validate_only=validate_only)
            except MetadataError as exc:
                return Outcome(exc.code, exc.message)
            return Outcome(0)

        return await as_forwarded(channel, alter_client_quotas)

    async def register(channel, reg, *, timeout_ms):
        calls.append(f"register->{channel.port}")
        return await controllers[channel.port].handle_registration(reg)

    async def heartbeat(channel, broker_id, epoch, offset, *, want_shut_down, timeout_ms):
        calls.append(f"heartbeat->{channel.port}")
        return await controllers[channel.port].handle_heartbeat(
            broker_id, epoch, want_shut_down=want_shut_down, metadata_offset=offset
        )

    async def elect(channel, election_type, partitions, *, timeout_ms):
        async def elect_leaders(target):
            try:
                return 0, await target.elect_leaders(election_type, partitions)
            except MetadataError as exc:
                return exc.code, {}

        return await as_forwarded(channel, elect_leaders)

    monkeypatch.setattr(replication_module, "forward_create_topic", create)
    monkeypatch.setattr(replication_module, "forward_elect_leaders", elect)
    monkeypatch.setattr(replication_module, "forward_delete_topic", delete)
    monkeypatch.setattr(replication_module, "forward_create_partitions", partitions)
    monkeypatch.setattr(config_module, "forward_alter_topic_configs", alter)
    monkeypatch.setattr(quota_module, "forward_alter_client_quotas", quotas)
    monkeypatch.setattr(session_module, "send_registration", register)
    monkeypatch.setattr(session_module, "send_heartbeat", heartbeat)
    return calls
