"""Transactional offset commits in the group coordinator (KIP-98 TxnOffsetCommit, KIP-447
require_stable; Kafka documentation §4.6 "Message Delivery Semantics": the consumer's position is written "in
the same transaction" as
the output, so an aborted transaction rolls the position back)."""

from __future__ import annotations

import pytest

from broker.coordinator.group import CommittedOffset, partition_for
from pyspark_log.records.control import ControlType, encode_control_batch
from pyspark_log.wire.errors import ErrorCode
from tests.unit.coordinator.helpers import GROUP, Harness

PID, EPOCH = 4242, 3
TP = ("t", 0)


def offset(n: int) -> CommittedOffset:
    return CommittedOffset(n, -1, f"m{n}", 1_000)


def stage(h: Harness, n: int, *, pid: int = PID, member: str = "", generation: int = -1) -> dict:
    return h.coordinator.commit_txn_offsets(GROUP, pid, EPOCH, member, None, generation, {TP: offset(n)})


def fetched(h: Harness, *, stable: bool = False) -> object:
    return h.coordinator.fetch_offsets(GROUP, [TP], require_stable=stable)[1][TP]


def marker(h: Harness, commit: bool, pid: int = PID) -> None:
    """The marker lands in the log (as the replica manager writes it) and is announced."""
    partition = partition_for(GROUP, h.partitions)
    kind = ControlType.COMMIT if commit else ControlType.ABORT
    h.log.append(partition, encode_control_batch(kind, pid, EPOCH, 0, h.clock.now))
    h.coordinator.on_marker("__consumer_offsets", partition, pid, commit)


def test_staged_until_commit_marker() -> None:
    h = Harness()
    h.coordinator.commit_offsets(GROUP, "", None, -1, {TP: offset(5)})
    assert stage(h, 10) == {TP: ErrorCode.NONE}
    assert fetched(h).offset == 5  # not visible before the marker
    assert fetched(h, stable=True) == ErrorCode.UNSTABLE_OFFSET_COMMIT
    h.coordinator.on_marker("other-topic", partition_for(GROUP, h.partitions), PID, True)
    assert fetched(h).offset == 5
    marker(h, commit=True)
    assert fetched(h, stable=True).offset == 10


def test_committed_offsets_are_fetched_once_the_commit_marker_is_on_the_isr() -> None:
    """A COMMIT marker not yet on the offsets partition's ISR may be lost with its leader (the
    transaction coordinator then writes it again at the next one): until the ISR has it the
    offset is UNSTABLE for require_stable and the earlier one otherwise (Kafka applies the marker
    once its acks=all append completed)."""
    h = Harness()
    h.coordinator.commit_offsets(GROUP, "", None, -1, {TP: offset(5)})
    stage(h, 10)
    h.log.replicated_to = h.log.log_end_offset(partition_for(GROUP, h.partitions))
    marker(h, commit=True)
    assert fetched(h).offset == 5
    assert fetched(h, stable=True) == ErrorCode.UNSTABLE_OFFSET_COMMIT
    h.log.replicated_to = None
    assert fetched(h, stable=True).offset == 10


def test_abort_marker_drops_the_staged_offsets() -> None:
    h = Harness()
    stage(h, 10)
    marker(h, commit=False)
    assert fetched(h, stable=True) is None


def test_marker_of_another_producer_changes_nothing() -> None:
    h = Harness()
    stage(h, 10)
    marker(h, commit=True, pid=PID + 1)
    assert fetched(h, stable=True) == ErrorCode.UNSTABLE_OFFSET_COMMIT


def test_a_later_plain_commit_wins() -> None:
    h = Harness()
    stage(h, 10)
    h.coordinator.commit_offsets(GROUP, "", None, -1, {TP: offset(20)})
    marker(h, commit=True)
    assert fetched(h).offset == 20


