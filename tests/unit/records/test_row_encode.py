"""Records sections straight from row tuples (``row_encode.py``) against ``encode_batch``.

The contract is byte identity with ``encode_batch`` (Kafka documentation §5.3.2 "Record" record layout) and with the
Arrow encoder (``columnar_encode.encode_rows``): the same sections, byte starts and timestamps,
for rows of bytes values, bytes keys or no keys, without headers (the plain path) and, through
the fallback, for rows with some null keys, null values or headers. Every test runs twice: with
the numpy plain path and with the compiled one (``speedups.native``, where it was built).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyspark_log.records import columnar_encode as ce
from pyspark_log.records import row_encode
from pyspark_log.records.batch import ProducerRecord, encode_batch, encode_batch_parts

from ..native_switch import switched
from .strategies import TS_BASE, record_lists

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True, scope="module", params=["numpy", "compiled"])
def encoder(request: pytest.FixtureRequest) -> Any:
    """The plain path's implementation, set for the module's tests (module scope: hypothesis
    tests may not use function-scoped fixtures)."""
    yield from switched(request.param)


plain_rows = st.lists(
    st.tuples(
        st.one_of(st.binary(max_size=40), st.binary(min_size=100, max_size=300)),
        st.one_of(st.binary(max_size=40), st.binary(min_size=100, max_size=20_000)),
        st.integers(min_value=TS_BASE - 10**6, max_value=TS_BASE + 10**9),
        st.just(()),
    ),
    min_size=1,
    max_size=40,
)


def batch_bytes(section: object, count: int, **fields: int) -> bytes:
    """The whole batch ``encode_batch_parts`` builds around a records section."""
    return bytes(encode_batch_parts(section, count, **fields))


def _batches(rows: list, sections: ce.Sections, starts: list[int]) -> list[bytes]:
    return [
        batch_bytes(
            sections.section(b),
            starts[b + 1] - starts[b],
            base_timestamp=int(sections.base_timestamp[b]),
            max_timestamp=int(sections.max_timestamp[b]),
        )
        for b in range(len(starts) - 1)
    ]


def _cuts(n: int, data: st.DataObject) -> list[int]:
    inner = data.draw(st.lists(st.integers(min_value=1, max_value=max(1, n - 1)), max_size=3, unique=True))
    return [0, *sorted(c for c in inner if 0 < c < n), n]


@settings(max_examples=150, deadline=None)
@given(rows=plain_rows, data=st.data())
def test_plain_rows_encode_byte_identical_to_encode_batch_and_the_arrow_encoder(
    rows: list, data: st.DataObject
) -> None:
    starts = _cuts(len(rows), data)
    sections = row_encode.encode_plain_rows(rows, starts)
    assert sections is not None
    records = [ProducerRecord(k, v, ts, h) for k, v, ts, h in rows]
    assert _batches(rows, sections, starts) == [encode_batch(records[a:z]) for a, z in itertools.pairwise(starts)]
    arrow = ce.encode_rows(rows, starts)
    assert bytes(sections.data) == bytes(arrow.data)
    assert sections.byte_starts.tolist() == arrow.byte_starts.tolist()
    assert sections.base_timestamp.tolist() == arrow.base_timestamp.tolist()
    assert sections.max_timestamp.tolist() == arrow.max_timestamp.tolist()


null_key_rows = st.lists(
    st.tuples(
        st.none(),
        st.one_of(st.binary(max_size=40), st.binary(min_size=100, max_size=20_000)),
        st.integers(min_value=TS_BASE - 10**6, max_value=TS_BASE + 10**9),
        st.just(()),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=100, deadline=None)
@given(rows=null_key_rows, data=st.data())
def test_rows_without_keys_take_the_plain_path_byte_identical(rows: list, data: st.DataObject) -> None:
    """The sticky partitioner's rows (every key None) are written with keyLen -1 and no key
    bytes, as ``encode_batch`` and the Arrow encoder write them."""
    starts = _cuts(len(rows), data)
    sections = row_encode.encode_plain_rows(rows, starts)
    assert sections is not None
    assert _batches(rows, sections, starts) == _expected(rows, starts)
    arrow = ce.encode_rows(rows, starts)
    assert bytes(sections.data) == bytes(arrow.data)
    assert sections.byte_starts.tolist() == arrow.byte_starts.tolist()


def test_many_records_have_multi_byte_offset_and_timestamp_deltas() -> None:
    """Offset deltas past 63 and timestamp deltas of several varint bytes, in one and in three batches."""
    rows = [(b"k%d" % i, b"v" * (i % 200), TS_BASE + i * 70_001 - (i % 7), ()) for i in range(1000)]
    records = [ProducerRecord(*row) for row in rows]
    for starts in ([0, 1000], [0, 1, 700, 1000]):
        sections = row_encode.encode_rows(rows, starts)
        assert isinstance(sections.data, bytes)  # the plain path, not Arrow's
        assert _batches(rows, sections, starts) == [encode_batch(records[a:z]) for a, z in itertools.pairwise(starts)]


@settings(max_examples=60, deadline=None)
@given(records=record_lists)
def test_any_records_encode_byte_identical_through_the_fallback(records: list[ProducerRecord]) -> None:
    """Null keys or values and headers go to the Arrow encoder; ``ProducerRecord`` s work as rows."""
    starts = [0, len(records)]
    assert _batches(records, row_encode.encode_rows(records, starts), starts) == [encode_batch(records)]


@pytest.mark.parametrize(
    "row",
    [
        (None, b"v", TS_BASE, ()),
        (b"k", None, TS_BASE, ()),
        (b"k", b"v", TS_BASE, (("h", b"x"),)),
        (bytearray(b"k"), b"v", TS_BASE, ()),
    ],
    ids=["one-null-key", "null-value", "headers", "bytearray-key"],
)
def test_rows_the_plain_path_does_not_take(row: tuple, encoder: str) -> None:
    """The compiled path also takes null keys among keys and null values (the same bytes)."""
    rows = [(b"a", b"b", TS_BASE, ()), row]
    plain = row_encode.encode_plain_rows(rows, [0, 2])
    if encoder == "compiled" and row[3] == () and not isinstance(row[0], bytearray):
        assert plain is not None
        assert _batches(rows, plain, [0, 2]) == _expected(rows, [0, 2])
    else:
        assert plain is None
    if not isinstance(row[0], bytearray):
        assert _batches(rows, row_encode.encode_rows(rows, [0, 2]), [0, 2]) == [
            encode_batch([ProducerRecord(*r) for r in rows])
        ]


@pytest.mark.parametrize("starts", [[0], [1, 2], [0, 1], [0, 2, 2], [0, 3, 2]])
def test_bad_starts_are_refused(starts: list[int]) -> None:
    rows = [(b"a", b"b", TS_BASE, ())] * 2
    with pytest.raises(ValueError, match="starts"):
        row_encode.encode_plain_rows(rows, np.array(starts))


def _expected(rows: list, starts: list[int]) -> list[bytes]:
    records = [ProducerRecord(k, v, ts, h) for k, v, ts, h in rows]
    return [encode_batch(records[a:z]) for a, z in itertools.pairwise(starts)]


@pytest.mark.parametrize("records_per_run", [0, 10**9], ids=["runs", "struct"])
@pytest.mark.parametrize(
    ("key_of", "value_of", "batches"),
    [
        (lambda i: b"k%d" % i, lambda i: b"x" * 100, 3),  # one value length, heads in long runs
        (lambda i: b"key-%04d" % i, lambda i: b"", 7),  # empty values
        (lambda i: b"", lambda i: b"v" * (i % 70), 2),  # empty keys, value lengths across 64
        (lambda i: b"K" * 100, lambda i: b"v" * (i % 200), 3),  # one key length of two varint bytes
        (lambda i: b"k" * (i % 3), lambda i: b"v" * (i % 3), 300),  # many short batches
    ],
    ids=["same-lengths", "empty-values", "empty-keys", "long-keys", "short-batches"],
)
def test_heads_cut_by_runs_or_by_struct_are_identical(
    monkeypatch: pytest.MonkeyPatch, records_per_run: int, key_of: Any, value_of: Any, batches: int
) -> None:
    monkeypatch.setattr(row_encode, "_RECORDS_PER_RUN", records_per_run)
    n = 1500
    rows = [(key_of(i), value_of(i), TS_BASE + i // 7 - (i % 5), ()) for i in range(n)]
    starts = [n * b // batches for b in range(batches + 1)]
    sections = row_encode.encode_plain_rows(rows, starts)
    assert sections is not None
    assert _batches(rows, sections, starts) == _expected(rows, starts)


@pytest.mark.parametrize(
    ("key_len", "value_len", "ts_step"),
    [
        (70, 9000, 1),  # two-byte key lengths, three-byte record lengths
        (9000, 10, 1),  # three-byte key lengths
        (3, 20, 1 << 20),  # timestamp deltas of four bytes and more: heads past 8 bytes
        (3, 20, -(1 << 30)),  # negative timestamp deltas
        (200, 70_000, 1 << 24),  # wide everything, heads of up to 16 bytes
    ],
)
def test_wide_varints(key_len: int, value_len: int, ts_step: int) -> None:
    n = 300
    rows = [(b"k" * (key_len + i % 2), b"v" * (value_len - i % 3), TS_BASE + ts_step * (i % 11), ()) for i in range(n)]
    starts = [0, 1, 100, n]
    sections = row_encode.encode_plain_rows(rows, starts)
    assert sections is not None
    assert _batches(rows, sections, starts) == _expected(rows, starts)


def test_batches_of_more_than_8192_records() -> None:
    """Offset deltas of three bytes (past the precomputed two-byte table)."""
    n = 20_000
    rows = [(b"k%d" % (i % 10), b"v", TS_BASE, ()) for i in range(n)]
    starts = [0, 5, n]
    sections = row_encode.encode_plain_rows(rows, starts)
    assert sections is not None
    assert _batches(rows, sections, starts) == _expected(rows, starts)


@pytest.mark.parametrize("ts_step", [1 << 50, 1 << 56, -(1 << 62)])
def test_heads_over_16_bytes_take_the_arrow_encoder(ts_step: int, encoder: str) -> None:
    """(The compiled path has no slots: it writes any head.)"""
    rows = [(b"k" * 70, b"v" * 9000, TS_BASE + ts_step * (i % 2), ()) for i in range(80)]
    starts = [0, 80]
    plain = row_encode.encode_plain_rows(rows, starts)
    if encoder == "compiled":
        assert plain is not None
        assert _batches(rows, plain, starts) == _expected(rows, starts)
    else:
        assert plain is None
    assert _batches(rows, row_encode.encode_rows(rows, starts), starts) == _expected(rows, starts)


class _Fields:
    """A ``RecordFields`` that is not a tuple (like the producer's ``RecordFuture``)."""

    def __init__(self, key: bytes, value: bytes, timestamp: int) -> None:
        self.key, self.value, self.timestamp, self.headers = key, value, timestamp, ()


def test_record_fields_objects_among_the_row_tuples() -> None:
    rows: list[Any] = [(b"k%d" % i, b"v" * i, TS_BASE + i, ()) for i in range(300)]
    rows[7] = _Fields(*rows[7][:3])
    rows[-1] = ProducerRecord(*rows[-1])
    starts = [0, 150, 300]
    sections = row_encode.encode_plain_rows(rows, starts)
    assert sections is not None
    plain = [(r.key, r.value, r.timestamp, ()) if isinstance(r, _Fields) else tuple(r) for r in rows]
    assert _batches(plain, sections, starts) == _expected(plain, starts)
