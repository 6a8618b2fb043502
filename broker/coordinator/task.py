"""The one background task of a coordinator (group or transaction), shared by both managers.

It loads the coordinator's partitions of its state topic a step at a time (other requests run between steps) and
fires its timers (session timeouts, delayed joins, transaction timeouts, marker retries, expiry).
docs/architecture.md ("one owner per file and per background loop"): it is the only task; if it dies, ``shutdown()``
fails everyone waiting on it
and the exception propagates to the owner (``broker.server`` stops the broker).
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import enum
import logging
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from broker.coordinator.group.timers import Timers

log = logging.getLogger(__name__)


class PartitionStatus(enum.Enum):
    """Where a coordinator's partition of its state topic is: being replayed, or serving."""

    LOADING = "loading"
    ACTIVE = "active"


class PartitionLoadStep(Protocol):
    """One partition being replayed (``group.store.PartitionLoad``, ``txn.store.PartitionLoad``)."""

    partition: int

    def step(self) -> bool: ...


class CoordinatorTask(abc.ABC):
    """Mixin for a manager with ``timers``, ``clock_ms``, pending ``_loads``, ``_finish_load``,
    ``partitions`` and ``shutdown``; ``task_name`` and ``state_topic`` name it in logs."""

    task_name: str
    state_topic: str
    timers: Timers
    clock_ms: Callable[[], int]
    partitions: dict[int, Any]
    _loads: deque[Any]
    _wake: asyncio.Event | None
    _sleep_until: int | None  # the deadline the task sleeps towards (None: none)

    @abc.abstractmethod
    def _finish_load(self, load: Any) -> None:
        """Install what a completed load read (if the partition is still being loaded)."""

    def load_step(self) -> bool:
        """Replay a bounded part of the first pending partition; True while loads remain."""
        if not self._loads:
            return False
        load: PartitionLoadStep = self._loads[0]
        try:
            finished = load.step()
        except Exception:
            # Serving the partition without its history would hand out wrong state; answering
            # NOT_COORDINATOR until the next leadership change is the safe choice.
            log.exception("loading %s-%s failed; not serving it", self.state_topic, load.partition)
            self._loads.popleft()
            self.partitions.pop(load.partition, None)
            return bool(self._loads)
        if finished:
            self._loads.popleft()
            self._finish_load(load)
        return bool(self._loads)

    def load_all(self) -> None:
        while self.load_step():
            pass

    @abc.abstractmethod
    def shutdown(self) -> None:
        """Fail every waiter and stop serving."""

    def _on_schedule(self, deadline_ms: int) -> None:
        """Wake the task only for a deadline earlier than the one it sleeps towards."""
        if self._sleep_until is None or deadline_ms < self._sleep_until:
            self.wake()

    def wake(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def run_due(self, now_ms: int | None = None) -> int:
        """Fire every timer due at ``now_ms`` (default: the clock); returns how many fired."""
        fired = 0
        while True:
            due = self.timers.pop_due(self.clock_ms() if now_ms is None else now_ms)
            if not due:
                return fired
            for action in due:
                fired += 1
                try:
                    action()
                except Exception:
                    log.exception("%s timer failed", self.task_name)

    async def run(self) -> None:
        """The coordinator's one background task: load partitions, fire timers."""
        self._wake = asyncio.Event()
        self.timers.on_schedule = self._on_schedule
        try:
            while True:
                self._wake.clear()
                self.run_due()
                if self.load_step() or self._loads:
                    await asyncio.sleep(0)
                    continue
                deadline = self._sleep_until = self.timers.next_deadline()
                timeout = None if deadline is None else max(deadline - self.clock_ms(), 0) / 1000.0
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await self._wake.wait()
                self._sleep_until = None
        except Exception:
            log.exception("the %s's task died; it no longer serves requests", self.task_name)
            self.shutdown()
            raise
        finally:
            self.timers.on_schedule = None
            self._wake = None
