"""KIP-595 "Quorum State" file and the role transition table owned by ``QuorumState``."""

from __future__ import annotations

import random

import pytest

from broker.raft.config import RaftConfig
from broker.raft.effects import EffectBuffer, PersistQuorumState, QuorumStateData
from broker.raft.log import OffsetAndEpoch
from broker.raft.state import IllegalTransitionError, QuorumState

VOTERS = frozenset({1, 2, 3})
EMPTY_LOG = OffsetAndEpoch(0, 0)


def quorum(
    node_id: int = 1, stored: QuorumStateData | None = None, log_end: OffsetAndEpoch = EMPTY_LOG
) -> tuple[QuorumState, EffectBuffer]:
    effects = EffectBuffer()
    qs = QuorumState(
        RaftConfig(node_id=node_id, voters=VOTERS),
        rng=random.Random(1),
        effects=effects,
        stored=stored,
        log_end=log_end,
        now_ms=0,
    )
    return qs, effects


def written(effects: EffectBuffer) -> list[tuple[int, int, int]]:
    return [
        (e.state.leader_id, e.state.leader_epoch, e.state.voted_id)
        for e in effects.drain().persist
        if isinstance(e, PersistQuorumState)
    ]


def test_bootstrap_writes_epoch_zero_without_leader_or_vote() -> None:
    """ "LeaderEpoch is initialized to 0 when the quorum is bootstrapped"; LeaderId/VotedId -1."""
    qs, effects = quorum()
    qs.initialize()
    assert written(effects) == [(-1, 0, -1)]
    assert qs.state.name == "unattached"


def test_every_transition_is_persisted_with_the_file_fields() -> None:
    """LeaderId, LeaderEpoch, VotedId, AppliedOffset, CurrentVoters, written on each transition."""
    qs, effects = quorum()
    qs.transition_to_voted(3, 2, now_ms=0)
    qs.transition_to_follower(3, 2, now_ms=0)
    qs.transition_to_candidate(now_ms=0)
    qs.state.record_vote(2, True)  # type: ignore[attr-defined]
    qs.transition_to_leader(epoch_start_offset=0, now_ms=0)
    qs.transition_to_resigned((2, 3), now_ms=0)
    qs.transition_to_unattached(9, now_ms=0)
    assert written(effects) == [(-1, 3, 2), (2, 3, 2), (-1, 4, 1), (1, 4, 1), (1, 4, 1), (-1, 9, -1)]
    assert qs.snapshot().current_voters == (1, 2, 3)


@pytest.mark.parametrize(
    ("setup", "move"),
    [
        ("voted", lambda qs: qs.transition_to_voted(3, 3, now_ms=0)),  # a second vote in epoch 3
        ("follower", lambda qs: qs.transition_to_follower(3, 3, now_ms=0)),  # two leaders in epoch 3
        ("follower", lambda qs: qs.transition_to_unattached(3, now_ms=0)),  # epoch must grow
        ("follower", lambda qs: qs.transition_to_follower(2, 2, now_ms=0)),  # epoch goes back
        ("follower", lambda qs: qs.transition_to_leader(0, now_ms=0)),  # leader needs a majority
        ("unattached", lambda qs: qs.transition_to_resigned((), now_ms=0)),  # only a leader resigns
        ("unattached", lambda qs: qs.transition_to_observer(5)),  # voters never observe
        ("unattached", lambda qs: qs.transition_to_voted(3, 1, now_ms=0)),  # no vote for oneself here
        ("unattached", lambda qs: qs.transition_to_follower(3, 1, now_ms=0)),  # follow oneself
    ],
)
def test_illegal_transitions_raise(setup: str, move) -> None:  # type: ignore[no-untyped-def]
    qs, effects = quorum()
    if setup == "voted":
        qs.transition_to_voted(3, 2, now_ms=0)
    elif setup == "follower":
        qs.transition_to_follower(3, 2, now_ms=0)
    else:
        qs.transition_to_unattached(3, now_ms=0)
    before = qs.state
    effects.drain()
    with pytest.raises(IllegalTransitionError):
        move(qs)
    assert qs.state is before
    assert not effects.drain().persist


def test_observer_transitions() -> None:
    """Observers (non-voters) are only ever 'observer' or (non-voting) 'follower'."""
    qs, _ = quorum(node_id=7)
    assert qs.state.name == "observer"
    qs.transition_to_follower(2, 1, now_ms=0)
    qs.transition_to_observer(2)  # lost the leader of epoch 2
    with pytest.raises(IllegalTransitionError):
        qs.transition_to_candidate(now_ms=0)
    with pytest.raises(IllegalTransitionError):
        qs.transition_to_unattached(5, now_ms=0)


@pytest.mark.parametrize(
    ("stored", "role"),
    [
        (QuorumStateData(-1, 4, -1, 0, (1, 2, 3)), "unattached"),
        (QuorumStateData(-1, 4, 2, 0, (1, 2, 3)), "voted"),
        (QuorumStateData(-1, 4, 1, 0, (1, 2, 3)), "candidate"),
        (QuorumStateData(2, 4, 2, 0, (1, 2, 3)), "follower"),
        (QuorumStateData(1, 4, 1, 0, (1, 2, 3)), "resigned"),
    ],
)
def test_restart_restores_the_role_from_the_file(stored: QuorumStateData, role: str) -> None:
    """The file "helps initialize the quorum state after a restart" and keeps the vote."""
    qs, _ = quorum(stored=stored)
    assert (qs.state.name, qs.epoch, qs.voted_id) == (role, 4, stored.voted_id if role != "follower" else 2)


def test_log_beyond_the_stored_epoch_is_rejected() -> None:
    with pytest.raises(ValueError, match="beyond"):
        quorum(stored=QuorumStateData(-1, 2, -1, 0, (1, 2, 3)), log_end=OffsetAndEpoch(3, 10))


def test_candidate_timer_survives_a_larger_epoch_without_a_vote() -> None:
    """A voter that moves to a larger epoch without voting keeps its running election timer, so a
    candidate that cannot win does not postpone the elections of those that can."""
    qs, _ = quorum()
    qs.transition_to_unattached(3, now_ms=0)
    deadline = qs.state.timer_deadline_ms()
    qs.transition_to_unattached(4, now_ms=900)
    assert qs.state.timer_deadline_ms() == deadline
