"""KIP-595 "Leader Progress Timeout": a zombie leader must not keep serving stale data."""

from __future__ import annotations

from broker.raft.messages import VoteRequest
from tests.unit.raft.helpers import deliver, elect, fetch, make_core, messages


def test_leader_without_fetches_from_a_majority_starts_an_election() -> None:
    """ "If the leader has not received Fetch requests from a majority of the quorum for
    quorum.fetch.timeout.ms, it starts sending VoteRequests to the voters... [it] stays a
    candidate until replaced or until it wins an election.\""""
    core, _ = make_core(voters=(1, 2, 3), fetch_timeout_ms=2000)
    elect(core, 0)  # leader since t=10_000
    epoch = core.epoch
    assert core.next_deadline_ms(10_000) == 12_000
    core.tick(11_999)
    assert core.is_leader
    result = core.tick(12_000)
    assert core.role == "candidate"
    assert core.epoch == epoch + 1
    assert len(messages(result, VoteRequest)) == 2


def test_leader_fetched_by_a_majority_stays_leader() -> None:
    core, _ = make_core(voters=(1, 2, 3, 4, 5), fetch_timeout_ms=2000)
    elect(core, 0)
    epoch = core.epoch
    for t in range(10_500, 20_000, 500):
        deliver(core, 2, fetch(2, epoch, 1, epoch), t)
        deliver(core, 3, fetch(3, epoch, 1, epoch), t)
        core.tick(t + 1)
    assert core.is_leader
    assert core.epoch == epoch


def test_fetches_from_a_minority_are_not_enough() -> None:
    core, _ = make_core(voters=(1, 2, 3, 4, 5), fetch_timeout_ms=2000)
    elect(core, 0)
    epoch = core.epoch
    for t in range(10_500, 13_000, 500):
        deliver(core, 2, fetch(2, epoch, 1, epoch), t)  # the leader and one voter: 2 of 5
        deliver(core, 9, fetch(9, epoch, 1, epoch), t)  # observers do not count
    assert core.role == "candidate"


def test_single_voter_leader_never_times_out() -> None:
    core, _ = make_core(voters=(1,))
    core.tick(1_000_000)
    assert core.is_leader
