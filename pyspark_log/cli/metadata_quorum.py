"""``pylog metadata-quorum describe --status | --replication``: Kafka's ``kafka-metadata-quorum.sh``
(KIP-595 "Tooling Support"), over DescribeQuorum (55).

``--status`` prints the quorum summary::

    ClusterId:              4L6g3nShT-eMCtK--X86sw
    LeaderId:               2
    LeaderEpoch:            15
    HighWatermark:          234130
    MaxFollowerLag:         34
    MaxFollowerLagTimeMs:   15
    CurrentVoters:          [1,2,3]
    CurrentObservers:       [4,5]

``--replication`` one line per replica (the leader, the other voters, then observers)::

    NodeId  LogEndOffset  Lag  LagTimeMs  LastFetchTimestamp  LastCaughtUpTimestamp  Status

As Kafka computes them: ``Lag`` = leader's log end offset - the replica's; ``LagTimeMs`` = leader's
last caught-up time - the replica's (0 for the leader, -1 when a timestamp is unknown, as
DescribeQuorum v0 has none). ``MaxFollowerLag`` and ``MaxFollowerLagTimeMs`` both describe one
voter, the one with the smallest log end offset (the first in the answer on a tie), exactly as
Kafka's ``MetadataQuorumCommand.handleDescribeStatus`` picks it: the lag time is that voter's, not
the largest lag time of any voter (a voter with an older LastCaughtUpTimestamp but a longer log
does not count), and it is 0 when that voter is the leader.
The broker asked forwards the request to the quorum leader. ``--output json`` gives the same data.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark_log.cli.context import Context
from pyspark_log.cli.errors import CliError, UsageError, unreachable
from pyspark_log.client.connection import BrokerConnection
from pyspark_log.client.errors import BrokerConnectionError, KafkaError
from pyspark_log.wire import ApiKey, ErrorCode

METADATA_TOPIC = "__cluster_metadata"
CLIENT_ID = "pylog-metadata-quorum"
STATUS_WIDTH = 24
REPLICATION_COLUMNS = (
    "NodeId",
    "LogEndOffset",
    "Lag",
    "LagTimeMs",
    "LastFetchTimestamp",
    "LastCaughtUpTimestamp",
    "Status",
)


@dataclass(frozen=True)
class Replica:
    node_id: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


@dataclass(frozen=True)
class QuorumInfo:
    """A DescribeQuorum answer for ``__cluster_metadata-0``."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[Replica, ...]
    observers: tuple[Replica, ...]

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
                    r.get("last_caught_up_timestamp", -1),
                )
                for r in partition[key]
            )  # fmt: skip

        return cls(
            partition["leader_id"],
            partition["leader_epoch"],
            partition["high_watermark"],
            replicas("current_voters"),
            replicas("observers"),
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
            ("CurrentVoters", [v.node_id for v in self.voters]),
            ("CurrentObservers", [o.node_id for o in self.observers]),
        ]

    def replication(self) -> list[dict[str, Any]]:
        """The ``--replication`` rows: the leader, the other voters, then the observers."""
        voters = sorted(self.voters, key=lambda v: (v.node_id != self.leader_id, v.node_id))
        rows = []
        for replica in (*voters, *sorted(self.observers, key=lambda o: o.node_id)):
            if replica.node_id == self.leader_id:
                status = "Leader"
            elif replica in self.voters:
                status = "Follower"
            else:
                status = "Observer"
            rows.append(
                {
                    "NodeId": replica.node_id,
                    "LogEndOffset": replica.log_end_offset,
                    "Lag": self.lag_of(replica),
                    "LagTimeMs": self.lag_time_ms_of(replica),
                    "LastFetchTimestamp": replica.last_fetch_timestamp,
                    "LastCaughtUpTimestamp": replica.last_caught_up_timestamp,
                    "Status": status,
                }
            )
        return rows


def format_status(fields: Sequence[tuple[str, Any]]) -> list[str]:
    """``Key:`` padded to Kafka's column, lists as ``[1,2,3]``."""
    out = []
    for key, value in fields:
        text = "[" + ",".join(map(str, value)) + "]" if isinstance(value, list) else str(value)
        out.append(f"{key + ':':<{STATUS_WIDTH}}{text}")
    return out


def format_replication(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """An aligned text table, the header first."""
    table = [list(REPLICATION_COLUMNS)] + [[str(row[c]) for c in REPLICATION_COLUMNS] for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(REPLICATION_COLUMNS))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip() for line in table]


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    quorum = commands.add_parser(
        "metadata-quorum", help="describe the KRaft metadata quorum (kafka-metadata-quorum.sh)", parents=[common]
    )
    verbs = quorum.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = verbs.add_parser("describe", help="the quorum's status or its replication", parents=[common])
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--status", action="store_true", help="leader, epoch, high watermark, lag, voters")
    which.add_argument("--replication", action="store_true", help="log end offset and lag of every replica")
    p.set_defaults(handler=describe)


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
        numeric = [c for c in REPLICATION_COLUMNS if c != "Status"]
        out.table(list(REPLICATION_COLUMNS), [[r[c] for c in REPLICATION_COLUMNS] for r in rows], numeric=numeric)
    else:
        out.lines(format_replication(rows))
    return 0


async def _ask(bootstrap: str, timeout_ms: float) -> tuple[Mapping[str, Any], str | None]:
    """DescribeQuorum and the cluster id from the first bootstrap server that answers."""
    last: BrokerConnectionError | None = None
    for server in (s.strip() for s in bootstrap.split(",") if s.strip()):
        host, _, port = server.rpartition(":")
        if not port.isdigit():
            raise UsageError(f"--bootstrap-server {server!r} is not HOST:PORT")
        conn = BrokerConnection(
            host.strip("[]"), int(port), node_id=-1, client_id=CLIENT_ID, request_timeout_ms=timeout_ms
        )
        try:
            await conn.connect(timeout_ms)
        except BrokerConnectionError as exc:
            last = exc
            continue
        try:
            versions = conn.api_versions.get(ApiKey.DESCRIBE_QUORUM)
            if versions is None:
                raise CliError(f"{server} runs no KRaft metadata quorum (no DescribeQuorum; set process.roles)")
            request = {"topics": [{"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0}]}]}
            body = await conn.request(ApiKey.DESCRIBE_QUORUM, request, version=min(1, versions[1]))
            metadata = await conn.request(ApiKey.METADATA, {"topics": [], "allow_auto_topic_creation": False})
        except KafkaError as exc:
            raise CliError(f"DescribeQuorum to {server} failed: {exc} ({exc.code.name})") from exc
        finally:
            conn.close()
        assert body is not None
        assert metadata is not None
        return body, metadata.get("cluster_id")
    if last is None:
        raise CliError("--bootstrap-server names no HOST:PORT")
    raise unreachable(bootstrap, last)
