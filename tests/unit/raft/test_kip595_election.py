"""KIP-595 "Vote" (starting an election), "Vote response handling" and the LeaderChange record."""

from __future__ import annotations

from broker.raft.effects import AppendToLog, FlushLog, PersistQuorumState
from broker.raft.log import LeaderChange
from broker.raft.messages import (
    NO_LEADER,
    BeginQuorumEpochRequest,
    ErrorCode,
    VoteRequest,
    VoteResponse,
)
from tests.unit.raft.helpers import (
    CLUSTER,
    deliver,
    elect,
    log_of,
    make_core,
    messages,
    persisted,
    reply,
    sends,
    state,
)


def test_candidate_votes_for_itself_before_asking_for_votes() -> None:
    """ "The voter first votes for itself and updates the quorum state file. Once persisted, it
    becomes a candidate and sends a VoteRequest to all other voters.\""""
    core, _ = make_core(log=log_of(1, 1, 2), stored=state(2))
    result = core.tick(5_000)
    assert core.role == "candidate"
    assert core.epoch == 3
    written = persisted(result)[0]
    assert (written.leader_epoch, written.voted_id, written.leader_id) == (3, 1, -1)
    assert isinstance(result.persist[0], PersistQuorumState)
    requests = messages(result, VoteRequest)
    assert sorted(s.destination for s in sends(result, VoteRequest)) == [2, 3]
    assert {(r.candidate_epoch, r.candidate_id, r.last_offset_epoch, r.last_offset) for r in requests} == {(3, 1, 2, 3)}


def test_election_timeout_is_randomized_from_election_timeout_ms() -> None:
    """ "quorum.election.timeout.ms": an unattached voter waits at least this long, randomized."""
    deadlines = set()
    for seed in range(20):
        core, _ = make_core(seed=seed)
        deadline = core.next_deadline_ms(0)
        assert deadline is not None
        deadlines.add(core.state.timer_deadline_ms())
        assert 1000 <= (core.state.timer_deadline_ms() or 0) < 2000
    assert len(deadlines) > 1


def test_majority_makes_a_leader_that_appends_leader_change_then_begins_the_epoch() -> None:
    """ "If it has a majority, it may update the quorum state file to become leader of the new
    epoch... write the current assignment state to its log (a LeaderChange control record), and
    then begin sending BeginQuorumEpoch requests.\""""
    core, _ = make_core(voters=(1, 2, 3), log=log_of(1, 1), stored=state(1))
    result = core.tick(5_000)
    (vote2, vote3) = sends(result, VoteRequest)
    result = reply(core, vote2, VoteResponse(ErrorCode.NONE, NO_LEADER, core.epoch, True), 5_010)
    assert core.is_leader
    assert core.epoch == 2
    kinds = [type(e) for e in result.persist]
    assert kinds == [PersistQuorumState, AppendToLog, FlushLog]
    assert persisted(result)[0].leader_id == 1
    (entry,) = result.persist[1].entries  # type: ignore[union-attr]
    assert (entry.offset, entry.epoch) == (2, 2)
    assert entry.payload == LeaderChange(leader_id=1, voters=(1, 2, 3), granting_voters=(1, 2))
    assert sorted(s.destination for s in sends(result, BeginQuorumEpochRequest)) == [2, 3]
    # A late vote after winning changes nothing.
    late = reply(core, vote3, VoteResponse(ErrorCode.NONE, NO_LEADER, 2, True), 5_020)
    assert core.is_leader
    assert not late.persist


def test_vote_response_ignored_when_no_longer_candidate() -> None:
    """1. "Check whether the voter is still a candidate... If not, ignore the response.\""""
    core, _ = make_core()
    result = core.tick(5_000)
    request = sends(result, VoteRequest)[0]
    deliver(core, 2, BeginQuorumEpochRequest(CLUSTER, 2, core.epoch), 5_005)
    assert core.role == "follower"
    result = reply(core, request, VoteResponse(ErrorCode.NONE, NO_LEADER, core.epoch, True), 5_010)
    assert core.role == "follower"
    assert not result.persist


