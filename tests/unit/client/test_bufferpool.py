"""buffer.memory back-pressure: a full pool blocks senders until memory is released."""

from __future__ import annotations

import asyncio
import threading

from pyspark_log.client.bufferpool import BufferPool
from tests.waiting import wait_until_async


def test_try_reserve_and_release() -> None:
    pool = BufferPool(100)
    assert pool.try_reserve(60)
    assert not pool.try_reserve(50)
    pool.release(60)
    assert pool.available_bytes == 100
    pool.release(1000)
    assert pool.available_bytes == 100  # never above the total


def test_blocking_reserve_times_out() -> None:
    pool = BufferPool(10)
    assert pool.try_reserve(10)
    assert not pool.reserve_blocking(5, 0.01)
    assert not pool.has_waiters()


def test_blocking_reserve_wakes_on_release_from_another_thread() -> None:
    pool = BufferPool(10)
    assert pool.try_reserve(10)
    got: list[bool] = []
    t = threading.Thread(target=lambda: got.append(pool.reserve_blocking(8, 10)))
    t.start()
    while not pool.has_waiters():
        threading.Event().wait(0.001)
    pool.release(10)
    t.join(5)
    assert got == [True]
    assert pool.available_bytes == 2


def test_async_reserve_waits_and_times_out() -> None:
    async def main() -> None:
        pool = BufferPool(10)
        assert await pool.reserve(10, 1)
        assert not await pool.reserve(1, 0.01)
        waiter = asyncio.ensure_future(pool.reserve(4, 5))
        await wait_until_async(pool.has_waiters, what="the reserve to wait for memory")
        assert pool.has_waiters()
        pool.release(5)
        assert await waiter
        assert pool.available_bytes == 1
        assert not pool.has_waiters()

    asyncio.run(main())


def test_async_waiter_woken_by_release_from_a_thread() -> None:
    async def main() -> None:
        pool = BufferPool(10)
        pool.try_reserve(10)
        waiter = asyncio.ensure_future(pool.reserve(10, 5))
        await wait_until_async(pool.has_waiters, what="the reserve to wait for memory")  # woken by the thread
        threading.Thread(target=pool.release, args=(10,)).start()
        assert await waiter

    asyncio.run(main())
