"""Log-dir failures (issue 17 "Disk full and disk errors are visible"), with the OS error injected
at the I/O boundary (``pwritev_all``, the probe write): "Log one ERROR per failing dir naming the
path and the OS error (not one per request) ... and recover by itself when space returns if the
log is still consistent". Nothing acknowledged is lost. The real full disk is in
``tests/integration/test_disk_full.py``.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from pathlib import Path

import pytest

from broker.log import dir_health, segment
from broker.log import manager as manager_module
from broker.log.config import LogConfig, LogManagerConfig
from broker.log.errors import KafkaStorageError
from broker.log.manager import CLEAN_SHUTDOWN_FILE, LogManager
from broker.log.metrics import LogDirCollector
from broker.metrics.exposition import render
from tests.unit.log.helpers import FakeClock, batch, read_all


def enospc(*_: object, **__: object) -> int:
    raise OSError(errno.ENOSPC, "No space left on device")


def manager(dirs: list[Path], clock: FakeClock) -> LogManager:
    logs = LogManager(LogManagerConfig(log_dirs=tuple(map(str, dirs))), LogConfig(), clock)
    logs.startup()
    return logs


def errors_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def test_full_disk_logs_one_error_per_dir_and_recovers_when_space_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    full, other = tmp_path / "full", tmp_path / "other"
    logs = manager([full, other], clock)
    a = logs.get_or_create_log("t", 0)
    b = logs.get_or_create_log("t", 1)
    assert {logs.dir_of("t", 0), logs.dir_of("t", 1)} == {full, other}
    victim, healthy = (a, b) if logs.dir_of("t", 0) == full else (b, a)
    victim.append(batch(2))  # acknowledged: offsets 0, 1
    size_before = victim.size_bytes

    caplog.set_level(logging.WARNING)
    monkeypatch.setattr(segment, "pwritev_all", enospc)
    for _ in range(5):
        with pytest.raises(KafkaStorageError) as caught:
            victim.append(batch(1))
        assert caught.value.code == 56
    monkeypatch.undo()
    errors = errors_of(caplog)
    assert len(errors) == 1, errors  # one per dir, not one per request
    assert str(full) in errors[0]
    assert "No space left on device" in errors[0]
    assert "ENOSPC" in errors[0]
    state = logs.dir_states[full]
    assert state.offline
    assert state.errors_total == 1
    assert logs.offline_dir_count == 1
    assert not logs.dir_states[other].offline
    healthy.append(batch(1))  # the other dir goes on
    assert read_all(victim) == [0, 1], "reads of an offline dir go on; nothing acknowledged is lost"
    assert (
        victim.size_bytes
        == size_before
        == (full / "t-0" if victim is a else full / "t-1").joinpath("00000000000000000000.log").stat().st_size
    )
    metrics = render([LogDirCollector(logs)]).decode()
    assert "kafka_log_logmanager_offlinelogdirectorycount 1.0" in metrics
    assert f'kafka_log_logmanager_logdirectoryoffline{{logdirectory="{full.absolute()}"}} 1.0' in metrics
    logs.get_or_create_log("u", 0)
    assert logs.dir_of("u", 0) == other, "new partitions avoid offline dirs"

    monkeypatch.setattr(dir_health.os, "write", enospc)  # still full: the probe fails, still offline
    assert asyncio.run(logs.run_dir_probe_once()) == 0
    assert state.offline
    assert len(errors_of(caplog)) == 1
    monkeypatch.undo()

    assert asyncio.run(logs.run_dir_probe_once()) == 1  # space returned
    assert not state.offline
    assert logs.offline_dir_count == 0
    assert any("back online" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert not list(full.glob(dir_health.PROBE_FILE))
    victim.append(batch(1))
    assert read_all(victim) == [0, 1, 2]
    assert "kafka_log_logmanager_offlinelogdirectorycount 0.0" in render([LogDirCollector(logs)]).decode()
    logs.shutdown()
    assert (full / CLEAN_SHUTDOWN_FILE).exists()


def test_a_log_left_longer_than_memory_is_cut_back_before_the_dir_comes_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that failed half-way and whose truncation failed too leaves bytes past the log's
    end: the probe cuts them off (the log is consistent again) before the dir is online."""
    clock = FakeClock()
    logs = manager([tmp_path / "d"], clock)
    log = logs.get_or_create_log("t", 0)
    log.append(batch(1))
    path = log.segments.active.log_path
    size = path.stat().st_size

    def partial_then_enospc(fd: int, buffers: object, position: int) -> int:
        os.pwrite(fd, b"\x01" * 10, position)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(segment, "pwritev_all", partial_then_enospc)
    monkeypatch.setattr(segment.os, "ftruncate", enospc)
    with pytest.raises(KafkaStorageError):
        log.append(batch(1))
    monkeypatch.undo()
    assert path.stat().st_size == size + 10
    assert asyncio.run(logs.run_dir_probe_once()) == 1
    assert path.stat().st_size == size
    log.append(batch(1))
    assert read_all(log) == [0, 1]
    logs.shutdown()


def test_failed_checkpoint_write_takes_the_dir_offline_and_shutdown_survives_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    logs = manager([tmp_path / "d"], clock)
    logs.get_or_create_log("t", 0).append(batch(1))
    monkeypatch.setattr(manager_module, "write_checkpoint", enospc)
    caplog.set_level(logging.ERROR)
    asyncio.run(logs.run_checkpoints_once())
    asyncio.run(logs.run_checkpoints_once())
    assert logs.dir_states[tmp_path / "d"].offline
    assert len(errors_of(caplog)) == 1
    logs.shutdown()  # no exception; the offline dir is not marked clean
    assert not (tmp_path / "d" / CLEAN_SHUTDOWN_FILE).exists()


def test_describe_os_error_names_the_errno() -> None:
    text = dir_health.describe_os_error(OSError(errno.EIO, "Input/output error"))
    assert text == "[Errno 5] Input/output error (EIO)"
