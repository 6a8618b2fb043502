"""Vectorised encoding from Arrow columns (``columnar_encode.py``) against ``encode_batch``.

The contract is byte identity: the same records, as Arrow columns or as ``ProducerRecord`` s,
give the same RecordBatch v2 bytes (Kafka documentation §5.3.2 "Record" record layout), for every codec the client
supports, with null keys/values, empty values, headers with null values, negative and large
timestamp deltas; and the column murmur2 equals Kafka's ``Utils.murmur2`` per key.
"""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyspark_log.client import producer_batch
from pyspark_log.client.partitioner import murmur2, partition_for_key
from pyspark_log.records import columnar_encode as ce
from pyspark_log.records.batch import ProducerRecord, decode_records, encode_batch, encode_batch_parts
from pyspark_log.records.header import HEADER_SIZE

from .strategies import TS_BASE, codecs, record_lists

pytestmark = pytest.mark.unit


def batch_bytes(section: object, count: int, **fields: int) -> bytes:
    """The whole batch ``encode_batch_parts`` builds around a records section."""
    return bytes(encode_batch_parts(section, count, **fields))


def columns_of(records: list[ProducerRecord], *, string_keys: bool = False) -> ce.ArrowRecords:
    keys = [r.key for r in records]
    key_array = (
        pa.array([None if k is None else k.decode("latin-1") for k in keys], pa.string())
        if string_keys
        else pa.array(keys, pa.binary())
    )
    if string_keys:  # latin-1 round trip: compare against the UTF-8 bytes a string column gives
        records = [
            ProducerRecord(None if r.key is None else r.key.decode("latin-1").encode(), r.value, r.timestamp, r.headers)
            for r in records
        ]
    headers = pa.array([[{"key": k, "value": v} for k, v in r.headers] for r in records], ce.HEADERS_TYPE)
    return ce.ArrowRecords.build(
        key=key_array,
        value=pa.array([r.value for r in records], pa.binary()),
        headers=headers,
        timestamp_ms=pa.array([r.timestamp for r in records], pa.int64()),
    )


def encode_columns(cols: ce.ArrowRecords, starts: list[int], codec: int = 0) -> list[bytes]:
    sections = ce.encode_sections(cols, np.array(starts))
    return [
        batch_bytes(
            sections.section(b),
            starts[b + 1] - starts[b],
            base_timestamp=int(sections.base_timestamp[b]),
            max_timestamp=int(sections.max_timestamp[b]),
            codec=codec,
            producer_id=7,
            producer_epoch=1,
            base_sequence=100,
            transactional=True,
        )
        for b in range(len(starts) - 1)
    ]


def reference(records: list[ProducerRecord], starts: list[int], codec: int = 0) -> list[bytes]:
    return [
        encode_batch(
            records[starts[b] : starts[b + 1]],
            codec=codec,
            producer_id=7,
            producer_epoch=1,
            base_sequence=100,
            transactional=True,
        )
        for b in range(len(starts) - 1)
    ]


@settings(max_examples=150, deadline=None)
@given(records=record_lists, codec=codecs, data=st.data())
def test_columns_encode_byte_identical_to_encode_batch(
    records: list[ProducerRecord], codec: int, data: st.DataObject
) -> None:
    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(len(records) - 1, 1)), max_size=4))))
    starts = [0, *[c for c in cuts if 0 < c < len(records)], len(records)]
    assert encode_columns(columns_of(records), starts, codec) == reference(records, starts, codec)


def test_nulls_empties_and_null_header_values() -> None:
    records = [
        ProducerRecord(None, None, TS_BASE),
        ProducerRecord(b"", b"", TS_BASE - 5),
        ProducerRecord(b"k", b"v" * 300, TS_BASE + 10**10, (("h", None), ("", b""), ("x" * 200, b"y" * 70))),
        ProducerRecord(None, b"tomb?", TS_BASE, (("only", None),)),
    ]
    for codec in range(5):
        assert encode_columns(columns_of(records), [0, 4], codec) == reference(records, [0, 4], codec)
        assert encode_columns(columns_of(records), [0, 1, 3, 4], codec) == reference(records, [0, 1, 3, 4], codec)


