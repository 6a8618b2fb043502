"""The sync ``send`` path hands records to the producer's loop a chunk at a time
(``client/handoff.py``): keyed and explicit-partition runs are partitioned and appended in bulk,
null keys one by one, the batch API's batches as they are. Kafka's contract is unchanged:
records of a partition keep the order of the ``send`` calls (Kafka documentation §4.4 "The Producer": order
within a partition),
keyed records land on ``toPositive(murmur2(key)) % partitions``, every record gets its own
delivery report."""

from __future__ import annotations

import random
import threading
from typing import Any

import pyarrow as pa
import pytest

from pyspark_log.client import Producer
from pyspark_log.client.errors import ClientClosedError
from pyspark_log.client.futures import RecordFuture
from pyspark_log.client.handoff import VECTORISE_KEYS_FROM, _all_keyed, _by_partition
from pyspark_log.client.partitioner import partition_for_key
from pyspark_log.client.types import RecordMetadata

from .fake_broker import FakeCluster

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("send_path")]

BASE = {"bootstrap.servers": "fake:9092", "retry.backoff.ms": 1, "linger.ms": 5}


def future(key: bytes | None, partition: int | None = None, topic: str = "t") -> RecordFuture:
    return RecordFuture(topic, partition, key, b"v", 0, (), 40, None)


@pytest.mark.parametrize("n", [5, VECTORISE_KEYS_FROM, 3 * VECTORISE_KEYS_FROM])
@pytest.mark.parametrize("key_format", [b"key-%d", b"key-%07d"], ids=["mixed-lengths", "one-length"])
def test_runs_are_grouped_by_murmur2_or_explicit_partition_in_order(n: int, key_format: bytes) -> None:
    rng = random.Random(n)
    records = [future(key_format % rng.randrange(10**6), rng.choice([None, None, 1, 4])) for _ in range(n)]
    groups = dict(_by_partition(records, 5))
    assert sum(len(g) for g in groups.values()) == n
    # the same with the partitions and keys the drain found already (``_all_keyed``)
    given = _all_keyed(list(records), ignore_keys=False)
    assert given is not None
    assert dict(_by_partition(records, 5, *given)) == groups
    for p, group in groups.items():
        for r in group:
            assert p == (r._partition if r._partition is not None else partition_for_key(r.key, 5))  # type: ignore[arg-type]
        positions = [records.index(r) for r in group]
        assert positions == sorted(positions)  # order within a partition is send order


def test_mixed_keyed_explicit_null_key_and_batch_api_records_keep_per_partition_order() -> None:
    """One producer thread interleaves every kind of record; each partition's log holds its
    records in send order, with the keys and headers given."""
    fake = FakeCluster(1, topics={"t": 3})
    sent: list[tuple[int | None, bytes | None, bytes]] = []  # (partition asked, key, value)
    futures: list[Any] = []
    with Producer({**BASE, "batch.size": 2048}, connector=fake.connector) as p:
        for i in range(600):
            kind = i % 7
            value = b"v%d" % i
            if kind == 0:
                futures.append(p.send("t", value, partition=i % 3))
                sent.append((i % 3, None, value))
            elif kind == 1:
                futures.append(p.send("t", value, headers={"h": b"x"}))  # null key: sticky
                sent.append((None, None, value))
            elif kind == 2 and i % 5 == 0:
                table = pa.table({"key": [b"b%d" % i, b"c%d" % i], "value": [value + b"a", value + b"b"]})
                futures.append(p.send_batch("t", table))
                sent += [(None, b"b%d" % i, value + b"a"), (None, b"c%d" % i, value + b"b")]
            else:
                futures.append(p.send("t", value, key=b"k%d" % (i % 11)))
                sent.append((None, b"k%d" % (i % 11), value))
        p.flush()
        assert all(f.exception(timeout=5) is None for f in futures)
    logs = {q: fake.records("t", q) for q in range(3)}
    where = {r.value: (q, i) for q, recs in logs.items() for i, r in enumerate(recs)}
    assert len(where) == len(sent)
    last: dict[int, int] = {}
    for asked, key, value in sent:
        q, i = where[value]
        if asked is not None:
            assert q == asked
        elif key is not None:
            assert q == partition_for_key(key, 3)
        assert i > last.get(q, -1), f"{value!r} out of order in partition {q}"
        last[q] = i


def test_each_record_is_reported_once_with_its_offset_and_futures_resolve_lazily() -> None:
    fake = FakeCluster(1, topics={"t": 2})
    reports: list[tuple[RecordMetadata | None, BaseException | None]] = []
    done_callbacks: list[RecordMetadata] = []
    with Producer(BASE, connector=fake.connector) as p:
        futs = [p.send("t", b"%d" % i, key=b"k", on_delivery=lambda m, e: reports.append((m, e))) for i in range(500)]
        futs[0].add_done_callback(lambda f: done_callbacks.append(f.result()))
        p.flush()
        metas = [f.result(timeout=5) for f in futs]
    part = partition_for_key(b"k", 2)
    assert [m.offset for m in metas] == list(range(500))
    assert {m.partition for m in metas} == {part}
    assert sorted(m.offset for m, e in reports if e is None and m is not None) == list(range(500))
    assert done_callbacks == [metas[0]]
    assert [r.value for r in fake.records("t", part)] == [b"%d" % i for i in range(500)]


