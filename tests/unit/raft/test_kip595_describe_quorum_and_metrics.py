"""KIP-595 "DescribeQuorum" and "Metrics"."""

from __future__ import annotations

from broker.raft.messages import (
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    ErrorCode,
    ReplicaState,
    VoteRequest,
    VoteResponse,
)
from tests.unit.raft.helpers import deliver, elect, fetch, follow, make_core, messages, reply, sends

T = 10_000


def test_leader_describes_replication_progress() -> None:
    """ "Build the response using the current assignment and the cached replication progress":
    leader id and epoch, high watermark, per voter/observer log end offset (and fetch times)."""
    core, _ = make_core(voters=(1, 2, 3))
    elect(core, 0)
    core.append([b"a", b"b"], T + 10)  # log end 3
    deliver(core, 2, fetch(2, 1, 3, 1), T + 20)
    deliver(core, 9, fetch(9, 1, 1, 1), T + 30)
    (response,) = messages(deliver(core, -1, DescribeQuorumRequest(), T + 40), DescribeQuorumResponse)
    assert (response.error_code, response.leader_id, response.leader_epoch) == (ErrorCode.NONE, 1, 1)
    assert response.high_watermark == 3
    assert response.current_voters == (
        ReplicaState(1, 3, T + 40, T + 40),
        ReplicaState(2, 3, T + 20, T + 20),
        ReplicaState(3, -1, -1, -1),
    )
    assert response.observers == (ReplicaState(9, 1, T + 30, -1),)


def test_caught_up_time_is_when_the_replica_reached_the_leader_end() -> None:
    """``last_caught_up_timestamp``: the last time the replica had all the leader had then."""
    core, _ = make_core()
    elect(core, 0)
    deliver(core, 2, fetch(2, 1, 1, 1), T + 10)  # caught up at T+10
    core.append([b"a"], T + 20)
    deliver(core, 2, fetch(2, 1, 1, 1), T + 30)  # behind: still caught up as of T+10
    assert core.describe_quorum(T + 30).current_voters[1].last_caught_up_timestamp == T + 10
    deliver(core, 2, fetch(2, 1, 2, 1), T + 40)  # reached the end it was shown at T+30
    assert core.describe_quorum(T + 40).current_voters[1].last_caught_up_timestamp == T + 40


def test_non_leader_returns_an_error_with_the_leader_it_knows() -> None:
    """1. "If the node is not the leader, return an error so the client can retry; include
    LeaderId and LeaderEpoch if the leader is known.\""""
    core, _ = make_core(node_id=2)
    follow(core, 1, 3, 0)
    (response,) = messages(deliver(core, -1, DescribeQuorumRequest(), 1), DescribeQuorumResponse)
    assert response.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (response.leader_id, response.leader_epoch) == (1, 3)


def test_metrics_gauges() -> None:
    """current-leader (-1 unknown), current-epoch, current-vote (-1 none), current-state,
    log-end-offset, log-end-epoch, high-watermark."""
    core, _ = make_core(node_id=2)
    metrics = core.metrics(0)
    assert (metrics["current-leader"], metrics["current-epoch"], metrics["current-vote"]) == (-1, 0, -1)
    assert metrics["current-state"] == "unattached"
    follow(core, 1, 3, 0)
    metrics = core.metrics(1)
    assert (metrics["current-leader"], metrics["current-epoch"], metrics["current-state"]) == (1, 3, "follower")
    assert (metrics["log-end-offset"], metrics["log-end-epoch"], metrics["high-watermark"]) == (0, 0, 0)


def test_election_and_commit_latency() -> None:
    """election-latency: "from becoming a candidate until learning or becoming the new leader";
    commit-latency: "on the leader, from appending a record until the high watermark passes it".
    """
    core, _ = make_core()
    result = core.tick(5_000)
    assert core.metrics(5_000)["current-state"] == "candidate"
    request = sends(result, VoteRequest)[0]
    reply(core, request, VoteResponse(ErrorCode.NONE, -1, 1, True), 5_040)
    metrics = core.metrics(5_040)
    assert metrics["election-latency-avg"] == 40
    assert metrics["election-latency-max"] == 40
    core.append([b"a"], 5_100)
    deliver(core, 2, fetch(2, 1, 2, 1), 5_130)
    metrics = core.metrics(5_130)
    assert core.high_watermark == 2
    assert metrics["commit-latency-max"] == 90  # the LeaderChange record, appended at 5_040
    assert metrics["append-records-rate"] > 0
