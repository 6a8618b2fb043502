"""``pylog metadata-quorum``: Kafka's ``kafka-metadata-quorum`` (KIP-595 "Tooling Support",
KIP-853 controller membership), over DescribeQuorum (55), AddRaftVoter (80), RemoveRaftVoter (81).

Flags are Kafka 4.1's: ``--bootstrap-server`` (a broker, which forwards to the quorum leader) or
``--bootstrap-controller`` (a controller), ``--command-config FILE`` (for ``add-controller`` the
properties of the controller to add), then one verb::

    describe --status | --replication
    add-controller [--dry-run]
    remove-controller --controller-id/-i N --controller-directory-id/-d DIR [--dry-run]

``--status`` prints the quorum summary as Kafka 4.1 does (voters and observers with their
directory ids, voters with their endpoints; a zero directory id is left out)::

    ClusterId:              4L6g3nShT-eMCtK--X86sw
    LeaderId:               2
    LeaderEpoch:            15
    HighWatermark:          234130
    MaxFollowerLag:         34
    MaxFollowerLagTimeMs:   15
    CurrentVoters:          [{"id": 1, "directoryId": "...", "endpoints": ["CONTROLLER://h1:9093"]}, ...]
    CurrentObservers:       [{"id": 4, "directoryId": "..."}]

``--replication`` one row per replica (the leader, the other voters, then the observers, in the
answer's order), Kafka's columns and its tab-separated padded table::

    NodeId  DirectoryId  LogEndOffset  Lag  LastFetchTimestamp  LastCaughtUpTimestamp  Status

As Kafka computes them: ``Lag`` = leader's log end offset - the replica's. ``MaxFollowerLag`` and
``MaxFollowerLagTimeMs`` both describe one voter, the one with the smallest log end offset (the
first in the answer on a tie), exactly as Kafka's ``MetadataQuorumCommand.handleDescribeStatus``
picks it: the lag time is that voter's last caught-up time subtracted from the leader's (-1 when
unknown), and 0 when that voter is the leader. ``--output json`` gives the same data.

``add-controller`` reads the controller's ``node.id``, ``process.roles`` (must contain
``controller``), its metadata directory (``metadata.log.dir``, else the first of ``log.dirs``)
whose ``meta.properties`` holds its ``directory.id``, and the endpoints of its
``controller.listener.names`` (advertised address first); pylog's single-listener mode (no
controller listener among ``listeners``) uses the first listener. The answer comes once the new
voter set is committed; the controller must be running and caught up as an observer.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark_log.cli.context import Context, connect_first, read_command_config
from pyspark_log.cli.errors import CliError, UsageError
from pyspark_log.client.connection import BrokerConnection
from pyspark_log.client.errors import KafkaError
from pyspark_log.wire import ApiKey, ErrorCode

METADATA_TOPIC = "__cluster_metadata"
CLIENT_ID = "pylog-metadata-quorum"
STATUS_WIDTH = 24
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"
REPLICATION_COLUMNS = (
    "NodeId",
    "DirectoryId",
    "LogEndOffset",
    "Lag",
    "LastFetchTimestamp",
    "LastCaughtUpTimestamp",
    "Status",
)
DEFAULT_VOTER_TIMEOUT_MS = 30_000


def uuid_text(value: Any) -> str:
    """A Uuid as Kafka prints it: base64url of its 16 bytes, no padding."""
    raw = value.bytes if isinstance(value, uuid.UUID) else bytes(value or bytes(16))
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def parse_uuid(text: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString``: base64url of 16 bytes (22 characters)."""
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError):
        raw = b""
    if len(text) != 22 or len(raw) != 16:
        raise UsageError(f"Failed to parse --controller-directory-id: Input string '{text}' is not a valid Uuid")
    return uuid.UUID(bytes=raw)


@dataclass(frozen=True)
class Replica:
    node_id: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int
    directory_id: str = ZERO_UUID


