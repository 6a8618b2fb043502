"""Re-encoding a cleaned batch (Kafka documentation §4.8 "Log Compaction": offsets never change)."""

from __future__ import annotations

import pytest

from broker.log.cleaner.rewrite import rewrite_batch
from pyspark_log.records import compression
from pyspark_log.records.batch import ProducerRecord, decode_records, encode_batch
from pyspark_log.records.header import check_batch, read_header

T0 = 1_700_000_000_000


def stored(codec: int = compression.NONE, **kwargs: object) -> bytes:
    records = [ProducerRecord(f"k{i % 2}".encode(), f"v{i}".encode(), T0 + i, (("h", b"x"),)) for i in range(4)]
    return encode_batch(records, base_offset=100, codec=codec, partition_leader_epoch=3, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("codec", [compression.NONE, compression.GZIP])
def test_section_4_8_offsets_never_change_and_the_header_keeps_its_meaning(codec: int) -> None:
    """offsets never change: kept records keep offsets and timestamps; the
    batch keeps base offset, last offset delta, leader epoch, producer fields and flags."""
    data = stored(codec, producer_id=42, producer_epoch=2, base_sequence=10, transactional=True)
    header, records = decode_records(data)
    out = rewrite_batch(header, [records[1], records[3]])
    new = check_batch(out)  # a valid CRC-32C
    assert (new.base_offset, new.last_offset_delta, new.partition_leader_epoch) == (100, 3, 3)
    assert (new.producer_id, new.producer_epoch, new.base_sequence) == (42, 2, 10)
    assert new.is_transactional
    assert not new.is_control
    assert new.compression == codec
    assert new.records_count == 2
    assert new.base_timestamp == T0
    assert new.max_timestamp == T0 + 3
    _, kept = decode_records(out)
    assert kept == [records[1], records[3]]


def test_no_record_kept_leaves_a_bare_header() -> None:
    """Kafka's RETAIN_EMPTY: the last batch of a producer stays as its header alone."""
    data = stored(compression.GZIP, producer_id=42, producer_epoch=2, base_sequence=10)
    header, _ = decode_records(data)
    out = rewrite_batch(header, [])
    new = read_header(check_batch(out) and out)
    assert len(out) == 61
    assert (new.records_count, new.last_offset_delta, new.base_sequence) == (0, 3, 10)
    assert new.compression == compression.NONE
    assert decode_records(out)[1] == []


def test_kip_534_delete_horizon_stamped_with_timestamps_kept() -> None:
    """KIP-534: the ``hasDeleteHorizonMs`` attribute and baseTimestamp = the horizon; every record
    keeps its absolute timestamp (deltas relative to the horizon), maxTimestamp unchanged."""
    data = stored(compression.LZ4, producer_id=42, producer_epoch=2, base_sequence=10)
    header, records = decode_records(data)
    horizon = T0 + 86_400_000
    out = rewrite_batch(header, records, delete_horizon_ms=horizon)
    new = check_batch(out)
    assert new.has_delete_horizon
    assert new.base_timestamp == horizon
    assert new.max_timestamp == T0 + 3
    assert new.compression == compression.LZ4
    _, again = decode_records(out)
    assert again == records
    # a later clean dropping records keeps the horizon and the timestamps
    later = rewrite_batch(new, again[2:])
    newer = check_batch(later)
    assert (newer.has_delete_horizon, newer.base_timestamp) == (True, horizon)
    assert decode_records(later)[1] == records[2:]
    with pytest.raises(AssertionError):
        rewrite_batch(new, again, delete_horizon_ms=horizon + 1)
