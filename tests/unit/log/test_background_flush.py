"""Flushes off the event loop (``broker/log/flush.py``; Kafka documentation §5.4.1 "Writes" ``flush.messages`` /
``flush.ms``; Kafka's roll schedules "flush-log" with ``flushUptoOffsetExclusive(newSegment.
baseOffset)`` and advances the recovery point when it completes).

The contract checked here: no fsync runs on the loop; the recovery point advances only after the
worker's fsyncs, never above the log end, capped by a truncation meanwhile; a segment deleted
while its flush is in flight does not break it; a file registered with ``LogFlusher.sync_before`` (the
leader-epoch checkpoint, a roll's producer snapshot) is durable before the recovery point passes
its offset. ``ManualExecutor`` plays the worker thread so that each test decides when it runs.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any

import pytest

from broker.log.config import LogConfig, LogManagerConfig
from broker.log.errors import KafkaStorageError
from broker.log.log import Log
from broker.log.manager import LogManager
from broker.replication.leader_epoch import CHECKPOINT_NAME, EpochEntry, LeaderEpochFile
from broker.replication.partition import _load_epochs
from tests.unit.log.helpers import FakeClock, batch, make_log, reopen
from tests.waiting import wait_until_async

ONE = len(batch(1, value_bytes=100))


class ManualExecutor(Executor):
    """An executor whose work runs only when the test calls ``run_all`` (the "worker thread")."""

    def __init__(self) -> None:
        self.pending: list[tuple[Callable[[], object], Future[object]]] = []

    def submit(self, fn: Callable[..., object], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[object] = Future()
        self.pending.append((lambda: fn(*args, **kwargs), future))
        return future

    def run_all(self) -> int:
        ran = 0
        while self.pending:
            fn, future = self.pending.pop(0)
            future.set_result(fn())
            ran += 1
        return ran


class FsyncRecorder:
    """Replaces ``os.fsync``: records the path of every descriptor synced (and where)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.paths: list[str] = []
        self.in_worker = False
        self.on_loop = 0
        real = os.fsync

        def fsync(fd: int) -> None:
            if not self.in_worker:
                self.on_loop += 1
            self.paths.append(os.readlink(f"/proc/self/fd/{fd}"))
            real(fd)

        monkeypatch.setattr(os, "fsync", fsync)

    def names(self) -> list[str]:
        return [Path(p).name for p in self.paths]


def run_worker(executor: ManualExecutor, recorder: FsyncRecorder | None = None) -> int:
    if recorder is not None:
        recorder.in_worker = True
    try:
        return executor.run_all()
    finally:
        if recorder is not None:
            recorder.in_worker = False


async def settle() -> None:
    """Let the loop run the done callbacks of finished jobs (they arrive via call_soon_threadsafe)."""
    for _ in range(5):
        await asyncio.sleep(0)


