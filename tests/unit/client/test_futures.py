"""DeliveryFuture: the concurrent.futures.Future interface, cheap and thread-safe."""

from __future__ import annotations

import threading

import pytest

from pyspark_log.client.futures import DeliveryFuture


def test_result_and_callbacks() -> None:
    fut: DeliveryFuture[int] = DeliveryFuture()
    seen: list[int] = []
    fut.add_done_callback(lambda f: seen.append(f.result()))
    assert not fut.done()
    assert fut.running()
    fut.set_result(7)
    fut.set_result(8)  # completes once
    assert fut.done()
    assert fut.result() == 7
    assert fut.exception() is None
    fut.add_done_callback(lambda f: seen.append(f.result() * 10))
    assert seen == [7, 70]
    assert not fut.cancel()
    assert not fut.cancelled()


def test_exception_and_timeout() -> None:
    fut: DeliveryFuture[int] = DeliveryFuture()
    with pytest.raises(TimeoutError):
        fut.result(timeout=0.01)
    err = ValueError("boom")
    fut.set_exception(err)
    assert fut.exception() is err
    with pytest.raises(ValueError, match="boom"):
        fut.result()


def test_waiter_in_another_thread_is_woken() -> None:
    fut: DeliveryFuture[str] = DeliveryFuture()
    got: list[str] = []
    t = threading.Thread(target=lambda: got.append(fut.result(timeout=5)))
    t.start()
    fut.set_result("ok")
    t.join(5)
    assert got == ["ok"]


def test_a_raising_callback_is_logged_not_propagated(caplog: pytest.LogCaptureFixture) -> None:
    fut: DeliveryFuture[int] = DeliveryFuture()

    def bad(f: DeliveryFuture[int]) -> None:
        raise RuntimeError("callback bug")

    fut.add_done_callback(bad)
    fut.set_result(1)
    assert "callback raised" in caplog.text
    assert "pending" in repr(DeliveryFuture())
