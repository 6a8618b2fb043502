"""Stopping the client's background tasks: every owner (cluster, fetcher, sender, group
membership, transaction manager) stops its tasks the same way, here.

All the tasks are cancelled first, then each is awaited, so that nothing they hold outlives the
owner's ``close``; what a task raises while it unwinds (``CancelledError``, or an error it had
died of earlier) is swallowed: the owner is closing, and a failure that mattered was already
delivered to whoever waited on the task (docs/architecture.md, "every background loop has one
owning task").
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any] | None]) -> None:
    """Cancel every task of ``tasks`` (None entries skipped), then wait for each to finish."""
    pending = [t for t in tasks if t is not None]
    for task in pending:
        task.cancel()
    for task in pending:
        with contextlib.suppress(BaseException):
            await task
