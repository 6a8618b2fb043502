"""Hypothesis strategies for records and batches shared by the records tests."""

from __future__ import annotations

from hypothesis import strategies as st

from pyspark_log.records.batch import ProducerRecord

TS_BASE = 1_700_000_000_000

nullable_bytes = st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=100, max_size=300))
headers = st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20))), max_size=3).map(tuple)
producer_records = st.builds(
    ProducerRecord,
    key=nullable_bytes,
    value=nullable_bytes,
    timestamp=st.integers(min_value=TS_BASE - 10**6, max_value=TS_BASE + 10**9),
    headers=st.one_of(st.just(()), headers),
)
record_lists = st.lists(producer_records, min_size=1, max_size=30)
codecs = st.sampled_from([0, 1, 2, 3, 4])
