"""The record accumulator (Kafka documentation §4.4 "The Producer" and §3.3 "Producer Configs":
batch.size, linger.ms, buffer.memory),
driven by a manual clock: no sleeping, no sockets."""

from __future__ import annotations

import random

import pytest

from pyspark_log.client.accumulator import RecordAccumulator
from pyspark_log.client.backoff import ExponentialBackoff
from pyspark_log.client.clock import ManualClock
from pyspark_log.client.producer_batch import BATCH_OVERHEAD_BYTES, ProducerBatch, estimate_record_bytes
from pyspark_log.client.types import RecordMetadata, TopicPartition
from pyspark_log.records.batch import ProducerRecord, decode_records

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
T2 = TopicPartition("t", 2)


class Leaders:
    def __init__(self, leaders: dict[TopicPartition, int | None]) -> None:
        self.leaders = leaders

    def leader_for(self, tp: TopicPartition) -> int | None:
        return self.leaders.get(tp)


def rec(value: bytes = b"v" * 10, key: bytes | None = None, ts: int = 1000) -> ProducerRecord:
    return ProducerRecord(key, value, ts)


def make(
    batch_size: int = 1024,
    linger_ms: float = 10,
    *,
    released: list[int] | None = None,
    pressure: list[bool] | None = None,
    guarantee_order: bool = False,
) -> RecordAccumulator:
    return RecordAccumulator(
        batch_size_bytes=batch_size,
        linger_ms=linger_ms,
        retry_backoff=ExponentialBackoff(100, 1000, jitter=0.0),
        release=(released.append if released is not None else lambda n: None),
        memory_pressure=(lambda: bool(pressure and pressure[0])),
        guarantee_order=guarantee_order,
    )


CLUSTER = Leaders({T0: 1, T1: 1, T2: 2})


def test_records_share_a_batch_until_batch_size() -> None:
    size = estimate_record_bytes(rec())
    acc = make(batch_size=BATCH_OVERHEAD_BYTES + 3 * size)
    results = [acc.append(T0, rec(), None, 0) for _ in range(4)]
    assert [r.new_batch_created for r in results] == [True, False, False, True]
    assert [r.batch_is_full for r in results] == [False, False, True, True]
    drained = acc.drain(CLUSTER, [1], 10**6, 0)
    assert [len(b.records) for b in drained[1]] == [3]


def test_a_record_larger_than_batch_size_gets_its_own_batch() -> None:
    acc = make(batch_size=100)
    acc.append(T0, rec(b"x" * 10), None, 0)
    r = acc.append(T0, rec(b"x" * 500), None, 0)
    assert r.new_batch_created
    assert r.batch_is_full


def test_linger_holds_a_batch_until_it_expires() -> None:
    clock = ManualClock()
    acc = make(linger_ms=10)
    acc.append(T0, rec(), None, clock.monotonic_ms())
    check = acc.ready(CLUSTER, clock.monotonic_ms())
    assert check.ready_nodes == frozenset()
    assert check.next_ready_check_delay_ms == 10
    clock.advance(4)
    assert acc.ready(CLUSTER, clock.monotonic_ms()).next_ready_check_delay_ms == 6
    clock.advance(6)
    assert acc.ready(CLUSTER, clock.monotonic_ms()).ready_nodes == {1}


def test_linger_zero_sends_at_once() -> None:
    acc = make(linger_ms=0)
    acc.append(T0, rec(), None, 0)
    assert acc.ready(CLUSTER, 0).ready_nodes == {1}


def test_a_full_batch_is_ready_before_linger() -> None:
    size = estimate_record_bytes(rec())
    acc = make(batch_size=BATCH_OVERHEAD_BYTES + size, linger_ms=1000)
    acc.append(T0, rec(), None, 0)
    assert acc.ready(CLUSTER, 0).ready_nodes == {1}


def test_flush_and_memory_pressure_make_batches_ready() -> None:
    pressure = [False]
    acc = make(linger_ms=1000, pressure=pressure)
    acc.append(T0, rec(), None, 0)
    assert not acc.ready(CLUSTER, 0).ready_nodes
    acc.begin_flush()
    assert acc.ready(CLUSTER, 0).ready_nodes == {1}
    acc.end_flush()
    pressure[0] = True
    assert acc.ready(CLUSTER, 0).ready_nodes == {1}


def test_unknown_leader_is_reported() -> None:
    acc = make(linger_ms=0)
    acc.append(TopicPartition("other", 0), rec(), None, 0)
    check = acc.ready(CLUSTER, 0)
    assert check.unknown_leader_topics == {"other"}
    assert not check.ready_nodes


