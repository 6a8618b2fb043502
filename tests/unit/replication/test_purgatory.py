"""The delayed-operation mechanism (``broker.replication.purgatory``; Kafka's
``DelayedOperationPurgatory``, ``DelayedProduce``, ``DelayedFetch``, ``DelayedDeleteRecords``) and
the pure replica core's acks=all judgement (``ReplicaState``; Kafka documentation §4.7
"Replication"): pure, driven by hand with no event loop."""

from __future__ import annotations

from broker.metadata.image import PartitionImage
from broker.replication.leader_epoch import LeaderEpochCache
from broker.replication.purgatory import (
    DelayedDeleteRecords,
    DelayedFetch,
    DelayedOperationPurgatory,
    DelayedProduce,
)
from broker.replication.replica_state import ReplicaState
from pyspark_log.wire.errors import ErrorCode


def test_delayed_produce_completes_when_every_partition_is_acknowledged() -> None:
    hw = {"a": 0, "b": 0}
    got: list[list[int]] = []
    purgatory: DelayedOperationPurgatory[str] = DelayedOperationPurgatory("Produce")
    op = DelayedProduce([("a", 3), ("b", 2)], lambda key, required: 0 if hw[key] >= required else None, got.append)
    assert not purgatory.try_complete_else_watch(op, ["a", "b"])
    assert purgatory.watched("a") == purgatory.watched("b") == 1
    hw["a"] = 3
    assert purgatory.check_and_complete("a") == 0
    assert not got
    hw["b"] = 5
    assert purgatory.check_and_complete("b") == 1
    assert got == [[0, 0]]
    assert purgatory.check_and_complete("a") == 1  # dropped lazily from the other key
    assert len(purgatory) == 0
    assert not op.expire()  # completes once


def test_expiry_answers_request_timed_out_for_what_still_waits() -> None:
    got: list[list[int]] = []
    op = DelayedProduce([("a", 1), ("b", 1)], lambda key, _: 0 if key == "a" else None, got.append)
    assert not op.try_complete()
    assert op.expire()
    assert got == [[ErrorCode.NONE, ErrorCode.REQUEST_TIMED_OUT]]


def test_delete_records_waits_for_the_low_watermark() -> None:
    low = {"p": 2}
    got: list[list[tuple[int, int]]] = []
    purgatory: DelayedOperationPurgatory[str] = DelayedOperationPurgatory("DeleteRecords")
    op = DelayedDeleteRecords([("p", 5)], lambda key, offset: (0, low[key]) if low[key] >= offset else None, got.append)
    assert not purgatory.try_complete_else_watch(op, ["p"])
    low["p"] = 6
    purgatory.check_and_complete("p")
    assert got == [[(ErrorCode.NONE, 6)]]
    timed_out: list[list[tuple[int, int]]] = []
    late = DelayedDeleteRecords([("p", 9)], lambda key, offset: None, timed_out.append)
    late.expire()
    assert timed_out == [[(ErrorCode.REQUEST_TIMED_OUT, -1)]]


def test_a_completion_may_move_the_partition_and_watch_again() -> None:
    """A follower long-poll that wakes, reads, and parks again under the same key from inside its
    completion (the re-entrant case the replication simulation drives): the new operation stays
    watched."""
    purgatory: DelayedOperationPurgatory[str] = DelayedOperationPurgatory("Fetch")
    end = [0]
    woken: list[int] = []

    def park() -> None:
        seen = end[0]
        purgatory.try_complete_else_watch(DelayedFetch(lambda: end[0] != seen, wake), ["p"])

    def wake() -> None:
        woken.append(end[0])
        if end[0] < 3:
            end[0] += 1  # the read moved the partition: re-enter, then park again
            purgatory.check_and_complete("p")
            park()

    park()
    end[0] = 1
    purgatory.check_and_complete("p")
    assert woken == [1]
    assert purgatory.watched("p") == 1  # parked again inside the completion: still watched
    end[0] = 5
    purgatory.check_and_complete("p")
    assert woken == [1, 5]
    assert purgatory.watched("p") == 0


def test_replica_state_judges_acks_all() -> None:
    """min.insync.replicas before the append, the high watermark and a shrunk ISR after it."""
    state = ReplicaState(1, LeaderEpochCache(), 0)
    image = PartitionImage(partition=0, leader=1, leader_epoch=3, replicas=(1, 2, 3), isr=(1, 2, 3))
    assert state.become_leader(image, now_ms=0, log_end=0)
    assert state.acks_all_refusal(2) == ErrorCode.NONE
    assert state.acks_status(5, 2) is None  # followers unknown: the HW stays
    state.record_follower_fetch(2, 5, log_end=5, now_ms=1)
    assert state.acks_status(5, 2) is None
    assert state.record_follower_fetch(3, 5, log_end=5, now_ms=1)  # the HW moved
    assert state.high_watermark == 5
    assert state.acks_status(5, 2) == ErrorCode.NONE
    shrunk = PartitionImage(partition=0, leader=1, leader_epoch=3, replicas=(1, 2, 3), isr=(1,), partition_epoch=1)
    state.update_from_image(shrunk, log_end=5)
    assert state.acks_status(5, 2) == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert state.acks_all_refusal(2) == ErrorCode.NOT_ENOUGH_REPLICAS
    state.become_follower(PartitionImage(partition=0, leader=2, leader_epoch=4, replicas=(1, 2, 3), isr=(2,)))
    assert state.acks_status(5, 2) == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_replica_state_proposes_isr_changes() -> None:
    """A caught-up follower is proposed for the ISR once (KIP-497); an answer of unknown outcome
    keeps it in the maximal ISR and proposes it again after the backoff; a lagging one is shrunk."""
    state = ReplicaState(1, LeaderEpochCache(), 0)
    state.become_leader(
        PartitionImage(partition=0, leader=1, leader_epoch=0, replicas=(1, 2, 3), isr=(1, 3)), now_ms=0, log_end=4
    )
    state.record_follower_fetch(3, 4, log_end=4, now_ms=0)
    state.record_follower_fetch(2, 4, log_end=4, now_ms=0)
    proposal = state.isr_expansion(2, now_ms=0)
    assert proposal == (1, 3, 2)
    state.propose_isr(proposal)
    assert state.isr_expansion(2, now_ms=0) is None  # one in flight
    state.on_isr_answer(proposal, ErrorCode.REQUEST_TIMED_OUT, now_ms=10, backoff_ms=100, log_end=4)
    assert state.pending_isr == proposal
    assert 2 in state.maximal_isr
    assert state.isr_check(now_ms=50, log_end=4, lag_time_max_ms=1000) is None
    assert state.isr_check(now_ms=110, log_end=4, lag_time_max_ms=1000) == (proposal, "retry")
    state.on_isr_answer(proposal, ErrorCode.INELIGIBLE_REPLICA, now_ms=120, backoff_ms=100, log_end=4)
    assert state.pending_isr is None
    assert state.isr_check(now_ms=5000, log_end=9, lag_time_max_ms=1000) == ((1,), "shrink")
