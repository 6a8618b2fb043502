"""``LogManager``: log dirs, locks, partitions, background tasks, checkpoints, clean shutdown."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker.log.checkpoint import read_checkpoint
from broker.log.config import LogConfig, LogManagerConfig
from broker.log.errors import LogDirLockedError
from broker.log.manager import CLEAN_SHUTDOWN_FILE, LogManager
from tests.unit.log.helpers import T0_MS, FakeClock, batch, read_all


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def _manager(dirs: list[Path], clock: FakeClock, **config: object) -> LogManager:
    manager = LogManager(
        LogManagerConfig(log_dirs=tuple(str(d) for d in dirs)),
        LogConfig(**config),  # type: ignore[arg-type]
        clock,
    )
    manager.startup()
    return manager


def test_create_append_shutdown_and_reload(tmp_path: Path, clock: FakeClock) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = _manager(dirs, clock, segment_bytes=500)
    for partition in range(4):
        log = manager.get_or_create_log("orders", partition)
        for i in range(5):
            log.append(batch(2, tag=i, value_bytes=50))
    assert manager.get_or_create_log("orders", 0) is manager.get_log("orders", 0)
    assert sorted(p.name for p in dirs[0].iterdir() if p.is_dir()) == ["orders-0", "orders-2"]
    manager.shutdown()
    for d in dirs:
        assert (d / CLEAN_SHUTDOWN_FILE).exists()
        points = read_checkpoint(d / "recovery-point-offset-checkpoint")
        assert set(points.values()) == {10}
        assert set(read_checkpoint(d / "log-start-offset-checkpoint").values()) == {0}

    again = _manager(dirs, clock, segment_bytes=500)
    assert not any((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)  # a crash now is unclean
    for partition in range(4):
        log = again.get_log("orders", partition)
        assert log is not None
        assert read_all(log) == list(range(10))
    again.shutdown()


def test_second_manager_on_the_same_dir_is_refused(tmp_path: Path, clock: FakeClock) -> None:
    manager = _manager([tmp_path / "a"], clock)
    with pytest.raises(LogDirLockedError) as info:
        _manager([tmp_path / "a"], clock)
    assert "a" in str(info.value)
    assert info.value.code == 56
    manager.shutdown()
    _manager([tmp_path / "a"], clock).shutdown()  # free again after shutdown


def test_unclean_restart_recovers_from_the_checkpoint(tmp_path: Path, clock: FakeClock) -> None:
    manager = _manager([tmp_path], clock)
    log = manager.get_or_create_log("t", 0)
    log.append(batch(3))
    log.flush()
    manager.write_checkpoints()
    log.append(batch(2))
    segment = log.segments.active
    with segment.log_path.open("r+b") as f:  # crash: the last batch is torn
        f.truncate(segment.size_bytes - 1)
    for lock in manager._locks:  # the process "died": its locks are gone
        lock.release()
    again = _manager([tmp_path], clock)
    recovered = again.get_log("t", 0)
    assert recovered is not None
    assert recovered.log_end_offset == 3
    again.shutdown()


def test_delete_log_renames_then_removes_after_the_delay(tmp_path: Path, clock: FakeClock) -> None:
    manager = _manager([tmp_path], clock, file_delete_delay_ms=1000)
    manager.get_or_create_log("gone", 0).append(batch(1))
    assert manager.delete_log("gone", 0)
    assert not manager.delete_log("gone", 0)
    assert manager.get_log("gone", 0) is None
    renamed = [p.name for p in tmp_path.iterdir() if p.name.startswith("gone-0.")]
    assert len(renamed) == 1
    assert renamed[0].endswith("-delete")
    assert asyncio.run(manager.run_file_deletion_once(clock.now_ms + 999)) == 0
    assert asyncio.run(manager.run_file_deletion_once(clock.now_ms + 1000)) == 1
    assert not any(p.name.startswith("gone-0") for p in tmp_path.iterdir())
    assert manager.get_or_create_log("gone", 0).log_end_offset == 0  # a fresh log
    manager.shutdown()


def test_leftover_delete_dirs_are_removed_at_startup(tmp_path: Path, clock: FakeClock) -> None:
    leftover = tmp_path / "t-0.0123456789abcdef0123456789abcdef-delete"
    leftover.mkdir()
    (leftover / "00000000000000000000.log").write_bytes(b"")
    (tmp_path / "__cluster_metadata-0").mkdir()  # owned by the Raft log, not loaded here
    manager = _manager([tmp_path], clock)
    assert not leftover.exists()
    assert manager.get_log("__cluster_metadata", 0) is None
    assert (tmp_path / "__cluster_metadata-0").exists()
    manager.shutdown()


def test_background_retention_flush_and_file_deletion(tmp_path: Path, clock: FakeClock) -> None:
    manager = _manager([tmp_path], clock, retention_ms=1000, flush_ms=500, file_delete_delay_ms=100)
    log = manager.get_or_create_log("t", 0)
    log.append(batch(2, timestamp_ms=T0_MS))
    log.roll()
    log.append(batch(2, timestamp_ms=T0_MS + 2000))

    async def run() -> tuple[int, int, int, int]:
        flushed = await manager.run_flush_once(T0_MS + 500)
        deleted = await manager.run_retention_once(T0_MS + 1001)
        removed_early = await manager.run_file_deletion_once(T0_MS + 1050)
        removed = await manager.run_file_deletion_once(T0_MS + 1101)
        return flushed, deleted, removed_early, removed

    assert asyncio.run(run()) == (1, 1, 0, 1)
    assert log.log_start_offset == 2
    assert log.recovery_point == 4
    manager.shutdown()


def test_topic_config_applies_to_existing_logs(tmp_path: Path, clock: FakeClock) -> None:
    manager = _manager([tmp_path], clock)
    log = manager.get_or_create_log("t", 0)
    manager.set_topic_config("t", LogConfig(segment_bytes=200))
    for i in range(4):
        log.append(batch(1, tag=i, value_bytes=80))
    assert len(log.segments) == 4
    with pytest.raises(ValueError, match="illegal"):
        manager.get_or_create_log("bad/name", 0)
    manager.shutdown()
