"""KIP-595 "Fetch": epoch validation, long polling, follower timeouts, finding the leader."""

from __future__ import annotations

import pytest

from broker.raft.messages import (
    NO_LEADER,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    VoteRequest,
)
from tests.unit.raft.helpers import (
    CLUSTER,
    deliver,
    elect,
    fetch,
    fetch_response,
    follow,
    make_core,
    messages,
    reply,
    sends,
    state,
)

T = 10_050


@pytest.mark.parametrize(
    ("request_epoch", "error"),
    [(0, ErrorCode.FENCED_LEADER_EPOCH), (2, ErrorCode.UNKNOWN_LEADER_EPOCH), (1, ErrorCode.NONE)],
)
def test_leader_checks_the_request_epoch(request_epoch: int, error: ErrorCode) -> None:
    """2. "Check that the request's leader epoch equals the locally cached one; otherwise reject
    with FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH.\""""
    core, _ = make_core()
    elect(core, 0)
    response = fetch_response(deliver(core, 2, fetch(2, request_epoch, 0, 0), T))
    assert response.error_code == error
    assert response.current_leader == LeaderIdAndEpoch(1, 1)  # piggybacked on every response


def test_non_leader_answers_not_leader_with_the_leader_it_knows() -> None:
    """ "A non-leader receiving a Fetch returns an error saying it is no longer the leader, and
    also encodes the currently known leader id and epoch.\""""
    core, _ = make_core(node_id=2)
    follow(core, 1, 3, 0)
    response = fetch_response(deliver(core, 9, fetch(9, 3, 0, 0), 1))
    assert response.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert response.current_leader == LeaderIdAndEpoch(1, 3)


def test_cluster_id_mismatch_is_fatal_only_from_the_elected_leader() -> None:
    """ "Only when the broker's value conflicts with the elected leader's is a cluster-id mismatch
    fatal... the same error in Fetch is considered fatal" (from the leader); from another voter
    the fetcher keeps retrying elsewhere."""
    core, _ = make_core(node_id=2)
    (request,) = sends(follow(core, 1, 3, 0), FetchRequest)
    not_leader = FetchResponse(ErrorCode.INCONSISTENT_CLUSTER_ID, -1, LeaderIdAndEpoch(NO_LEADER, 3))
    reply(core, request, not_leader, 1)
    assert core.fatal_error is None
    request = sends(core.tick(100), FetchRequest)[0]
    leader_says = FetchResponse(ErrorCode.INCONSISTENT_CLUSTER_ID, -1, LeaderIdAndEpoch(1, 3))
    result = reply(core, request, leader_says, 101)
    assert core.fatal_error is not None
    assert core.fatal_error in result.notify


def test_leader_rejects_a_fetch_with_another_cluster_id() -> None:
    """1. "Check that the clusterId, if not null, matches the cached value in meta.properties.\""""
    core, _ = make_core()
    elect(core, 0)
    request = FetchRequest("another", 2, 0, 1, 0, 0)
    assert fetch_response(deliver(core, 2, request, T)).error_code == ErrorCode.INCONSISTENT_CLUSTER_ID


def test_fetch_with_nothing_new_is_parked_until_records_arrive() -> None:
    """A leader holds a caught-up fetch (long poll, MaxWaitTimeMs) and answers it when records
    are appended, so followers neither spin nor wait a whole fetch interval."""
    core, _ = make_core()
    elect(core, 0)
    deliver(core, 2, fetch(2, 1, 1, 1, max_wait_ms=500), T)  # first answer carries the HW
    result = deliver(core, 2, fetch(2, 1, 1, 1, max_wait_ms=500), T + 1, correlation_id=8)
    assert not messages(result, FetchResponse)  # parked
    result = core.append([b"x"], T + 50).step
    response = fetch_response(result)
    assert [e.payload for e in response.records] == [b"x"]
    assert result.send[0].correlation_id == 8


def test_parked_fetch_expires_after_max_wait() -> None:
    core, _ = make_core()
    elect(core, 0)
    deliver(core, 2, fetch(2, 1, 1, 1, max_wait_ms=300), T)
    deliver(core, 2, fetch(2, 1, 1, 1, max_wait_ms=300), T + 1)
    assert core.next_deadline_ms(T + 1) == T + 301
    response = fetch_response(core.tick(T + 301))
    assert response.records == ()
    assert response.error_code == ErrorCode.NONE


