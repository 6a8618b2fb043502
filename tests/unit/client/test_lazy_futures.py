"""The sync ``send()``'s futures complete lazily from their batch (``futures.RecordFuture``,
``link_records``): the batch holds only the record's row, so a dropped future is freed at once,
while ``done``/``result``/``exception``/``add_done_callback`` and ``on_delivery`` keep the
``concurrent.futures`` semantics (a blocking ``result()``, callbacks on the completing thread,
each exactly once), also across a batch split (``MESSAGE_TOO_LARGE``) and a failure."""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref
from typing import Any

import pytest

from pyspark_log.client.accumulator import RecordAccumulator
from pyspark_log.client.backoff import ExponentialBackoff
from pyspark_log.client.errors import ClientClosedError
from pyspark_log.client.futures import RecordFuture, link_records
from pyspark_log.client.handoff import HANDOFF_CHUNK, Handoff
from pyspark_log.client.producer_batch import ProducerBatch
from pyspark_log.client.types import RecordMetadata, TopicPartition

pytestmark = pytest.mark.unit

TP = TopicPartition("t", 2)


def futures(n: int, on_delivery: Any = None) -> list[RecordFuture]:
    return [RecordFuture("t", None, b"k%d" % i, b"v%d" % i, 1000 + i, (), 40, on_delivery) for i in range(n)]


def appended(futs: list[RecordFuture], batch_size: int = 1 << 20) -> tuple[RecordAccumulator, list[ProducerBatch]]:
    """Append the futures' rows as the hand-off does, and link them; returns the batches."""
    acc = RecordAccumulator(batch_size_bytes=batch_size, linger_ms=0, retry_backoff=ExponentialBackoff(1, 1))
    placed: list[tuple[ProducerBatch, int, int, int]] = []
    rows = [f._row for f in futs]
    acc.append_many(TP, rows, [f._size for f in futs], [None] * len(futs), 0, placed)
    link_records(futs, placed)
    return acc, list(acc._queues[TP])


def test_an_unwatched_future_is_not_held_by_its_batch_and_completes_lazily() -> None:
    futs = futures(3)
    _, (batch,) = appended(futs)
    assert batch.records == [f._row for f in futs]
    assert batch.thunks == [None, None, None]  # the batch holds rows, not futures
    ref = weakref.ref(futs[0])
    del futs[0]
    gc.collect()
    assert ref() is None  # freed while its batch is still queued
    assert not futs[0].done()
    assert futs[0].running()
    batch.complete(50)
    assert futs[0].done()
    assert futs[0].result() == RecordMetadata("t", 2, 51, 1001)  # offset base + index, own CreateTime
    assert futs[1].exception() is None
    assert futs[1].result(timeout=0) == RecordMetadata("t", 2, 52, 1002)


def test_log_append_time_and_acks_0_come_from_the_batch() -> None:
    futs = futures(2)
    _, (batch,) = appended(futs)
    batch.complete(-1, 777)
    assert [f.result() for f in futs] == [RecordMetadata("t", 2, -1, 777)] * 2


def test_result_blocks_until_the_batch_completes_whether_waiting_began_before_or_after_linking() -> None:
    futs = futures(4)
    results: list[RecordMetadata] = []
    early = threading.Thread(target=lambda: results.append(futs[0].result(timeout=30)))
    early.start()
    while futs[0]._event is None:  # the waiter has hooked itself (no batch yet)
        threading.Event().wait(0.001)
    _, (batch,) = appended(futs)
    assert batch.thunks[0] is futs[0]  # the drain put the hooked future into its batch
    late = threading.Thread(target=lambda: results.append(futs[3].result(timeout=30)))
    late.start()
    while futs[3]._event is None:
        threading.Event().wait(0.001)
    assert batch.thunks[3] is futs[3]
    with pytest.raises(TimeoutError):
        futs[1].result(timeout=0.01)
    batch.complete(10)
    early.join()
    late.join()
    assert sorted(m.offset for m in results) == [10, 13]


def test_callbacks_and_on_delivery_run_once_on_the_completing_thread() -> None:
    reports: list[tuple[Any, Any, str]] = []
    futs = futures(3, on_delivery=lambda m, e: reports.append((m, e, threading.current_thread().name)))
    seen: list[tuple[int, str]] = []
    futs[0].add_done_callback(lambda f: seen.append((f.result().offset, threading.current_thread().name)))
    _, (batch,) = appended(futs)
    futs[1].add_done_callback(lambda f: seen.append((f.result().offset, threading.current_thread().name)))
    done = threading.Thread(target=lambda: batch.complete(0), name="io")
    done.start()
    done.join()
    batch.complete(99)  # late: ignored
    assert sorted(seen) == [(0, "io"), (1, "io")]
    assert [(m.offset, e, t) for m, e, t in reports] == [(0, None, "io"), (1, None, "io"), (2, None, "io")]
    futs[2].add_done_callback(lambda f: seen.append((f.result().offset, "now")))  # done: runs at once
    assert seen[-1] == (2, "now")


