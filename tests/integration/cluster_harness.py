"""Waits of the multi-process cluster tests (clusters come from ``pyspark_log.embedded_cluster``):
poll for a state with a generous deadline that only a failure waits out."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

WAIT_S = 90.0


def wait_for(condition: Callable[[], Any], what: str, timeout_s: float = WAIT_S) -> Any:
    """Poll ``condition`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = condition()
        except (OSError, ValueError, KeyError) as exc:
            last_error, result = exc, None
        if result:
            return result
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what} (last error: {last_error!r})")
