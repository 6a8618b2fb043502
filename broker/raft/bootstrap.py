"""From ``server.properties`` to a ``RaftDriver``: ``process.roles``, the voters and their checks.

KRaft mode is on when ``process.roles`` is given (``controller``, ``broker`` or both):

* ``controller.quorum.voters`` (KIP-595's ``quorum.voters`` also accepted) lists the voters as
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
from typing import TYPE_CHECKING, Any

from broker.log.manager import METADATA_DIR_NAME
from broker.meta_properties import read_meta
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
from broker.raft.voters import (
    VotersFileError,
    directory_id_bytes,
    directory_id_text,
    parse_bootstrap_servers,
    read_bootstrap_checkpoint,
)

if TYPE_CHECKING:
    from broker.config import BrokerConfig


def raft_config(config: BrokerConfig, listener: tuple[str, int]) -> RaftConfig:
    """The quorum settings of this node; a controller without voters is a one-voter quorum at
    its own ``listener`` address.

    KIP-853: without ``controller.quorum.voters`` but with ``controller.quorum.bootstrap.servers``
    the quorum is dynamic. The first voter set is the bootstrap checkpoint's (``storage format
    --standalone`` / ``--initial-controllers``); a node formatted without one (a broker, or a
    controller formatted with ``--no-initial-controllers``) knows no voter until its log says so
    and finds the leader through the bootstrap servers."""
    kwargs: dict[str, Any] = {attr: int(config[key]) for key, attr in QUORUM_KEYS.items()}
    endpoints: dict[int, VoterEndpoint] = parse_quorum_voters(str(config["controller.quorum.voters"]))
    bootstrap_servers = str(config["controller.quorum.bootstrap.servers"]).strip()
    if not endpoints and bootstrap_servers:
        servers = parse_bootstrap_servers(bootstrap_servers)
        try:
            bootstrap = read_bootstrap_checkpoint(metadata_dir(config))
        except VotersFileError as exc:
            raise RaftConfigError(str(exc)) from None
        if bootstrap is not None:
            endpoints = {v.voter_id: VoterEndpoint(v.voter_id, v.host, v.port) for v in bootstrap.voters}
        return RaftConfig(
            node_id=config.node_id, voters=frozenset(endpoints), voter_endpoints=endpoints,
            bootstrap_voters=bootstrap, bootstrap_servers=servers, **kwargs,
        )  # fmt: skip
    if not endpoints:
        endpoints = {config.node_id: VoterEndpoint(config.node_id, *listener)}
    return RaftConfig(node_id=config.node_id, voters=frozenset(endpoints), voter_endpoints=endpoints, **kwargs)


def check_directory_id(config: BrokerConfig) -> None:
    """KIP-853: a controller listed in the bootstrap voter set must start on the directory it was
    listed with (``directory.id`` of ``meta.properties`` in the metadata log dir); otherwise the
    start is refused with the command to run (Kafka treats such a replica as another one)."""
    if not str(config["controller.quorum.bootstrap.servers"]).strip() or config["controller.quorum.voters"]:
        return
    directory = Path(config.log_dirs[0])
    try:
        bootstrap = read_bootstrap_checkpoint(directory / METADATA_DIR_NAME)
    except VotersFileError as exc:
        raise RaftConfigError(str(exc)) from None
    spec = bootstrap.spec(config.node_id) if bootstrap is not None else None
    meta = directory / "meta.properties"
    if spec is None or not meta.exists():
        return
    stored = load_properties(meta).get("directory.id", "")
    if directory_id_text(spec.directory_id) != stored:
        raise RaftConfigError(
            f"{directory} has directory.id={stored or '(none)'} but the bootstrap voter set of "
            f"{directory / METADATA_DIR_NAME} lists node {config.node_id} with directory id "
            f"{directory_id_text(spec.directory_id)}: format this node again with `pylog storage format "
            "--initial-controllers ...` naming its directory id, or with --standalone"
        )


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
    meta = read_meta(config.log_dirs[0])
    try:
        directory_id = directory_id_bytes(meta.directory_id) if meta is not None and meta.directory_id else None
    except VotersFileError:
        directory_id = None  # not a Uuid: this node never asks to update its voter entry
    return RaftDriver(
        raft_config(config, listener), config.node_id, cluster_id, metadata_dir(config), on_fatal=on_fatal,
        dialer=dialer, local_endpoint=listener, directory_id=directory_id,
        snapshot_policy=SnapshotPolicy(
            int(config["metadata.log.max.record.bytes.between.snapshots"]),
            int(config["metadata.log.max.snapshot.interval.ms"]),
        ),
        retention_policy=RetentionPolicy(
            int(config["metadata.max.retention.bytes"]), int(config["metadata.max.retention.ms"])
        ),
    )  # fmt: skip
