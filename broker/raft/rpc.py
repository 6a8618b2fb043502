"""The KIP-595 messages of ``broker.raft.messages`` on the Kafka wire, both directions.

Outbound (the driver): ``request_to_wire(message)`` gives ``(api_key, version, body)`` and
``response_from_wire(api_key, body)`` reads the answer. Inbound (``broker.api.raft``):
``request_from_wire(api_key, version, body)`` gives ``(source, message)`` and
``response_to_wire(message, ...)`` the body to answer with.

Versions sent: Vote/BeginQuorumEpoch/EndQuorumEpoch v0, DescribeQuorum v2, Fetch v12 (the first
with the KIP-595 fields; topics by name), or v17 in a dynamic quorum (KIP-853: it carries the
fetching replica's directory id; topics by id), FetchSnapshot v0 (KIP-630; a Fetch answer's
``SnapshotId`` tells a replica behind the log start which snapshot to fetch). Every request names
``__cluster_metadata`` partition 0; a request for anything else is answered
UNKNOWN_TOPIC_OR_PARTITION by the handlers. As Kafka does, INCONSISTENT_CLUSTER_ID is the
top-level error code of a response; we also repeat it in the partition, whose
``leader_id``/``leader_epoch`` the receiving core needs.

The ``source`` of an inbound request is the replica that sent it: the candidate (Vote), the leader
(BeginQuorumEpoch, EndQuorumEpoch: v0 has no replica id field), the fetching replica (Fetch), and
-1 for DescribeQuorum (an admin client).

Inbound requests are checked here as Kafka's ``KafkaRaftClient`` checks them before its state
machine sees them: ``InvalidRaftRequest`` (answered INVALID_REQUEST with ``error_response_to_wire``)
for a Vote with a negative last offset or epoch, or a last epoch not below the candidate's epoch;
a negative candidate or leader id; a Fetch with a negative MaxWaitMs, FetchOffset or
LastFetchedEpoch, a LastFetchedEpoch above its CurrentLeaderEpoch, or a ReplicaId below -1 (-1 is
a reader that is not a replica). Any client can reach the listener, so nothing it sends may make
the core raise (review finding 3).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from broker.raft.log import Entry, VoterSpec
from broker.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EpochEndOffset,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderIdAndEpoch,
    Message,
    ReplicaState,
    Request,
    Response,
    VoteRequest,
    VoteResponse,
)
from broker.raft.snapshot import SnapshotId
from pyspark_log.wire.api_keys import ApiKey

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka's Uuid.METADATA_TOPIC_ID, for Fetch v13+
FETCH_VERSION = 12
FETCH_DIRECTORY_VERSION = 17  # KIP-853: with ReplicaDirectoryId (sent in a dynamic quorum only)
DESCRIBE_QUORUM_VERSION = 2
FETCH_SNAPSHOT_VERSION = 0
CONTROLLER_LISTENER_NAME = "CONTROLLER"  # the listener name a VotersRecord endpoint is recorded under
FETCH_MAX_BYTES = 8 * 1024 * 1024
_ADMIN_SOURCE = -1

RecordsEncoder = Callable[[tuple[Entry, ...]], bytes]


class NotMetadataPartition(ValueError):
    """The request does not name exactly ``__cluster_metadata`` partition 0."""


class InvalidRaftRequest(ValueError):
    """A request whose fields no replica can act on: answer it INVALID_REQUEST."""


def _topics(name_key: str, partition: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{name_key: METADATA_TOPIC, "partitions": [{"partition_index": METADATA_PARTITION, **partition}]}]


def _code(error: ErrorCode) -> int:
    return int(error)


def _top_level(error: ErrorCode) -> int:
    return int(error) if error == ErrorCode.INCONSISTENT_CLUSTER_ID else 0


# -- outbound requests ---------------------------------------------------------------------------


def request_to_wire(message: Request, directory_id: bytes | None = None) -> tuple[int, int, dict[str, Any]]:
    """A core request as ``(api_key, version, body)``. ``directory_id``: this replica's (a dynamic
    quorum, KIP-853): a Fetch goes as v17, which carries it; otherwise as v12 (by topic name)."""
    if isinstance(message, VoteRequest):
        partition = {
            "candidate_epoch": message.candidate_epoch,
            "candidate_id": message.candidate_id,
            "last_offset_epoch": message.last_offset_epoch,
            "last_offset": message.last_offset,
        }
        return ApiKey.VOTE, 0, {"cluster_id": message.cluster_id, "topics": _topics("topic_name", partition)}
    if isinstance(message, BeginQuorumEpochRequest):
        partition = {"leader_id": message.leader_id, "leader_epoch": message.leader_epoch}
        body = {"cluster_id": message.cluster_id, "topics": _topics("topic_name", partition)}
        return ApiKey.BEGIN_QUORUM_EPOCH, 0, body
    if isinstance(message, EndQuorumEpochRequest):
        end_partition: dict[str, Any] = {
            "leader_id": message.leader_id,
            "leader_epoch": message.leader_epoch,
            "preferred_successors": list(message.preferred_successors),
        }
        body = {"cluster_id": message.cluster_id, "topics": _topics("topic_name", end_partition)}
        return ApiKey.END_QUORUM_EPOCH, 0, body
    if isinstance(message, FetchRequest):
        fetch_partition: dict[str, Any] = {
            "partition": METADATA_PARTITION,
            "current_leader_epoch": message.current_leader_epoch,
            "fetch_offset": message.fetch_offset,
            "last_fetched_epoch": message.last_fetched_epoch,
            "log_start_offset": message.log_start_offset,
            "partition_max_bytes": FETCH_MAX_BYTES,
        }
        fetch_body: dict[str, Any] = {
            "cluster_id": message.cluster_id,
            "replica_id": message.replica_id,
            "max_wait_ms": message.max_wait_time_ms,
            "min_bytes": 0,
            "max_bytes": FETCH_MAX_BYTES,
            "topics": [{"topic": METADATA_TOPIC, "partitions": [fetch_partition]}],
        }
        if directory_id is not None:
            fetch_partition["replica_directory_id"] = uuid.UUID(bytes=bytes(directory_id))
            fetch_body["replica_state"] = {"replica_id": message.replica_id, "replica_epoch": -1}
            fetch_body["topics"] = [{"topic_id": METADATA_TOPIC_ID, "partitions": [fetch_partition]}]
            return ApiKey.FETCH, FETCH_DIRECTORY_VERSION, fetch_body
        return ApiKey.FETCH, FETCH_VERSION, fetch_body
    if isinstance(message, DescribeQuorumRequest):
        return ApiKey.DESCRIBE_QUORUM, DESCRIBE_QUORUM_VERSION, {"topics": _topics("topic_name", {})}
    if isinstance(message, FetchSnapshotRequest):
        snapshot_partition = {
            "partition": METADATA_PARTITION,
            "current_leader_epoch": message.current_leader_epoch,
            "snapshot_id": {"end_offset": message.snapshot_id.end_offset, "epoch": message.snapshot_id.epoch},
            "position": message.position,
        }
        snapshot_body = {
            "cluster_id": message.cluster_id,
            "replica_id": message.replica_id,
            "max_bytes": message.max_bytes,
            "topics": [{"name": METADATA_TOPIC, "partitions": [snapshot_partition]}],
        }
        return ApiKey.FETCH_SNAPSHOT, FETCH_SNAPSHOT_VERSION, snapshot_body
    raise TypeError(f"not a request: {message!r}")


# -- inbound requests ----------------------------------------------------------------------------


def _only_partition(body: Mapping[str, Any], version: int = 0, *, fetch: bool = False) -> Mapping[str, Any]:
    topics = body["topics"]
    if len(topics) != 1 or len(topics[0]["partitions"]) != 1:
        raise NotMetadataPartition("expected exactly one topic partition")
    topic = topics[0]
    if fetch and version >= 13:
        named = topic["topic_id"] == METADATA_TOPIC_ID
    else:
        named = topic["topic" if fetch else "topic_name"] == METADATA_TOPIC
    partition = topic["partitions"][0]
    index = partition["partition" if fetch else "partition_index"]
    if not named or index != METADATA_PARTITION:
        raise NotMetadataPartition("not __cluster_metadata-0")
    return partition


def is_metadata_fetch(version: int, body: Mapping[str, Any]) -> bool:
    """Whether a Fetch request is Raft replication of the metadata log (KIP-595 fields, v12+)."""
    if version < FETCH_VERSION:
        return False
    try:
        _only_partition(body, version, fetch=True)
    except NotMetadataPartition:
        return False
    return True


def request_from_wire(api_key: int, version: int, body: Mapping[str, Any]) -> tuple[int, Request]:
    """``(source, message)`` of an inbound request; NotMetadataPartition for another partition,
    InvalidRaftRequest for fields no replica can act on (see the module docstring)."""
    cluster_id = body.get("cluster_id")
    if api_key == ApiKey.VOTE:
        p = _only_partition(body)
        vote = VoteRequest(
            cluster_id, p["candidate_epoch"], p["candidate_id"], p["last_offset_epoch"], p["last_offset"]
        )
        _check_vote(vote)
        return p["candidate_id"], vote
    if api_key == ApiKey.BEGIN_QUORUM_EPOCH:
        p = _only_partition(body)
        _check_replica_id("LeaderId", p["leader_id"])
        return p["leader_id"], BeginQuorumEpochRequest(cluster_id, p["leader_id"], p["leader_epoch"])
    if api_key == ApiKey.END_QUORUM_EPOCH:
        p = _only_partition(body)
        _check_replica_id("LeaderId", p["leader_id"])
        successors = tuple(p["preferred_successors"])
        return p["leader_id"], EndQuorumEpochRequest(
            cluster_id, p["leader_id"], p["leader_id"], p["leader_epoch"], successors
        )
    if api_key == ApiKey.FETCH:
        p = _only_partition(body, version, fetch=True)
        replica_id = body["replica_id"] if version < 15 else body["replica_state"]["replica_id"]
        fetch = FetchRequest(
            cluster_id,
            replica_id,
            body["max_wait_ms"],
            p["current_leader_epoch"],
            p["fetch_offset"],
            p["last_fetched_epoch"],
            max(p["log_start_offset"], 0),
            p["replica_directory_id"].bytes if version >= FETCH_DIRECTORY_VERSION else None,
        )
        _check_fetch(fetch)
        return replica_id, fetch
    if api_key == ApiKey.DESCRIBE_QUORUM:
        _only_partition(body)
        return _ADMIN_SOURCE, DescribeQuorumRequest()
    if api_key == ApiKey.FETCH_SNAPSHOT:
        topics = body["topics"]
        if len(topics) != 1 or len(topics[0]["partitions"]) != 1:
            raise NotMetadataPartition("expected exactly one topic partition")
        p = topics[0]["partitions"][0]
        if topics[0]["name"] != METADATA_TOPIC or p["partition"] != METADATA_PARTITION:
            raise NotMetadataPartition("not __cluster_metadata-0")
        sid = p["snapshot_id"]
        if sid["end_offset"] < 0 or sid["epoch"] < 0 or p["position"] < 0 or body["max_bytes"] <= 0:
            raise InvalidRaftRequest(f"SnapshotId {sid} / Position {p['position']} / MaxBytes {body['max_bytes']}")
        snapshot = FetchSnapshotRequest(
            cluster_id,
            body["replica_id"],
            p["current_leader_epoch"],
            SnapshotId(sid["end_offset"], sid["epoch"]),
            p["position"],
            body["max_bytes"],
        )
        _check_replica_id("ReplicaId", snapshot.replica_id)
        return snapshot.replica_id, snapshot
    raise ValueError(f"api key {api_key} is not a KIP-595 request")


def _check_replica_id(name: str, value: int) -> None:
    if value < 0:
        raise InvalidRaftRequest(f"{name} {value} is negative")


def _check_vote(request: VoteRequest) -> None:
    _check_replica_id("CandidateId", request.candidate_id)
    if request.last_offset < 0 or request.last_offset_epoch < 0:
        raise InvalidRaftRequest(f"LastOffset {request.last_offset} / LastOffsetEpoch {request.last_offset_epoch}")
    if request.last_offset_epoch >= request.candidate_epoch:
        raise InvalidRaftRequest(
            f"LastOffsetEpoch {request.last_offset_epoch} is not below CandidateEpoch {request.candidate_epoch}"
        )


def _check_fetch(request: FetchRequest) -> None:
    if request.replica_id < -1:
        raise InvalidRaftRequest(f"ReplicaId {request.replica_id} is neither a replica nor -1")
    if request.max_wait_time_ms < 0:
        raise InvalidRaftRequest(f"MaxWaitMs {request.max_wait_time_ms} is negative")
    if request.fetch_offset < 0 or request.last_fetched_epoch < 0:
        raise InvalidRaftRequest(f"FetchOffset {request.fetch_offset} / LastFetchedEpoch {request.last_fetched_epoch}")
    if request.last_fetched_epoch > request.current_leader_epoch:
        raise InvalidRaftRequest(
            f"LastFetchedEpoch {request.last_fetched_epoch} is above CurrentLeaderEpoch {request.current_leader_epoch}"
        )


# -- responses -----------------------------------------------------------------------------------


def _replica(state: ReplicaState, directory_ids: Mapping[int, bytes] | None = None) -> dict[str, Any]:
    directory_id = (directory_ids or {}).get(state.replica_id, bytes(16))
    return {
        "replica_id": state.replica_id,
        "replica_directory_id": uuid.UUID(bytes=bytes(directory_id)),
        "log_end_offset": state.log_end_offset,
        "last_fetch_timestamp": state.last_fetch_timestamp,
        "last_caught_up_timestamp": state.last_caught_up_timestamp,
    }


def _nodes(voters: Sequence[VoterSpec]) -> list[dict[str, Any]]:
    """DescribeQuorum v2 ``Nodes``: each voter's controller endpoint (KIP-853)."""
    return [
        {"node_id": v.voter_id, "listeners": [{"name": CONTROLLER_LISTENER_NAME, "host": v.host, "port": v.port}]}
        for v in voters
        if v.port
    ]


