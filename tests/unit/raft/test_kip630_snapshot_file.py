"""KIP-630 snapshot files ("Snapshot Format"): Kafka's file name, SnapshotHeader / data batches /
SnapshotFooter with CRC-32C, atomic write, and the newest valid snapshot chosen on load."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from broker.raft.snapshot import (
    CorruptSnapshotError,
    RetentionPolicy,
    SnapshotId,
    SnapshotPolicy,
    decode_snapshot,
    encode_snapshot,
    parse_snapshot_file_name,
    snapshot_file_name,
)
from broker.raft.store import delete_snapshots_before, list_snapshots, load_newest_valid, write_snapshot
from pyspark_log.records.batch import decode_batches
from pyspark_log.records.control import ControlType, first_control_type
from pyspark_log.records.header import iter_batch_headers

RECORDS = [f"record-{i}".encode() * (i % 7 + 1) for i in range(25)]


def test_file_name_is_kafkas() -> None:
    sid = SnapshotId(1234, 7)
    assert snapshot_file_name(sid) == "00000000000000001234-0000000007.checkpoint"
    assert parse_snapshot_file_name(sid.file_name) == sid
    assert parse_snapshot_file_name("00000000000000001234-0000000007.checkpoint.part") is None
    assert parse_snapshot_file_name("00000000000000000000.log") is None


def test_layout_header_data_footer_dense_offsets() -> None:
    sid = SnapshotId(100, 3)
    data = encode_snapshot(sid, RECORDS, 555, timestamp_ms=1000, max_batch_records=10)
    headers = [h for _, h in iter_batch_headers(data)]
    assert [h.base_offset for h in headers] == [0, 1, 11, 21, 26]
    assert all(h.partition_leader_epoch == 3 for h in headers)
    assert headers[0].is_control
    assert headers[-1].is_control
    assert not any(h.is_control for h in headers[1:-1])
    pos_first, pos_last = 0, len(data) - headers[-1].size
    assert first_control_type(data, pos_first, headers[0]) == ControlType.SNAPSHOT_HEADER
    assert first_control_type(data, pos_last, headers[-1]) == ControlType.SNAPSHOT_FOOTER
    snapshot = decode_snapshot(sid, data)
    assert snapshot.records == tuple(RECORDS)
    assert snapshot.last_contained_log_timestamp == 555
    assert len(decode_batches(data)) == 5


def test_empty_image_is_header_and_footer() -> None:
    data = encode_snapshot(SnapshotId(0, 0), [], 0, timestamp_ms=0)
    assert decode_snapshot(SnapshotId(0, 0), data).records == ()


@pytest.mark.parametrize("cut", [1, 20, 61])
def test_torn_file_is_rejected(cut: int) -> None:
    data = encode_snapshot(SnapshotId(10, 1), RECORDS, 0, timestamp_ms=0, max_batch_records=5)
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(SnapshotId(10, 1), data[:-cut])


def test_flipped_byte_fails_crc() -> None:
    data = bytearray(encode_snapshot(SnapshotId(10, 1), RECORDS, 0, timestamp_ms=0))
    data[len(data) // 2] ^= 0xFF
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(SnapshotId(10, 1), bytes(data))


def test_trailing_bytes_after_footer_rejected() -> None:
    one = encode_snapshot(SnapshotId(10, 1), RECORDS[:2], 0, timestamp_ms=0)
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(SnapshotId(10, 1), one + one)


def test_write_load_skips_corrupt_newest(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    old, new = SnapshotId(50, 2), SnapshotId(90, 3)
    write_snapshot(tmp_path, old, encode_snapshot(old, RECORDS[:5], 1, timestamp_ms=0))
    good_new = encode_snapshot(new, RECORDS, 2, timestamp_ms=0)
    write_snapshot(tmp_path, new, good_new[:-10])  # a damaged newest file
    (tmp_path / "00000000000000000099-0000000003.checkpoint.part").write_bytes(b"partial")
    assert list_snapshots(tmp_path) == [old, new]
    with caplog.at_level(logging.WARNING, logger="broker.raft.store"):
        loaded = load_newest_valid(tmp_path)
    assert loaded is not None
    assert loaded.snapshot_id == old
    assert loaded.records == tuple(RECORDS[:5])
    assert "skipping invalid snapshot" in caplog.text
    assert not list(tmp_path.glob("*.part"))
    write_snapshot(tmp_path, new, good_new)
    loaded = load_newest_valid(tmp_path)
    assert loaded is not None
    assert loaded.snapshot_id == new
    assert delete_snapshots_before(tmp_path, new) == [old]
    assert list_snapshots(tmp_path) == [new]


def test_load_from_missing_dir_is_none(tmp_path: Path) -> None:
    assert load_newest_valid(tmp_path / "absent") is None


def test_policy_triggers() -> None:
    policy = SnapshotPolicy(max_record_bytes_between_snapshots=1000, max_snapshot_interval_ms=60_000)
    assert not policy.should_snapshot(10_000, 10**9, 0)  # nothing new: never
    assert policy.should_snapshot(1000, 0, 1)
    assert not policy.should_snapshot(999, 59_999, 1)
    assert policy.should_snapshot(1, 60_000, 1)
    assert not SnapshotPolicy(1000, 0).should_snapshot(1, 10**9, 1)  # 0 disables the time trigger
    defaults = SnapshotPolicy()
    assert defaults.max_record_bytes_between_snapshots == 20 * 1024 * 1024
    assert defaults.max_snapshot_interval_ms == 3_600_000


def test_retention_drops_prefix_only_below_snapshot_and_hw() -> None:
    policy = RetentionPolicy(max_retention_bytes=1000, max_retention_ms=60_000)
    common = {"log_start_offset": 0, "high_watermark": 500, "oldest_entry_timestamp_ms": 0, "now_ms": 1}
    # no snapshot: nothing goes however big the log is
    assert policy.new_log_start_offset(snapshot_end_offset=None, retained_bytes=10**9, **common) == 0
    # under both limits: kept
    assert policy.new_log_start_offset(snapshot_end_offset=400, retained_bytes=1000, **common) == 0
    # over the byte limit: up to the snapshot
    assert policy.new_log_start_offset(snapshot_end_offset=400, retained_bytes=1001, **common) == 400
    # snapshot beyond the high watermark: capped at the high watermark
    assert policy.new_log_start_offset(snapshot_end_offset=600, retained_bytes=1001, **common) == 500
    # over the age limit
    aged = {**common, "now_ms": 60_001}
    assert policy.new_log_start_offset(snapshot_end_offset=400, retained_bytes=1, **aged) == 400
    # no FetchSnapshot: a lagging voter keeps its entries
    lagging = policy.new_log_start_offset(
        snapshot_end_offset=400, retained_bytes=5000, voter_fetch_offsets=(450, 120), snapshots_servable=False, **common
    )
    assert lagging == 120
    # with FetchSnapshot the lagging voter fetches the snapshot instead
    served = policy.new_log_start_offset(
        snapshot_end_offset=400, retained_bytes=5000, voter_fetch_offsets=(450, 120), **common
    )
    assert served == 400
    # -1 disables a limit; the start offset never goes back
    off = RetentionPolicy(max_retention_bytes=-1, max_retention_ms=-1)
    assert off.new_log_start_offset(snapshot_end_offset=400, retained_bytes=10**9, **aged) == 0
    later = {**common, "log_start_offset": 450}
    assert policy.new_log_start_offset(snapshot_end_offset=400, retained_bytes=10**9, **later) == 450
    # an observer (no replica reads its log): up to the snapshot at once, capped at the high
    # watermark; kept when both limits are off
    observer = {**common, "prefix_has_readers": False}
    assert policy.new_log_start_offset(snapshot_end_offset=400, retained_bytes=1, **observer) == 400
    assert policy.new_log_start_offset(snapshot_end_offset=600, retained_bytes=1, **observer) == 500
    assert policy.new_log_start_offset(snapshot_end_offset=None, retained_bytes=1, **observer) == 0
    assert off.new_log_start_offset(snapshot_end_offset=400, retained_bytes=1, **observer) == 0
