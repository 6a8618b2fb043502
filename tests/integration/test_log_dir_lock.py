"""A log dir's lock holds against another process (``LogManager``: one broker per log dir, as
Kafka's ``.lock`` file; the same-process case is tests/unit/log/test_manager.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from broker.log.config import LogConfig, LogManagerConfig
from broker.log.manager import LogManager
from tests.unit.log.helpers import FakeClock


def test_lock_refuses_another_process(tmp_path: Path) -> None:
    manager = LogManager(LogManagerConfig(log_dirs=(str(tmp_path / "a"),)), LogConfig(), FakeClock())
    manager.startup()
    code = (
        "import sys; from broker.log.manager import LogManager; from broker.log.config import LogManagerConfig\n"
        "from broker.log.errors import LogDirLockedError\n"
        f"m = LogManager(LogManagerConfig(log_dirs=({str(tmp_path / 'a')!r},)))\n"
        "try:\n    m.startup()\nexcept LogDirLockedError:\n    sys.exit(3)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parents[3], check=False)
    assert result.returncode == 3
    manager.shutdown()
