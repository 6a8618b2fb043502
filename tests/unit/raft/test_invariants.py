"""``broker.raft.invariants``: the safety facts a replica checks on itself after every step.

KIP-595 keeps Raft's safety properties (one leader per epoch, a vote granted once per epoch, the
quorum state durable before a reply: "persist before you reply"); each check below is shown to
pass on a legal step and to stop the node on the broken one.
"""

from __future__ import annotations

import pytest

from broker.raft.effects import AppendToLog, FlushLog, PersistQuorumState, QuorumStateData, StepResult
from broker.raft.invariants import RaftInvariantError, ReplicaView, StepInvariants
from broker.raft.log import Entry

ME = 1
VOTERS = (1, 2, 3)


def view(
    leader: int = -1, epoch: int = 1, voted: int = -1, *, leader_role: bool = False, hw: int = 0, end: int = 0
) -> ReplicaView:
    return ReplicaView(QuorumStateData(leader, epoch, voted, hw, VOTERS), leader_role, hw, end)


def persisting(state: ReplicaView, *more: object) -> StepResult:
    """A step that persists ``state``'s quorum state (then ``more`` persist effects)."""
    return StepResult(persist=[PersistQuorumState(state.state), *more])  # type: ignore[list-item]


def checks(start: ReplicaView | None = None) -> StepInvariants:
    return StepInvariants(ME, start or view())


def test_a_legal_election_passes() -> None:
    inv = checks()
    steps = [
        view(-1, 2, ME),  # candidate of epoch 2, votes for itself
        view(ME, 2, ME, leader_role=True),  # elected
    ]
    for state in steps:
        inv.after_step(state, persisting(state))
    entries = (Entry(0, 2, b"x"),)
    grown = view(ME, 2, ME, leader_role=True, end=1)
    inv.after_step(grown, StepResult(persist=[AppendToLog(entries), FlushLog(1)]))
    committed = view(ME, 2, ME, leader_role=True, end=1, hw=1)
    inv.after_step(committed, StepResult())  # the high watermark moves without a quorum-state write


def test_a_vote_cleared_on_becoming_a_follower_of_the_same_epoch_passes() -> None:
    inv = checks()
    for state in (view(-1, 2, 3), view(3, 2, -1), view(3, 2, 3)):
        inv.after_step(state, persisting(state))


def test_the_epoch_never_goes_down() -> None:
    inv = checks(view(epoch=5))
    with pytest.raises(RaftInvariantError, match="epoch went from 5 down to 4"):
        inv.after_step(view(epoch=4), persisting(view(epoch=4)))


def test_one_vote_per_epoch() -> None:
    inv = checks()
    inv.after_step(view(-1, 2, 3), persisting(view(-1, 2, 3)))
    inv.after_step(view(-1, 2, -1), persisting(view(-1, 2, -1)))
    with pytest.raises(RaftInvariantError, match="voted for 3 and then 2 in epoch 2"):
        inv.after_step(view(-1, 2, 2), persisting(view(-1, 2, 2)))


def test_one_leader_per_epoch() -> None:
    inv = checks()
    inv.after_step(view(3, 2), persisting(view(3, 2)))
    with pytest.raises(RaftInvariantError, match="has the leader 3 and then 2 in epoch 2"):
        inv.after_step(view(2, 2), persisting(view(2, 2)))


def test_a_leader_names_itself() -> None:
    inv = checks()
    with pytest.raises(RaftInvariantError, match="is the leader of epoch 2 but names 3"):
        inv.after_step(view(3, 2, leader_role=True), persisting(view(3, 2, leader_role=True)))


def test_the_high_watermark_never_goes_down_nor_past_the_log_end() -> None:
    inv = checks(view(3, 2, end=5, hw=4))
    with pytest.raises(RaftInvariantError, match="high watermark went from 4 down to 3"):
        inv.after_step(view(3, 2, end=5, hw=3), StepResult())
    inv = checks(view(3, 2, end=5, hw=4))
    with pytest.raises(RaftInvariantError, match="high watermark 6 is beyond the log end 5"):
        inv.after_step(view(3, 2, end=5, hw=6), StepResult())


def test_a_new_vote_must_be_persisted_in_its_step() -> None:
    inv = checks()
    with pytest.raises(RaftInvariantError, match="persists"):
        inv.after_step(view(-1, 2, 3), StepResult())  # voted in memory only


def test_a_grown_log_must_be_flushed_in_its_step() -> None:
    inv = checks(view(3, 2))
    with pytest.raises(RaftInvariantError, match="leaves the log end at 1 but flushes it at 0"):
        inv.after_step(view(3, 2, end=1), StepResult(persist=[AppendToLog((Entry(0, 2, b"x"),))]))


def test_the_error_is_an_assertion_the_driver_treats_as_fatal() -> None:
    assert issubclass(RaftInvariantError, AssertionError)
