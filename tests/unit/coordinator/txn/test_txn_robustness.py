"""The transaction coordinator under failures (review findings 4-8, 19, 20): marker errors and their
backoff, persistence errors, a coordinator epoch change while markers are in flight, and a
coordinator task that dies (Kafka 3.7 ``TransactionMarkerRequestCompletionHandler`` and
``TransactionCoordinator``; docs/architecture.md ("one owner per file and per background loop"): a dead task fails
its waiters)."""

from __future__ import annotations

import asyncio
import itertools
import logging
from dataclasses import replace

import pytest

from broker.coordinator.txn.metadata import MAX_EPOCH
from broker.coordinator.txn.records import TxnState, partition_for
from broker.coordinator.txn.sender import MarkerRequest
from broker.metadata.image import BrokerInfo
from pyspark_log.wire.errors import ErrorCode

from .helpers import CONFIG, TXN_ID, TXN_PARTITIONS, FakeSender, Harness, topic_image

S = TxnState
MARKERS_LOG = "broker.coordinator.txn.markers"


def attempts_of(h: Harness, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The clock time of every marker write the coordinator attempts (failed ones included)."""
    times: list[int] = []
    write = h.appender.append_control_marker

    def counting(*args: object, **kwargs: object) -> int:
        times.append(h.clock.now)
        return write(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(h.appender, "append_control_marker", counting)
    return times


def test_unknown_topic_or_partition_answer_is_retried() -> None:
    """Kafka retries UNKNOWN_TOPIC_OR_PARTITION (the leader may not have the partition yet);
    only a partition the metadata no longer has is dropped."""
    h = Harness()
    h.init()
    h.appender.fail[("t", 0)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    h.begin(("t", 0), ("t", 1))
    assert h.end(commit=True) == ErrorCode.NONE
    assert h.txn.state is S.PREPARE_COMMIT
    assert h.coordinator.markers.jobs[TXN_ID].pending == {("t", 0)}
    h.advance(1_000)
    assert h.txn.state is S.PREPARE_COMMIT  # still retrying
    del h.appender.fail[("t", 0)]
    h.advance(1_000)
    assert h.txn.state is S.COMPLETE_COMMIT
    assert sorted((m.topic, m.partition) for m in h.appender.markers) == [("t", 0), ("t", 1)]


def test_unsupported_version_drops_the_partition() -> None:
    h = Harness()
    h.init()
    h.appender.fail[("t", 0)] = ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT
    h.begin(("t", 0), ("t", 1))
    h.end(commit=False)
    assert h.txn.state is S.COMPLETE_ABORT


def test_marker_retries_back_off_and_warn_rate_limited(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Review finding 8: retries double from ``marker_retry_backoff_ms`` up to the maximum, and a
    job that keeps failing is logged at WARNING (naming the id and partition) at most every 30 s."""
    h = Harness(config=replace(CONFIG, marker_retry_backoff_max_ms=800))
    h.coordinator = h.new_coordinator()
    times = attempts_of(h, monkeypatch)
    h.init()
    h.appender.fail[("t", 0)] = ErrorCode.NOT_LEADER_OR_FOLLOWER
    h.begin(("t", 0))
    with caplog.at_level(logging.DEBUG, logger=MARKERS_LOG):
        h.end(commit=True)
        h.advance(40_000)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps[:5] == [100, 200, 400, 800, 800]
    assert set(gaps[4:]) == {800}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2  # 40 s of failures: the first warning and one 30 s later
    assert TXN_ID in warnings[0]
    assert "t-0: NOT_LEADER_OR_FOLLOWER" in warnings[0]
    del h.appender.fail[("t", 0)]
    h.advance(800)
    assert h.txn.state is S.COMPLETE_COMMIT


def test_a_partition_without_leader_backs_off_too() -> None:
    h = Harness()
    h.add_topic(topic_image("orphan", 1, leader=-1))
    h.init()
    h.begin(("orphan", 0))
    h.end(commit=True)
    job = h.coordinator.markers.jobs[TXN_ID]
    h.advance(1_000)
    assert job.failures >= 3  # 100 + 200 + 400 ms: a few rounds, not one per tick
    assert job.failures <= 5
    h.add_topic(topic_image("orphan", 1))
    h.advance(2_000)
    assert h.txn.state is S.COMPLETE_COMMIT


def test_persist_exception_leaves_no_pending_transition(monkeypatch: pytest.MonkeyPatch) -> None:
    """Review finding 5: any append failure, not only StoreError, drops the pending transition
    (else the id answers CONCURRENT_TRANSACTIONS forever)."""
    h = Harness()
    h.init()

    def broken(partition: int, records: bytes) -> int:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(h.log, "append", broken)
    assert h.begin(("t", 0)) == ErrorCode.UNKNOWN_SERVER_ERROR
    assert (h.txn.state, h.txn.pending) == (S.EMPTY, None)
    monkeypatch.undo()
    assert h.begin(("t", 0)) == ErrorCode.NONE


def test_complete_commit_persist_failure_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every marker is written but CompleteCommit cannot be persisted yet: the transaction stays
    PrepareCommit (retries of EndTxn hear CONCURRENT_TRANSACTIONS) and the coordinator keeps
    trying, with backoff, until the append succeeds."""
    h = Harness()
    h.init()
    h.begin(("t", 0))
    write = h.appender.append_control_marker

    def write_then_break_the_log(*args: object, **kwargs: object) -> int:
        offset = write(*args, **kwargs)  # type: ignore[arg-type]
        h.log.fail_with = ErrorCode.COORDINATOR_NOT_AVAILABLE
        return offset

    monkeypatch.setattr(h.appender, "append_control_marker", write_then_break_the_log)
    assert h.end(commit=True) == ErrorCode.NONE
    assert (h.txn.state, h.txn.pending) == (S.PREPARE_COMMIT, None)
    h.advance(5_000)
    assert h.txn.state is S.PREPARE_COMMIT
    assert h.end(commit=True) == ErrorCode.CONCURRENT_TRANSACTIONS
    h.log.fail_with = None
    h.advance(CONFIG.marker_retry_backoff_max_ms)
    assert h.txn.state is S.COMPLETE_COMMIT
    assert h.end(commit=True) == ErrorCode.NONE


def test_retry_timer_survives_exceptions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Review finding 5: an exception in one retry round neither stops later rounds nor the
    other jobs."""
    h = Harness()
    h.init()
    h.init("other")
    h.appender.fail[("t", 0)] = ErrorCode.NOT_LEADER_OR_FOLLOWER
    h.begin(("t", 0))
    h.begin(("t", 0), txn_id="other")
    h.end(commit=True)
    h.end(commit=True, txn_id="other")
    markers = h.coordinator.markers
    retry, drive = markers.retry, markers._drive
    calls = {"retry": 0, "drive": 0}

    def retry_once_broken() -> None:
        calls["retry"] += 1
        if calls["retry"] == 1:
            raise RuntimeError("bug in retry")
        retry()

    def drive_broken_for_txn_a(job: object) -> None:
        if getattr(job, "transactional_id", None) == TXN_ID and calls["drive"] < 2:
            calls["drive"] += 1
            raise RuntimeError("bug in drive")
        drive(job)  # type: ignore[arg-type]

    monkeypatch.setattr(markers, "retry", retry_once_broken)
    monkeypatch.setattr(markers, "_drive", drive_broken_for_txn_a)
    del h.appender.fail[("t", 0)]
    h.advance(5_000)
    assert calls == {"retry": calls["retry"], "drive": 2}
    assert h.txn.state is S.COMPLETE_COMMIT
    assert h.coordinator.manager.txns["other"].state is S.COMPLETE_COMMIT


class BrokenSender(FakeSender):
    """Raises on its first request (a bug in the network side), then answers normally."""

    async def write_txn_markers(self, host: str, port: int, request: MarkerRequest) -> dict[tuple[str, int], int]:
        self.requests.append((host, port, request))
        if len(self.requests) == 1:
            raise RuntimeError("bug in the sender")
        return dict.fromkeys(request.partitions, self.code)


def remote_harness(sender: FakeSender) -> Harness:
    h = Harness()
    h.add_topic(topic_image("remote", 2, leader=2))
    h.image = h.image.with_broker(BrokerInfo(2, "10.0.0.2", 9093))
    h.coordinator = h.new_coordinator(sender)
    return h


async def settle(h: Harness, ms: int) -> None:
    """Let remote sends finish while the clock moves on (timers fire as on the coordinator task)."""
    for _ in range(ms // 10):
        for _ in range(3):
            await asyncio.sleep(0)
        h.advance(10)


def test_remote_send_exception_is_retried() -> None:
    """Review finding 5: an exception in the WriteTxnMarkers task is a retriable failure."""
    sender = BrokenSender()
    h = remote_harness(sender)

    async def scenario() -> None:
        h.init()
        h.begin(("remote", 1))
        h.end(commit=True)
        await settle(h, 1_000)

    asyncio.run(scenario())
    assert len(sender.requests) == 2
    assert h.txn.state is S.COMPLETE_COMMIT


def test_remote_answers_back_off() -> None:
    sender = FakeSender()
    sender.code = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    h = remote_harness(sender)

    async def scenario() -> None:
        h.init()
        h.begin(("remote", 1))
        h.end(commit=True)
        await settle(h, 1_500)
        assert 3 <= len(sender.requests) <= 5  # 0, 100, 300, 700, (1500) ms
        sender.code = int(ErrorCode.NONE)
        await settle(h, 2_000)

    asyncio.run(scenario())
    assert h.txn.state is S.COMPLETE_COMMIT


def test_refused_markers_are_written_again_later(caplog: pytest.LogCaptureFixture) -> None:
    """Review finding 7: INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED abandon the job
    (Kafka) with a WARNING; the markers are written again after the maximum backoff while the
    transaction is still prepared here, instead of never."""
    h = Harness()
    h.init()
    h.appender.fail[("t", 0)] = ErrorCode.TRANSACTION_COORDINATOR_FENCED
    h.begin(("t", 0))
    with caplog.at_level(logging.WARNING):
        h.end(commit=True)
        assert not h.coordinator.markers.has_pending
        assert h.txn.state is S.PREPARE_COMMIT
        assert any("abandoned" in r.getMessage() and TXN_ID in r.getMessage() for r in caplog.records)
        del h.appender.fail[("t", 0)]
        h.advance(CONFIG.marker_retry_backoff_max_ms + 100)
    assert h.txn.state is S.COMPLETE_COMMIT
    assert any("writing its markers again" in r.getMessage() for r in caplog.records)
    assert h.init().error == ErrorCode.NONE


def test_refused_markers_of_an_unloaded_transaction_are_not_resent() -> None:
    h = Harness()
    h.init()
    h.appender.fail[("t", 0)] = ErrorCode.INVALID_PRODUCER_EPOCH
    h.begin(("t", 0))
    h.end(commit=True)
    mine = partition_for(TXN_ID, TXN_PARTITIONS)
    h.coordinator.manager.set_partitions(TXN_PARTITIONS, {p: 0 for p in range(TXN_PARTITIONS) if p != mine})
    del h.appender.fail[("t", 0)]
    h.advance(CONFIG.marker_retry_backoff_max_ms + 100)
    assert h.appender.markers == []


def test_abort_timed_out_survives_one_failing_transaction() -> None:
    """Review finding 19: one transaction that cannot be fenced (epoch at its maximum) is logged
    and skipped; the others are still aborted."""
    h = Harness()
    h.init(timeout_ms=2_000)
    h.init("other", timeout_ms=2_000)
    h.begin(("t", 0))
    h.begin(("t", 1), txn_id="other")
    h.txn.producer_epoch = MAX_EPOCH
    h.clock.now += 3_000
    assert h.coordinator.abort_timed_out() == 2
    assert (h.txn.state, h.txn.pending) == (S.ONGOING, None)
    assert h.coordinator.manager.txns["other"].state is S.COMPLETE_ABORT


class GatedSender(FakeSender):
    """Answers each request when the test releases it (``gates[i].set()``)."""

    def __init__(self) -> None:
        super().__init__()
        self.gates: list[asyncio.Event] = []

    async def write_txn_markers(self, host: str, port: int, request: MarkerRequest) -> dict[tuple[str, int], int]:
        self.requests.append((host, port, request))
        gate = asyncio.Event()
        self.gates.append(gate)
        await gate.wait()
        return dict.fromkeys(request.partitions, self.code)


def test_coordinator_epoch_change_mid_commit() -> None:
    """The transaction's partition is led again at a new epoch while a marker is in flight: the
    old job is dropped (its late answer changes nothing) and the reloaded PrepareCommit writes
    its markers under the new coordinator epoch, then completes."""
    sender = GatedSender()
    h = remote_harness(sender)
    mine = partition_for(TXN_ID, TXN_PARTITIONS)

    async def scenario() -> None:
        h.init()
        h.begin(("t", 0), ("remote", 1))
        h.end(commit=True)
        await settle(h, 50)
        assert len(sender.requests) == 1
        manager = h.coordinator.manager
        manager.set_partitions(TXN_PARTITIONS, {p: (5 if p == mine else 0) for p in range(TXN_PARTITIONS)})
        assert manager.status(TXN_ID) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        manager.load_all()
        await settle(h, 50)
        assert len(sender.requests) == 2
        sender.gates[0].set()  # the old epoch's answer arrives late
        await settle(h, 50)
        assert h.txn.state is S.PREPARE_COMMIT
        sender.gates[1].set()
        await settle(h, 50)

    asyncio.run(scenario())
    assert h.txn.state is S.COMPLETE_COMMIT
    assert [r.coordinator_epoch for _, _, r in sender.requests] == [0, 5]
    assert [(m.partition, m.coordinator_epoch) for m in h.appender.markers] == [(0, 0), (0, 5)]


def test_dead_manager_task_fails_everyone_and_reraises(monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness()
    h.init()

    def broken() -> bool:
        raise RuntimeError("bug in the loop")

    monkeypatch.setattr(h.coordinator.manager, "load_step", broken)
    with pytest.raises(RuntimeError, match="bug in the loop"):
        asyncio.run(h.coordinator.run())
    assert h.init().error == ErrorCode.COORDINATOR_NOT_AVAILABLE
