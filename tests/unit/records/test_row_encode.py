"""Records sections straight from row tuples (``row_encode.py``) against ``encode_batch``.

The contract is byte identity with ``encode_batch`` (seed 002 §5.3.2 record layout) and with the
Arrow encoder (``columnar_encode.encode_rows``): the same sections, byte starts and timestamps,
for rows of bytes keys and values without headers (the plain path) and, through the fallback,
for rows with null keys or values and headers.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyspark_log.records import columnar_encode as ce
from pyspark_log.records import row_encode
from pyspark_log.records.batch import ProducerRecord, encode_batch, encode_batch_parts

from .strategies import TS_BASE, record_lists

pytestmark = pytest.mark.unit

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
    ids=["null-key", "null-value", "headers", "bytearray-key"],
)
def test_rows_the_plain_path_does_not_take(row: tuple) -> None:
    rows = [(b"a", b"b", TS_BASE, ()), row]
    assert row_encode.encode_plain_rows(rows, [0, 2]) is None
    if not isinstance(row[0], bytearray):
        assert _batches(rows, row_encode.encode_rows(rows, [0, 2]), [0, 2]) == [
            encode_batch([ProducerRecord(*r) for r in rows])
        ]


@pytest.mark.parametrize("starts", [[0], [1, 2], [0, 1], [0, 2, 2], [0, 3, 2]])
def test_bad_starts_are_refused(starts: list[int]) -> None:
    rows = [(b"a", b"b", TS_BASE, ())] * 2
    with pytest.raises(ValueError, match="starts"):
        row_encode.encode_plain_rows(rows, np.array(starts))