def test_member_checks_only_when_given() -> None:
    """KIP-447 fields (v3+) are checked like OffsetCommit's; without them (v0-v2) a group with
    members still takes the commit (Kafka ``validateOffsetCommit`` with isTransactional)."""
    h = Harness()
    members = h.stable_group(1)
    assert stage(h, 1) == {TP: ErrorCode.NONE}
    assert stage(h, 2, member="someone", generation=members[0].generation_id) == {TP: ErrorCode.UNKNOWN_MEMBER_ID}
    wrong = members[0].generation_id + 1
    assert stage(h, 3, member=members[0].member_id, generation=wrong) == {TP: ErrorCode.ILLEGAL_GENERATION}
    ok = stage(h, 4, member=members[0].member_id, generation=members[0].generation_id)
    assert ok == {TP: ErrorCode.NONE}


def test_empty_group_id_and_store_errors() -> None:
    h = Harness()
    assert h.coordinator.commit_txn_offsets("", PID, EPOCH, "", None, -1, {TP: offset(1)}) == {
        TP: ErrorCode.INVALID_GROUP_ID
    }
    h.log.fail_with = ErrorCode.NOT_COORDINATOR
    assert stage(h, 1) == {TP: ErrorCode.NOT_COORDINATOR}
    h.log.fail_with = None
    assert fetched(h, stable=True) is None  # nothing stays staged after a failed append


def test_reload_honours_markers() -> None:
    h = Harness()
    stage(h, 10)
    marker(h, commit=True)
    stage(h, 11, pid=PID + 1)
    marker(h, commit=False, pid=PID + 1)
    stage(h, 12, pid=PID + 2)  # still open when the coordinator restarts
    restarted = Harness(log=h.log, clock=h.clock)
    restarted.coordinator.manager.load_all()
    assert fetched(restarted).offset == 10
    assert fetched(restarted, stable=True) == ErrorCode.UNSTABLE_OFFSET_COMMIT
    marker(restarted, commit=True, pid=PID + 2)
    assert fetched(restarted, stable=True).offset == 12


def test_pending_offsets_keep_an_empty_group_alive() -> None:
    h = Harness()
    stage(h, 10)
    h.clock.now += 20_000
    h.coordinator.manager.expire_offsets()
    assert GROUP in h.coordinator.manager.groups


def test_marker_landing_while_the_offsets_partition_loads_is_replayed() -> None:
    """Review finding 1: after a restart the transaction coordinator writes the markers of a
    PrepareCommit transaction while ``__consumer_offsets`` is still loading; the load reads on to
    the log end as it is then, so the marker is not lost (no UNSTABLE_OFFSET_COMMIT forever)."""
    h = Harness()
    stage(h, 12, pid=PID)
    stage(h, 13, pid=PID + 1)
    restarted = Harness(log=h.log, clock=h.clock)
    partition = partition_for(GROUP, h.partitions)
    assert restarted.coordinator.manager.status(GROUP) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    marker(restarted, commit=True, pid=PID)
    marker(restarted, commit=False, pid=PID + 1)
    restarted.coordinator.manager.load_all()
    assert restarted.coordinator.manager.partitions[partition].value == "active"
    assert fetched(restarted, stable=True).offset == 12


def test_marker_between_load_steps_is_replayed() -> None:
    h = Harness()
    h.coordinator.commit_offsets(GROUP, "", None, -1, {("t", 1): offset(1)})
    stage(h, 12)
    restarted = Harness(log=h.log, clock=h.clock)
    manager = restarted.coordinator.manager
    assert manager.load_step() or manager.loading  # part of the partition is replayed
    marker(restarted, commit=True)
    manager.load_all()
    assert fetched(restarted, stable=True).offset == 12


def test_fetch_of_all_partitions_honours_require_stable() -> None:
    """Review finding 2 (Kafka 3.7 ``getOffsets``): the committed partitions of a fetch without a
    partition list are checked for pending transactional offsets like named ones."""
    h = Harness()
    other = ("t", 1)
    h.coordinator.commit_offsets(GROUP, "", None, -1, {TP: offset(5), other: offset(7)})
    stage(h, 10)
    error, found = h.coordinator.fetch_offsets(GROUP, None, require_stable=True)
    assert error == ErrorCode.NONE
    assert found[TP] == ErrorCode.UNSTABLE_OFFSET_COMMIT
    assert found[other].offset == 7
    assert h.coordinator.fetch_offsets(GROUP, None)[1][TP].offset == 5  # without require_stable
    marker(h, commit=True)
    assert h.coordinator.fetch_offsets(GROUP, None, require_stable=True)[1][TP].offset == 10


