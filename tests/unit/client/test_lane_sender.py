"""``Producer.send``'s compiled common case (``records/_speedups.c``, ``LaneSender``) against the
Python method it stands in for: the same rows in the same lanes, the same futures, and every
call it does not take (other arguments, other types, a closed or transactional producer, an
unknown topic, no ``buffer.memory`` room, bad arguments) handed to the Python ``send`` before
anything changed, so it returns or raises what Python's does."""

from __future__ import annotations

import gc
import inspect
import threading
import time
import weakref
from contextlib import contextmanager
from typing import Any

import pytest

from pyspark_log.client import Producer
from pyspark_log.client.errors import BufferExhaustedError, ClientClosedError
from pyspark_log.client.futures import LaneFuture, RecordFuture
from pyspark_log.client.partitioner import partition_for_key
from pyspark_log.client.types import RecordMetadata
from pyspark_log.records import speedups

from ..native_switch import switched
from .fake_broker import FakeCluster

pytestmark = [
    pytest.mark.unit,
    pytest.mark.skipif(speedups.native is None, reason="the compiled speedups were not built here"),
]

BASE = {"bootstrap.servers": "fake:9092", "retry.backoff.ms": 1, "linger.ms": 1}


def compiled(p: Producer) -> bool:
    return type(p.send).__name__ == "LaneSender"


def held_rows(
    p: Producer, calls: list[tuple[tuple[Any, ...], dict[str, Any]]]
) -> tuple[list[tuple[Any, ...]], list[int]]:
    """Send ``calls`` with the hand-off marked as scheduled (the loop is not asked to drain, so
    the rows stay in the open lane) and return the lane's rows with their sizes (timestamps
    left out) and the rows' timestamps."""
    writer = p.core.lane_writer
    writer.scheduled = True
    try:
        futures = [p.send(*args, **kwargs) for args, kwargs in calls]
        lane = writer.lane
        assert lane is not None
        assert all(f.__class__ is LaneFuture and f._chunk is lane for f in futures)
        assert [f._pos for f in futures] == list(range(len(calls)))
        rows = [(k, v, h, size) for (k, v, _ts, h), size in zip(lane.rows, lane.sizes, strict=True)]
        return rows, [row[2] for row in lane.rows]
    finally:
        writer.scheduled = False
        writer.kick()


def test_the_compiled_send_queues_the_rows_the_python_send_queues() -> None:
    fake = FakeCluster(1, topics={"t": 3})
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        (("t", b"v0", b"k0"), {}),
        (("t",), {"value": b"v1", "key": b"k1"}),
        (("t", b"v2"), {"key": b"k2", "headers": None, "partition": None}),
        ((), {"topic": "t", "value": b"", "key": b""}),
        (("t", b"v4", b"k4", None, None, None), {"on_delivery": None}),
    ]
    got = {}
    for path in ("compiled", "python"):
        with contextmanager(switched)(path), Producer(BASE, connector=fake.connector) as p:
            assert compiled(p) is (path == "compiled")
            p.send("t", b"warm-up", b"w").result(timeout=5)
            before = time.time_ns() // 1_000_000
            got[path], stamps = held_rows(p, calls)
            after = time.time_ns() // 1_000_000
            assert all(before <= ts <= after for ts in stamps), (before, stamps, after)  # CreateTime, ms
            p.flush()
            assert p.core.lane_writer.lane is None or not p.core.lane_writer.lane.rows
    assert got["compiled"] == got["python"]
    # what reached the broker: the warm-up and the five records, twice, in send order per key
    values = sorted(r.value for p in range(3) for r in fake.records("t", p))
    assert values == sorted([b"warm-up", b"v0", b"v1", b"v2", b"", b"v4"] * 2)


def test_futures_of_the_compiled_send_resolve_to_their_partitions_and_timestamps() -> None:
    fake = FakeCluster(1, topics={"t": 4})
    with Producer(BASE, connector=fake.connector) as p:
        assert compiled(p)
        before = time.time_ns() // 1_000_000
        futures = [p.send("t", b"v%d" % i, b"k%d" % (i % 9)) for i in range(500)]
        futures += [p.send("t", b"sticky") for _ in range(20)]
        p.flush()
        after = time.time_ns() // 1_000_000
        metas = [f.result(timeout=5) for f in futures]
    for i, m in enumerate(metas[:500]):
        assert m.partition == partition_for_key(b"k%d" % (i % 9), 4)
        assert before <= m.timestamp <= after
        assert futures[i].key == b"k%d" % (i % 9)
        assert futures[i].value == b"v%d" % i
    for p in range(4):
        mine = [m.offset for m in metas if m.partition == p]
        assert mine == sorted(mine)