def test_string_columns_are_their_utf8_bytes_and_null_header_lists_are_no_headers() -> None:
    records = [ProducerRecord(b"caf\xc3\xa9", b"v", TS_BASE), ProducerRecord(None, b"w", TS_BASE + 1)]
    cols = ce.ArrowRecords.build(
        key=pa.array(["café", None]),
        value=pa.array(["v", "w"]),
        headers=pa.array([None, []], ce.HEADERS_TYPE),
        timestamp_ms=pa.array([TS_BASE, TS_BASE + 1], pa.timestamp("ms")),
    )
    assert encode_columns(cols, [0, 2]) == reference(records, [0, 2])


def test_large_batches_with_multibyte_varints_decode_back() -> None:
    n = 20_000
    rng = np.random.default_rng(1)
    values = [bytes(rng.integers(0, 256, int(s), dtype=np.uint8)) for s in rng.integers(0, 3000, n)]
    records = [ProducerRecord(str(i).encode(), v, TS_BASE + i * 1000) for i, v in enumerate(values)]
    cols = columns_of(records)
    starts = [0, 17_000, n]
    assert encode_columns(cols, starts) == reference(records, starts)
    _header, decoded = decode_records(encode_columns(cols, starts)[0])
    assert [r.value for r in decoded] == values[:17_000]


def test_a_null_header_key_is_refused() -> None:
    headers = pa.array([[{"key": None, "value": b"v"}]], ce.HEADERS_TYPE)
    cols = ce.ArrowRecords.build(value=pa.array([b"v"]), headers=headers, timestamp_ms=TS_BASE)
    with pytest.raises(ValueError, match="header key is null"):
        ce.encode_sections(cols, np.array([0, 1]))


def test_estimates_match_the_accumulator_and_bounds_follow_its_greedy_rule() -> None:
    assert (ce.RECORD_OVERHEAD_BYTES, ce.HEADER_OVERHEAD_BYTES) == (
        producer_batch.RECORD_OVERHEAD_BYTES,
        producer_batch.HEADER_OVERHEAD_BYTES,
    )
    records = [
        ProducerRecord(b"k" * (i % 7), None if i % 5 == 0 else b"v" * (i * 13 % 500), TS_BASE, (("h", b"x"),) * (i % 3))
        for i in range(500)
    ]
    estimates = ce.estimate_bytes(columns_of(records))
    assert estimates.tolist() == [producer_batch.estimate_record_bytes(r) for r in records]
    bounds = ce.batch_bounds(estimates, 4096, HEADER_SIZE).tolist()
    # the accumulator's rule, one record at a time
    expected, size = [0], HEADER_SIZE
    for i, est in enumerate(estimates.tolist()):
        if i > expected[-1] and size + est > 4096:
            expected.append(i)
            size = HEADER_SIZE
        size += est
    assert bounds == [*expected, len(records)]
    assert ce.batch_bounds(np.array([10_000, 5]), 100, HEADER_SIZE).tolist() == [0, 1, 2]


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.binary(max_size=70), min_size=1, max_size=40), partitions=st.integers(1, 1000))
def test_column_murmur2_is_kafkas_murmur2(keys: list[bytes], partitions: int) -> None:
    column = pa.array(keys, pa.binary())
    assert [int(h) for h in ce.murmur2(column).view(np.int32)] == [murmur2(k) for k in keys]
    assert ce.partitions_for_keys(column, partitions).tolist() == [partition_for_key(k, partitions) for k in keys]
    sliced = column.slice(1)
    assert ce.partitions_for_keys(sliced, partitions).tolist() == [partition_for_key(k, partitions) for k in keys[1:]]