@dataclass(frozen=True)
class QuorumInfo:
    """A DescribeQuorum answer for ``__cluster_metadata-0`` (v2: directory ids and voter nodes)."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[Replica, ...]
    observers: tuple[Replica, ...]
    nodes: Mapping[int, tuple[str, ...]] = field(default_factory=dict)  # node id -> "NAME://host:port"

    @classmethod
    def from_response(cls, body: Mapping[str, Any]) -> QuorumInfo:
        """Read the response; CliError for an error code (named as Kafka names it)."""
        code = body.get("error_code", 0)
        topics = body.get("topics") or []
        partition = topics[0]["partitions"][0] if topics and topics[0]["partitions"] else None
        if not code and partition is not None:
            code = partition["error_code"]
        if code or partition is None:
            error = ErrorCode.of(code) if code else ErrorCode.UNKNOWN_SERVER_ERROR
            if error == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                raise CliError(f"the metadata quorum has no leader right now; retry shortly ({error.name})")
            raise CliError(f"DescribeQuorum failed ({error.name})")

        def replicas(key: str) -> tuple[Replica, ...]:
            return tuple(
                Replica(
                    r["replica_id"], r["log_end_offset"], r.get("last_fetch_timestamp", -1),
                    r.get("last_caught_up_timestamp", -1), uuid_text(r.get("replica_directory_id")),
                )
                for r in partition[key]
            )  # fmt: skip

        nodes = {
            n["node_id"]: tuple(f"{x['name']}://{_host(x['host'])}:{x['port']}" for x in n["listeners"])
            for n in body.get("nodes") or ()
        }
        return cls(
            partition["leader_id"],
            partition["leader_epoch"],
            partition["high_watermark"],
            replicas("current_voters"),
            replicas("observers"),
            nodes,
        )

    @property
    def leader(self) -> Replica | None:
        return next((v for v in self.voters if v.node_id == self.leader_id), None)

    def lag_of(self, replica: Replica) -> int:
        leader = self.leader
        return leader.log_end_offset - replica.log_end_offset if leader is not None else -1

    def lag_time_ms_of(self, replica: Replica) -> int:
        leader = self.leader
        if leader is None:
            return -1
        if replica.node_id == leader.node_id:
            return 0
        if leader.last_caught_up_timestamp < 0 or replica.last_caught_up_timestamp < 0:
            return -1
        return leader.last_caught_up_timestamp - replica.last_caught_up_timestamp

    def describe_replica(self, replica: Replica) -> dict[str, Any]:
        """One entry of CurrentVoters/CurrentObservers (Kafka leaves out a zero directory id and
        an empty endpoint list)."""
        entry: dict[str, Any] = {"id": replica.node_id}
        if replica.directory_id != ZERO_UUID:
            entry["directoryId"] = replica.directory_id
        endpoints = self.nodes.get(replica.node_id, ())
        if endpoints:
            entry["endpoints"] = list(endpoints)
        return entry

    def status(self, cluster_id: str | None) -> list[tuple[str, Any]]:
        """The ``--status`` fields, in Kafka's order (both lag fields of the smallest-LEO voter)."""
        lagging = min(self.voters, key=lambda v: v.log_end_offset, default=None)
        return [
            ("ClusterId", cluster_id),
            ("LeaderId", self.leader_id),
            ("LeaderEpoch", self.leader_epoch),
            ("HighWatermark", self.high_watermark),
            ("MaxFollowerLag", self.lag_of(lagging) if lagging is not None else 0),
            ("MaxFollowerLagTimeMs", self.lag_time_ms_of(lagging) if lagging is not None else 0),
            ("CurrentVoters", [self.describe_replica(v) for v in self.voters]),
            ("CurrentObservers", [self.describe_replica(o) for o in self.observers]),
        ]

    def replication(self) -> list[dict[str, Any]]:
        """The ``--replication`` rows: the leader, the other voters, then the observers."""
        leader = [v for v in self.voters if v.node_id == self.leader_id]
        others = [v for v in self.voters if v.node_id != self.leader_id]
        rows = []
        for status, group in (("Leader", leader), ("Follower", others), ("Observer", list(self.observers))):
            for replica in group:
                rows.append(
                    {
                        "NodeId": replica.node_id,
                        "DirectoryId": replica.directory_id,
                        "LogEndOffset": replica.log_end_offset,
                        "Lag": self.lag_of(replica),
                        "LastFetchTimestamp": replica.last_fetch_timestamp,
                        "LastCaughtUpTimestamp": replica.last_caught_up_timestamp,
                        "Status": status,
                    }
                )
        return rows


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _replica_text(entry: Mapping[str, Any]) -> str:
    """Kafka's ``Node.toString``: ``{"id": 1, "directoryId": "...", "endpoints": ["C://h:1"]}``."""
    text = f'{{"id": {entry["id"]}'
    if "directoryId" in entry:
        text += f', "directoryId": "{entry["directoryId"]}"'
    if entry.get("endpoints"):
        text += ', "endpoints": [' + ", ".join(f'"{e}"' for e in entry["endpoints"]) + "]"
    return text + "}"