def test_drain_respects_max_request_size_but_sends_at_least_one_batch() -> None:
    acc = make(linger_ms=0)
    for tp in (T0, T1):
        acc.append(tp, rec(b"x" * 300), None, 0)
    first = acc.drain(CLUSTER, [1], 10, 0)
    assert len(first[1]) == 1
    second = acc.drain(CLUSTER, [1], 10, 0)
    assert len(second[1]) == 1
    assert {first[1][0].tp, second[1][0].tp} == {T0, T1}


def test_drain_rotates_the_first_partition_per_node() -> None:
    acc = make(linger_ms=0)
    firsts = []
    for _ in range(4):
        for tp in (T0, T1):
            acc.append(tp, rec(b"x" * 300), None, 0)
        drained = acc.drain(CLUSTER, [1], 400, 0)
        firsts.append(drained[1][0].tp)
        acc.drain(CLUSTER, [1], 10**6, 0)
    assert set(firsts) == {T0, T1}


def test_drained_batches_are_closed_and_encode_their_records() -> None:
    acc = make(linger_ms=0)
    acc.append(T0, rec(b"a", key=b"k"), None, 0)
    acc.append(T0, rec(b"b"), None, 0)
    (batch,) = acc.drain(CLUSTER, [1], 10**6, 0)[1]
    assert batch.closed
    header, records = decode_records(bytes(batch.encode(acc.codec)))
    assert [r.value for r in records] == [b"a", b"b"]
    assert records[0].key == b"k"
    assert header.producer_id == -1
    r = acc.append(T0, rec(b"c"), None, 0)
    assert r.new_batch_created


def test_completion_delivers_offsets_and_releases_memory() -> None:
    released: list[int] = []
    acc = make(linger_ms=0, released=released)
    got: list[RecordMetadata | None] = []
    for _ in range(3):
        acc.append(T0, rec(ts=5), lambda m, e: got.append(m), 0, reserved_bytes=100)
    (batch,) = acc.drain(CLUSTER, [1], 10**6, 0)[1]
    batch.complete(40)
    assert [m.offset for m in got if m] == [40, 41, 42]
    assert got[0] == RecordMetadata("t", 0, 40, 5)
    assert released == [300]
    assert acc.incomplete() == []


def test_log_append_time_replaces_the_timestamp_and_acks_zero_gives_minus_one() -> None:
    got: list[RecordMetadata | None] = []
    acc = make(linger_ms=0)
    acc.append(T0, rec(ts=5), lambda m, e: got.append(m), 0)
    acc.append(T1, rec(ts=5), lambda m, e: got.append(m), 0)
    b0, b1 = acc.drain(CLUSTER, [1], 10**6, 0)[1]
    b0.complete(7, log_append_time_ms=999)
    b1.complete(-1)
    assert {(m.offset, m.timestamp) for m in got if m} == {(7, 999), (-1, 5)}


def test_a_failing_callback_does_not_stop_the_others() -> None:
    got: list[BaseException | None] = []

    def bad(m: object, e: object) -> None:
        raise RuntimeError("user bug")

    acc = make(linger_ms=0)
    acc.append(T0, rec(), bad, 0)
    acc.append(T0, rec(), lambda m, e: got.append(e), 0)
    (batch,) = acc.drain(CLUSTER, [1], 10**6, 0)[1]
    err = ValueError("boom")
    batch.fail(err)
    batch.complete(1)  # ignored: a batch finishes once
    assert got == [err]


def test_retry_waits_for_backoff_and_goes_back_to_the_head() -> None:
    clock = ManualClock()
    acc = make(linger_ms=0)
    acc.append(T0, rec(b"first"), None, 0)
    (batch,) = acc.drain(CLUSTER, [1], 10**6, 0)[1]
    acc.append(T0, rec(b"second"), None, 0)
    acc.reenqueue(batch, clock.monotonic_ms())
    assert batch.attempts == 1
    check = acc.ready(CLUSTER, clock.monotonic_ms())
    assert not check.ready_nodes
    assert check.next_ready_check_delay_ms == 100
    assert acc.drain(CLUSTER, [1], 10**6, 0) == {}
    clock.advance(100)
    (again,) = acc.drain(CLUSTER, [1], 10**6, clock.monotonic_ms())[1]
    assert again is batch
    acc.reenqueue(batch, clock.monotonic_ms())
    assert acc.ready(CLUSTER, clock.monotonic_ms()).next_ready_check_delay_ms == 200


def test_order_guarantee_mutes_a_partition_while_its_batch_is_in_flight() -> None:
    acc = make(linger_ms=0, guarantee_order=True)
    acc.append(T0, rec(b"x" * 300), None, 0)
    acc.append(T0, rec(b"x" * 1000), None, 0)
    (first,) = acc.drain(CLUSTER, [1], 10**6, 0)[1]
    assert acc.drain(CLUSTER, [1], 10**6, 0) == {}
    assert not acc.ready(CLUSTER, 0).ready_nodes
    first.complete(0)
    assert acc.ready(CLUSTER, 0).ready_nodes == {1}


