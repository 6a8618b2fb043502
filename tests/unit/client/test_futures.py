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


def test_record_futures_of_a_batch_settle_at_once_with_lazy_metadata() -> None:
    """``settle_records``: a batch's ``RecordFuture`` s complete together (offset ``base + i``,
    LogAppendTime when the broker set one); waiters, done callbacks and ``on_delivery`` run;
    other entries (plain callables) are left to the caller; done futures are not touched again."""
    from pyspark_log.client.futures import RecordFuture, RecordOutcome, settle_records
    from pyspark_log.client.types import RecordMetadata

    reports: list[tuple[object, object]] = []
    futs = [
        RecordFuture("t", None, b"k", b"v", 100 + i, (), 40, (lambda m, e: reports.append((m, e))) if i == 1 else None)
        for i in range(3)
    ]
    seen: list[RecordMetadata] = []
    futs[2].add_done_callback(lambda f: seen.append(f.result()))
    waiter = threading.Thread(target=lambda: seen.append(futs[0].result(timeout=5)))
    waiter.start()
    plain = object()
    others = settle_records([*futs, plain, None], RecordOutcome("t", 4, 10, -1), None)
    waiter.join()
    assert others == [3]
    assert [f.result() for f in futs] == [RecordMetadata("t", 4, 10 + i, 100 + i) for i in range(3)]
    assert reports == [(RecordMetadata("t", 4, 11, 101), None)]
    assert sorted(m.offset for m in seen) == [10, 12]
    settle_records(futs, None, RuntimeError("late"))  # already done: ignored
    assert futs[0].exception() is None

    lat = [RecordFuture("t", None, None, b"v", 5, (), 40, None)]
    settle_records(lat, RecordOutcome("t", 0, -1, 999), None)  # acks=0 and LogAppendTime
    assert lat[0].result() == RecordMetadata("t", 0, -1, 999)

    failed = [RecordFuture("t", None, None, b"v", 5, (), 40, lambda m, e: reports.append((m, e)))]
    settle_records(failed, None, ValueError("no"))
    with pytest.raises(ValueError, match="no"):
        failed[0].result()
    assert reports[-1][0] is None
    assert isinstance(reports[-1][1], ValueError)
