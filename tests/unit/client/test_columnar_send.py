"""The batch API's loop-free part (``columnar_send.py``) and columnar batches in the accumulator:
Kafka's default partitioner over whole columns (explicit partition, murmur2 of the key, sticky
null keys — Kafka documentation §4.4 "The Producer" and §3.3 "Producer Configs", KIP-480), batches cut at
``batch.size``, byte-identical encoding, and
completion, linger, split and memory release as for ``send()``'s batches."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from pyspark_log.client import columnar_send
from pyspark_log.client.accumulator import RecordAccumulator
from pyspark_log.client.backoff import ExponentialBackoff
from pyspark_log.client.partitioner import partition_for_key
from pyspark_log.client.producer_batch import ColumnarDelivery, estimate_record_bytes
from pyspark_log.client.types import TopicPartition
from pyspark_log.records import columnar_encode
from pyspark_log.records.batch import BatchParts, ProducerRecord, encode_batch

pytestmark = pytest.mark.unit

TS = 1_700_000_000_000


class Leaders:
    def leader_for(self, tp: TopicPartition) -> int | None:
        return 1


def test_partitions_follow_kafkas_default_partitioner() -> None:
    keys = [None if i % 3 == 0 else f"k{i}".encode() for i in range(300)]
    explicit = [5 if i % 10 == 0 else None for i in range(300)]
    data = pa.table({"value": pa.array([b"v" * 50] * 300), "key": pa.array(keys), "partition": pa.array(explicit)})
    records, parts_in = columnar_send.records_of(data, partition=None, timestamp_ms=None, now_ms=TS)
    estimates = columnar_encode.estimate_bytes(records)
    chosen: list[int | None] = []

    def sticky(previous: int | None) -> int:
        chosen.append(previous)
        return 0 if previous is None else previous + 1

    parts = columnar_send.assign_partitions(
        records, parts_in, 8, ignore_keys=False, estimates=estimates, batch_size_bytes=1000, sticky=sticky
    )
    for i, key in enumerate(keys):
        if explicit[i] is not None:
            assert parts[i] == 5
        elif key is not None:
            assert parts[i] == partition_for_key(key, 8)
    loose = [i for i in range(300) if explicit[i] is None and keys[i] is None]
    per_batch = (1000 - 61) // int(estimates[0])  # null-key rows fill a batch, then move on
    assert [int(parts[i]) for i in loose] == [k // per_batch for k in range(len(loose))]
    assert chosen[0] is None
    assert all(p is not None for p in chosen[1:])


def test_encoded_partition_batches_equal_encode_batch_and_keep_order() -> None:
    n = 400
    data = {
        "value": [f"value-{i}".encode() * (i % 4) if i % 7 else None for i in range(n)],
        "key": [f"k{i % 13}".encode() for i in range(n)],
        "headers": [[("a", b"1"), ("b", None)] if i % 2 else [] for i in range(n)],
        "timestamp": [TS + (i * 37) % 1000 for i in range(n)],
    }
    records, explicit = columnar_send.records_of(data, partition=None, timestamp_ms=None, now_ms=0)
    parts = columnar_encode.partitions_for_keys(records.key, 4)
    estimates = columnar_encode.estimate_bytes(records)
    delivery = ColumnarDelivery(n, lambda _n, _e: None)
    chunks = list(
        columnar_send.encode_partitions(
            "t", records, parts, estimates, batch_size_bytes=2048, created_ms=0.0, delivery=delivery
        )
    )
    assert explicit is None
    assert sorted(c.tp.partition for c in chunks) == sorted(set(parts.tolist()))
    for chunk in chunks:
        rows = [i for i in range(n) if parts[i] == chunk.tp.partition]
        recs = [
            ProducerRecord(data["key"][i], data["value"][i], data["timestamp"][i], tuple(data["headers"][i]))
            for i in rows
        ]
        at = 0
        for batch in chunk.batches:
            count = batch.record_count
            assert bytes(batch.encode(3)) == encode_batch(recs[at : at + count], codec=3)
            assert (
                batch.size_bytes - 61
                == batch.reserved_bytes
                == sum(estimate_record_bytes(r) for r in recs[at : at + count])
            )
            assert batch.size_bytes <= 2048 or count == 1
            at += count
        assert at == len(recs)


def make_batches(n: int, delivery: ColumnarDelivery) -> list[columnar_send.PartitionBatches]:
    records, _ = columnar_send.records_of({"value": [b"x" * 100] * n}, partition=None, timestamp_ms=TS, now_ms=0)
    return list(
        columnar_send.encode_partitions(
            "t",
            records,
            np.zeros(n, np.int64),
            columnar_encode.estimate_bytes(records),
            batch_size_bytes=1 << 20,
            created_ms=0.0,
            delivery=delivery,
        )
    )


def test_columnar_batches_linger_complete_once_and_release_memory() -> None:
    done: list[tuple[int | None, BaseException | None]] = []
    released: list[int] = []
    acc = RecordAccumulator(
        batch_size_bytes=1 << 20, linger_ms=50, retry_backoff=ExponentialBackoff(100, 1000), release=released.append
    )
    (chunk,) = make_batches(10, ColumnarDelivery(10, lambda n, e: done.append((n, e))))
    reserved = chunk.reserved_bytes
    acc.append_columns(chunk.tp, chunk.batches)
    assert acc.ready(Leaders(), 0).ready_nodes == frozenset()  # an unfull batch lingers
    assert acc.ready(Leaders(), 50).ready_nodes == {1}
    (batch,) = acc.drain(Leaders(), [1], 1 << 20, 50)[1]
    batch.complete(100)
    batch.complete(100)
    assert done == [(10, None)]
    assert released == [reserved] != [0]


def test_a_split_columnar_batch_delivers_through_its_halves() -> None:
    done: list[tuple[int | None, BaseException | None]] = []
    released: list[int] = []
    acc = RecordAccumulator(
        batch_size_bytes=1 << 20, linger_ms=0, retry_backoff=ExponentialBackoff(100, 1000), release=released.append
    )
    (chunk,) = make_batches(9, ColumnarDelivery(9, lambda n, e: done.append((n, e))))
    reserved = chunk.reserved_bytes
    acc.append_columns(chunk.tp, chunk.batches)
    (batch,) = acc.drain(Leaders(), [1], 1 << 20, 0)[1]
    assert acc.split_and_reenqueue(batch, 0) == 2
    (a,) = acc.drain(Leaders(), [1], 1 << 20, 0)[1]
    (second,) = acc.drain(Leaders(), [1], 1 << 20, 0)[1]
    assert (a.record_count, second.record_count) == (4, 5)
    assert bytes(a.encode(0)) == encode_batch([ProducerRecord(None, b"x" * 100, TS)] * 4)
    a.complete(0)
    assert done == []
    second.complete(4)
    assert done == [(9, None)]
    assert sum(released) == reserved


def test_a_failed_batch_fails_the_call_once() -> None:
    done: list[tuple[int | None, BaseException | None]] = []
    delivery = ColumnarDelivery(3, lambda n, e: done.append((n, e)))
    (chunk,) = make_batches(3, delivery)
    err = RuntimeError("boom")
    chunk.batches[0].fail(err)
    delivery.fail(RuntimeError("later"))
    assert done == [(None, err)]


def test_bad_columns_are_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match="needs a value column"):
        columnar_send.records_of(pa.table({"key": [b"k"]}), partition=None, timestamp_ms=None, now_ms=0)
    with pytest.raises(TypeError, match="partition column must be integers"):
        columnar_send.records_of(
            pa.table({"value": [b"v"], "partition": ["x"]}), partition=None, timestamp_ms=None, now_ms=0
        )
    with pytest.raises(TypeError, match="binary or string"):
        columnar_send.records_of(pa.table({"value": [1]}), partition=None, timestamp_ms=None, now_ms=0)


@pytest.mark.parametrize("keyed", [True, False])
def test_encoding_in_runs_keeps_batches_whole_ordered_and_byte_identical(keyed: bool) -> None:
    """``encode_partitions`` encodes a partition in runs of whole batches (``run_bytes``): every
    run's batches equal ``encode_batch`` of the same records, a partition's runs come oldest
    first, and the cut into batches is the one a single pass makes (``batch.size``)."""
    n = 500
    data = {
        "value": [f"value-{i}".encode() * (1 + i % 5) for i in range(n)],
        "key": [f"key-{i % 17}".encode() for i in range(n)],
        "timestamp": [TS + i for i in range(n)],
    }
    records, _ = columnar_send.records_of(data, partition=None, timestamp_ms=None, now_ms=0)
    parts = columnar_encode.partitions_for_keys(records.key, 3) if keyed else np.zeros(n, np.int64)
    estimates = columnar_encode.estimate_bytes(records)

    def batches_by_partition(run_bytes: int | None) -> dict[int, list[tuple[int, bytes]]]:
        out: dict[int, list[tuple[int, bytes]]] = {}
        delivery = ColumnarDelivery(n, lambda _n, _e: None)
        for chunk in columnar_send.encode_partitions(
            "t",
            records,
            parts,
            estimates,
            batch_size_bytes=1024,
            created_ms=0.0,
            delivery=delivery,
            run_bytes=run_bytes,
        ):
            assert len(chunk.batches) >= 1
            out.setdefault(chunk.tp.partition, []).extend((b.record_count, bytes(b.encode(0))) for b in chunk.batches)
        return out

    whole = batches_by_partition(1 << 30)
    runs = batches_by_partition(3000)
    assert runs == whole
    for partition, batches in runs.items():
        rows = [i for i in range(n) if parts[i] == partition]
        recs = [ProducerRecord(data["key"][i], data["value"][i], data["timestamp"][i]) for i in rows]
        at = 0
        for count, encoded in batches:
            assert encoded == encode_batch(recs[at : at + count])
            at += count
        assert at == len(recs)


def test_runs_are_at_least_one_batch_and_about_run_bytes() -> None:
    n = 64
    records, _ = columnar_send.records_of({"value": [b"v" * 200] * n}, partition=None, timestamp_ms=TS, now_ms=0)
    estimates = columnar_encode.estimate_bytes(records)
    delivery = ColumnarDelivery(n, lambda _n, _e: None)
    per_batch = [
        len(chunk.batches)
        for chunk in columnar_send.encode_partitions(
            "t",
            records,
            np.zeros(n, np.int64),
            estimates,
            batch_size_bytes=1000,
            created_ms=0.0,
            delivery=delivery,
            run_bytes=1,
        )
    ]
    assert per_batch == [1] * len(per_batch)
    assert len(per_batch) > 1
    runs = list(
        columnar_send.encode_partitions(
            "t",
            records,
            np.zeros(n, np.int64),
            estimates,
            batch_size_bytes=1000,
            created_ms=0.0,
            delivery=delivery,
            run_bytes=3000,
        )
    )
    assert all(sum(b.reserved_bytes for b in run.batches) <= 3000 for run in runs)
    assert sum(b.record_count for run in runs for b in run.batches) == n


def test_batch_api_batches_encode_to_parts_that_join_to_the_batch() -> None:
    """A batch-API batch is encoded as ``BatchParts`` (header, records section): the connection
    writes the section without joining it; joined, the parts are the batch ``encode_batch`` makes."""
    (chunk,) = make_batches(5, ColumnarDelivery(5, lambda _n, _e: None))
    (batch,) = chunk.batches
    batch.producer_id, batch.producer_epoch, batch.base_sequence = 7, 1, 40
    encoded = batch.encode(0)
    assert isinstance(encoded, BatchParts)
    assert len(encoded) == len(bytes(encoded)) == len(encoded.parts[0]) + len(encoded.parts[1])
    expected = encode_batch(
        [ProducerRecord(None, b"x" * 100, TS)] * 5, producer_id=7, producer_epoch=1, base_sequence=40
    )
    assert bytes(encoded) == expected
    assert isinstance(encoded.parts[1], memoryview)  # the encoded section itself, not a copy