def response_to_wire(
    message: Response,
    encode_records: RecordsEncoder | None = None,
    voters: Sequence[VoterSpec] = (),
    observer_directories: Mapping[int, bytes] | None = None,
) -> dict[str, Any]:
    """The wire body answering with ``message`` (``encode_records`` turns Fetch entries to bytes;
    ``voters``: the voter set in effect, whose directory ids and endpoints DescribeQuorum v2 carries)."""
    if isinstance(message, VoteResponse):
        partition = {
            "error_code": _code(message.error_code),
            "leader_id": message.leader_id,
            "leader_epoch": message.leader_epoch,
            "vote_granted": message.vote_granted,
        }
        return {"error_code": _top_level(message.error_code), "topics": _topics("topic_name", partition)}
    if isinstance(message, BeginQuorumEpochResponse | EndQuorumEpochResponse):
        partition = {
            "error_code": _code(message.error_code),
            "leader_id": message.leader_id,
            "leader_epoch": message.leader_epoch,
        }
        return {"error_code": _top_level(message.error_code), "topics": _topics("topic_name", partition)}
    if isinstance(message, FetchResponse):
        return fetch_response_to_wire(message, encode_records)
    if isinstance(message, FetchSnapshotResponse):
        return fetch_snapshot_response_to_wire(message)
    if isinstance(message, DescribeQuorumResponse):
        directory_ids = {v.voter_id: v.directory_id for v in voters}
        quorum: dict[str, Any] = {
            "error_code": _code(message.error_code),
            "leader_id": message.leader_id,
            "leader_epoch": message.leader_epoch,
            "high_watermark": message.high_watermark,
            "current_voters": [_replica(r, directory_ids) for r in message.current_voters],
            "observers": [_replica(r, observer_directories) for r in message.observers],
        }
        return {"error_code": 0, "topics": _topics("topic_name", quorum), "nodes": _nodes(voters)}
    raise TypeError(f"not a response: {message!r}")