@settings(max_examples=200, deadline=None)
@given(
    keys=st.one_of(
        st.lists(st.binary(max_size=70), min_size=1, max_size=40),
        st.integers(0, 23).flatmap(lambda n: st.lists(st.binary(min_size=n, max_size=n), min_size=1, max_size=60)),
    ),
    partitions=st.integers(1, 1000),
)
def test_list_murmur2_is_kafkas_murmur2(keys: list[bytes], partitions: int) -> None:
    """``murmur2_of_list`` (what the send() hand-off hashes): keys of one length take the
    matrix path, keys of mixed lengths the per-word one; both are Kafka's ``Utils.murmur2``."""
    assert [int(h) for h in ce.murmur2_of_list(keys).view(np.int32)] == [murmur2(k) for k in keys]
    assert ce.partitions_for_keys(keys, partitions).tolist() == [partition_for_key(k, partitions) for k in keys]


def test_murmur2_known_values() -> None:
    # Kafka's own UtilsTest.testMurmur2 vectors (the per-key implementation is checked against them too)
    for key in (
        b"21",
        b"foobar",
        b"a-little-bit-long-string",
        b"a-little-bit-longer-string",
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
    ):
        assert int(ce.murmur2(pa.array([key])).view(np.int32)[0]) == murmur2(key)
        assert int(ce.murmur2_of_list([key, key]).view(np.int32)[1]) == murmur2(key)


@settings(max_examples=100, deadline=None)
@given(records=record_lists)
def test_rows_encode_from_columns_byte_identical_to_encode_batch(records: list[ProducerRecord]) -> None:
    """``encode_rows`` (what the producer does with a batch of ``send()`` records at drain time)
    writes the records section ``encode_batch`` writes for the same records."""
    cut = len(records) // 2
    starts = [0, cut, len(records)] if 0 < cut < len(records) else [0, len(records)]
    sections = ce.encode_rows(records, starts)
    ours = [
        batch_bytes(
            sections.section(b),
            starts[b + 1] - starts[b],
            base_timestamp=int(sections.base_timestamp[b]),
            max_timestamp=int(sections.max_timestamp[b]),
        )
        for b in range(len(starts) - 1)
    ]
    assert ours == [encode_batch(records[a:z]) for a, z in itertools.pairwise(starts)]


def test_rows_with_nulls_empties_headers_and_falling_timestamps_encode_from_columns() -> None:
    records = [
        ProducerRecord(None, None, TS_BASE),
        ProducerRecord(b"", b"", TS_BASE - 5),
        ProducerRecord(b"k", b"v" * 300, TS_BASE + 10**10, (("h", None), ("", b""))),
        ProducerRecord(None, b"tomb?", TS_BASE, (("only", None),)),
    ]
    for rows in (records, records[:2]):
        sections = ce.encode_rows(rows)
        section, base_ts, max_ts = sections.section(0), int(sections.base_timestamp[0]), int(sections.max_timestamp[0])
        assert (base_ts, max_ts) == (rows[0].timestamp, max(r.timestamp for r in rows))
        assert batch_bytes(section, len(rows), base_timestamp=base_ts, max_timestamp=max_ts) == encode_batch(rows)


def test_table_columns_of_one_chunk_are_used_without_a_copy() -> None:
    """A ``pyarrow.Table``'s columns are chunked arrays; one chunk is used as it is (its values'
    bytes are not copied: ``combine_chunks`` would), several are combined."""
    table = pa.table({"value": pa.array([b"v" * 100] * 10), "key": pa.array([b"k"] * 10)})
    records = ce.ArrowRecords.build(value=table.column("value"), key=table.column("key"), timestamp_ms=TS_BASE)
    assert records.value.buffers()[2].address == table.column("value").chunk(0).buffers()[2].address
    two = pa.chunked_array([pa.array([b"a", None]), pa.array([b"bc"])])
    assert ce.ArrowRecords.build(value=two, timestamp_ms=TS_BASE).value.to_pylist() == [b"a", None, b"bc"]
    sections = ce.encode_sections(ce.ArrowRecords.build(value=two, timestamp_ms=TS_BASE), [0, 3])
    expected = encode_batch([ProducerRecord(None, v, TS_BASE) for v in (b"a", None, b"bc")])
    assert sections.data.to_pybytes() == expected[HEADER_SIZE:]
