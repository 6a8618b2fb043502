"""From ``server.properties`` to a ``RaftDriver``: ``process.roles``, the voters and their checks.

KRaft mode is on when ``process.roles`` is given (``controller``, ``broker`` or both):

* ``controller.quorum.voters`` (the seed's ``quorum.voters`` also accepted) lists the voters as
  ``id@host:port,...``. pylog has one listener for everything, so a voter's address is its
  listener's (Kafka has a separate controller listener). A node with the ``controller`` role must
  be one of the voters; a ``broker``-only node must not be, and runs as an observer.
* A ``controller`` (or ``broker,controller``) node with no voters configured forms a one-voter
  quorum of itself: the single-node default of the demo.
* A quorum of more than one voter needs one cluster id on every node: ``cluster.id`` must be set
  (or already be in ``meta.properties``), since each node would otherwise invent its own and every
  Raft request would be refused with INCONSISTENT_CLUSTER_ID (Kafka: ``kafka-storage format -t``).

Every error names the key to fix (``RaftConfigError``; ``broker.config`` re-raises it as its
``ConfigError``). The checks themselves (``validate_quorum_config``) live in ``broker.raft.config``,
so ``broker.config`` runs them without importing this module (which names ``BrokerConfig``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from broker.log.manager import METADATA_DIR_NAME
from broker.network.dial import Dialer
from broker.properties import load_properties
from broker.raft.config import (
    QUORUM_KEYS,
    RaftConfig,
    RaftConfigError,
    VoterEndpoint,
    kraft_enabled,
    parse_quorum_voters,
)
from broker.raft.driver import RaftDriver
from broker.raft.snapshot import RetentionPolicy, SnapshotPolicy

if TYPE_CHECKING:
    from broker.config import BrokerConfig


def raft_config(config: BrokerConfig, listener: tuple[str, int]) -> RaftConfig:
    """The quorum settings of this node; a controller without voters is a one-voter quorum at
    its own ``listener`` address."""
    endpoints: dict[int, VoterEndpoint] = parse_quorum_voters(str(config["controller.quorum.voters"]))
    if not endpoints:
        endpoints = {config.node_id: VoterEndpoint(config.node_id, *listener)}
    kwargs = {attr: int(config[key]) for key, attr in QUORUM_KEYS.items()}
    return RaftConfig(node_id=config.node_id, voters=frozenset(endpoints), voter_endpoints=endpoints, **kwargs)


def check_cluster_id(config: BrokerConfig) -> None:
    """Before ``meta.properties`` is written: a multi-voter quorum needs a shared cluster id."""
    if not kraft_enabled(config.raw) or config["cluster.id"]:
        return
    if len(parse_quorum_voters(str(config["controller.quorum.voters"]))) <= 1:
        return
    for directory in config.log_dirs:
        meta = Path(directory) / "meta.properties"
        if meta.exists() and load_properties(meta).get("cluster.id"):
            return
    raise RaftConfigError(
        "cluster.id must be set (the same on every node) when controller.quorum.voters names more than one "
        "voter: each node would otherwise generate its own and the quorum would refuse it"
    )


def metadata_dir(config: BrokerConfig) -> Path:
    """``<first log dir>/__cluster_metadata-0``: the metadata log and the quorum-state file."""
    return Path(config.log_dirs[0]) / METADATA_DIR_NAME


def create_driver(
    config: BrokerConfig,
    cluster_id: str,
    listener: tuple[str, int],
    *,
    on_fatal: Callable[[str], None] | None = None,
    dialer: Dialer | None = None,
) -> RaftDriver:
    """The driver of this node (not started: register committed-entry listeners, then start);
    ``dialer`` opens its connections to the other voters (``broker.network.dial``)."""
    return RaftDriver(
        raft_config(config, listener), config.node_id, cluster_id, metadata_dir(config), on_fatal=on_fatal,
        dialer=dialer,
        snapshot_policy=SnapshotPolicy(
            int(config["metadata.log.max.record.bytes.between.snapshots"]),
            int(config["metadata.log.max.snapshot.interval.ms"]),
        ),
        retention_policy=RetentionPolicy(
            int(config["metadata.max.retention.bytes"]), int(config["metadata.max.retention.ms"])
        ),
    )  # fmt: skip
