"""What every request handler receives: the decoded request and the broker's shared parts."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker.config import BrokerConfig
from broker.controller.local import MetadataController
from broker.log.manager import LogManager
from broker.metadata.image import MetadataImage
from broker.network.connection import ConnectionContext
from broker.quota.mutation import ControllerMutationQuotas
from broker.quota.replication import ReplicationThrottles
from broker.replication.log_dir_mover import LogDirMover
from broker.replication.replica_manager import ReplicaManager
from broker.security.acl.authority import AclAuthority
from broker.security.listeners import ListenerPolicy
from pyspark_log.wire.headers import RequestHeader
from pyspark_log.wire.message import Message

if TYPE_CHECKING:
    from broker.coordinator.group import GroupCoordinator
    from broker.coordinator.share_group import ShareGroups
    from broker.coordinator.txn import TransactionCoordinator
    from broker.log.remote.manager import RemoteLogManager
    from broker.raft.driver import RaftDriver


@dataclass
class Broker:
    """The parts of a running broker that handlers use (built by ``broker.server``)."""

    config: BrokerConfig
    controller: MetadataController
    logs: LogManager
    replicas: ReplicaManager
    clock_ms: Callable[[], int]
    api_versions: list[dict[str, int]] = field(default_factory=list)  # set by the Dispatcher
    groups: GroupCoordinator | None = None  # the group coordinator (None: groups not served)
    txn: TransactionCoordinator | None = None  # the transaction coordinator (None: not served)
    raft: RaftDriver | None = None  # the KIP-595 metadata quorum replica (None: process.roles not set)
    listener_policy: ListenerPolicy = field(default_factory=ListenerPolicy)  # controller-only requests
    mutation_quotas: ControllerMutationQuotas | None = None  # KIP-599 (None: not enforced)
    replication_throttles: ReplicationThrottles | None = None  # KIP-73 (None: never throttled)
    share: ShareGroups | None = None  # KIP-932 share groups (None: not served)
    authorizer: AclAuthority | None = None  # authorizer.class.name set: the ACL checks (broker.api.authz)
    log_dir_mover: LogDirMover | None = None  # AlterReplicaLogDirs (None: not served)
    remote_log: RemoteLogManager | None = None  # KIP-405 tiered storage (None: remote.log.storage.system.enable off)

    @property
    def node_id(self) -> int:
        return self.config.node_id

    def image(self) -> MetadataImage:
        return self.controller.image()


@dataclass(frozen=True)
class Request:
    header: RequestHeader
    body: Message
    connection: ConnectionContext

    @property
    def version(self) -> int:
        return self.header.api_version


# A handler returns the response body (a mapping), None for no response (acks=0), or an
# awaitable of either for work that waits (long-poll fetch, topic creation).
HandlerResult = Mapping[str, Any] | None | Awaitable[Mapping[str, Any] | None]
Handler = Callable[[Broker, Request], HandlerResult]