def format_status(fields: Sequence[tuple[str, Any]]) -> list[str]:
    """``Key:`` padded to Kafka's column; voters and observers as Kafka prints them."""
    out = []
    for key, value in fields:
        text = "[" + ", ".join(_replica_text(v) for v in value) + "]" if isinstance(value, list) else str(value)
        out.append(f"{key + ':':<{STATUS_WIDTH}}{text}")
    return out


def format_replication(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Kafka's ``ToolsUtils.prettyPrintTable``: each cell padded to its column, then a tab."""
    table = [list(REPLICATION_COLUMNS)] + [[str(row[c]) for c in REPLICATION_COLUMNS] for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(REPLICATION_COLUMNS))]
    return ["".join(cell.ljust(width) + "\t" for cell, width in zip(line, widths, strict=True)) for line in table]


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    quorum = commands.add_parser(
        "metadata-quorum", help="describe and change the KRaft metadata quorum (kafka-metadata-quorum)",
        parents=[common],
    )  # fmt: skip
    _bootstrap_controller(quorum)
    verbs = quorum.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = verbs.add_parser("describe", help="Describe the metadata quorum info", parents=[common])
    _bootstrap_controller(p)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--status", action="store_true", help="leader, epoch, high watermark, lag, voters")
    which.add_argument("--replication", action="store_true", help="log end offset and lag of every replica")
    p.set_defaults(handler=describe)
    p = verbs.add_parser("add-controller", help="Add a controller to the KRaft controller cluster", parents=[common])
    _bootstrap_controller(p)
    p.add_argument("--dry-run", action="store_true", help="Print what would be done, but do not do it.")
    p.set_defaults(handler=add_controller)
    p = verbs.add_parser(
        "remove-controller", help="Remove a controller from the KRaft controller cluster", parents=[common]
    )
    _bootstrap_controller(p)
    p.add_argument("--controller-id", "-i", type=int, required=True, help="The id of the controller to remove.")
    p.add_argument("--controller-directory-id", "-d", required=True, help="The directory ID of the controller.")
    p.add_argument("--dry-run", action="store_true", help="Print what would be done, but do not do it.")
    p.set_defaults(handler=remove_controller)


def _bootstrap_controller(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-controller", dest="bootstrap_server", metavar="HOST:PORT",
                        default=argparse.SUPPRESS,
                        help="controller(s) to bootstrap from, comma-separated (KIP-919)")  # fmt: skip


