"""Waiting for a state in async unit tests: poll a condition, never sleep for a duration.

``wait_until`` yields to the event loop between checks, so tasks under test make progress, and
fails with the awaited ``what`` after a generous deadline (a loaded machine is slow, not broken).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any


async def wait_until(predicate: Callable[[], Any], timeout_s: float = 20.0, what: str = "condition") -> None:
    """Return once ``predicate()`` is true; raise AssertionError naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        await asyncio.sleep(0.005)
