"""KIP-595 quorum configuration under Kafka's names and defaults.

KIP-595's "Configurations" section names the keys; the defaults are Kafka's (``QuorumConfig``):

=================================  =======  ==================================================
key                                default  meaning (KIP-595)
=================================  =======  ==================================================
``quorum.voters``                  (none)   ``{id}@{host}:{port},...``: the voters and their endpoints
``quorum.election.timeout.ms``     1000     longest a candidate waits for a majority before retrying
``quorum.fetch.timeout.ms``        2000     longest a follower waits on the leader before an election
``quorum.election.backoff.max.ms`` 1000     upper bound of the random delay before a new election
``quorum.request.timeout.ms``      2000     a pending request is considered failed after this
``quorum.retry.backoff.ms``        20       first delay between request retries
``quorum.retry.backoff.max.ms``    1000     largest delay between request retries (KIP-580 style)
=================================  =======  ==================================================

KIP-595 gives no default for ``quorum.retry.backoff.max.ms``; 1000 is KIP-580's
``retry.backoff.max.ms`` default. ``fetch_max_wait_ms`` (how long a leader parks a fetch that has
nothing to return) and ``fetch_max_records`` are not ``quorum.*`` keys: Kafka fixes the former at
500 ms in its Raft client; the latter bounds one fetch response of the abstract log.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


class RaftConfigError(ValueError):
    """A quorum configuration value that cannot be used; the message names the key."""


@dataclass(frozen=True, slots=True)
class VoterEndpoint:
    """One entry of ``quorum.voters``: ``{broker-id}@{broker-host}:{broker-port}``."""

    voter_id: int
    host: str
    port: int


def parse_quorum_voters(value: str) -> dict[int, VoterEndpoint]:
    """Parse ``quorum.voters`` (``1@kafka-1:9092,2@kafka-2:9092``) into ``{id: endpoint}``."""
    voters: dict[int, VoterEndpoint] = {}
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        id_text, sep, address = item.partition("@")
        host, colon, port_text = address.rpartition(":")
        if not sep or not colon or not host:
            raise RaftConfigError(f"quorum.voters: {item!r} is not of the form id@host:port")
        try:
            voter_id, port = int(id_text), int(port_text)
        except ValueError as exc:
            raise RaftConfigError(f"quorum.voters: {item!r} has a non-numeric id or port") from exc
        if voter_id < 0 or not 0 < port < 65536:
            raise RaftConfigError(f"quorum.voters: {item!r} has an id < 0 or an invalid port")
        if voter_id in voters:
            raise RaftConfigError(f"quorum.voters: voter id {voter_id} is listed twice")
        voters[voter_id] = VoterEndpoint(voter_id, host.strip("[]"), port)
    return voters


@dataclass(frozen=True, slots=True)
class RaftConfig:
    """The quorum settings of one replica (``node_id``); immutable, validated on creation."""

    node_id: int
    voters: frozenset[int]
    voter_endpoints: Mapping[int, VoterEndpoint] = field(default_factory=dict, hash=False, compare=False)
    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    retry_backoff_max_ms: int = 1000
    fetch_max_wait_ms: int = 500
    fetch_max_records: int = 256
    bootstrap_voters: Any = field(default=None, hash=False, compare=False)
    """KIP-853: the initial ``VotersRecord`` (``storage format --standalone`` or
    ``--initial-controllers``); None for a static quorum (``controller.quorum.voters``, kraft.version 0).
    When given, ``voters`` must be its ids."""
    bootstrap_servers: Mapping[int, VoterEndpoint] = field(default_factory=dict, hash=False, compare=False)
    """KIP-853 ``controller.quorum.bootstrap.servers`` under negative ids (-2, -3, ...): where a
    replica that knows no voter yet (an empty log, ``voters`` empty) fetches to find the leader."""

    def __post_init__(self) -> None:
        if self.node_id < 0:
            raise RaftConfigError("node.id must be >= 0")
        if not self.voters and not self.bootstrap_servers:
            raise RaftConfigError("quorum.voters must name at least one voter")
        for name in (
            "election_timeout_ms",
            "fetch_timeout_ms",
            "election_backoff_max_ms",
            "request_timeout_ms",
            "retry_backoff_ms",
            "retry_backoff_max_ms",
            "fetch_max_records",
        ):
            if getattr(self, name) <= 0:
                raise RaftConfigError(f"{_KEY_OF_ATTR.get(name, name)} must be > 0")
        if self.fetch_max_wait_ms < 0:
            raise RaftConfigError("fetch_max_wait_ms must be >= 0")
        if self.retry_backoff_max_ms < self.retry_backoff_ms:
            raise RaftConfigError("quorum.retry.backoff.max.ms must be >= quorum.retry.backoff.ms")
        if self.bootstrap_voters is not None and self.bootstrap_voters.ids != self.voters:
            raise RaftConfigError("the bootstrap voters record must name exactly the configured voters")

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

    @property
    def majority(self) -> int:
        """Votes (or replicas) that make a majority of the voter set."""
        return len(self.voters) // 2 + 1

    @classmethod
    def from_properties(cls, node_id: int, props: Mapping[str, str]) -> RaftConfig:
        """Build from Kafka property names (``quorum.voters``, ``quorum.*.ms``); others are ignored."""
        endpoints = parse_quorum_voters(props.get("quorum.voters", ""))
        kwargs: dict[str, Any] = {}
        for key, attr in _PROPERTY_KEYS.items():
            if key in props:
                try:
                    kwargs[attr] = int(props[key])
                except ValueError as exc:
                    raise RaftConfigError(f"{key}: {props[key]!r} is not an integer") from exc
        return cls(
            node_id=node_id,
            voters=frozenset(endpoints),
            voter_endpoints=endpoints,
            **kwargs,
        )


_PROPERTY_KEYS = {
    "quorum.election.timeout.ms": "election_timeout_ms",
    "quorum.fetch.timeout.ms": "fetch_timeout_ms",
    "quorum.election.backoff.max.ms": "election_backoff_max_ms",
    "quorum.request.timeout.ms": "request_timeout_ms",
    "quorum.retry.backoff.ms": "retry_backoff_ms",
    "quorum.retry.backoff.max.ms": "retry_backoff_max_ms",
}
_KEY_OF_ATTR = {attr: key for key, attr in _PROPERTY_KEYS.items()}


# -- the KRaft keys of server.properties (checked by broker.config, used by bootstrap) ---------------

ROLES = ("broker", "controller")
QUORUM_KEYS = {
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
    for key in QUORUM_KEYS:
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
    if not voters and str(values.get("controller.quorum.bootstrap.servers", "")).strip():
        return  # KIP-853 dynamic quorum: the voters come from the log (broker.raft.voters)
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
