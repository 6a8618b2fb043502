"""KIP-595 "EndQuorumEpoch": graceful resignation with preferred successors."""

from __future__ import annotations

import pytest

from broker.raft.election import end_quorum_epoch_backoff_ms
from broker.raft.messages import EndQuorumEpochRequest, EndQuorumEpochResponse, ErrorCode, VoteRequest
from tests.unit.raft.helpers import CLUSTER, deliver, elect, fetch, follow, make_core, messages, reply, state


def end(leader: int, epoch: int, successors: tuple[int, ...]) -> EndQuorumEpochRequest:
    return EndQuorumEpochRequest(CLUSTER, leader, leader, epoch, successors)


def answer(result) -> EndQuorumEpochResponse:  # type: ignore[no-untyped-def]
    (response,) = messages(result, EndQuorumEpochResponse)
    return response


def test_resigning_leader_names_successors_by_replication_offset() -> None:
    """ "The leader defines a list of preferred successors sorted by each voter's current
    replication offset in descending order" and sends EndQuorumEpoch to all voters."""
    core, _ = make_core(voters=(1, 2, 3, 4))
    elect(core, 0)
    core.append([b"a", b"b", b"c"], 10_010)
    deliver(core, 2, fetch(2, core.epoch, 2, core.epoch), 10_020)
    deliver(core, 4, fetch(4, core.epoch, 4, core.epoch), 10_030)
    result = core.resign(10_040)
    assert core.role == "resigned"
    requests = messages(result, EndQuorumEpochRequest)
    assert sorted(s.destination for s in result.send) == [2, 3, 4]
    assert {r.preferred_successors for r in requests} == {(4, 2, 3)}
    assert {(r.leader_id, r.leader_epoch, r.replica_id) for r in requests} == {(1, core.epoch, 1)}


def test_first_successor_becomes_candidate_at_once() -> None:
    """ "If the node has the highest priority it becomes a candidate immediately, without waiting
    for the election timeout"; it updates the quorum state file before collecting votes."""
    core, _ = make_core(node_id=2)
    follow(core, 1, 4, 0)
    result = deliver(core, 1, end(1, 4, (2, 3)), 10)
    assert answer(result).error_code == ErrorCode.NONE
    assert core.role == "candidate"
    assert core.epoch == 5
    assert len(messages(result, VoteRequest)) == 2


@pytest.mark.parametrize(("position", "backoff"), [(1, 20), (2, 40), (3, 80), (7, 1000), (12, 1000)])
def test_later_successors_wait_the_exponential_backoff(position: int, backoff: int) -> None:
    """ "For a successor with priority N > 0, the next election timeout is
    MIN(retryBackOffMaxMs, retryBackoffMs * 2^(N - 1)).\""""
    voters = tuple(range(1, 15))
    successors = tuple(range(2, 15))  # node 2 + position has index ``position``
    node = successors[position]
    core, _ = make_core(node_id=node, voters=voters, stored=state(3, voters=voters))
    follow(core, 1, 4, 0)
    deliver(core, 1, end(1, 4, successors), 100)
    assert end_quorum_epoch_backoff_ms(core.config, position) == backoff
    assert core.role == "follower"
    core.tick(100 + backoff - 1)
    assert core.role == "follower"
    core.tick(100 + backoff)
    assert core.role == "candidate"


def test_voter_missing_from_successors_answers_inconsistent_voter_set() -> None:
    """ "The voter checks whether it is in the given PreferredSuccessors; if not, it returns
    INCONSISTENT_VOTER_SET.\""""
    core, _ = make_core(node_id=3)
    follow(core, 1, 4, 0)
    assert answer(deliver(core, 1, end(1, 4, (2,)), 10)).error_code == ErrorCode.INCONSISTENT_VOTER_SET
    assert core.role == "follower"


def test_older_epoch_or_unknown_leader_is_rejected() -> None:
    """ "If the epoch is smaller than the last known epoch, or the leader id of this epoch is
    unknown, the request is rejected.\""""
    core, _ = make_core(node_id=2, stored=state(6))
    assert answer(deliver(core, 1, end(1, 5, (2,)), 0)).error_code == ErrorCode.FENCED_LEADER_EPOCH
    unknown = EndQuorumEpochRequest(CLUSTER, 1, -1, 6, (2,))
    assert answer(deliver(core, 1, unknown, 1)).error_code != ErrorCode.NONE
    assert core.role == "unattached"


def test_resigned_leader_follows_a_newer_leader_from_the_response() -> None:
    """Response handling: "if the error says a newer leader exists, become its follower while
    updating the quorum state file.\""""
    core, _ = make_core(voters=(1, 2))
    elect(core, 0)
    result = core.resign(10_010)
    (request,) = result.send
    reply(core, request, EndQuorumEpochResponse(ErrorCode.FENCED_LEADER_EPOCH, 2, core.epoch + 1), 10_020)
    assert core.role == "follower"
    assert core.leader_id == 2


def test_resign_on_a_non_leader_does_nothing() -> None:
    core, _ = make_core()
    assert core.resign(0).is_empty()
