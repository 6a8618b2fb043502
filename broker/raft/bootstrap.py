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
``ConfigError``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker.log.manager import METADATA_DIR_NAME
from broker.properties import load_properties
from broker.raft.config import RaftConfig, RaftConfigError, VoterEndpoint, parse_quorum_voters
from broker.raft.driver import RaftDriver

if TYPE_CHECKING:
    from broker.config import BrokerConfig

ROLES = ("broker", "controller")
_QUORUM_KEYS = {
    "quorum.election.timeout.ms": "election_timeout_ms",
    "quorum.fetch.timeout.ms": "fetch_timeout_ms",
    "quorum.election.backoff.max.ms": "election_backoff_max_ms",
    "quorum.request.timeout.ms": "request_timeout_ms",
    "quorum.retry.backoff.ms": "retry_backoff_ms",
    "quorum.retry.backoff.max.ms": "retry_backoff_max_ms",
}


def kraft_enabled(raw: Mapping[str, str]) -> bool:
    """KRaft mode: ``process.roles`` was given (without it pylog keeps its single-node metadata)."""
    return "process.roles" in raw


def voters_key(raw: Mapping[str, str]) -> str:
    """The key the voters were given under (for error messages)."""
    if "quorum.voters" in raw and "controller.quorum.voters" not in raw:
        return "quorum.voters"
    return "controller.quorum.voters"


def validate_quorum_config(values: Mapping[str, Any], raw: Mapping[str, str]) -> None:
    """Check the KRaft keys of a broker config; RaftConfigError naming the key otherwise."""
    port = int(values["metrics.port"])
    if port != -1 and not 0 <= port <= 65535:
        raise RaftConfigError(f"metrics.port={port} is not a port: use -1 (off) or 0-65535")
    for key in _QUORUM_KEYS:
        if int(values[key]) <= 0:
            raise RaftConfigError(f"{key}={values[key]} must be > 0")
    if int(values["quorum.retry.backoff.max.ms"]) < int(values["quorum.retry.backoff.ms"]):
        raise RaftConfigError("quorum.retry.backoff.max.ms must be >= quorum.retry.backoff.ms")
    if not kraft_enabled(raw):
        return
    roles: Sequence[str] = values["process.roles"]
    unknown = sorted(set(roles) - set(ROLES))
    if not roles or unknown or len(set(roles)) != len(roles):
        raise RaftConfigError(
            f"process.roles={','.join(roles)!r} is invalid: use controller, broker, or broker,controller"
        )
    key = voters_key(raw)
    try:
        voters = parse_quorum_voters(str(values["controller.quorum.voters"]))
    except RaftConfigError as exc:
        raise RaftConfigError(str(exc).replace("quorum.voters:", f"{key}:", 1)) from None
    node_id = int(values["node.id"])
    listed = ",".join(str(v) for v in sorted(voters))
    if "controller" in roles:
        if voters and node_id not in voters:
            raise RaftConfigError(
                f"node.id={node_id} is not in {key} (voters {listed}): a node with process.roles=controller "
                "must be one of the voters"
            )
    elif not voters:
        raise RaftConfigError(f"{key} is required with process.roles=broker: the brokers find the quorum through it")
    elif node_id in voters:
        raise RaftConfigError(
            f"node.id={node_id} is in {key} (voters {listed}) but process.roles=broker: a voter must have "
            "the controller role"
        )


def raft_config(config: BrokerConfig, listener: tuple[str, int]) -> RaftConfig:
    """The quorum settings of this node; a controller without voters is a one-voter quorum at
    its own ``listener`` address."""
    endpoints: dict[int, VoterEndpoint] = parse_quorum_voters(str(config["controller.quorum.voters"]))
    if not endpoints:
        endpoints = {config.node_id: VoterEndpoint(config.node_id, *listener)}
    kwargs = {attr: int(config[key]) for key, attr in _QUORUM_KEYS.items()}
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
) -> RaftDriver:
    """The driver of this node (not started: register committed-entry listeners, then start)."""
    return RaftDriver(
        raft_config(config, listener), config.node_id, cluster_id, metadata_dir(config), on_fatal=on_fatal
    )
