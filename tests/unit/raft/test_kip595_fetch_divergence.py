"""KIP-595 "Fetch request handling" step 3 and "Fetch response handling" step 2: log
reconciliation piggybacked on Fetch (LastFetchedEpoch / DivergingEpoch)."""

from __future__ import annotations

import pytest

from broker.raft.core import RaftCore
from broker.raft.effects import FlushLog, TruncateLog
from broker.raft.messages import NO_LEADER, EpochEndOffset, FetchRequest, FetchResponse, LeaderIdAndEpoch
from tests.unit.raft.helpers import (
    deliver,
    elect,
    fetch,
    fetch_response,
    follow,
    log_of,
    make_core,
    reply,
    sends,
    state,
)

LEADER_LOG = (1, 1, 2, 2, 2, 4, 4)  # epoch 1: [0,2) epoch 2: [2,5) epoch 4: [5,7); epoch 5 then starts at 7


def leader() -> RaftCore:
    core, _ = make_core(node_id=1, stored=state(4), log=log_of(*LEADER_LOG))
    elect(core, 0)
    assert core.epoch == 5
    assert core.log.end_offset == 8
    return core


@pytest.mark.parametrize(
    ("fetch_offset", "last_fetched_epoch", "diverging"),
    [
        (0, 0, None),  # an empty follower
        (5, 2, None),  # the start offset of the next epoch
        (4, 2, None),  # inside epoch 2's range
        (8, 5, None),  # fully caught up
        (6, 3, EpochEndOffset(2, 5)),  # epoch 3 unknown to the leader: largest smaller epoch, its end
        (7, 2, EpochEndOffset(2, 5)),  # the follower's epoch 2 runs past the leader's
        (3, 1, EpochEndOffset(1, 2)),
        (9, 5, EpochEndOffset(5, 8)),  # beyond the leader's end
    ],
)
def test_leader_answers_diverging_epoch(
    fetch_offset: int, last_fetched_epoch: int, diverging: EpochEndOffset | None
) -> None:
    """ "The leader checks that LastFetchedEpoch is consistent with its log: FetchOffset is expected
    in the range of offsets with epoch LastFetchedEpoch or the start offset of the next epoch. If
    not, return an empty response with DivergingEpoch set to the largest epoch smaller than the
    fetcher's LastFetchedEpoch" (and its end offset).\""""
    core = leader()
    response = fetch_response(deliver(core, 2, fetch(2, 5, fetch_offset, last_fetched_epoch), 10_050))
    assert response.diverging_epoch == diverging
    if diverging is not None:
        assert response.records == ()
    else:
        assert [e.offset for e in response.records] == list(range(fetch_offset, 8))


def test_diverging_fetch_does_not_count_as_progress() -> None:
    """Only a fetch consistent with the leader's log says where the follower's log matches."""
    core = leader()
    deliver(core, 2, fetch(2, 5, 7, 2), 10_050)
    assert core.state.progress[2].end_offset == -1  # type: ignore[attr-defined]
    assert core.high_watermark == 0


@pytest.mark.parametrize(
    ("diverging", "truncated_to"),
    [
        (EpochEndOffset(2, 5), 4),  # epochs > 2 go (offset 4 has epoch 3)
        (EpochEndOffset(2, 3), 3),  # offsets >= EndOffset go
        (EpochEndOffset(3, 9), 9 - 2),  # nothing with epoch > 3; end offset beyond the log: no-op
        (EpochEndOffset(0, 0), 0),
    ],
)
def test_follower_truncates_on_diverging_epoch(diverging: EpochEndOffset, truncated_to: int) -> None:
    """Response step 2: "If DivergingEpoch is set, truncate all offsets >= DivergingEpoch.EndOffset
    and all offsets with an epoch larger than DivergingEpoch.Epoch.\""""
    core, _ = make_core(node_id=2, stored=state(3), log=log_of(1, 1, 2, 2, 3, 3, 3))
    result = follow(core, 1, 5, 0)
    (request,) = sends(result, FetchRequest)
    assert (request.message.fetch_offset, request.message.last_fetched_epoch) == (7, 3)  # type: ignore[union-attr]
    response = FetchResponse(0, 0, LeaderIdAndEpoch(1, 5), diverging)
    result = reply(core, request, response, 10)
    assert core.log.end_offset == truncated_to
    if truncated_to < 7:
        assert [type(e) for e in result.persist] == [TruncateLog, FlushLog]
        assert result.persist[0] == TruncateLog(truncated_to)
    # ...and then fetches again from the new end.
    (again,) = sends(result, FetchRequest)
    assert again.message.fetch_offset == truncated_to  # type: ignore[union-attr]
    assert again.message.last_fetched_epoch == core.log.last_epoch  # type: ignore[union-attr]


def test_follower_never_truncates_committed_entries() -> None:
    """Committed entries are never truncated: a DivergingEpoch below the high watermark is a bug."""
    core, _ = make_core(node_id=2, stored=state(3), log=log_of(1, 1, 2, 2))
    request = sends(follow(core, 1, 3, 0), FetchRequest)[0]
    result = reply(core, request, FetchResponse(0, 4, LeaderIdAndEpoch(1, 3), None, ()), 10)
    assert core.high_watermark == 4
    (request,) = sends(result, FetchRequest)
    with pytest.raises(AssertionError, match="committed"):
        reply(core, request, FetchResponse(0, 4, LeaderIdAndEpoch(1, 3), EpochEndOffset(1, 2)), 30)


def test_reconciliation_converges_in_a_few_fetches() -> None:
    """ "In the worst case, multiple rounds of Fetch may be needed to find the first diverging
    offset.\" Two replicas with different histories converge on the leader's log."""
    lead = leader()
    core, _ = make_core(node_id=2, stored=state(4), log=log_of(1, 1, 2, 3, 3, 3, 3, 3, 3))
    result = follow(core, 1, 5, 0)
    for round_ in range(10):
        (request,) = sends(result, FetchRequest)
        answer = deliver(lead, 2, request.message, 30 + round_, correlation_id=100 + round_)
        (response,) = sends(answer, FetchResponse)
        result = reply(core, request, response.message, 31 + round_)
        if [(e.offset, e.epoch) for e in core.log.entries()] == [(e.offset, e.epoch) for e in lead.log.entries()]:
            break
    else:
        raise AssertionError("did not converge")
    assert round_ <= 3
    assert core.log.entries() == lead.log.entries()
    assert core.leader_id == 1
    assert core.epoch == 5
    assert core.leader_id != NO_LEADER