def test_calls_it_does_not_take_go_to_the_python_send() -> None:
    fake = FakeCluster(1, topics={"t": 2})
    delivered: list[RecordMetadata | None] = []
    with Producer(BASE, connector=fake.connector) as p:
        assert compiled(p)
        taken = [
            p.send("t", "a str value", key="a str key"),  # serialised by the Python path
            p.send("t", b"v", headers=[("h", b"x")]),
            p.send("t", b"v", partition=1),
            p.send("t", b"v", timestamp_ms=1234),
            p.send("t", bytearray(b"v")),
            p.send("t", b"v", on_delivery=lambda m, e: delivered.append(m)),
        ]
        assert all(isinstance(f, RecordFuture) and f.__class__ is not LaneFuture for f in taken)
        p.flush()
        metas = [f.result(timeout=5) for f in taken]
    assert metas[2].partition == 1
    assert metas[3].timestamp == 1234
    assert delivered == [metas[5]]
    assert b"v" in [r.value for r in fake.records("t", 1)]


def test_it_shows_the_python_methods_signature_and_docstring() -> None:
    fake = FakeCluster(1, topics={"t": 1})
    with Producer(BASE, connector=fake.connector) as p:
        assert compiled(p)
        assert inspect.signature(p.send) == inspect.signature(Producer.send.__get__(p))
        assert p.send.__doc__ == Producer.send.__doc__


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (("t", b"v", b"k", None, None, None, None), {}, "positional"),
        (("t", b"v"), {"value": b"w"}, "multiple values"),
        (("t",), {"colour": b"red"}, "unexpected keyword"),
        ((), {"value": b"v"}, "topic"),
    ],
    ids=["too-many", "twice", "unknown", "no-topic"],
)
def test_bad_arguments_raise_pythons_type_error(args: tuple[Any, ...], kwargs: dict[str, Any], match: str) -> None:
    fake = FakeCluster(1, topics={"t": 1})
    with Producer(BASE, connector=fake.connector) as p, pytest.raises(TypeError, match=match):
        p.send(*args, **kwargs)


def test_a_closed_producer_raises_and_memory_too_short_is_left_to_python() -> None:
    """(``test_sync``'s back-pressure test runs with both send paths.)"""
    fake = FakeCluster(1, topics={"t": 1})
    with Producer({**BASE, "buffer.memory": 400, "max.block.ms": 50}, connector=fake.connector) as p:
        assert compiled(p)
        p.core.pool.available = 0  # (as if 400 bytes were in flight)
        with pytest.raises(BufferExhaustedError):  # no room: Python's send waits, then raises
            p.send("t", b"z" * 100)
        p.core.pool.available = 400
        assert p.core.lane_writer.lane is None or not p.core.lane_writer.lane.rows  # nothing was queued
        p.send("t", b"fits").result(timeout=5)
        assert p.core.pool.available == 400
    with pytest.raises(ClientClosedError):
        p.send("t", b"x")


def test_a_topic_new_to_the_producer_is_waited_for_by_the_python_send_then_taken() -> None:
    fake = FakeCluster(1, topics={"t": 1, "later": 2})
    with Producer(BASE, connector=fake.connector) as p:
        assert p.send("later", b"v", b"k").result(timeout=5).topic == "later"
        p.core.lane_writer.scheduled = True
        assert p.send("later", b"v", b"k").__class__ is LaneFuture  # now known: the lane
        p.core.lane_writer.scheduled = False
        p.core.lane_writer.kick()
        p.flush()


def test_threads_share_the_compiled_send_and_buffer_memory_adds_up() -> None:
    fake = FakeCluster(1, topics={"t": 3})
    with Producer(BASE, connector=fake.connector) as p:
        assert compiled(p)

        def work(n: int) -> None:
            for i in range(2000):
                p.send("t", b"%d:%d" % (n, i), b"k%d" % (i % 5))

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        p.flush()
        assert p.core.pool.available == p.core.pool.total_bytes
    values = [r.value for q in range(3) for r in fake.records("t", q)]
    assert len(values) == 8000
    for q in range(3):
        per_thread: dict[bytes, list[int]] = {}
        for r in fake.records("t", q):
            n, i = r.value.split(b":")
            per_thread.setdefault(n, []).append(int(i))
        assert all(v == sorted(v) for v in per_thread.values())


def test_an_unclosed_producer_is_collected_and_stops_its_thread() -> None:
    """The compiled send holds the producer (a cycle through the instance): the collector frees
    both."""
    fake = FakeCluster(1, topics={"t": 1})
    p = Producer(BASE, connector=fake.connector)
    assert compiled(p)
    ref = weakref.ref(p)
    del p
    for _ in range(100):
        gc.collect()
        if ref() is None:
            break
        threading.Event().wait(0.01)
    assert ref() is None
