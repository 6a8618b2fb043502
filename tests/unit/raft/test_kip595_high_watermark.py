"""KIP-595 "Fetch request handling" step 4 and the "additional condition on commit"."""

from __future__ import annotations

from broker.raft.effects import HighWatermarkAdvanced
from broker.raft.messages import FetchRequest, FetchResponse, LeaderIdAndEpoch, VoteRequest, VoteResponse
from tests.unit.raft.helpers import (
    deliver,
    elect,
    fetch,
    fetch_response,
    follow,
    log_of,
    make_core,
    messages,
    reply,
    sends,
    state,
)

OLD_LOG = (1, 1, 2, 2, 2, 4, 4)  # 7 entries from earlier epochs; LeaderChange of epoch 5 at offset 7
T = 10_050  # just after the election of ``elect``


def leader(voters: tuple[int, ...] = (1, 2, 3)):  # type: ignore[no-untyped-def]
    core, _ = make_core(node_id=1, voters=voters, stored=state(4, voters=voters), log=log_of(*OLD_LOG))
    elect(core, 0)
    return core


def test_old_epoch_entries_on_a_majority_are_not_committed_until_a_current_epoch_entry_is() -> None:
    """ "The leader only advances the high watermark once it has replicated at least one entry of
    its current epoch to a majority of the quorum" (the Raft paper's figure 8 hazard: an entry of
    an older epoch on a majority can still be truncated by a later leader)."""
    core = leader()
    deliver(core, 2, fetch(2, 5, 7, 4), T)  # voter 2 holds every old entry, not the LeaderChange
    assert core.state.majority_end_offset() == 7  # type: ignore[attr-defined]
    assert core.high_watermark == 0
    result = deliver(core, 2, fetch(2, 5, 8, 5), T + 1, correlation_id=8)
    assert core.high_watermark == 8
    assert HighWatermarkAdvanced(8) in result.notify
    assert fetch_response(result).high_watermark == 8


def test_high_watermark_is_the_offset_a_majority_of_voters_hold() -> None:
    """ "Otherwise, the high watermark is set to the maximum offset replicated to a majority."""
    core = leader(voters=(1, 2, 3, 4, 5))
    core.append([b"a", b"b"], T)  # log end 10
    deliver(core, 2, fetch(2, 5, 10, 5), T + 1)
    assert core.high_watermark == 0  # leader + 1 of 5
    deliver(core, 3, fetch(3, 5, 9, 5), T + 2)
    assert core.high_watermark == 9  # leader(10), 2(10), 3(9): the third largest is 9
    deliver(core, 4, fetch(4, 5, 10, 5), T + 3)
    assert core.high_watermark == 10


def test_observer_fetches_do_not_move_the_high_watermark() -> None:
    """4. "If the request is from a voter, not an observer, the leader can advance the high
    watermark.\""""
    core = leader()
    deliver(core, 9, fetch(9, 5, 8, 5), T)
    assert core.high_watermark == 0
    assert [r.replica_id for r in core.describe_quorum(T).observers] == [9]


def test_follower_high_watermark_is_bounded_by_its_log_and_never_decreases() -> None:
    """A follower adopts the leader's high watermark, up to its own log end; it never goes back."""
    core, _ = make_core(node_id=2, stored=state(4), log=log_of(1, 1, 2))
    (request,) = sends(follow(core, 1, 4, 0), FetchRequest)
    result = reply(core, request, FetchResponse(0, 10, LeaderIdAndEpoch(1, 4)), 5)
    assert core.high_watermark == 3
    assert HighWatermarkAdvanced(3) in result.notify
    (request,) = sends(result, FetchRequest)
    reply(core, request, FetchResponse(0, 1, LeaderIdAndEpoch(1, 4)), 6)
    assert core.high_watermark == 3


def test_high_watermark_is_written_as_applied_offset_and_restored() -> None:
    """QuorumStateMessage ``AppliedOffset``: "the maximum offset applied to this quorum state
    (high watermark), used for log recovery"; it is written with every quorum-state change."""
    core = leader()
    deliver(core, 2, fetch(2, 5, 8, 5), T)
    assert core.high_watermark == 8
    assert core.quorum_state_data().applied_offset == 8
    restarted, _ = make_core(node_id=1, stored=core.quorum_state_data(), log=core.log.entries())
    assert restarted.high_watermark == 8


def test_raft_figure_8_old_epoch_entry_on_a_majority_can_still_be_overwritten() -> None:
    """ "S1 writes '2' but does not commit it to every replica; leadership moves to S5 which writes
    '3', also uncommitted; then leadership returns to S1, which tries to commit '2'. Even if '2'
    reaches a majority, S5 can still become leader and truncate it." So S1 must not count it
    committed until an entry of its own epoch is on a majority."""
    voters = (1, 2, 3, 4, 5)
    # Offset 0 (epoch 1) everywhere; '2' = offset 1 of epoch 2 on S1 and S2; '3' = offset 1 of
    # epoch 3 on S5 only. S1 is elected in epoch 4 by S1, S2, S3 (S3's log is behind S1's).
    s1, _ = make_core(node_id=1, voters=voters, stored=state(3, voters=voters), log=log_of(1, 2))
    elect(s1, 0)
    assert s1.epoch == 4
    # S3 fetches '2' alone (a one-record batch) and reports it: '2' is on S1, S2, S3 - a majority.
    deliver(s1, 2, fetch(2, 4, 2, 2), T)
    deliver(s1, 3, fetch(3, 4, 2, 2), T + 1)
    assert s1.state.majority_end_offset() == 2  # type: ignore[attr-defined]
    assert s1.high_watermark == 0  # ...but '2' is not committed
    # Indeed S5 (last epoch 3) can still win epoch 5 with S3's and S4's votes...
    s3, _ = make_core(node_id=3, voters=voters, stored=state(4, leader=1, voters=voters), log=log_of(1, 2))

    (answer,) = messages(deliver(s3, 5, VoteRequest("test-cluster", 5, 5, 3, 2), T + 5), VoteResponse)
    assert answer.vote_granted
    # ...and it would truncate '2' from S3. Once S1's own epoch-4 record is on a majority,
    # everything before it is committed (and S5 can no longer win).
    deliver(s1, 2, fetch(2, 4, 3, 4), T + 2, correlation_id=9)
    deliver(s1, 3, fetch(3, 4, 3, 4), T + 3, correlation_id=10)
    assert s1.high_watermark == 3