def test_records_from_many_threads_are_all_delivered() -> None:
    fake = FakeCluster(1, topics={"t": 3})
    with Producer(BASE, connector=fake.connector) as p:

        def produce(t: int) -> None:
            for i in range(300):
                p.send("t", b"%d-%d" % (t, i), key=b"%d" % t)

        threads = [threading.Thread(target=produce, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        p.flush()
    values = [r.value for q in range(3) for r in fake.records("t", q)]
    assert len(values) == 1200
    for t in range(4):  # one key per thread: one partition, in the thread's order
        mine = [v for v in values if v.startswith(b"%d-" % t)]
        assert mine == [b"%d-%d" % (t, i) for i in range(300)]


def test_records_queued_when_the_producer_closes_fail_and_give_memory_back() -> None:
    fake = FakeCluster(1, topics={"t": 1})
    p = Producer(BASE, connector=fake.connector)
    core = p.core
    total = core.pool.total_bytes
    record = core.prepare("t", b"v", b"k", None, None, None)
    assert core.pool.try_reserve(record._size)
    core._handoff._queue.append(record)  # queued, not drained yet
    core._handoff.abort(ClientClosedError("closing"))
    assert isinstance(record.exception(timeout=1), ClientClosedError)
    assert core.pool.available_bytes == total
    p.close()


class _Meta:
    def partition_count(self, topic: str) -> int:
        return 4


class _Target:
    """A real accumulator and sticky partitioner behind the drain (no loop, no sockets)."""

    def __init__(self, seed: int, batch_size: int) -> None:
        from pyspark_log.client.accumulator import RecordAccumulator
        from pyspark_log.client.backoff import ExponentialBackoff
        from pyspark_log.client.partitioner import StickyPartitioner

        self.accumulator = RecordAccumulator(
            batch_size_bytes=batch_size, linger_ms=5, retry_backoff=ExponentialBackoff(1, 1)
        )
        self.sticky = StickyPartitioner(random.Random(seed))
        self.available = [0, 1, 3]  # partition 2 has no leader

    def cluster_metadata(self) -> Any:
        return _Meta()

    def ignore_keys(self) -> bool:
        return False

    def now_ms(self) -> float:
        return 0.0

    def append_one(self, record: RecordFuture) -> None:
        raise AssertionError("every record here is appended in bulk")

    def append_columns(self, tp: Any, batches: Any) -> None:
        raise AssertionError

    def sticky_partition(self, topic: str, count: int) -> int:
        return self.sticky.partition(topic, count, self.available)

    def sticky_next(self, topic: str, count: int, previous: int) -> int:
        return self.sticky.on_new_batch(topic, count, self.available, previous)

    def appended(self, tps: Any, wake_sender: bool) -> None:
        pass

    def release(self, reserved: int) -> None:
        pass

    def is_dead(self) -> bool:
        return False


@pytest.mark.parametrize("seed", range(6))
def test_null_key_runs_fill_batches_like_one_by_one_sticky_appends(seed: int) -> None:
    """KIP-480 sticky partitioning in bulk: the same partitions and batches as appending each
    record with ``abort_on_new_batch`` and moving the sticky partition on when it is refused
    (``AsyncProducer._append``), including explicit-partition records between null-key ones."""
    from pyspark_log.client.handoff import Handoff
    from pyspark_log.client.types import TopicPartition

    rng = random.Random(seed)
    batch_size = rng.choice([200, 600, 2048])
    records = [
        RecordFuture(
            "t", rng.choice([None] * 5 + [1]), None, b"%d:" % i + b"x" * rng.choice([1, 30, 90, 400]), 0, (), 0, None
        )
        for i in range(300)
    ]
    for r in records:
        r._size = 36 + len(r.value or b"")

    bulk = _Target(seed, batch_size)
    handoff = Handoff(bulk)
    handoff._queue.extend(records)
    handoff.drain()

    ref = _Target(seed, batch_size)
    acc = ref.accumulator
    for r in records:  # AsyncProducer._append's branches for explicit partitions and null keys
        if r._partition is not None:
            acc.append(TopicPartition("t", r._partition), r, None, 0, reserved_bytes=r._size, size_bytes=r._size)
            continue
        p = ref.sticky.partition("t", 4, ref.available)
        result = acc.append(
            TopicPartition("t", p), r, None, 0, reserved_bytes=r._size, abort_on_new_batch=True, size_bytes=r._size
        )
        if not result.appended:
            p = ref.sticky.on_new_batch("t", 4, ref.available, p)
            acc.append(TopicPartition("t", p), r, None, 0, reserved_bytes=r._size, size_bytes=r._size)

    def shape(a: Any) -> dict[Any, list[list[bytes | None]]]:
        from pyspark_log.client.producer_batch import as_row

        return {tp: [[as_row(r)[1] for r in b.records] for b in q] for tp, q in a._queues.items() if q}

    assert shape(bulk.accumulator) == shape(acc)