def error_response_to_wire(api_key: int, error_code: int, leader_id: int, leader_epoch: int) -> dict[str, Any]:
    """The answer to a request of ``api_key`` that failed with ``error_code`` (partition level, as
    Kafka answers INVALID_REQUEST), carrying this replica's view of the leader and epoch."""
    if api_key == ApiKey.FETCH:
        body = fetch_response_to_wire(
            FetchResponse(ErrorCode.NONE, -1, LeaderIdAndEpoch(leader_id, leader_epoch)), None
        )
        body["responses"][0]["partitions"][0]["error_code"] = error_code
        return body
    if api_key == ApiKey.FETCH_SNAPSHOT:
        body = fetch_snapshot_response_to_wire(
            FetchSnapshotResponse(ErrorCode.NONE, LeaderIdAndEpoch(leader_id, leader_epoch), SnapshotId(0, 0))
        )
        body["topics"][0]["partitions"][0]["error_code"] = error_code
        body["topics"][0]["partitions"][0]["snapshot_id"] = {"end_offset": -1, "epoch": -1}
        return body
    partition: dict[str, Any] = {"error_code": error_code, "leader_id": leader_id, "leader_epoch": leader_epoch}
    if api_key == ApiKey.VOTE:
        partition["vote_granted"] = False
    elif api_key == ApiKey.DESCRIBE_QUORUM:
        partition.update(high_watermark=-1, current_voters=[], observers=[])
        return {"error_code": 0, "topics": _topics("topic_name", partition), "nodes": []}
    elif api_key not in (ApiKey.BEGIN_QUORUM_EPOCH, ApiKey.END_QUORUM_EPOCH):
        raise ValueError(f"api key {api_key} is not a KIP-595 request")
    return {"error_code": 0, "topics": _topics("topic_name", partition)}