def run(body: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(body())


def background_log(tmp_path: Path, clock: FakeClock, **config: object) -> tuple[Log, ManualExecutor]:
    log = make_log(tmp_path, clock, **config)
    executor = ManualExecutor()
    log.flusher.executor = executor
    return log, executor


def test_kafka_flush_log_a_roll_fsyncs_in_the_worker_and_only_then_advances_the_recovery_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = FsyncRecorder(monkeypatch)

    async def body() -> None:
        log, executor = background_log(tmp_path, FakeClock(), segment_bytes=2 * ONE)
        recorder.on_loop = 0  # Log.create fsyncs its directory
        for _ in range(3):  # the third append rolls
            log.append(batch(1, value_bytes=100))
        assert len(log.segments) == 2
        assert log.flusher.in_flight is not None
        assert recorder.on_loop == 0, "no fsync on the event loop"
        await settle()
        assert log.recovery_point == 0, "not before the worker's fsyncs"
        assert run_worker(executor, recorder) == 1
        assert log.recovery_point == 0, "advanced on the loop, in the job's done callback"
        await settle()
        assert log.recovery_point == 2
        assert log.flusher.in_flight is None
        names = recorder.names()
        old = f"{0:020d}"
        assert {f"{old}.log", f"{old}.timeindex", f"{2:020d}.snapshot", "t-0"} <= set(names)
        assert names[-1] == "t-0", "the directory after the files"
        assert recorder.on_loop == 0

    run(body)


def test_kafka_doc_5_4_flush_messages_completes_asynchronously_and_requests_merge(tmp_path: Path) -> None:
    async def body() -> None:
        log, executor = background_log(tmp_path, FakeClock(), flush_messages=1)
        log.append(batch(1))
        assert log.flusher.in_flight is not None
        assert log.recovery_point == 0
        log.append(batch(1))
        log.append(batch(1))
        assert len(executor.pending) == 1, "one job in flight per log; later requests wait"
        executor.run_all()
        await settle()
        assert log.recovery_point == 1  # the first job's target
        assert len(executor.pending) == 1, "the merged follow-up"
        executor.run_all()
        await settle()
        assert log.recovery_point == 3 == log.log_end_offset
        assert log.flusher.in_flight is None

    run(body)


def test_kafka_doc_5_4_flush_ms_starts_a_background_flush(tmp_path: Path) -> None:
    async def body() -> None:
        clock = FakeClock()
        log, executor = background_log(tmp_path, clock, flush_ms=1000)
        log.append(batch(2))
        assert not log.flusher.flush_if_due(clock())
        clock.advance(1000)
        assert log.flusher.flush_if_due(clock())
        assert not log.flusher.flush_if_due(clock()), "not again while it is in flight"
        assert log.recovery_point == 0
        executor.run_all()
        await settle()
        assert log.recovery_point == 2

    run(body)


def test_truncation_during_an_in_flight_flush_caps_the_recovery_point(tmp_path: Path) -> None:
    """Bytes appended after the cut were not in the job: the recovery point may not pass the cut
    when the job completes, even though the log end is back above the job's target."""

    async def body() -> None:
        log, executor = background_log(tmp_path, FakeClock(), flush_messages=4)
        for _ in range(4):
            log.append(batch(1))
        assert log.flusher.in_flight is not None  # target 4
        assert log.truncate_to(2)
        for _ in range(3):
            log.append(batch(1, tag=7))  # offsets 2..4: new bytes, not in the job
        assert log.log_end_offset == 5
        executor.run_all()
        await settle()
        assert log.recovery_point == 2, "capped at the truncation point"
        executor.run_all()  # the follow-up flush holds the new bytes
        await settle()
        assert log.recovery_point == 5

    run(body)


def test_segments_truncated_and_deleted_while_their_flush_is_in_flight(tmp_path: Path) -> None:
    """The job fsyncs duplicated descriptors: the loop may truncate a segment and close, rename and
    remove another one meanwhile."""

    async def body() -> None:
        clock = FakeClock()
        log, executor = background_log(tmp_path, clock, segment_bytes=2 * ONE, file_delete_delay_ms=0)
        for _ in range(3):
            log.append(batch(1, value_bytes=100))
        assert log.flusher.in_flight is not None  # the roll's flush up to 2
        doomed = log.segments[1]
        assert log.truncate_to(1)
        assert doomed.fd == -1
        assert log.delete_pending_files(clock() + 1) == 1
        assert not doomed.log_path.with_name(doomed.log_path.name + ".deleted").exists()
        executor.run_all()
        await settle()
        assert log.failure is None
        assert log.recovery_point == 1 == log.log_end_offset

    run(body)


def test_a_segment_removed_by_retention_while_its_flush_is_in_flight(tmp_path: Path) -> None:
    async def body() -> None:
        clock = FakeClock()
        log, executor = background_log(
            tmp_path, clock, segment_bytes=2 * ONE, file_delete_delay_ms=0, retention_bytes=1
        )
        for _ in range(3):
            log.append(batch(1, value_bytes=100))
        assert log.flusher.in_flight is not None
        assert log.delete_old_segments(clock()) >= 1
        assert log.delete_pending_files(clock() + 1) >= 1
        executor.run_all()
        await settle()
        assert log.failure is None
        assert log.recovery_point == 2

    run(body)


def test_a_failed_background_fsync_fails_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def body() -> None:
        log, executor = background_log(tmp_path, FakeClock(), flush_messages=1)
        log.append(batch(1))

        def broken(_: int) -> None:
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(os, "fsync", broken)
        executor.run_all()
        await settle()
        assert log.failure is not None
        assert log.recovery_point == 0
        with pytest.raises(KafkaStorageError) as caught:
            log.append(batch(1))
        assert caught.value.code == 56

    run(body)


def test_a_blocking_flush_and_close_wait_for_the_flush_in_flight(tmp_path: Path) -> None:
    """``close`` (shutdown) must not mark the log flushed while a worker still syncs it."""
    clock = FakeClock()
    log, executor = background_log(tmp_path, clock, flush_messages=1)

    async def body() -> None:
        log.append(batch(1))
        assert log.flusher.in_flight is not None

    run(body)
    job = log.flusher.in_flight
    assert job is not None
    executor.run_all()  # the worker finishes; the loop that would apply it is gone
    log.flush()
    assert log.recovery_point == 1
    assert log.flusher.in_flight is None
    log.close()
    assert reopen(log, clock, clean=True, recovery_point=1).log_end_offset == 1


def test_epoch_checkpoint_is_written_without_fsync_and_made_durable_before_the_recovery_point_passes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A follower appends a batch of a new epoch at offset 3 while a flush up to 4 is in flight
    (it was started inside the append): that flush must stop the recovery point at 3, and the
    follow-up flush fsyncs the checkpoint (and the directory) before it lets it pass."""
    recorder = FsyncRecorder(monkeypatch)

    async def body() -> None:
        log, executor = background_log(tmp_path, FakeClock(), flush_messages=4)
        recorder.on_loop = 0  # Log.create fsyncs its directory
        epochs = LeaderEpochFile(log.directory, log.flusher.sync_before).load(log.log_end_offset, ())
        epochs.assign(1, 0)
        for _ in range(3):
            log.append(batch(1), leader_epoch=1)
        assert recorder.on_loop == 0, "the epoch checkpoint was written without an fsync"
        log.append(batch(1))  # offset 3; flush.messages starts a flush up to 4
        assert log.flusher.in_flight is not None
        epochs.assign(2, 3)  # Partition.append_as_follower learns the epoch after the append
        assert recorder.on_loop == 0
        assert LeaderEpochFile(log.directory).read() == [EpochEntry(1, 0), EpochEntry(2, 3)]
        run_worker(executor, recorder)
        await settle()
        assert CHECKPOINT_NAME not in recorder.names()
        assert log.recovery_point == 3, "not past the entry's start before the file is durable"
        run_worker(executor, recorder)
        await settle()
        names = recorder.names()
        assert CHECKPOINT_NAME in names
        assert names[-1] == "t-0"
        assert log.recovery_point == 4
        assert recorder.on_loop == 0

    run(body)


def test_kafka_16541_a_damaged_epoch_checkpoint_is_rebuilt_from_every_batch(tmp_path: Path) -> None:
    """A machine crash during a rewrite not yet fsynced can leave the file empty or damaged; the
    batches below the recovery point then hold the only record of their epochs."""
    clock = FakeClock()
    log = make_log(tmp_path, clock)
    for epoch in (1, 1, 3, 4):
        log.append(batch(1), leader_epoch=epoch)
    log.flush()
    (log.directory / CHECKPOINT_NAME).write_bytes(b"0\n3\n1 0\n3 2\n4 \x00\x00")
    cache = _load_epochs(log)
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(3, 2), EpochEntry(4, 3)]
    assert LeaderEpochFile(log.directory).read() == cache.entries
    (log.directory / CHECKPOINT_NAME).write_bytes(b"")  # empty: unreadable too
    assert _load_epochs(log).entries == cache.entries


def test_log_manager_runs_flushes_in_its_threads_and_waits_for_them_on_shutdown(tmp_path: Path) -> None:
    async def body() -> None:
        manager = LogManager(
            LogManagerConfig(log_dirs=(str(tmp_path),)),
            LogConfig(segment_bytes=2 * ONE),
            FakeClock(),
            flush_in_background=True,
        )
        manager.startup()
        try:
            log = manager.get_or_create_log("t", 0)
            for _ in range(9):
                log.append(batch(1, value_bytes=100))
            await wait_until_async(lambda: log.recovery_point >= 8, "the last roll's flush", interval_s=0.01)
            assert log.recovery_point == 8, "the last roll's flush completed in the background"
        finally:
            manager.shutdown()
        assert log.closed
        assert log.flusher.in_flight is None

    run(body)


def test_kafka_doc_5_4_flush_messages_a_produce_waits_for_its_flush_as_kafkas_append_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``flush.messages=1`` an acknowledged batch is fsynced (Kafka's append fsyncs before it
    returns): the produce answers when ``wait_durable`` completes, and errors when the flush fails."""

    async def body() -> None:
        log, executor = background_log(tmp_path, FakeClock(), flush_messages=1)
        info = log.append(batch(2))
        durable = log.flusher.wait_durable(info.last_offset + 1)
        assert durable is not None
        log.append(batch(1))  # merged into the follow-up flush
        second = log.flusher.wait_durable(3)
        assert second is not None
        await settle()
        assert not durable.done()
        executor.run_all()
        await settle()
        assert durable.done()
        assert durable.result() is None
        assert not second.done()
        executor.run_all()
        await settle()
        assert second.done()
        assert log.flusher.wait_durable(3) is None, "already durable"

        log.append(batch(1))
        failing = log.flusher.wait_durable(4)
        assert failing is not None

        def broken(_: int) -> None:
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(os, "fsync", broken)
        executor.run_all()
        await settle()
        with pytest.raises(KafkaStorageError):
            failing.result()

    run(body)


def test_a_produce_waiting_for_a_flush_is_answered_when_a_truncation_cuts_its_batch(tmp_path: Path) -> None:
    async def body() -> None:
        log, executor = background_log(tmp_path, FakeClock(), flush_messages=1)
        log.append(batch(1))
        log.append(batch(1))
        cut = log.flusher.wait_durable(2)
        assert cut is not None
        log.truncate_to(1)
        assert cut.done()
        executor.run_all()
        await settle()
        assert log.recovery_point == 1

    run(body)


def test_epoch_checkpoint_rewrite_names_the_smallest_changed_start_offset(tmp_path: Path) -> None:
    """``durable_before`` gets the first offset the rewrite changed: an added entry's start, or a
    removed one's (a truncation); an unchanged rewrite registers nothing new."""
    calls: list[int] = []
    file = LeaderEpochFile(tmp_path, lambda _path, offset: calls.append(offset))
    cache = file.load(0, ())
    cache.assign(1, 0)
    cache.assign(3, 10)
    cache.assign(4, 20)
    cache.truncate_from_end(15)  # removes (4, 20)
    cache.assign(5, 15)
    assert calls == [0, 10, 20, 20, 15]
    assert file.read() == [EpochEntry(1, 0), EpochEntry(3, 10), EpochEntry(5, 15)]
    file.write(cache.entries)
    assert calls == [0, 10, 20, 20, 15]


def test_a_produce_does_not_wait_for_a_rolls_flush_without_flush_messages(tmp_path: Path) -> None:
    """Kafka's append fsyncs only for ``flush.messages``; a roll's flush runs in the background."""

    async def body() -> None:
        log, executor = background_log(tmp_path, FakeClock(), segment_bytes=2 * ONE)
        for _ in range(4):
            info = log.append(batch(1, value_bytes=100))
        assert log.flusher.in_flight is not None
        assert log.flusher.wait_durable(info.last_offset + 1) is None
        executor.run_all()
        await settle()

    run(body)
