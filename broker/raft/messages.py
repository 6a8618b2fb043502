"""KIP-595 RPCs as plain dataclasses, one partition each (the metadata log ``__cluster_metadata-0``).

Field names are the Kafka RPC field names in snake_case (``candidate_epoch``, ``last_offset_epoch``,
``diverging_epoch``...). The topic/partition arrays of the wire schemas are flattened away, and the
top-level and partition ``ErrorCode`` fold into one ``error_code``: the driver maps these onto the
wire messages of ``pyspark_log.wire``.

Envelopes: ``Inbound(source, correlation_id, message)`` is what the driver hands the core;
``Send(destination, correlation_id, message)`` (in ``effects``) is what the core asks to send. A
response carries the correlation id of its request.

Two conventions differ from a literal reading of KIP-595, both as Kafka implements them:
``VoteRequest.last_offset`` is the candidate's log *end* offset (exclusive), and KIP-595's
``INVALID_CLUSTER_ID`` is Kafka's ``INCONSISTENT_CLUSTER_ID`` (104).
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.raft.log import Entry
from broker.raft.snapshot import SnapshotId
from pyspark_log.wire.errors import ErrorCode  # the one enum of Kafka error codes

__all__ = ["ErrorCode"]  # re-exported: the core and the driver name codes through this module


#: KIP-595's names for codes Kafka spells differently. Kafka has no INVALID_QUORUM_STATE code;
#: a request that conflicts with the known local state is answered with INVALID_REQUEST.
INVALID_CLUSTER_ID = ErrorCode.INCONSISTENT_CLUSTER_ID
INVALID_QUORUM_STATE = ErrorCode.INVALID_REQUEST
NOT_LEADER_FOR_PARTITION = ErrorCode.NOT_LEADER_OR_FOLLOWER

NO_LEADER = -1  # "LeaderId: -1 if the leader is unknown"
NO_VOTE = -1


@dataclass(frozen=True, slots=True)
class VoteRequest:
    cluster_id: str | None
    candidate_epoch: int
    candidate_id: int
    last_offset_epoch: int
    last_offset: int  # the candidate's log end offset


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error_code: ErrorCode
    leader_id: int
    leader_epoch: int
    vote_granted: bool


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    cluster_id: str | None
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error_code: ErrorCode
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    cluster_id: str | None
    replica_id: int
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error_code: ErrorCode
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class FetchRequest:
    cluster_id: str | None
    replica_id: int
    max_wait_time_ms: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int = 0
    replica_directory_id: bytes | None = None  # KIP-853 (Fetch v17); the core does not read it


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """``DivergingEpoch``: the largest epoch (and its end offset) the follower's log may keep."""

    epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class LeaderIdAndEpoch:
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error_code: ErrorCode
    high_watermark: int  # -1 when unknown
    current_leader: LeaderIdAndEpoch
    diverging_epoch: EpochEndOffset | None = None
    records: tuple[Entry, ...] = ()
    log_start_offset: int = 0
    snapshot_id: SnapshotId | None = None  # KIP-630: fetch this snapshot first (FetchOffset < log start)


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    """KIP-630 FetchSnapshot (59): ``max_bytes`` of snapshot ``snapshot_id`` from ``position``."""

    cluster_id: str | None
    replica_id: int
    current_leader_epoch: int
    snapshot_id: SnapshotId
    position: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    """KIP-630 FetchSnapshot answer: ``data`` holds the bytes from ``position`` of a snapshot of
    ``size`` bytes. The leader's core leaves ``data``/``size`` empty (-1): its driver reads them
    from the file when it sends the answer, and answers SNAPSHOT_NOT_FOUND /
    POSITION_OUT_OF_RANGE if the file is gone or shorter."""

    error_code: ErrorCode
    current_leader: LeaderIdAndEpoch
    snapshot_id: SnapshotId
    size: int = -1
    position: int = 0
    data: bytes = b""
    max_bytes: int = 0  # leader side: how much the driver may read


@dataclass(frozen=True, slots=True)
class DescribeQuorumRequest:
    pass


@dataclass(frozen=True, slots=True)
class ReplicaState:
    replica_id: int
    log_end_offset: int  # -1 if unknown
    last_fetch_timestamp: int = -1
    last_caught_up_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class DescribeQuorumResponse:
    error_code: ErrorCode
    leader_id: int
    leader_epoch: int
    high_watermark: int
    current_voters: tuple[ReplicaState, ...] = ()
    observers: tuple[ReplicaState, ...] = ()


Request = (
    VoteRequest
    | BeginQuorumEpochRequest
    | EndQuorumEpochRequest
    | FetchRequest
    | DescribeQuorumRequest
    | FetchSnapshotRequest
)
Response = (
    VoteResponse
    | BeginQuorumEpochResponse
    | EndQuorumEpochResponse
    | FetchResponse
    | DescribeQuorumResponse
    | FetchSnapshotResponse
)
Message = Request | Response

RESPONSE_TYPES = (
    VoteResponse,
    BeginQuorumEpochResponse,
    EndQuorumEpochResponse,
    FetchResponse,
    DescribeQuorumResponse,
    FetchSnapshotResponse,
)


def is_response(message: Message) -> bool:
    return isinstance(message, RESPONSE_TYPES)


@dataclass(frozen=True, slots=True)
class Inbound:
    """A message the driver received: from ``source`` (a replica id, or -1 for an admin client)."""

    source: int
    correlation_id: int
    message: Message
