"""The sync facade: usable with no event loop, from many threads, and from inside a running
loop; never from its own I/O thread; closing stops its thread."""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import threading
from typing import Any

import pytest

from pyspark_log.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from pyspark_log.client.errors import BufferExhaustedError, ClientClosedError
from pyspark_log.client.futures import DeliveryFuture
from pyspark_log.client.partitioner import partition_for_key
from pyspark_log.client.types import RecordMetadata

from .fake_broker import FakeCluster

BASE = {"bootstrap.servers": "fake:9092", "retry.backoff.ms": 1, "linger.ms": 1}


def threads_named(prefix: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(prefix) and t.is_alive()]


def test_produce_consume_admin_without_an_event_loop() -> None:
    fake = FakeCluster(2, topics={})
    with AdminClient(BASE, connector=fake.connector) as admin:
        admin.create_topics([NewTopic("t", 3)])
        assert admin.list_topics() == ["t"]
    got: list[tuple[RecordMetadata | None, BaseException | None]] = []
    with Producer(BASE, connector=fake.connector) as p:
        futs = [p.send("t", f"v{i}", key=f"k{i % 4}", on_delivery=lambda m, e: got.append((m, e))) for i in range(30)]
        p.flush()
        metas = [f.result(timeout=5) for f in futs]
        assert p.partitions_for("t") == [0, 1, 2]
    assert all(m.partition == partition_for_key(f"k{i % 4}".encode(), 3) for i, m in enumerate(metas))
    assert len(got) == 30
    assert all(e is None for _, e in got)
    with Consumer({**BASE, "auto.offset.reset": "earliest", "fetch.max.wait.ms": 10}, connector=fake.connector) as c:
        c.assign([TopicPartition("t", p) for p in range(3)])
        records: list[Any] = []
        while len(records) < 30:
            records += c.poll(timeout_ms=1000)
        assert sorted(r.value for r in records) == sorted(f"v{i}".encode() for i in range(30))
        assert sum(c.end_offsets([TopicPartition("t", p) for p in range(3)]).values()) == 30
        assert c.position(TopicPartition("t", 0)) == c.end_offsets([TopicPartition("t", 0)])[TopicPartition("t", 0)]


def test_works_from_inside_a_running_event_loop() -> None:
    fake = FakeCluster(1, topics={"t": 1})

    async def main() -> RecordMetadata:
        assert asyncio.get_running_loop().is_running()
        with Producer(BASE, connector=fake.connector) as p:
            return p.send("t", b"from a coroutine").result(timeout=5)

    assert asyncio.run(main()).offset == 0


def test_many_threads_share_one_producer_and_keep_per_thread_order() -> None:
    fake = FakeCluster(1, topics={"t": 1})
    with Producer(BASE, connector=fake.connector) as p:

        def work(n: int) -> list[DeliveryFuture[RecordMetadata]]:
            return [p.send("t", f"{n}:{i}".encode(), partition=0) for i in range(100)]

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            all_futs = list(pool.map(work, range(4)))
        p.flush()
    for n, futs in enumerate(all_futs):
        offsets = [f.result().offset for f in futs]
        assert offsets == sorted(offsets), f"thread {n} reordered"
    values = [r.value.decode() for r in fake.records("t", 0)]
    assert len(values) == 400
    for n in range(4):
        mine = [v for v in values if v.startswith(f"{n}:")]
        assert mine == [f"{n}:{i}" for i in range(100)]


def test_calling_the_client_from_its_own_callback_raises_instead_of_deadlocking() -> None:
    fake = FakeCluster(1, topics={"t": 1})
    seen: list[BaseException] = []
    with Producer(BASE, connector=fake.connector) as p:

        def callback(m: object, e: object) -> None:
            try:
                p.flush()
            except RuntimeError as exc:
                seen.append(exc)

        p.send("t", b"x", on_delivery=callback).result(timeout=5)
    assert seen
    assert "own I/O thread" in str(seen[0])


def test_back_pressure_blocks_then_raises() -> None:
    fake = FakeCluster(1, topics={"t": 1})
    with Producer({**BASE, "buffer.memory": 400, "max.block.ms": 50}, connector=fake.connector) as p:
        p.send("t", b"warm up").result(timeout=5)
        fake.response_delay_s = 0.5
        first = p.send("t", b"x" * 300)
        with pytest.raises(BufferExhaustedError):
            p.send("t", b"y" * 300)
        first.result(timeout=5)


def test_close_stops_the_thread_and_later_calls_fail() -> None:
    fake = FakeCluster(1, topics={"t": 1})
    before = len(threads_named("pylog-producer"))
    p = Producer(BASE, connector=fake.connector)
    assert len(threads_named("pylog-producer")) == before + 1
    p.close()
    p.close()  # idempotent
    assert len(threads_named("pylog-producer")) == before
    with pytest.raises(ClientClosedError):
        p.send("t", b"x")


def test_an_unclosed_client_stops_its_thread_when_collected() -> None:
    fake = FakeCluster(1, topics={"t": 1})
    before = len(threads_named("pylog-admin"))
    a = AdminClient(BASE, connector=fake.connector)
    assert len(threads_named("pylog-admin")) == before + 1
    del a
    gc.collect()
    for _ in range(1000):
        if len(threads_named("pylog-admin")) == before:
            break
        threading.Event().wait(0.01)
    assert len(threads_named("pylog-admin")) == before


def test_a_failed_start_leaves_no_thread_behind() -> None:
    fake = FakeCluster(1)
    fake.refuse.add(0)
    before = len(threads_named("pylog-consumer"))
    with pytest.raises(Exception, match="no broker reachable"):
        Consumer({**BASE, "default.api.timeout.ms": 300, "request.timeout.ms": 100}, connector=fake.connector)
    assert len(threads_named("pylog-consumer")) == before


def test_send_from_a_delivery_callback_is_allowed() -> None:
    fake = FakeCluster(1, topics={"t": 1})
    chained: list[DeliveryFuture[RecordMetadata]] = []
    with Producer(BASE, connector=fake.connector) as p:

        def forward(m: RecordMetadata | None, e: BaseException | None) -> None:
            chained.append(p.send("t", b"forwarded"))

        p.send("t", b"first", on_delivery=forward).result(timeout=5)
        p.flush()
    assert chained[0].result(timeout=5).offset == 1
