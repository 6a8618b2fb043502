"""Waiting in tests: poll for a state with a generous deadline that only a failure waits out;
never sleep for a duration as synchronisation (docs/architecture.md, "house style").

One place for every tier:

- ``wait_until(condition, what)`` polls ``condition()`` until it returns something true and
  returns that value; after ``timeout_s`` it raises ``AssertionError`` naming ``what`` and the
  last value (or the last exception of a type in ``retry_on``, which counts as "not yet").
- ``wait_until_async`` is the same for a test driving an event loop: it yields to the loop
  between checks, so the tasks under test make progress.
- ``Deadline`` is the clock of a loop that must return what it has by a time rather than fail
  (a reader that collects records until it has ``n`` or time is up, and lets its caller compare).

Deadlines default to 90 s and use ``time.monotonic``; a loaded machine is slow, not broken.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Generator
from typing import TypeVar

T = TypeVar("T")

WAIT_S = 90.0
"""The default deadline: generous, since only a failure waits it out."""


class Deadline:
    """A point ``timeout_s`` from now on the monotonic clock."""

    def __init__(self, timeout_s: float = WAIT_S) -> None:
        self.timeout_s = timeout_s
        self.at = time.monotonic() + timeout_s

    def expired(self) -> bool:
        return time.monotonic() >= self.at

    def remaining_s(self) -> float:
        """Seconds left, never below zero."""
        return max(0.0, self.at - time.monotonic())


def _checks(
    condition: Callable[[], T],
    what: str | Callable[[], str],
    timeout_s: float,
    retry_on: tuple[type[BaseException], ...],
) -> Generator[None, None, T]:
    """Check once per step; yields while not yet, returns the true value, raises at the deadline."""
    deadline = Deadline(timeout_s)
    while True:
        error: BaseException | None = None
        value: T | None = None
        try:
            value = condition()
        except retry_on as exc:
            error = exc
        if error is None and value:
            return value
        if deadline.expired():
            described = what() if callable(what) else what
            seen = f"last error {error!r}" if error is not None else f"last value {value!r}"
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {described} ({seen})") from error
        yield


def wait_until(
    condition: Callable[[], T],
    what: str | Callable[[], str],
    *,
    timeout_s: float = WAIT_S,
    interval_s: float = 0.1,
    retry_on: tuple[type[BaseException], ...] = (),
) -> T:
    """Return ``condition()``'s first true value, checking every ``interval_s``.

    ``what`` names the awaited state in the failure (a callable is asked at the failure, so it
    can describe what was seen by then). An exception of a type in ``retry_on`` counts as "not
    yet"; any other propagates at once. Raises AssertionError after ``timeout_s``.
    """
    checks = _checks(condition, what, timeout_s, retry_on)
    while True:
        try:
            next(checks)
        except StopIteration as done:
            return done.value
        time.sleep(interval_s)


async def wait_until_async(
    condition: Callable[[], T],
    what: str | Callable[[], str],
    *,
    timeout_s: float = WAIT_S,
    interval_s: float = 0.005,
    retry_on: tuple[type[BaseException], ...] = (),
) -> T:
    """``wait_until`` for a test running an event loop: ``asyncio.sleep`` between checks."""
    checks = _checks(condition, what, timeout_s, retry_on)
    while True:
        try:
            next(checks)
        except StopIteration as done:
            return done.value
        await asyncio.sleep(interval_s)