def test_failed_append_keeps_the_earlier_staged_offset() -> None:
    """Review finding 10: a failed TxnOffsetCommit append restores what it replaced; the earlier
    commit of the same transaction is in the log and its COMMIT marker still applies it."""
    h = Harness()
    assert stage(h, 10) == {TP: ErrorCode.NONE}
    h.log.fail_with = ErrorCode.NOT_COORDINATOR
    assert stage(h, 11) == {TP: ErrorCode.NOT_COORDINATOR}
    h.log.fail_with = None
    assert fetched(h, stable=True) == ErrorCode.UNSTABLE_OFFSET_COMMIT
    marker(h, commit=True)
    assert fetched(h).offset == 10


def test_unexpected_append_error_leaks_no_staged_offset(monkeypatch: pytest.MonkeyPatch) -> None:
    """Review finding 11: an exception other than StoreError answers UNKNOWN_SERVER_ERROR and
    unstages what the request staged."""
    h = Harness()

    def broken(partition: int, records: bytes) -> int:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(h.log, "append", broken)
    assert stage(h, 10) == {TP: ErrorCode.UNKNOWN_SERVER_ERROR}
    monkeypatch.undo()
    assert fetched(h, stable=True) is None
    assert not h.group.pending_txn_offsets


def test_membership_checks_follow_kafka_37() -> None:
    """Review finding 12, checked against Kafka 3.7 ``validateOffsetCommit`` (isTransactional):
    generation -1 on an Empty group needs no membership; otherwise an empty member id with a
    generation is UNKNOWN_MEMBER_ID (``validateCurrentMember``), an unknown static instance too,
    a known instance under another member id FENCED_INSTANCE_ID."""
    h = Harness()
    assert stage(h, 1, member="stale-member", generation=-1) == {TP: ErrorCode.NONE}  # Empty group
    assert h.coordinator.commit_offsets(GROUP, "stale-member", None, -1, {TP: offset(1)}) == {TP: ErrorCode.NONE}
    members = h.stable_group(1)
    generation = members[0].generation_id
    assert stage(h, 2, generation=generation) == {TP: ErrorCode.UNKNOWN_MEMBER_ID}
    commit = h.coordinator.commit_txn_offsets
    assert commit(GROUP, PID, EPOCH, members[0].member_id, "nobody", generation, {TP: offset(3)}) == {
        TP: ErrorCode.UNKNOWN_MEMBER_ID
    }
    assert stage(h, 4, member="stale-member", generation=-1) == {TP: ErrorCode.UNKNOWN_MEMBER_ID}


def test_fenced_static_instance() -> None:
    h = Harness()
    first = h.join("", instance_id="static-1")
    h.until_answered(first)
    member_id, generation = first[0].member_id, first[0].generation_id
    h.sync(member_id, generation, {member_id: b""}, instance_id="static-1")
    commit = h.coordinator.commit_txn_offsets
    assert commit(GROUP, PID, EPOCH, "other", "static-1", generation, {TP: offset(1)}) == {
        TP: ErrorCode.FENCED_INSTANCE_ID
    }
    assert commit(GROUP, PID, EPOCH, member_id, "static-1", generation, {TP: offset(1)}) == {TP: ErrorCode.NONE}


def test_markers_visit_only_the_producers_groups() -> None:
    """Review finding 21: a marker looks up the groups its producer staged offsets in (Kafka's
    open groups per producer), not every cached group; completed entries are forgotten."""
    h = Harness()
    stage(h, 10)
    manager = h.coordinator.manager
    assert manager._producer_groups == {PID: {GROUP}}
    marker(h, commit=True, pid=PID + 7)  # another producer: nothing to visit
    assert manager._producer_groups == {PID: {GROUP}}
    marker(h, commit=True)
    assert manager._producer_groups == {}
    assert fetched(h, stable=True).offset == 10
    stage(h, 11)
    restarted = Harness(log=h.log, clock=h.clock)
    restarted.coordinator.manager.load_all()
    assert restarted.coordinator.manager._producer_groups == {PID: {GROUP}}  # rebuilt from the log
    marker(restarted, commit=True)
    assert fetched(restarted, stable=True).offset == 11