def describe(args: argparse.Namespace, ctx: Context) -> int:
    timeout_ms = float(ctx.config().get("request.timeout.ms", 30000))
    body, cluster_id = asyncio.run(_ask(ctx.bootstrap, timeout_ms))
    info = QuorumInfo.from_response(body)
    out = ctx.output
    if args.status:
        fields = info.status(cluster_id)
        if out.is_json:
            out.json(dict(fields))
        elif out.is_table:
            out.table(["Field", "Value"], [(k, format_status([(k, v)])[0][STATUS_WIDTH:]) for k, v in fields])
        else:
            out.lines(format_status(fields))
        return 0
    rows = info.replication()
    if out.is_json:
        out.json(rows)
    elif out.is_table:
        numeric = [c for c in REPLICATION_COLUMNS if c not in ("Status", "DirectoryId")]
        out.table(list(REPLICATION_COLUMNS), [[r[c] for c in REPLICATION_COLUMNS] for r in rows], numeric=numeric)
    else:
        out.lines(format_replication(rows))
    return 0


@dataclass(frozen=True)
class ControllerToAdd:
    """What ``add-controller`` reads from the controller's properties (Kafka's rules)."""

    node_id: int
    directory_id: uuid.UUID
    endpoints: tuple[tuple[str, str, int], ...]  # (listener name, host, port)


def _listener(uri: str) -> tuple[str, str, int]:
    name, sep, rest = uri.strip().partition("://")
    host, colon, port = rest.rpartition(":")
    if not sep or not colon or not port.isdigit():
        raise UsageError(f"cannot parse listener {uri!r}")
    return name.strip().upper(), host.strip("[]") or "localhost", int(port)


def controller_to_add(props: Mapping[str, str]) -> ControllerToAdd:
    """Kafka's ``MetadataQuorumCommand`` checks: node.id, process.roles, the metadata directory's
    ``directory.id``, the controller listeners' endpoints (advertised ones win)."""
    if "node.id" not in props:
        raise CliError("node.id not found in configuration file. Is this a valid controller configuration file?")
    node_id = int(props["node.id"])
    if node_id < 0:
        raise CliError("node.id was negative in configuration file. Is this a valid controller configuration file?")
    if "controller" not in props.get("process.roles", ""):
        raise CliError(
            "process.roles did not contain 'controller' in configuration file. Is this a valid controller "
            "configuration file?"
        )
    directory = props.get("metadata.log.dir") or next(
        (d.strip() for d in props.get("log.dirs", props.get("log.dir", "")).split(",") if d.strip()), None
    )
    if directory is None:
        raise CliError(
            "Neither metadata.log.dir nor log.dirs were found. Is this a valid controller configuration file?"
        )
    meta = Path(directory) / "meta.properties"
    try:
        stored = read_command_config(str(meta))
    except UsageError:
        raise CliError(f"Unable to read meta.properties from {directory}") from None
    if not stored.get("directory.id"):
        raise CliError(f"No directory id found in {directory}")
    directory_id = parse_uuid(stored["directory.id"])
    listeners = {}
    for key in ("listeners", "advertised.listeners"):
        for uri in filter(str.strip, props.get(key, "").split(",")):
            name, host, port = _listener(uri)
            listeners[name] = (name, host, port)
    names = [n.strip().upper() for n in props.get("controller.listener.names", "").split(",") if n.strip()]
    chosen = [listeners[n] for n in names if n in listeners]
    if not chosen:
        if not listeners:
            raise CliError(f"Cannot find information about controller listener name: {(names or ['CONTROLLER'])[0]}")
        chosen = [next(iter(listeners.values()))]  # pylog's single-listener mode: its one listener
    return ControllerToAdd(node_id, directory_id, tuple(chosen))


