"""KIP-595 "BeginQuorumEpoch request handling" and "response handling"."""

from __future__ import annotations

from broker.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    ErrorCode,
    FetchRequest,
)
from tests.unit.raft.helpers import CLUSTER, deliver, elect, make_core, messages, persisted, reply, sends, state


def begin(leader: int, epoch: int, cluster: str | None = CLUSTER) -> BeginQuorumEpochRequest:
    return BeginQuorumEpochRequest(cluster, leader, epoch)


def answer(result) -> BeginQuorumEpochResponse:  # type: ignore[no-untyped-def]
    (response,) = messages(result, BeginQuorumEpochResponse)
    return response


def test_accepted_at_a_known_or_larger_epoch_then_fetches_from_the_leader() -> None:
    """ "A voter accepts a BeginQuorumEpoch if its epoch is >= the known epoch... As soon as it
    accepts, it transitions to follower and starts sending Fetch requests to the new leader.\""""
    core, _ = make_core(stored=state(3))
    result = deliver(core, 2, begin(2, 3), 0)
    assert answer(result).error_code == ErrorCode.NONE
    assert core.role == "follower"
    assert core.leader_id == 2
    assert core.epoch == 3
    assert persisted(result)[-1].leader_id == 2
    assert [s.destination for s in sends(result, FetchRequest)] == [2]
    result = deliver(core, 3, begin(3, 7), 1)
    assert core.leader_id == 3
    assert core.epoch == 7


def test_conflicting_leader_in_the_same_epoch_is_rejected() -> None:
    """ "If leaderId A is known for epoch 5, a voter rejects a BeginQuorumEpoch from another voter B
    in the same epoch.\""""
    core, _ = make_core()
    deliver(core, 2, begin(2, 5), 0)
    response = answer(deliver(core, 3, begin(3, 5), 1))
    assert response.error_code != ErrorCode.NONE
    assert core.leader_id == 2
    assert answer(deliver(core, 2, begin(2, 5), 2)).error_code == ErrorCode.NONE  # a retry is fine


def test_smaller_epoch_is_rejected() -> None:
    """ "If the epoch is smaller than the known epoch, the request is rejected.\""""
    core, _ = make_core(stored=state(6))
    response = answer(deliver(core, 2, begin(2, 5), 0))
    assert response.error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert response.leader_epoch == 6


def test_cluster_id_mismatch_from_an_elected_leader_is_fatal() -> None:
    """ "At any time, if a broker receives a BeginQuorumEpoch from an elected leader with a
    mismatched cluster id, the broker shuts down.\""""
    core, _ = make_core()
    result = deliver(core, 2, begin(2, 1, cluster="someone-else"), 0)
    assert core.fatal_error is not None
    assert core.fatal_error.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
    assert core.fatal_error in result.notify
    assert core.tick(10_000).is_empty()  # a failed core does nothing more


def test_observers_do_not_take_begin_quorum_epoch() -> None:
    """ "Only voters receive BeginQuorumEpoch: observers discover the new leader through Fetch.\""""
    core, _ = make_core(node_id=8)
    assert answer(deliver(core, 2, begin(2, 1), 0)).error_code == ErrorCode.INCONSISTENT_VOTER_SET


def test_leader_resends_until_every_voter_endorses_it() -> None:
    """ "The leader keeps sending BeginQuorumEpoch to each known voter until it receives an
    endorsement", so a partitioned voter discovers it quickly after healing; a Fetch in the new
    epoch also counts as an endorsement."""
    core, _ = make_core(voters=(1, 2, 3))
    result = elect(core, 0)
    (to2, _to3) = sends(result, BeginQuorumEpochRequest)
    reply(core, to2, BeginQuorumEpochResponse(ErrorCode.NONE, 1, core.epoch), 10_010)
    # Voter 3 never answers: after the request timeout (and backoff) the request goes again.
    deliver(core, 2, FetchRequest(CLUSTER, 2, 0, core.epoch, 0, 0), 11_900)  # keeps the quorum
    again = [s.destination for s in sends(core.tick(10_000 + 2_000), BeginQuorumEpochRequest)]
    again += [s.destination for s in sends(core.tick(10_000 + 2_100), BeginQuorumEpochRequest)]
    assert again == [3]
    assert core.state.unendorsed_voters() == [3]  # type: ignore[attr-defined]
    deliver(core, 3, FetchRequest(CLUSTER, 3, 0, core.epoch, 0, 0), 12_200)
    assert core.state.unendorsed_voters() == []  # type: ignore[attr-defined]


def test_fenced_leader_epoch_response_makes_the_leader_follow() -> None:
    """ "If the error code indicates the voter's known epoch is larger (FENCED_LEADER_EPOCH), the
    voter updates its quorum state and becomes a follower of that leader.\""""
    core, _ = make_core()
    result = elect(core, 0)
    to2 = sends(result, BeginQuorumEpochRequest)[0]
    result = reply(core, to2, BeginQuorumEpochResponse(ErrorCode.FENCED_LEADER_EPOCH, 3, 9), 10_010)
    assert core.role == "follower"
    assert core.leader_id == 3
    assert core.epoch == 9
    assert persisted(result)[-1].leader_id == 3