def fetch_response_to_wire(message: FetchResponse, encode_records: RecordsEncoder | None) -> dict[str, Any]:
    records = b""
    if message.records:
        if encode_records is None:
            raise ValueError("a Fetch response with records needs a records encoder")
        records = encode_records(message.records)
    diverging = message.diverging_epoch
    partition = {
        "partition_index": METADATA_PARTITION,
        "error_code": _code(message.error_code),
        "high_watermark": message.high_watermark,
        "last_stable_offset": message.high_watermark,
        "log_start_offset": message.log_start_offset,
        "diverging_epoch": {
            "epoch": diverging.epoch if diverging else -1,
            "end_offset": diverging.end_offset if diverging else -1,
        },
        "current_leader": {
            "leader_id": message.current_leader.leader_id,
            "leader_epoch": message.current_leader.leader_epoch,
        },
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": records,
    }
    if message.snapshot_id is not None:
        partition["snapshot_id"] = {"end_offset": message.snapshot_id.end_offset, "epoch": message.snapshot_id.epoch}
    return {
        "throttle_time_ms": 0,
        "error_code": _top_level(message.error_code),
        "session_id": 0,
        "responses": [{"topic": METADATA_TOPIC, "topic_id": METADATA_TOPIC_ID, "partitions": [partition]}],
    }


