"""Columnar decoding of fetch responses (``columnar.py``, ``columnar_numpy.py``).

Checked against ``decode_records`` (the reference) and between the Python and numpy paths, with
Kafka's consumer rules: control records are not delivered (Kafka documentation §5.3.1 "Record Batch": control
records are never handed to the application), a partial trailing batch is ignored, and read_committed
drops aborted transactions as ``CompletedFetch`` does.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyspark_log.records import columnar, columnar_numpy
from pyspark_log.records.batch import ProducerRecord, decode_batches, encode_batch
from pyspark_log.records.columnar import ArrowColumns, decode_columns
from pyspark_log.records.control import ControlType, encode_control_batch
from pyspark_log.records.errors import CorruptRecordError, RecordTooLargeError
from pyspark_log.records.fetched import arrow_schema
from pyspark_log.records.header import ATTRIBUTES_POS, CRC_POS, HEADER_SIZE, crc32c

from .strategies import TS_BASE, codecs, record_lists

Row = tuple[int, int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]
TOPIC, PARTITION = "orders", 7


def decode_arrow(buf: bytes | bytearray | memoryview, **kwargs: object) -> ArrowColumns:
    """``columnar.decode_arrow`` of partition ``TOPIC``-``PARTITION``."""
    return columnar.decode_arrow(buf, topic=TOPIC, partition=PARTITION, **kwargs)  # type: ignore[arg-type]


def rows_of(result_batch: pa.RecordBatch) -> list[Row]:
    """The records of a decoded batch, timestamps in ms; every row is of ``TOPIC``-``PARTITION``."""
    d = result_batch.to_pydict()
    assert set(d["topic"]) <= {TOPIC}
    assert set(d["partition"]) <= {PARTITION}
    micros = result_batch.column("timestamp").cast(pa.int64()).to_pylist()
    assert all(us % 1000 == 0 for us in micros)
    timestamps = [us // 1000 for us in micros]
    headers = d.get("headers", [None] * len(d["offset"]))
    return [
        (o, t, tt, k, v, tuple((h["key"], h["value"]) for h in hs or ()))
        for o, t, tt, k, v, hs in zip(
            d["offset"], timestamps, d["timestampType"], d["key"], d["value"], headers, strict=True
        )
    ]


def reference(buf: bytes, start: int = 0, end: int | None = None) -> list[Row]:
    """Every delivered record per ``decode_records`` (read_uncommitted)."""
    out = []
    for header, records in decode_batches(buf):
        if header.is_control:
            continue
        for r in records:
            if r.offset >= start and (end is None or r.offset < end):
                out.append((r.offset, r.timestamp, header.timestamp_type, r.key, r.value, r.headers))
    return out


def all_paths(buf: bytes, **kwargs: object) -> list[Row]:
    """Decode with every path; assert they agree; return the rows."""
    cols = decode_columns(buf, include_headers=True, **kwargs)  # type: ignore[arg-type]
    py = decode_arrow(buf, include_headers=True, vectorize=False, **kwargs)
    np_ = decode_arrow(buf, include_headers=True, vectorize=True, **kwargs)
    assert np_.batch.schema == py.batch.schema == arrow_schema(True)
    assert np_.batch.equals(py.batch), (np_.batch.to_pydict(), py.batch.to_pydict())
    assert cols.to_arrow(topic=TOPIC, partition=PARTITION).equals(py.batch)
    assert (cols.next_offset, cols.consumed_bytes) == (py.next_offset, py.consumed_bytes)
    assert (np_.next_offset, np_.consumed_bytes) == (py.next_offset, py.consumed_bytes)
    plain = decode_arrow(buf, vectorize=True, **kwargs)
    assert plain.batch.equals(np_.batch.drop_columns(["headers"]))
    assert len(cols) == len(py) == len(np_)
    return rows_of(np_.batch)


def batch(
    records: Iterable[tuple[bytes | None, bytes | None]] | int, base_offset: int, codec: int = 0, **kwargs: object
) -> bytes:
    if isinstance(records, int):
        records = [(b"k%d" % (base_offset + i), b"value-%d" % (base_offset + i)) for i in range(records)]
    recs = [ProducerRecord(k, v, TS_BASE + base_offset + i) for i, (k, v) in enumerate(records)]
    return encode_batch(recs, base_offset=base_offset, codec=codec, **kwargs)  # type: ignore[arg-type]


def offsets(rows: list[Row]) -> list[int]:
    return [r[0] for r in rows]


# --- basics -------------------------------------------------------------------------------------


def test_mixed_codecs_and_partial_tail() -> None:
    parts = [batch(5, 0), batch(7, 5, codec=1), batch(3, 12, codec=2), batch(4, 15, codec=3), batch(2, 19, codec=4)]
    buf = b"".join(parts)
    for tail in (b"", parts[0][:1], parts[1][:60], parts[1][:-1]):
        result = decode_arrow(buf + tail)
        assert all_paths(buf + tail) == reference(buf)
        assert (result.next_offset, result.consumed_bytes) == (21, len(buf))
    as_view = decode_arrow(memoryview(bytearray(buf)), vectorize=True)
    assert as_view.batch.equals(decode_arrow(buf, vectorize=True).batch)


def test_empty_and_partial_only() -> None:
    for buf in (b"", batch(3, 0)[:-1], b"\x00" * 30):
        result = decode_arrow(buf)
        assert (len(result), result.next_offset, result.consumed_bytes) == (0, None, 0)
        assert result.batch.schema == arrow_schema()
        assert all_paths(buf) == []


def test_offset_range() -> None:
    buf = batch(10, 0) + batch(10, 10, codec=3) + batch(10, 20)
    assert offsets(all_paths(buf, start_offset=7, end_offset=23)) == list(range(7, 23))
    result = decode_arrow(buf, start_offset=7, end_offset=23)
    assert result.next_offset == 30  # the batch holding offset 22 was read whole
    result = decode_arrow(buf, end_offset=20)
    assert (result.next_offset, result.consumed_bytes) == (20, len(buf) - len(batch(10, 20)))
    assert offsets(all_paths(buf, start_offset=10, end_offset=20)) == list(range(10, 20))
    assert all_paths(buf, start_offset=30) == []
    assert decode_arrow(buf, start_offset=30).next_offset == 30
    assert all_paths(buf, end_offset=0) == []


def test_control_batches_are_skipped() -> None:
    buf = (
        batch(3, 0, producer_id=1, producer_epoch=0, transactional=True)
        + encode_control_batch(ControlType.COMMIT, 1, 0, 0, TS_BASE, base_offset=3)
        + batch(2, 4)
    )
    assert offsets(all_paths(buf)) == [0, 1, 2, 4, 5]
    assert decode_arrow(buf).next_offset == 6


def test_log_append_time_and_types() -> None:
    buf = batch(3, 0) + batch(3, 3, log_append_time=True)
    rows = all_paths(buf)
    assert [r[2] for r in rows] == [0, 0, 0, 1, 1, 1]
    assert [r[1] for r in rows[3:]] == [TS_BASE + 5] * 3


def test_headers_and_nulls() -> None:
    recs = [
        ProducerRecord(None, None, TS_BASE),
        ProducerRecord(b"", b"", TS_BASE),
        ProducerRecord(b"k", b"v" * 20, TS_BASE, (("a", b"1"), ("b", None), ("ключ", b""))),
    ] * 30
    buf = encode_batch(recs, base_offset=0)
    rows = all_paths(buf)
    assert rows[0][3:] == (None, None, ())
    assert rows[1][3:] == (b"", b"", ())
    assert rows[2][5] == (("a", b"1"), ("b", None), ("ключ", b""))
    assert rows == reference(buf)
    # a record without headers has a null headers list, as Spark's Kafka connector gives it
    for vectorize in (False, True):
        headers = decode_arrow(buf, include_headers=True, vectorize=vectorize).batch.column("headers")
        assert headers.to_pylist()[:3] == [None, None, [{"key": "a", "value": b"1"}, {"key": "b", "value": None},
                                                         {"key": "ключ", "value": b""}]]  # fmt: skip
        assert headers.null_count == 60


def test_short_values_at_the_very_end_of_the_buffer() -> None:
    """Values within the last 12 bytes of the data take the binary-view tail path."""
    buf = b"".join(batch([(b"k", b"v" * (i % 5)) for i in range(40)], 40 * j) for j in range(3))
    assert all_paths(buf) == reference(buf)


def test_both_record_walkers(monkeypatch: pytest.MonkeyPatch) -> None:
    many_small = b"".join(batch(8, 8 * i, codec=i % 5) for i in range(40))
    big = batch(500, 320)
    for cost in (0, 10**9):  # always / never step all batches at once
        monkeypatch.setattr(columnar_numpy, "VECTOR_STEP_COST", cost)
        assert all_paths(many_small + big) == reference(many_small + big)


def test_max_decompressed_bytes_applies_per_batch() -> None:
    buf = encode_batch([ProducerRecord(None, bytes(300_000), TS_BASE)], codec=4)
    with pytest.raises(RecordTooLargeError):
        decode_arrow(buf, max_decompressed_bytes=100_000)
    assert len(decode_arrow(buf)) == 1


# --- read_committed -----------------------------------------------------------------------------


def txn(pid: int, n: int, base: int) -> bytes:
    return batch(n, base, producer_id=pid, producer_epoch=0, transactional=True)


def marker(kind: ControlType, pid: int, offset: int) -> bytes:
    return encode_control_batch(kind, pid, 0, 0, TS_BASE, base_offset=offset)


ABORT, COMMIT = ControlType.ABORT, ControlType.COMMIT


def test_read_committed_drops_aborted_transactions() -> None:
    buf = (
        txn(1, 2, 0)  # 0-1 pid 1, aborted
        + txn(2, 2, 2)  # 2-3 pid 2, committed
        + batch(1, 4)  # 4 non-transactional
        + txn(1, 2, 5)  # 5-6 pid 1, same aborted transaction
        + marker(ABORT, 1, 7)
        + marker(COMMIT, 2, 8)
        + txn(1, 2, 9)  # 9-10 pid 1, a new transaction (committed)
        + marker(COMMIT, 1, 11)
    )
    assert offsets(all_paths(buf, aborted_transactions=[(1, 0)])) == [2, 3, 4, 9, 10]
    assert offsets(all_paths(buf, aborted_transactions=[])) == [0, 1, 2, 3, 4, 5, 6, 9, 10]
    assert offsets(all_paths(buf)) == [0, 1, 2, 3, 4, 5, 6, 9, 10]  # read_uncommitted


def test_read_committed_second_aborted_transaction_of_a_producer() -> None:
    buf = txn(1, 2, 0) + marker(ABORT, 1, 2) + txn(1, 2, 3) + marker(COMMIT, 1, 5) + txn(1, 2, 6) + marker(ABORT, 1, 8)
    assert offsets(all_paths(buf, aborted_transactions=[(1, 6), (1, 0)])) == [3, 4]


def test_read_committed_abort_entry_applies_from_its_first_offset() -> None:
    """An aborted transaction marks its producer only once a batch reaches its first offset."""
    buf = txn(1, 2, 0) + marker(COMMIT, 1, 2) + txn(1, 2, 3) + marker(ABORT, 1, 5)
    assert offsets(all_paths(buf, aborted_transactions=[(1, 3)])) == [0, 1]


def test_read_committed_keeps_idempotent_non_transactional_batches() -> None:
    buf = txn(1, 2, 0) + batch(2, 2, producer_id=1, producer_epoch=0, base_sequence=0) + marker(ABORT, 1, 4)
    assert offsets(all_paths(buf, aborted_transactions=[(1, 0)])) == [2, 3]


def test_read_committed_with_a_start_offset_inside_the_transaction() -> None:
    buf = txn(1, 4, 0) + txn(2, 2, 4) + marker(ABORT, 1, 6) + marker(COMMIT, 2, 7)
    assert offsets(all_paths(buf, start_offset=2, aborted_transactions=[(1, 0)])) == [4, 5]


def test_read_committed_compressed_abort_marker() -> None:
    from pyspark_log.records.control import EndTxnMarker, encode_control_key, encode_control_value

    compressed_marker = encode_batch(
        [ProducerRecord(encode_control_key(ABORT), encode_control_value(EndTxnMarker(ABORT, 0)), TS_BASE)],
        base_offset=2,
        codec=3,
        control=True,
        transactional=True,
        producer_id=1,
        producer_epoch=0,
    )
    buf = txn(1, 2, 0) + compressed_marker + txn(1, 2, 3)
    assert offsets(all_paths(buf, aborted_transactions=[(1, 0)])) == [3, 4]


# --- corruption ---------------------------------------------------------------------------------


def resign(buf: bytearray, pos: int, size: int) -> None:
    buf[pos + CRC_POS : pos + CRC_POS + 4] = crc32c(bytes(buf[pos + ATTRIBUTES_POS : pos + size])).to_bytes(4, "big")


def test_bad_crc_raises() -> None:
    buf = bytearray(batch(100, 0))
    buf[-5] ^= 1
    for vectorize in (False, True):
        with pytest.raises(CorruptRecordError, match="CRC"):
            decode_arrow(bytes(buf), vectorize=vectorize)
    assert len(decode_arrow(bytes(buf), verify_crc=False)) == 100


def test_wrong_magic_raises() -> None:
    buf = bytearray(batch(3, 0))
    buf[16] = 1
    with pytest.raises(CorruptRecordError, match="magic"):
        decode_columns(bytes(buf))


@given(data=st.data())
@settings(max_examples=200, deadline=None)
def test_corrupted_records_agree_across_paths(data: st.DataObject) -> None:
    """Flip a byte in the records section and re-sign: both paths raise, or both agree."""
    records = data.draw(record_lists)
    buf = bytearray(encode_batch(records))
    pos = data.draw(st.integers(HEADER_SIZE, len(buf) - 1))
    buf[pos] = data.draw(st.integers(0, 255))
    resign(buf, 0, len(buf))
    outcomes = []
    for vectorize in (False, True):
        try:
            outcomes.append(rows_of(decode_arrow(bytes(buf), vectorize=vectorize, include_headers=True).batch))
        except CorruptRecordError:
            outcomes.append(None)
    assert outcomes[0] == outcomes[1]
    try:
        expected = reference(bytes(buf))
    except CorruptRecordError:
        expected = None
    assert outcomes[0] == expected


# --- property -----------------------------------------------------------------------------------


@given(
    batches=st.lists(st.tuples(record_lists, codecs, st.booleans()), min_size=1, max_size=6),
    start=st.integers(0, 100),
    span=st.one_of(st.none(), st.integers(0, 100)),
    cut=st.integers(0, 80),
)
@settings(max_examples=120, deadline=None)
def test_paths_agree_with_reference(
    batches: list[tuple[list[ProducerRecord], int, bool]], start: int, span: int | None, cut: int
) -> None:
    parts = []
    offset = 0
    for records, codec, log_append_time in batches:
        parts.append(encode_batch(records, base_offset=offset, codec=codec, log_append_time=log_append_time))
        offset += len(records)
    buf = b"".join(parts)
    tail = parts[0][: min(cut, len(parts[0]) - 1)]
    end = None if span is None else start + span
    assert all_paths(buf + tail, start_offset=start, end_offset=end) == reference(buf, start, end)