def test_response_with_a_larger_epoch_ends_the_candidacy() -> None:
    """Common property 2: every response piggybacks the current leader and epoch."""
    core, _ = make_core()
    request = sends(core.tick(5_000), VoteRequest)[0]
    reply(core, request, VoteResponse(ErrorCode.NONE, 3, 9, False), 5_010)
    assert core.role == "follower"
    assert core.leader_id == 3
    assert core.epoch == 9


def test_failed_election_backs_off_at_most_election_backoff_max_ms() -> None:
    """ "If a voter fails to get a majority before quorum.election.timeout.ms, the vote is deemed
    failed; it backs off per quorum.election.backoff.max.ms before retrying.\""""
    for seed in range(10):
        core, _ = make_core(seed=seed, election_backoff_max_ms=300)
        core.tick(5_000)
        deadline = core.state.timer_deadline_ms()
        assert deadline is not None
        core.tick(deadline)  # election timeout: the candidacy failed
        assert core.role == "candidate"
        assert core.epoch == 1
        backoff_until = core.state.backoff_until_ms  # type: ignore[attr-defined]
        assert deadline < backoff_until <= deadline + 300
        assert not sends(core.tick(backoff_until - 1), VoteRequest)
        result = core.tick(backoff_until)
        assert core.epoch == 2
        assert len(sends(result, VoteRequest)) == 2


def test_two_voter_election_lost_steps_down_at_once() -> None:
    """ "If there are only two voters and the candidate does not get the other's vote (VoteGranted
    false), it need not wait for the election timeout: it can step down and back off at once.\""""
    core, _ = make_core(voters=(1, 2), election_backoff_max_ms=200)
    (request,) = sends(core.tick(5_000), VoteRequest)
    reply(core, request, VoteResponse(ErrorCode.NONE, NO_LEADER, core.epoch, False), 5_010)
    backoff_until = core.state.backoff_until_ms  # type: ignore[attr-defined]
    assert backoff_until is not None
    assert 5_010 < backoff_until <= 5_210
    assert core.state.election_deadline_ms > backoff_until  # type: ignore[attr-defined]
    core.tick(backoff_until)
    assert core.epoch == 2
    assert core.role == "candidate"


def test_inconsistent_cluster_id_in_vote_response_is_a_rejection_not_fatal() -> None:
    """ "An INVALID_CLUSTER_ID error in a Vote response is simply treated as a vote rejection.\""""
    core, _ = make_core(voters=(1, 2))
    (request,) = sends(core.tick(5_000), VoteRequest)
    result = reply(core, request, VoteResponse(ErrorCode.INCONSISTENT_CLUSTER_ID, NO_LEADER, 1, False), 5_010)
    assert core.fatal_error is None
    assert not result.notify
    assert core.state.backoff_until_ms is not None  # type: ignore[attr-defined]


def test_single_voter_elects_itself_on_start() -> None:
    """A quorum of one: the only vote needed is its own."""
    core, _result = make_core(voters=(1,))
    assert core.is_leader
    assert core.epoch == 1
    assert core.high_watermark == 1  # the LeaderChange record is committed at once


def test_restarted_leader_resigns_and_candidate_resumes() -> None:
    """Quorum-state file restore: a leader cannot resume (resigned); a candidate keeps its vote."""
    core, _ = make_core(stored=state(4, leader=1, voted=1))
    assert core.role == "resigned"
    assert core.epoch == 4
    core, result = make_core(stored=state(4, voted=1))
    assert core.role == "candidate"
    assert core.epoch == 4
    assert len(sends(result, VoteRequest)) == 2


def test_elect_helper_sanity() -> None:
    core, _ = make_core()
    elect(core, 0)
    assert core.is_leader
