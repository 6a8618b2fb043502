"""A rolled pylog segment copied to the filesystem tier reads back as the local one does: the
tier's ``.index`` (fetched by ``IndexType.OFFSET``) positions a read at an offset, and the
bytes there are the v2 batch holding it (KIP-405 "fetch from remote": offset index lookup, then
a ranged ``fetchLogSegment``), parsed with the Spark direct reader's pure helpers."""

from __future__ import annotations

import uuid
from pathlib import Path

from broker.log.remote.metadata import RemoteLogSegmentId, RemoteLogSegmentMetadata, TopicIdPartition
from broker.log.remote.storage import (
    FILESYSTEM_RSM_CLASS,
    FileSystemRemoteStorageManager,
    IndexType,
    LogSegmentData,
    load_remote_storage_manager,
)
from pyspark_log.spark.segment_reader import batch_at, index_floor, parse_offset_index
from tests.unit.log.helpers import FakeClock, batch, make_log


def test_rolled_segment_served_from_tier(tmp_path: Path) -> None:
    clock = FakeClock()
    log = make_log(tmp_path / "local", clock, index_interval_bytes=256)
    for i in range(60):
        log.append(batch(3, tag=i, value_bytes=50))
    log.roll()
    seg = log.segments[0]
    end = seg.next_offset - 1
    assert end == 179
    snapshot = tmp_path / "empty.snapshot"
    snapshot.write_bytes(b"")
    data = LogSegmentData(
        log_segment=seg.log_path,
        offset_index=seg.offset_index.path,
        time_index=seg.time_index.path,
        transaction_index=None,
        producer_snapshot_index=snapshot,
        leader_epoch_index=b"0\n1\n0 0\n",
    )
    rsm = load_remote_storage_manager(FILESYSTEM_RSM_CLASS, {"rsm.config.dir": str(tmp_path / "tier")})
    assert isinstance(rsm, FileSystemRemoteStorageManager)
    tip = TopicIdPartition(uuid.uuid4(), "t", 0)
    md = RemoteLogSegmentMetadata(
        RemoteLogSegmentId.generate(tip), 0, end, clock.now_ms, 1, clock.now_ms, seg.size_bytes, {0: 0}
    )
    rsm.copy_log_segment_data(md, data)
    assert rsm.segment_path(md).read_bytes() == seg.log_path.read_bytes()

    with rsm.fetch_index(md, IndexType.OFFSET) as f:
        entries = parse_offset_index(f.read(), md.start_offset)
    assert len(entries) > 5  # index_interval_bytes=256 gives many entries
    for target in (0, 97, 150, end):
        floor = index_floor(entries, target)
        position = floor[1] if floor else 0
        with rsm.fetch_log_segment(md, position) as f:
            tail = f.read()
        pos = 0
        found = None
        while (hdr := batch_at(tail, pos)) is not None:
            if hdr[0] <= target <= hdr[1]:
                found = hdr
                break
            pos += hdr[2]
        assert found is not None, target
        assert found[1] - found[0] == 2  # a 3-record batch