def fetch_snapshot_response_to_wire(message: FetchSnapshotResponse) -> dict[str, Any]:
    partition = {
        "index": METADATA_PARTITION,
        "error_code": _code(message.error_code),
        "snapshot_id": {"end_offset": message.snapshot_id.end_offset, "epoch": message.snapshot_id.epoch},
        "current_leader": {
            "leader_id": message.current_leader.leader_id,
            "leader_epoch": message.current_leader.leader_epoch,
        },
        "size": max(message.size, 0),
        "position": message.position,
        "unaligned_records": message.data,
    }
    return {
        "throttle_time_ms": 0,
        "error_code": _top_level(message.error_code),
        "topics": [{"name": METADATA_TOPIC, "partitions": [partition]}],
    }


def _response_partition(body: Mapping[str, Any], *, fetch: bool = False) -> tuple[ErrorCode, Mapping[str, Any]]:
    topics = body["responses" if fetch else "topics"] or []
    partition: Mapping[str, Any] = topics[0]["partitions"][0] if topics and topics[0]["partitions"] else {}
    top = body.get("error_code", 0)
    code = top or partition.get("error_code", 0)
    try:
        error = ErrorCode(code)
    except ValueError:
        error = ErrorCode.INVALID_REQUEST  # an error the core has no rule for: a failed request
    return error, partition


