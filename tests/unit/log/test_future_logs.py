"""Future logs of AlterReplicaLogDirs (KIP-113) in the ``LogManager``: a copy in another log dir,
swapped in by renaming directories, reloaded after a restart, and a swap a crash interrupted
completed at start-up."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.config import LogConfig, LogManagerConfig
from broker.log.manager import LogManager
from tests.unit.log.helpers import FakeClock, batch, read_all


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def _manager(dirs: list[Path], clock: FakeClock) -> LogManager:
    manager = LogManager(LogManagerConfig(log_dirs=tuple(str(d) for d in dirs)), LogConfig(segment_bytes=400), clock)
    manager.startup()
    return manager


def _copy(manager: LogManager, topic: str, partition: int, target: Path) -> None:
    """Fill a future log in ``target`` from the current one, as the mover does."""
    current = manager.get_log(topic, partition)
    assert current is not None
    future = manager.create_future_log(topic, partition, target)
    while future.log_end_offset < current.log_end_offset:
        with current.read(future.log_end_offset, 1 << 20) as chunk:
            future.append_as_follower(chunk.read_bytes())


def test_a_future_log_replaces_the_current_one_and_survives_a_restart(tmp_path: Path, clock: FakeClock) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = _manager(dirs, clock)
    log = manager.get_or_create_log("orders", 0)
    source = manager.dir_of("orders", 0)
    assert source is not None
    target = next(d for d in dirs if d != source)
    for i in range(8):
        log.append(batch(3, tag=i, value_bytes=40))
    _copy(manager, "orders", 0, target)
    assert [f.name for f in manager.futures_in(target)] == ["orders-0"]
    moved = manager.replace_current_with_future("orders", 0)
    assert log.closed
    assert manager.get_log("orders", 0) is moved
    assert manager.dir_of("orders", 0) == target
    assert manager.future_log("orders", 0) is None
    assert moved.directory == target / "orders-0"
    assert all(s.log_path.parent == moved.directory for s in moved.segments)
    moved.append(batch(2, tag=99))  # rolls and appends in the new directory
    assert read_all(moved) == list(range(26))
    assert not (source / "orders-0").exists()
    assert any(p.name.endswith("-delete") for p in source.iterdir())
    manager.shutdown()

    again = _manager(dirs, clock)
    reloaded = again.get_log("orders", 0)
    assert reloaded is not None
    assert again.dir_of("orders", 0) == target
    assert read_all(reloaded) == list(range(26))
    again.shutdown()


def test_a_future_log_is_loaded_again_and_a_crash_between_the_renames_is_completed(
    tmp_path: Path, clock: FakeClock
) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = _manager(dirs, clock)
    log = manager.get_or_create_log("orders", 0)
    source = manager.dir_of("orders", 0)
    assert source is not None
    target = next(d for d in dirs if d != source)
    for i in range(5):
        log.append(batch(2, tag=i))
    _copy(manager, "orders", 0, target)
    manager.shutdown()

    again = _manager(dirs, clock)  # the move resumes: both logs are there
    future = again.future_log("orders", 0)
    assert future is not None
    assert again.future_dir_of("orders", 0) == target
    assert read_all(future) == list(range(10))
    again.shutdown()

    (source / "orders-0").rename(source / "orders-0.0123abcd-delete")  # the first rename of a swap, then a crash
    third = _manager(dirs, clock)
    swapped = third.get_log("orders", 0)
    assert swapped is not None
    assert third.dir_of("orders", 0) == target
    assert third.future_log("orders", 0) is None
    assert (target / "orders-0").is_dir()
    assert read_all(swapped) == list(range(10))
    third.shutdown()


def test_deleting_a_partition_deletes_its_future_log(tmp_path: Path, clock: FakeClock) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = _manager(dirs, clock)
    manager.get_or_create_log("orders", 0).append(batch(2))
    source = manager.dir_of("orders", 0)
    target = next(d for d in dirs if d != source)
    _copy(manager, "orders", 0, target)
    assert manager.delete_log("orders", 0)
    assert manager.future_log("orders", 0) is None
    assert not any(p.name.endswith("-future") for p in target.iterdir())
    manager.shutdown()


def test_log_dir_named_matches_absolute_paths_only_of_configured_dirs(tmp_path: Path, clock: FakeClock) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = _manager(dirs, clock)
    assert manager.log_dir_named(str(dirs[1].absolute()) + "/") == dirs[1]
    assert manager.log_dir_named(str(tmp_path / "c")) is None
    manager.shutdown()