def test_follower_without_leader_contact_for_fetch_timeout_becomes_candidate() -> None:
    """Vote condition 1: "it fails to receive a FetchResponse from the current leader before
    quorum.fetch.timeout.ms expires.\""""
    core, _ = make_core(node_id=2, fetch_timeout_ms=2000)
    follow(core, 1, 3, 0)
    core.tick(1999)
    assert core.role == "follower"
    result = core.tick(2000)
    assert core.role == "candidate"
    assert core.epoch == 4
    assert len(messages(result, VoteRequest)) == 2


def test_successful_fetch_response_resets_the_fetch_timeout() -> None:
    core, _ = make_core(node_id=2)
    (request,) = sends(follow(core, 1, 3, 0), FetchRequest)
    reply(core, request, FetchResponse(ErrorCode.NONE, 0, LeaderIdAndEpoch(1, 3)), 1500)
    core.tick(3000)
    assert core.role == "follower"
    core.tick(3500)
    assert core.role == "candidate"


def test_fenced_response_names_the_new_leader_which_the_follower_adopts() -> None:
    """Response step 1: "If the response has FENCED_LEADER_EPOCH, check the leaderId in the
    response. If defined, update the quorum state file and become a follower of that leader.\""""
    core, _ = make_core(node_id=2)
    (request,) = sends(follow(core, 1, 3, 0), FetchRequest)
    result = reply(core, request, FetchResponse(ErrorCode.FENCED_LEADER_EPOCH, -1, LeaderIdAndEpoch(3, 5)), 10)
    assert core.leader_id == 3
    assert core.epoch == 5
    assert [s.destination for s in sends(result, FetchRequest)] == [3]


def test_observer_finds_the_leader_by_fetching_random_voters() -> None:
    """ "On start-up, an observer sends fetch requests to random voters until it finds the new
    leader"; the answer of a non-leader names the leader."""
    core, result = make_core(node_id=9, voters=(1, 2, 3))
    assert core.role == "observer"
    (first,) = sends(result, FetchRequest)
    assert first.destination in (1, 2, 3)
    result = reply(core, first, FetchResponse(ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, LeaderIdAndEpoch(2, 4)), 5)
    assert core.role == "observer"
    assert core.leader_id == 2
    assert core.epoch == 4
    assert [s.destination for s in sends(result, FetchRequest)] == [2]
    assert core.quorum_state_data().leader_id == 2
    assert core.metrics(5)["current-state"] == "observer"


def test_observer_keeps_searching_without_a_leader_and_never_votes() -> None:
    """Observers "retry indefinitely" and never become candidates."""
    core, result = make_core(node_id=9, voters=(1, 2, 3))
    targets = set()
    now = 0
    for _ in range(30):
        for request in sends(result, FetchRequest):
            targets.add(request.destination)
            result = reply(
                core, request, FetchResponse(ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, LeaderIdAndEpoch(-1, 0)), now
            )
        now = max(now + 1, core.next_deadline_ms(now) or now + 1)
        result = core.tick(now)
    assert targets == {1, 2, 3}
    assert core.role == "observer"


def test_observer_returns_to_searching_after_fetch_timeout() -> None:
    core, result = make_core(node_id=9, voters=(1, 2, 3))
    (first,) = sends(result, FetchRequest)
    reply(core, first, FetchResponse(ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, LeaderIdAndEpoch(2, 4)), 5)
    core.tick(5 + 2000)
    assert core.role == "observer"
    assert core.leader_id == NO_LEADER
    assert core.epoch == 4


def test_unattached_voter_discovers_an_existing_leader_through_fetch() -> None:
    """Voter start-up (bootstrapping): "send Fetch to the current voters with the last known
    epoch...; keep retrying random voters until the election timeout expires.\""""
    core, result = make_core(node_id=3, stored=state(2))
    (first,) = sends(result, FetchRequest)
    assert first.message.current_leader_epoch == 2  # type: ignore[union-attr]
    reply(core, first, FetchResponse(ErrorCode.FENCED_LEADER_EPOCH, -1, LeaderIdAndEpoch(1, 6)), 5)
    assert core.role == "follower"
    assert core.leader_id == 1
    assert core.epoch == 6


def test_duplicate_or_stale_responses_are_ignored() -> None:
    """Only the response to the request in flight is used (matched by correlation id)."""
    core, _ = make_core(node_id=2)
    (request,) = sends(follow(core, 1, 3, 0), FetchRequest)
    response = FetchResponse(ErrorCode.NONE, 0, LeaderIdAndEpoch(1, 3), None, ())
    reply(core, request, response, 1)
    dup = reply(core, request, response, 2)
    assert not dup.persist
    assert not dup.send
    assert deliver(core, 1, response, 3, correlation_id=12345).is_empty()
    assert CLUSTER