def response_from_wire(
    api_key: int, body: Mapping[str, Any], decode_records: Callable[[Any], tuple[Entry, ...]] | None = None
) -> Message:
    """A core response read from the wire answer to ``request_to_wire``'s request."""
    error, p = _response_partition(body, fetch=api_key == ApiKey.FETCH)
    leader_id, leader_epoch = p.get("leader_id", -1), p.get("leader_epoch", -1)
    if api_key == ApiKey.VOTE:
        return VoteResponse(error, leader_id, leader_epoch, bool(p.get("vote_granted", False)))
    if api_key == ApiKey.BEGIN_QUORUM_EPOCH:
        return BeginQuorumEpochResponse(error, leader_id, leader_epoch)
    if api_key == ApiKey.END_QUORUM_EPOCH:
        return EndQuorumEpochResponse(error, leader_id, leader_epoch)
    if api_key == ApiKey.FETCH:
        current = p.get("current_leader") or {"leader_id": -1, "leader_epoch": -1}
        diverging = p.get("diverging_epoch") or {"epoch": -1, "end_offset": -1}
        raw = p.get("records")
        records = decode_records(raw) if raw and decode_records is not None else ()
        return FetchResponse(
            error,
            p.get("high_watermark", -1),
            LeaderIdAndEpoch(current["leader_id"], current["leader_epoch"]),
            EpochEndOffset(diverging["epoch"], diverging["end_offset"]) if diverging["epoch"] >= 0 else None,
            records,
            max(p.get("log_start_offset", 0), 0),
            _snapshot_id(p.get("snapshot_id")),
        )
    if api_key == ApiKey.FETCH_SNAPSHOT:
        current = p.get("current_leader") or {"leader_id": -1, "leader_epoch": -1}
        return FetchSnapshotResponse(
            error,
            LeaderIdAndEpoch(current["leader_id"], current["leader_epoch"]),
            _snapshot_id(p.get("snapshot_id")) or SnapshotId(0, 0),
            p.get("size", -1),
            p.get("position", 0),
            bytes(p.get("unaligned_records") or b""),
        )
    if api_key == ApiKey.DESCRIBE_QUORUM:
        return describe_quorum_from_wire(body)
    raise ValueError(f"api key {api_key} is not a KIP-595 request")


def _snapshot_id(raw: Mapping[str, Any] | None) -> SnapshotId | None:
    if not raw or raw.get("end_offset", -1) < 0 or raw.get("epoch", -1) < 0:
        return None
    return SnapshotId(raw["end_offset"], raw["epoch"])


def describe_quorum_from_wire(body: Mapping[str, Any]) -> DescribeQuorumResponse:
    error, p = _response_partition(body)

    def replicas(key: str) -> tuple[ReplicaState, ...]:
        return tuple(
            ReplicaState(
                r["replica_id"], r["log_end_offset"], r.get("last_fetch_timestamp", -1),
                r.get("last_caught_up_timestamp", -1),
            )
            for r in p.get(key, ())
        )  # fmt: skip

    return DescribeQuorumResponse(
        error,
        p.get("leader_id", -1),
        p.get("leader_epoch", -1),
        p.get("high_watermark", -1),
        replicas("current_voters"),
        replicas("observers"),
    )