def test_a_failed_batch_fails_every_future() -> None:
    reports: list[Any] = []
    futs = futures(2)
    futs.append(RecordFuture("t", None, None, b"x", 5, (), 40, lambda m, e: reports.append((m, e))))
    _, (batch,) = appended(futs)
    batch.fail(ClientClosedError("boom"))
    for f in futs:
        assert f.done()
        assert isinstance(f.exception(), ClientClosedError)
        with pytest.raises(ClientClosedError, match="boom"):
            f.result()
    assert len(reports) == 1
    assert reports[0][0] is None


def test_futures_of_a_split_batch_resolve_through_its_halves() -> None:
    """A batch the broker found too large is split; its records' futures (linked to the old
    batch, hooked before or after the split) get their offsets from the half holding them."""
    futs = futures(6)
    acc, (batch,) = appended(futs)
    waiter_before = threading.Thread(target=lambda: futs[4].result(timeout=30))
    futs[1].add_done_callback(lambda f: None)  # hooked before the split
    assert acc.split_and_reenqueue(batch, 0) == 2
    assert batch.split_parts is not None
    first, second, half = batch.split_parts
    assert half == 3
    assert not futs[4].done()
    waiter_before.start()
    while futs[4]._event is None:
        threading.Event().wait(0.001)
    assert second.thunks[1] is futs[4]
    first.complete(100)
    second.complete(200)
    waiter_before.join()
    assert [f.result().offset for f in futs] == [100, 101, 102, 200, 201, 202]
    assert [f.result().timestamp for f in futs] == [1000 + i for i in range(6)]


def test_many_sends_hand_over_in_chunks_and_a_send_on_the_loop_never_waits() -> None:
    """``Handoff.put`` lets the loop drain once ``HANDOFF_CHUNK`` entries are queued; on the loop
    itself (a delivery callback that sends) it never waits."""

    class Target:
        def is_dead(self) -> bool:
            return False

        def ignore_keys(self) -> bool:
            return False

    loop = asyncio.new_event_loop()
    try:
        handoff = Handoff(Target())  # type: ignore[arg-type]
        handoff.bind(loop)
        handoff.lanes.scheduled = True  # a drain is pending that never runs here
        handoff._queue.extend(futures(HANDOFF_CHUNK))

        async def put_on_loop() -> None:
            handoff.put(futures(1)[0])  # would wait for a drain that cannot run: must not

        loop.run_until_complete(asyncio.wait_for(put_on_loop(), 5))
        assert len(handoff) == HANDOFF_CHUNK + 1
        handoff.put(futures(1)[0])  # off the loop: waits (bounded) for the drain, then queues
        assert len(handoff) == HANDOFF_CHUNK + 2
    finally:
        loop.close()


def test_send_looks_up_a_topic_again_once_the_metadata_is_replaced() -> None:
    """``send`` remembers which topics have metadata per ``ClusterMetadata`` object (the cluster
    replaces it on every refresh): a topic deleted since is waited for again, up to
    ``max.block.ms``, exactly as before it was remembered."""
    from pyspark_log.client import Producer
    from pyspark_log.client.errors import KafkaError

    from .fake_broker import FakeCluster

    fake = FakeCluster(1, topics={"t": 2})
    fake.auto_create = False
    config = {"bootstrap.servers": "fake:9092", "retry.backoff.ms": 1, "linger.ms": 1, "max.block.ms": 200}
    with Producer(config, connector=fake.connector) as p:
        assert p.send("t", b"a", b"k").result(timeout=5).topic == "t"  # waits for the metadata
        assert p.send("t", b"a", b"k").result(timeout=5).topic == "t"  # the fast path: remembered
        assert "t" in p.core.lane_writer.topics
        del fake.topics["t"]
        p._run(p.core.cluster.refresh(1000), 5)
        with pytest.raises((KafkaError, TimeoutError)):
            p.send("t", b"b", b"k")


def test_a_completed_batch_lets_go_of_its_bytes_for_the_futures_that_keep_it() -> None:
    """A caller may keep every future; what they keep of a done batch is its outcome, not its
    encoded bytes."""
    futs = futures(300)  # above COLUMNAR_ENCODE_FROM: the records section comes from columns
    _, (batch,) = appended(futs)
    batch.close()
    assert batch.encode(0)
    assert batch.section is not None
    batch.complete(0)
    assert batch.encoded is None
    assert batch.section is None
    assert batch.record_count == 300
    assert futs[299].result().offset == 299
