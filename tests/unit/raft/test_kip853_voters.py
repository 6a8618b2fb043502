"""KIP-853 "Dynamic quorum": the voter set as replicated state (``VotersRecord``, control type 6)
and the leader's AddRaftVoter / RemoveRaftVoter rules, with Kafka's error codes."""

from __future__ import annotations

from broker.raft.core import RaftCore
from broker.raft.log import Entry, VoterSpec, VotersRecord
from broker.raft.messages import (
    EndQuorumEpochRequest,
    EpochEndOffset,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
)
from broker.raft.store import decode_entry, encode_entry
from tests.unit.raft.helpers import deliver, elect, fetch, make_core, reply, sends, state

T = 10_050  # just after the election of ``elect``
BOOTSTRAP = VotersRecord(tuple(VoterSpec(v, bytes([v]) * 16, "localhost", 9090 + v) for v in (1, 2, 3)))


def dynamic_leader() -> RaftCore:
    """Voter 1 of a quorum formatted with ``--initial-controllers`` (1, 2, 3), elected in epoch 1:
    its log holds LeaderChange at 0 and the bootstrap VotersRecord at 1."""
    core, _ = make_core(node_id=1, bootstrap_voters=BOOTSTRAP)  # type: ignore[arg-type]
    elect(core, 0)
    assert isinstance(core.log.entry(1).payload, VotersRecord)
    return core


def test_voters_record_round_trips_as_a_kraft_voters_control_batch() -> None:
    entry = Entry(5, 2, BOOTSTRAP)
    assert decode_entry(encode_entry(entry, 0))[0] == entry


def test_add_voter_needs_a_commit_in_the_epoch_a_caught_up_observer_and_a_new_id() -> None:
    core = dynamic_leader()
    spec = VoterSpec(4, b"\x04" * 16, "localhost", 9094)
    assert core.add_voter(spec, T).error_code == ErrorCode.REQUEST_TIMED_OUT  # nothing committed yet
    deliver(core, 2, fetch(2, 1, 2, 1), T)
    assert core.high_watermark == 2
    assert core.add_voter(spec, T).error_code == ErrorCode.REQUEST_TIMED_OUT  # 4 never fetched
    assert core.add_voter(VoterSpec(2, b"\x02" * 16), T).error_code == ErrorCode.DUPLICATE_VOTER
    deliver(core, 4, fetch(4, 1, 2, 1), T + 1, correlation_id=8)  # observer 4, caught up
    result = core.add_voter(spec, T + 2)
    assert result.error_code == ErrorCode.NONE
    assert result.append is not None
    assert result.append.last_offset == 2
    assert core.voters == frozenset({1, 2, 3, 4})  # in effect once appended
    # One change at a time: the next waits until this one is committed.
    assert core.remove_voter(3, None, T + 2).error_code == ErrorCode.REQUEST_TIMED_OUT
    deliver(core, 2, fetch(2, 1, 3, 1), T + 3, correlation_id=9)
    assert core.high_watermark == 2  # leader + 2 of 4 voters is not a majority
    deliver(core, 4, fetch(4, 1, 3, 1), T + 4, correlation_id=10)
    assert core.high_watermark == 3
    assert core.remove_voter(9, None, T + 5).error_code == ErrorCode.VOTER_NOT_FOUND
    assert core.remove_voter(3, b"\x09" * 16, T + 5).error_code == ErrorCode.VOTER_NOT_FOUND  # other directory


def test_a_leader_that_removes_itself_resigns_once_the_change_is_committed() -> None:
    core = dynamic_leader()
    deliver(core, 2, fetch(2, 1, 2, 1), T)
    result = core.remove_voter(1, b"\x01" * 16, T + 1)
    assert result.error_code == ErrorCode.NONE
    assert core.voters == frozenset({2, 3})
    assert core.is_leader  # leads until the removal is committed, by a majority of {2, 3}
    deliver(core, 2, fetch(2, 1, 3, 1), T + 2, correlation_id=8)
    assert core.high_watermark == 2  # 2 of {2, 3} needed
    step = deliver(core, 3, fetch(3, 1, 3, 1), T + 3, correlation_id=9)
    assert core.high_watermark == 3
    assert not core.is_leader
    assert core.role == "observer"
    assert {s.destination for s in sends(step, EndQuorumEpochRequest)} == {2, 3}


def test_static_quorum_and_non_leader_refuse_voter_changes() -> None:
    static, _ = make_core(node_id=1)
    elect(static, 0)
    deliver(static, 2, fetch(2, 1, 1, 1), T)
    assert static.add_voter(VoterSpec(4), T).error_code == ErrorCode.UNSUPPORTED_VERSION
    follower, _ = make_core(node_id=2, bootstrap_voters=BOOTSTRAP)  # type: ignore[arg-type]
    assert follower.remove_voter(1, None, T).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_replica_applies_an_appended_voters_record_and_reverts_it_on_truncation() -> None:
    """KIP-853: a voter set takes effect when appended, committed or not; truncating the record
    away (a diverging epoch from a new leader) restores the previous set."""
    core, _ = make_core(node_id=4, voters=(1, 2, 3), log=[Entry(0, 1, BOOTSTRAP)], stored=state(1))
    assert core.role == "observer"
    (request,) = sends(core.tick(T), FetchRequest)  # an observer looks for the leader
    leader = LeaderIdAndEpoch(request.destination, 2)
    step = reply(core, request, FetchResponse(ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, leader), T)
    assert core.leader_id == request.destination
    grown = VotersRecord((*BOOTSTRAP.voters, VoterSpec(4, b"\x04" * 16)))
    (request,) = sends(step, FetchRequest) or sends(core.tick(T + 1), FetchRequest)
    step = reply(core, request, FetchResponse(ErrorCode.NONE, 0, leader, None, (Entry(1, 2, grown),)), T + 2)
    assert core.voters == frozenset({1, 2, 3, 4})
    assert core.role == "follower"  # a voter now (it may stand for election)
    (request,) = sends(step, FetchRequest) or sends(core.tick(T + 3), FetchRequest)
    diverging = EpochEndOffset(1, 1)
    reply(core, request, FetchResponse(ErrorCode.NONE, 0, leader, diverging, ()), T + 4)
    assert core.log.end_offset == 1
    assert core.voters == frozenset({1, 2, 3})
    assert core.role == "observer"