def test_expire_removes_batches_past_delivery_timeout() -> None:
    clock = ManualClock()
    acc = make(linger_ms=10**6)
    acc.append(T0, rec(), None, clock.monotonic_ms())
    clock.advance(50)
    acc.append(T1, rec(), None, clock.monotonic_ms())
    assert acc.expire(clock.monotonic_ms(), 100) == []
    clock.advance(50)
    expired = acc.expire(clock.monotonic_ms(), 100)
    assert [b.tp for b in expired] == [T0]


def test_split_halves_a_batch_and_keeps_callbacks_and_memory() -> None:
    released: list[int] = []
    got: list[int] = []
    acc = make(linger_ms=0, released=released)
    for _ in range(4):
        acc.append(T0, rec(), lambda m, e: got.append(m.offset if m else -99), 0, reserved_bytes=10)
    (batch,) = acc.drain(CLUSTER, [1], 10**6, 0)[1]
    assert acc.split_and_reenqueue(batch, 0) == 2
    assert batch.done
    assert got == []
    a, b = acc.drain(CLUSTER, [1], 10**6, 0)[1], acc.drain(CLUSTER, [1], 10**6, 0)[1]
    assert [len(a[0].records), len(b[0].records)] == [2, 2]
    a[0].complete(0)
    b[0].complete(2)
    assert got == [0, 1, 2, 3]
    assert sum(released) == 40


def test_abort_all_fails_queued_and_in_flight_batches() -> None:
    errors: list[BaseException | None] = []
    acc = make(linger_ms=0)
    acc.append(T0, rec(), lambda m, e: errors.append(e), 0)
    acc.drain(CLUSTER, [1], 10**6, 0)
    acc.append(T1, rec(), lambda m, e: errors.append(e), 0)
    exc = RuntimeError("sender died")
    acc.abort_all(exc)
    assert errors == [exc, exc]
    assert not acc.has_undrained()
    assert acc.incomplete() == []


def test_abort_on_new_batch_reports_instead_of_creating() -> None:
    size = estimate_record_bytes(rec())
    acc = make(batch_size=BATCH_OVERHEAD_BYTES + size)
    assert not acc.append(T0, rec(), None, 0, abort_on_new_batch=True).appended  # no batch yet
    acc.append(T0, rec(), None, 0)
    assert not acc.append(T0, rec(), None, 0, abort_on_new_batch=True).appended  # full


@pytest.mark.parametrize("seed", range(5))
def test_random_appends_never_lose_or_reorder_records(seed: int) -> None:
    rng = random.Random(seed)
    acc = make(batch_size=rng.randint(80, 600), linger_ms=0)
    sent: dict[TopicPartition, list[bytes]] = {T0: [], T1: [], T2: []}
    got: dict[TopicPartition, list[bytes]] = {T0: [], T1: [], T2: []}
    for i in range(300):
        tp = rng.choice([T0, T1, T2])
        value = f"{i}".encode() * rng.randint(1, 20)
        sent[tp].append(value)
        acc.append(tp, rec(value), None, 0)
        if rng.random() < 0.2:
            for batches in acc.drain(CLUSTER, [1, 2], rng.randint(50, 2000), 0).values():
                for b in batches:
                    got[b.tp] += [r.value for r in b.records]
    while acc.has_undrained():
        for batches in acc.drain(CLUSTER, [1, 2], 10**6, 0).values():
            for b in batches:
                got[b.tp] += [r.value for r in b.records]
    assert got == sent


def test_batch_repr_and_done_callbacks() -> None:
    batch = ProducerBatch(T0, 0, 100)
    calls: list[ProducerBatch] = []
    batch.add_done_callback(calls.append)
    batch.complete(0)
    batch.add_done_callback(calls.append)
    assert calls == [batch, batch]
    assert "t-0" in repr(batch)


def test_append_many_makes_the_batches_append_makes_one_by_one() -> None:
    """The sync ``send()`` path appends a run of records per partition at once: same batches
    (``batch.size`` cut, at least one record per batch, records bigger than it alone), same sizes
    and reservations as appending them one at a time."""
    rng = random.Random(14)
    for _ in range(30):
        batch_size = rng.choice([100, 300, 1024])
        values = [b"x" * rng.choice([0, 5, 40, 120, 400]) for _ in range(rng.randrange(1, 60))]
        split = rng.randrange(len(values) + 1)  # some records one by one first, then the rest in bulk
        one, bulk = make(batch_size), make(batch_size)
        for v in values:
            one.append(T0, rec(v), None, 0, reserved_bytes=estimate_record_bytes(rec(v)))
        for v in values[:split]:
            bulk.append(T0, rec(v), None, 0, reserved_bytes=estimate_record_bytes(rec(v)))
        rest = [rec(v) for v in values[split:]]
        bulk.append_many(T0, rest, [estimate_record_bytes(r) for r in rest], [None] * len(rest), 0)
        shape = lambda acc: [  # noqa: E731
            (len(b.records), b.size_bytes, b.reserved_bytes, [r.value for r in b.records]) for b in acc._queues[T0]
        ]
        assert shape(bulk) == shape(one)


