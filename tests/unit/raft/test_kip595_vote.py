"""KIP-595 "Vote request handling" and the quorum-state file's role in it."""

from __future__ import annotations

import pytest

from broker.raft.effects import PersistQuorumState, Send
from broker.raft.messages import ErrorCode, VoteRequest, VoteResponse
from tests.unit.raft.helpers import CLUSTER, deliver, elect, log_of, make_core, messages, persisted, state


def vote(
    candidate: int, epoch: int, last_epoch: int = 0, end_offset: int = 0, cluster: str | None = CLUSTER
) -> VoteRequest:
    return VoteRequest(cluster, epoch, candidate, last_epoch, end_offset)


def answer(result) -> VoteResponse:  # type: ignore[no-untyped-def]
    (response,) = messages(result, VoteResponse)
    return response


def test_cluster_id_mismatch_rejects_the_vote() -> None:
    """1. "Check the request's clusterId matches the cached local value (if any); if not, reject
    the vote and return INVALID_CLUSTER_ID.\""""
    core, _ = make_core()
    response = answer(deliver(core, 2, vote(2, 1, cluster="other"), 0))
    assert response.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
    assert not response.vote_granted
    assert core.epoch == 0


def test_null_cluster_id_skips_validation() -> None:
    """ "If the clusterId is unknown ... specify null and the receiving broker skips validation.\""""
    core, _ = make_core()
    assert answer(deliver(core, 2, vote(2, 1, cluster=None), 0)).vote_granted


def test_larger_known_epoch_rejects_the_vote() -> None:
    """2. "First check whether an epoch larger than the candidate epoch is known. If so, the vote
    is rejected.\""""
    core, _ = make_core(stored=state(5))
    response = answer(deliver(core, 2, vote(2, 4), 0))
    assert response.error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert not response.vote_granted
    assert response.leader_epoch == 5


def test_only_one_vote_per_epoch() -> None:
    """3. "Check whether it has already voted in the candidate epoch. If so, grant only if the
    candidate id matches the id already voted for; otherwise reject.\""""
    core, _ = make_core(voters=(1, 2, 3, 4))
    assert answer(deliver(core, 2, vote(2, 1), 0)).vote_granted
    assert not answer(deliver(core, 3, vote(3, 1), 1)).vote_granted
    assert answer(deliver(core, 2, vote(2, 1), 2)).vote_granted  # a retried request is re-granted
    assert core.voted_id == 2


def test_vote_is_persisted_before_the_response() -> None:
    """4.b "If yes, first update the quorum state file, and then return a response with
    voteGranted=yes.\" (The persist effects run before the step's sends: see effects.)"""
    core, _ = make_core()
    result = deliver(core, 2, vote(2, 3), 0)
    (written,) = [s for s in persisted(result) if s.voted_id == 2]
    assert (written.leader_epoch, written.voted_id, written.leader_id) == (3, 2, -1)
    assert isinstance(result.persist[-1], PersistQuorumState)
    assert [type(s) for s in result.send] == [Send]
    assert answer(result).vote_granted


def test_vote_is_never_granted_twice_across_restarts() -> None:
    """ "The Raft protocol forbids a voter from changing its vote, so this state must be kept
    across restarts.\""""
    core, _ = make_core(voters=(1, 2, 3, 4))
    result = deliver(core, 2, vote(2, 7), 0)
    stored = persisted(result)[-1]
    restarted, _ = make_core(voters=(1, 2, 3, 4), stored=stored, seed=99)
    assert restarted.role == "voted"
    assert restarted.voted_id == 2
    assert not answer(deliver(restarted, 3, vote(3, 7), 10)).vote_granted
    assert answer(deliver(restarted, 2, vote(2, 7), 10)).vote_granted


@pytest.mark.parametrize(
    ("candidate_last_epoch", "candidate_end", "granted"),
    [
        (3, 1, True),  # a later last epoch wins even with a shorter log
        (2, 5, True),  # same last epoch, longer log
        (2, 4, True),  # identical logs: "at least as up to date"
        (2, 3, False),  # same last epoch, shorter log
        (1, 9, False),  # an earlier last epoch loses even with a longer log
    ],
)
def test_log_up_to_date_comparison(candidate_last_epoch: int, candidate_end: int, granted: bool) -> None:
    """ "If the last entries have different epochs, the log with the later epoch is more up to date;
    if they end with the same epoch, the longer log is more up to date.\""""
    core, _ = make_core(stored=state(2), log=log_of(1, 1, 2, 2))  # last epoch 2, end offset 4
    response = answer(deliver(core, 2, vote(2, 3, candidate_last_epoch, candidate_end), 0))
    assert response.vote_granted is granted
    assert core.epoch == 3  # the larger epoch is adopted either way


def test_candidate_outside_the_voter_set_is_rejected_and_triggers_an_election() -> None:
    """4.a "Check CandidateId is one of the expected voters; if not, reject the vote. The voter
    should accept the epoch bump and itself start a new election.\""""
    core, _ = make_core()
    result = deliver(core, 9, vote(9, 4), 0)
    response = answer(result)
    assert response.error_code == ErrorCode.INCONSISTENT_VOTER_SET
    assert not response.vote_granted
    assert core.role == "candidate"
    assert core.epoch == 5
    assert {m.candidate_epoch for m in messages(result, VoteRequest)} == {5}


def test_larger_epoch_makes_a_leader_step_down_and_vote() -> None:
    """ "On receiving a vote request with a larger candidate epoch, it may grant the vote while
    transitioning back to voter state, since a new leader may be elected in the new epoch.\""""
    core, _ = make_core()
    elect(core, 0)
    assert core.is_leader
    epoch = core.epoch
    response = answer(deliver(core, 2, vote(2, epoch + 1, epoch, core.log.end_offset), 20_000))
    assert response.vote_granted
    assert not core.is_leader
    assert core.voted_id == 2


def test_observer_does_not_vote() -> None:
    """Observer: "a replica that is not eligible to vote and cannot become leader"."""
    core, _ = make_core(node_id=7)
    response = answer(deliver(core, 2, vote(2, 1), 0))
    assert not response.vote_granted
    assert response.error_code == ErrorCode.INCONSISTENT_VOTER_SET
