"""``broker.raft.rpc.request_from_wire`` refuses what Kafka's KafkaRaftClient answers
INVALID_REQUEST before its state machine sees it (review finding 3), and accepts the boundary
values real replicas send; ``error_response_to_wire`` answers with the replica's leader and epoch."""

from __future__ import annotations

from typing import Any

import pytest

from broker.raft.messages import (
    BeginQuorumEpochRequest,
    DescribeQuorumRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    Request,
    VoteRequest,
)
from broker.raft.rpc import InvalidRaftRequest, error_response_to_wire, request_from_wire, request_to_wire
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.registry import decode_response_body, encode_response_body

C = "rpc-cluster"


def round_trip(message: Request) -> tuple[int, Request]:
    api_key, version, body = request_to_wire(message)
    return request_from_wire(api_key, version, body)


@pytest.mark.parametrize(
    "message",
    [
        FetchRequest(C, 2, 500, 3, -1, 0),
        FetchRequest(C, 2, 500, 3, 0, -1),
        FetchRequest(C, 2, -1, 3, 0, 0),
        FetchRequest(C, 2, 500, 3, 10, 4),
        FetchRequest(C, -2, 500, 3, 0, 0),
        FetchRequest(C, 2, 500, -1, 0, 0),  # any LastFetchedEpoch is above CurrentLeaderEpoch -1
        VoteRequest(C, 4, -1, 3, 10),
        VoteRequest(C, 4, 2, -1, 10),
        VoteRequest(C, 4, 2, 3, -1),
        VoteRequest(C, 4, 2, 4, 10),
        VoteRequest(C, 4, 2, 5, 10),
        VoteRequest(C, -5, 2, 0, 0),
        BeginQuorumEpochRequest(C, -1, 4),
        EndQuorumEpochRequest(C, -3, -3, 4, (1, 2)),
    ],
    ids=repr,
)
def test_invalid_fields_are_refused(message: Request) -> None:
    with pytest.raises(InvalidRaftRequest):
        round_trip(message)


@pytest.mark.parametrize(
    ("message", "source"),
    [
        (FetchRequest(C, 2, 500, 3, 10, 3), 2),
        (FetchRequest(C, 2, 0, 0, 0, 0), 2),  # a new replica before it knows any epoch
        (FetchRequest(C, -1, 0, 3, 0, 0), -1),  # a reader that is not a replica
        (FetchRequest(C, 2, 500, 2, 0, 0), 2),  # an old epoch: the core answers FENCED_LEADER_EPOCH
        (VoteRequest(C, 1, 2, 0, 0), 2),  # a candidate with an empty log
        (VoteRequest(C, 4, 2, 3, 10), 2),
        (VoteRequest(C, 2, 2, 1, 0), 2),  # an old epoch: the core answers FENCED_LEADER_EPOCH
        (BeginQuorumEpochRequest(C, 2, 4), 2),
        (EndQuorumEpochRequest(C, 2, 2, 4, ()), 2),
        (DescribeQuorumRequest(), -1),
    ],
    ids=repr,
)
def test_valid_requests_pass_unchanged(message: Request, source: int) -> None:
    assert round_trip(message) == (source, message)


@pytest.mark.parametrize(
    ("api_key", "version"),
    [
        (ApiKey.VOTE, 0),
        (ApiKey.BEGIN_QUORUM_EPOCH, 0),
        (ApiKey.END_QUORUM_EPOCH, 0),
        (ApiKey.FETCH, 12),
        (ApiKey.FETCH, 13),
        (ApiKey.DESCRIBE_QUORUM, 1),
    ],
)
def test_error_answers_encode_and_carry_leader_and_epoch(api_key: int, version: int) -> None:
    body = error_response_to_wire(api_key, 42, 3, 7)
    decoded: Any = decode_response_body(api_key, version, encode_response_body(api_key, version, body))
    if api_key == ApiKey.FETCH:
        partition = decoded["responses"][0]["partitions"][0]
        assert (partition["current_leader"]["leader_id"], partition["current_leader"]["leader_epoch"]) == (3, 7)
        assert partition["records"] in (b"", None)
    else:
        partition = decoded["topics"][0]["partitions"][0]
        assert (partition["leader_id"], partition["leader_epoch"]) == (3, 7)
    assert partition["error_code"] == 42
    assert decoded["error_code"] == 0


def test_error_answer_for_another_api_is_refused() -> None:
    with pytest.raises(ValueError, match="not a KIP-595 request"):
        error_response_to_wire(ApiKey.PRODUCE, 42, 1, 1)
