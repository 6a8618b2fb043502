"""The compiled producer loops (``records/_speedups.c``) against their pure Python twins.

``partition_keys`` and ``group_by_partition`` must give Kafka's default partitioner's
``toPositive(murmur2(key)) % partitions`` (``partitioner.partition_for_key``) and a stable
grouping of the keys by partition; ``encode_records`` the records sections ``encode_batch``
writes (Kafka documentation §5.3.2 "Record"), or None for what it leaves to the Python encoders.
"""

from __future__ import annotations

import itertools
import shutil
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyspark_log.client.partitioner import partition_for_key
from pyspark_log.records import columnar_encode as ce
from pyspark_log.records import speedups
from pyspark_log.records.batch import ProducerRecord, encode_batch, encode_batch_parts

from .strategies import TS_BASE

pytestmark = pytest.mark.unit

native: Any = speedups.native
needs_native = pytest.mark.skipif(native is None, reason="the compiled speedups were not built here")


def test_the_extension_is_built_where_a_compiler_and_python_headers_are() -> None:
    """A machine that can build it runs the compiled path: the fallback must not hide a broken
    build (``PYLOG_NO_SPEEDUPS`` unset, as in CI)."""
    headers = Path(sysconfig.get_paths()["include"], "Python.h").exists()
    if not (shutil.which("cc") or shutil.which("gcc")) or not headers:
        pytest.skip("no C compiler or Python headers here: the pure Python path is used")
    if speedups.os.environ.get("PYLOG_NO_SPEEDUPS", "") not in ("", "0"):
        pytest.skip("PYLOG_NO_SPEEDUPS is set")
    assert native is not None, "pyspark_log.records._speedups was not built: reinstall with pip install -e ."


keys = st.lists(st.binary(max_size=40), min_size=1, max_size=200)


@needs_native
@settings(max_examples=200, deadline=None)
@given(keys=keys, count=st.integers(min_value=1, max_value=1000))
def test_partition_keys_is_kafkas_default_partitioner(keys: list[bytes], count: int) -> None:
    expected = [partition_for_key(k, count) for k in keys]
    assert native.partition_keys(keys, count) == expected
    assert ce.partitions_for_keys(keys, count).tolist() == expected


@needs_native
@settings(max_examples=200, deadline=None)
@given(keys=keys, count=st.integers(min_value=1, max_value=12))
def test_group_by_partition_is_a_stable_sort_by_partition(keys: list[bytes], count: int) -> None:
    parts = [partition_for_key(k, count) for k in keys]
    order, cuts, runs = native.group_by_partition(keys, count)
    stable = sorted(range(len(keys)), key=parts.__getitem__)
    if order is None:  # one partition: the keys keep their order
        assert len(set(parts)) == 1
        order = stable
    assert order == stable
    assert runs == sorted(set(parts))
    assert cuts[0] == 0
    assert cuts[-1] == len(keys)
    for p, (a, b) in zip(runs, itertools.pairwise(cuts), strict=True):
        assert {parts[i] for i in order[a:b]} == {p}


@needs_native
def test_keys_of_other_buffers_and_bad_arguments() -> None:
    assert native.partition_keys([bytearray(b"ab"), memoryview(b"ab")], 7) == [partition_for_key(b"ab", 7)] * 2
    with pytest.raises(TypeError, match="key 1 is str"):
        native.partition_keys([b"a", "b"], 3)
    with pytest.raises(ValueError, match="partitions"):
        native.group_by_partition([b"a"], 0)


rows = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=100, max_size=300)),
        st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=100, max_size=20_000)),
        st.integers(min_value=TS_BASE - 10**12, max_value=TS_BASE + 10**12),
        st.just(()),
    ),
    min_size=1,
    max_size=60,
)


@needs_native
@settings(max_examples=200, deadline=None)
@given(rows=rows, data=st.data())
def test_encode_records_writes_encode_batchs_records(rows: list[tuple[Any, ...]], data: st.DataObject) -> None:
    inner = data.draw(st.lists(st.integers(min_value=1, max_value=max(1, len(rows) - 1)), max_size=4, unique=True))
    bounds = [0, *sorted(c for c in inner if 0 < c < len(rows)), len(rows)]
    encoded = native.encode_records(rows, bounds)
    assert encoded is not None
    data_, byte_starts, base, top = encoded
    records = [ProducerRecord(*r) for r in rows]
    for b, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        section = data_[byte_starts[b] : byte_starts[b + 1]]
        assert base[b] == rows[lo][2]
        assert top[b] == max(r[2] for r in rows[lo:hi])
        whole = encode_batch_parts(section, hi - lo, base_timestamp=base[b], max_timestamp=top[b])
        assert bytes(whole) == encode_batch(records[lo:hi])


@needs_native
@pytest.mark.parametrize(
    "row",
    [
        (b"k", b"v", TS_BASE, (("h", b"x"),)),  # headers: the Arrow encoder
        (bytearray(b"k"), b"v", TS_BASE, ()),
        (b"k", b"v", 2**63, ()),  # beyond int64
        (b"k", b"v", -(2**63), ()),  # its delta from TS_BASE is beyond int64
        (b"k", b"v", "1", ()),
        [b"k", b"v", TS_BASE, ()],  # not a tuple
        (b"k", b"v", TS_BASE),
    ],
    ids=["headers", "bytearray", "huge-timestamp", "delta-overflow", "str-timestamp", "list", "three-fields"],
)
def test_encode_records_leaves_other_rows_to_python(row: Any) -> None:
    assert native.encode_records([(b"a", b"b", TS_BASE, ()), row], [0, 2]) is None


@needs_native
@pytest.mark.parametrize("bounds", [[0], [1, 2], [0, 1], [0, 2, 2], [0, 3, 2]])
def test_encode_records_refuses_bad_bounds(bounds: list[int]) -> None:
    with pytest.raises(ValueError, match="starts"):
        native.encode_records([(b"a", b"b", TS_BASE, ())] * 2, bounds)