def add_controller(args: argparse.Namespace, ctx: Context) -> int:
    if not args.command_config:
        raise CliError(
            "You must supply the configuration file of the controller you are adding when using add-controller."
        )
    try:
        props = read_command_config(args.command_config)
    except UsageError:
        raise CliError(f"Properties file {args.command_config} does not exist.") from None
    controller = controller_to_add(props)
    if not args.dry_run:
        timeout_ms = int(ctx.config().get("default.api.timeout.ms", DEFAULT_VOTER_TIMEOUT_MS))
        body = {
            "cluster_id": None,
            "timeout_ms": timeout_ms,
            "voter_id": controller.node_id,
            "voter_directory_id": controller.directory_id,
            "listeners": [{"name": n, "host": h, "port": p} for n, h, p in controller.endpoints],
        }
        asyncio.run(_change(ctx.bootstrap, ApiKey.ADD_RAFT_VOTER, body, timeout_ms))
    endpoints = ", ".join(f"{n}://{_host(h)}:{p}" for n, h, p in controller.endpoints)
    verb = "DRY RUN of adding" if args.dry_run else "Added"
    ctx.output.line(
        f"{verb} controller {controller.node_id} with directory id {uuid_text(controller.directory_id)} "
        f"and endpoints: {endpoints}"
    )
    return 0


def remove_controller(args: argparse.Namespace, ctx: Context) -> int:
    if args.controller_id < 0:
        raise CliError(f"Invalid negative --controller-id: {args.controller_id}")
    directory_id = parse_uuid(args.controller_directory_id)
    if not args.dry_run:
        timeout_ms = int(ctx.config().get("default.api.timeout.ms", DEFAULT_VOTER_TIMEOUT_MS))
        body = {"cluster_id": None, "voter_id": args.controller_id, "voter_directory_id": directory_id}
        asyncio.run(_change(ctx.bootstrap, ApiKey.REMOVE_RAFT_VOTER, body, timeout_ms))
    verb = "DRY RUN of removing " if args.dry_run else "Removed "
    ctx.output.line(f"{verb} KRaft controller {args.controller_id} with directory id {uuid_text(directory_id)}")
    return 0


async def _connect(bootstrap: str, timeout_ms: float) -> tuple[str, BrokerConnection]:
    """A connection to the first bootstrap server that answers."""
    return await connect_first(bootstrap, timeout_ms, CLIENT_ID)


async def _change(bootstrap: str, api_key: ApiKey, body: Mapping[str, Any], timeout_ms: int) -> None:
    """AddRaftVoter / RemoveRaftVoter; CliError with the answer's error (Kafka's name and message)."""
    server, conn = await _connect(bootstrap, timeout_ms + 10_000)
    try:
        if conn.api_versions.get(api_key) is None:
            raise CliError(f"{server} does not serve {api_key.title} (KIP-853: a KRaft node of Kafka 3.9+ or pylog)")
        answer = await conn.request(api_key, dict(body), version=0)
    except KafkaError as exc:
        raise CliError(f"{api_key.title} to {server} failed: {exc} ({exc.code.name})") from exc
    finally:
        conn.close()
    assert answer is not None
    code = answer.get("error_code", 0)
    if code:
        message = answer.get("error_message") or ""
        raise CliError(f"{ErrorCode.of(code).name}: {message}".rstrip(": "))


async def _ask(bootstrap: str, timeout_ms: float) -> tuple[Mapping[str, Any], str | None]:
    """DescribeQuorum and the cluster id from the first bootstrap server that answers."""
    server, conn = await _connect(bootstrap, timeout_ms)
    try:
        versions = conn.api_versions.get(ApiKey.DESCRIBE_QUORUM)
        if versions is None:
            raise CliError(f"{server} runs no KRaft metadata quorum (no DescribeQuorum; set process.roles)")
        request = {"topics": [{"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0}]}]}
        body = await conn.request(ApiKey.DESCRIBE_QUORUM, request, version=min(2, versions[1]))
        metadata = await conn.request(ApiKey.METADATA, {"topics": [], "allow_auto_topic_creation": False})
    except KafkaError as exc:
        raise CliError(f"DescribeQuorum to {server} failed: {exc} ({exc.code.name})") from exc
    finally:
        conn.close()
    assert body is not None
    assert metadata is not None
    return body, metadata.get("cluster_id")
