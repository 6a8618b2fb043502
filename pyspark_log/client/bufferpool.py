"""``buffer.memory``: the producer's byte budget for records not yet acknowledged (Kafka documentation §4.4
"The Producer" and §3.3 "Producer Configs").

A record reserves its size estimate before it is queued and gets it back when its batch completes
or fails. When the budget is spent, ``send`` blocks up to ``max.block.ms`` (back-pressure) and
then raises ``BufferExhaustedError``; while anyone waits, the accumulator treats every batch as
sendable so memory frees up as fast as the broker allows.

Two kinds of waiters share the pool: caller threads of the sync facade (``reserve_blocking``, on a
``threading.Condition``) and coroutines on the producer's loop (``reserve``). ``release`` may be
called from any thread; loop waiters are woken on their loop.
"""

from __future__ import annotations

import asyncio
import threading
import time


class BufferPool:
    """A counting budget of bytes; all state under one lock.

    ``lock`` and ``available`` are public for one other owner: the producer's lane
    (``lane_writer.LaneWriter``) reserves a record's bytes and appends its row under ``lock`` in
    one critical section, reading and writing ``available`` directly (``try_reserve`` inlined)."""

    def __init__(self, total_bytes: int) -> None:
        self.total_bytes = total_bytes
        self.available = total_bytes  # (under ``lock``)
        self.lock = threading.Lock()
        self._cond = threading.Condition(self.lock)
        self._thread_waiters = 0
        self._loop_waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    @property
    def available_bytes(self) -> int:
        return self.available

    def has_waiters(self) -> bool:
        return self._thread_waiters > 0 or bool(self._loop_waiters)

    def try_reserve(self, n: int) -> bool:
        # once per send(): the condition's lock taken directly (no Condition wrapper, no
        # context manager; nothing in between can raise)
        lock = self.lock
        lock.acquire()
        available = self.available
        if available >= n:
            self.available = available - n
            lock.release()
            return True
        lock.release()
        return False

    def reserve_blocking(self, n: int, timeout_s: float) -> bool:
        """Reserve ``n`` bytes, waiting up to ``timeout_s`` (caller threads only, never the loop)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            self._thread_waiters += 1
            try:
                while self.available < n:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    self._cond.wait(remaining)
                self.available -= n
                return True
            finally:
                self._thread_waiters -= 1

    async def reserve(self, n: int, timeout_s: float) -> bool:
        """Reserve ``n`` bytes from a coroutine, waiting up to ``timeout_s``."""
        if self.try_reserve(n):
            return True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            with self._cond:
                if self.available >= n:
                    self.available -= n
                    return True
                fut: asyncio.Future[None] = loop.create_future()
                entry = (loop, fut)
                self._loop_waiters.append(entry)
            remaining = deadline - loop.time()
            try:
                if remaining <= 0:
                    return False
                try:
                    await asyncio.wait_for(fut, remaining)
                except TimeoutError:
                    return False
            finally:
                with self._cond:
                    if entry in self._loop_waiters:
                        self._loop_waiters.remove(entry)

    def release(self, n: int) -> None:
        if n <= 0:
            return
        with self._cond:
            self.available = min(self.total_bytes, self.available + n)
            self._cond.notify_all()
            waiters, self._loop_waiters = self._loop_waiters, []
        for loop, fut in waiters:
            loop.call_soon_threadsafe(_wake, fut)


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