def test_append_many_asks_for_the_sender_when_a_batch_opens_or_fills() -> None:
    acc = make(batch_size=BATCH_OVERHEAD_BYTES + 200)
    small = [rec(b"x" * 10)]
    assert acc.append_many(T0, small, [estimate_record_bytes(small[0])], [None], 0)  # opened a batch
    assert not acc.append_many(T0, small, [estimate_record_bytes(small[0])], [None], 0)  # room left
    big = [rec(b"x" * 150)]
    assert acc.append_many(T0, big, [estimate_record_bytes(big[0])], [None], 0)  # a second batch


def test_a_batch_of_many_records_is_encoded_from_columns_byte_identical() -> None:
    """Batches of at least ``COLUMNAR_ENCODE_FROM`` records without headers are encoded from
    columns at drain time; the bytes are those of ``encode_batch``."""
    from pyspark_log.client.producer_batch import COLUMNAR_ENCODE_FROM
    from pyspark_log.records.batch import encode_batch

    acc = make(batch_size=1 << 20)
    records = [rec(b"v%d" % i, key=None if i % 3 else b"k%d" % i, ts=1000 + i % 5) for i in range(COLUMNAR_ENCODE_FROM)]
    acc.append_many(T0, records, [estimate_record_bytes(r) for r in records], [None] * len(records), 0)
    batch = acc._queues[T0][0]
    batch.producer_id, batch.producer_epoch, batch.base_sequence = 7, 2, 40
    assert bytes(batch.encode(acc.codec)) == encode_batch(records, producer_id=7, producer_epoch=2, base_sequence=40)


def test_the_batches_of_one_request_are_encoded_from_columns_in_one_pass() -> None:
    """``encode_sections`` (the sender, per Produce request): small batches that together reach
    ``COLUMNAR_ENCODE_FROM`` records share one columnar pass; batches with headers, columnar
    batches and already encoded ones are left alone; every batch's bytes equal ``encode_batch``."""
    from pyspark_log.client.producer_batch import COLUMNAR_ENCODE_FROM, encode_sections
    from pyspark_log.records.batch import encode_batch

    acc = make(batch_size=1 << 20)
    per = COLUMNAR_ENCODE_FROM // 3 + 1
    tps = [T0, T1, T2]
    for n, tp in enumerate(tps):
        rows = [rec(b"%d-%d" % (n, i), key=b"k" if i % 2 else None, ts=50 - i) for i in range(per)]
        acc.append_many(tp, rows, [estimate_record_bytes(r) for r in rows], [None] * per, 0)
    with_headers = TopicPartition("t", 3)
    acc.append(with_headers, ProducerRecord(b"k", b"v", 7, (("h", None),)), None, 0)
    batches = [acc._queues[tp][0] for tp in [*tps, with_headers]]
    encode_sections(batches)
    assert all(b.section is not None for b in batches[:3])
    assert batches[3].section is None
    for b in batches:
        assert bytes(b.encode(acc.codec)) == encode_batch(b.records)


def test_send_rows_of_one_request_take_the_plain_pass_and_batches_with_headers_are_left_alone() -> None:
    """Row tuples as the sync ``send()`` queues them (bytes keys and values): the batches without
    headers share one pass (``row_encode``), a batch of rows with headers keeps the row encoder;
    every batch's bytes equal ``encode_batch``."""
    from pyspark_log.client.producer_batch import COLUMNAR_ENCODE_FROM, as_fields, encode_sections
    from pyspark_log.records.batch import encode_batch

    acc = make(batch_size=1 << 20)
    tps = [T0, T1, T2]
    for n, tp in enumerate(tps):
        rows = [(b"k%d" % i, b"%d-%d" % (n, i) * (i % 50), 10**12 + i * 997, ()) for i in range(COLUMNAR_ENCODE_FROM)]
        acc.append_many(tp, rows, [estimate_record_bytes(r) for r in rows], [None] * len(rows), 0)
    with_headers = TopicPartition("t", 3)
    acc.append_many(with_headers, [(b"k", b"v", 7, (("h", None),))] * 3, [60] * 3, [None] * 3, 0)
    batches = [acc._queues[tp][0] for tp in [*tps, with_headers]]
    encode_sections(batches)
    assert all(isinstance(b.section.data, memoryview) for b in batches[:3])  # type: ignore[union-attr]
    assert batches[3].section is None
    for b in batches:
        assert bytes(b.encode(acc.codec)) == encode_batch(list(map(as_fields, b.records)))
