"""KIP-405 RemoteStorageManager contract on the built-in filesystem tier: copy, ranged fetch,
index fetch, idempotent delete, Kafka's naming (topic-id / partition / segment uuid), crash
safety (a temp name until the rename) and three brokers writing one shared directory."""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path

import pytest

from broker.log.remote.metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    TopicIdPartition,
)
from broker.log.remote.storage import (
    FILESYSTEM_RSM_CLASS,
    FileSystemRemoteStorageManager,
    IndexType,
    LogSegmentData,
    RemoteResourceNotFoundException,
    RemoteStorageException,
    kafka_uuid_str,
    load_remote_storage_manager,
)

TOPIC_ID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")


def _segment(tmp: Path, base: int, payload: bytes, *, txn: bool = True) -> LogSegmentData:
    tmp.mkdir(parents=True, exist_ok=True)
    stem = tmp / f"{base:020d}"
    files = {".log": payload, ".index": b"I" * 8, ".timeindex": b"T" * 12, ".snapshot": b"S"}
    if txn:
        files[".txnindex"] = b"X" * 34
    for suffix, data in files.items():
        Path(str(stem) + suffix).write_bytes(data)
    return LogSegmentData(
        log_segment=Path(str(stem) + ".log"),
        offset_index=Path(str(stem) + ".index"),
        time_index=Path(str(stem) + ".timeindex"),
        transaction_index=Path(str(stem) + ".txnindex") if txn else None,
        producer_snapshot_index=Path(str(stem) + ".snapshot"),
        leader_epoch_index=b"0\n1\n0 " + str(base).encode() + b"\n",
    )


def _md(partition: int, base: int, end: int) -> RemoteLogSegmentMetadata:
    tip = TopicIdPartition(TOPIC_ID, "orders", partition)
    return RemoteLogSegmentMetadata(RemoteLogSegmentId.generate(tip), base, end, 0, 1, 0, 1, {0: base})


@pytest.fixture
def rsm(tmp_path: Path) -> FileSystemRemoteStorageManager:
    loaded = load_remote_storage_manager(FILESYSTEM_RSM_CLASS, {"rsm.config.dir": str(tmp_path / "tier"), "other": "x"})
    assert isinstance(loaded, FileSystemRemoteStorageManager)
    return loaded


def test_kafka_uuid_string() -> None:
    # Kafka's Uuid.toString: URL-safe base64 without padding, 22 characters
    assert kafka_uuid_str(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert len(kafka_uuid_str(TOPIC_ID)) == 22


def test_copy_fetch_delete(rsm: FileSystemRemoteStorageManager, tmp_path: Path) -> None:
    md = _md(3, 100, 199)
    rsm.copy_log_segment_data(md, _segment(tmp_path / "local", 100, bytes(range(256))))
    log = rsm.segment_path(md)
    assert log.parent.name == f"orders-3-{kafka_uuid_str(TOPIC_ID)}"
    assert log.name == f"{100:020d}-{kafka_uuid_str(md.segment_id.id)}.log"
    assert not [p for p in log.parent.iterdir() if p.name.endswith(".tmp")]
    with rsm.fetch_log_segment(md, 10, 19) as f:
        assert f.read() == bytes(range(10, 20))
    with rsm.fetch_log_segment(md, 250) as f:
        assert f.read(3) + f.read() == bytes(range(250, 256))
    with rsm.fetch_index(md, IndexType.TRANSACTION) as f:
        assert f.read() == b"X" * 34
    with rsm.fetch_index(md, IndexType.LEADER_EPOCH) as f:
        assert f.read() == b"0\n1\n0 100\n"
    rsm.delete_log_segment_data(md)
    rsm.delete_log_segment_data(md)  # idempotent
    assert list(log.parent.iterdir()) == []
    with pytest.raises(RemoteResourceNotFoundException):
        rsm.fetch_log_segment(md, 0)


def test_missing_txn_index_is_not_found(rsm: FileSystemRemoteStorageManager, tmp_path: Path) -> None:
    md = _md(0, 0, 9)
    rsm.copy_log_segment_data(md, _segment(tmp_path / "local", 0, b"abc", txn=False))
    with pytest.raises(RemoteResourceNotFoundException):
        rsm.fetch_index(md, IndexType.TRANSACTION)
    with pytest.raises(RemoteStorageException):
        rsm.fetch_log_segment(md, 2, 1)


def test_interrupted_copy_leaves_no_log_and_delete_clears_it(
    rsm: FileSystemRemoteStorageManager, tmp_path: Path
) -> None:
    """A crash mid-copy (the source vanishes before the .log is written) leaves no ``.log``
    under the segment's name, so no reader treats it as whole; the new leader's delete of the
    COPY_SEGMENT_STARTED segment removes what was written."""
    md = _md(0, 0, 9)
    data = _segment(tmp_path / "local", 0, b"abc")
    os.unlink(data.log_segment)
    with pytest.raises(RemoteStorageException):
        rsm.copy_log_segment_data(md, data)
    assert not rsm.segment_path(md).exists()
    assert rsm.segment_path(md, ".index").exists()
    rsm.delete_log_segment_data(md)
    assert list(rsm.segment_path(md).parent.iterdir()) == []


def test_unconfigured_and_unknown_class(tmp_path: Path) -> None:
    with pytest.raises(RemoteStorageException):
        load_remote_storage_manager(FILESYSTEM_RSM_CLASS, {})
    with pytest.raises(RemoteStorageException):
        load_remote_storage_manager("no.such.Module", {"rsm.config.dir": str(tmp_path)})


def test_three_brokers_share_one_tier(tmp_path: Path) -> None:
    """Three managers (one per broker) copy their own partitions' segments into one directory
    at once; every copy reads back byte for byte, no name collides, no temp file is left."""
    tier = str(tmp_path / "tier")
    results: dict[int, list[tuple[RemoteLogSegmentMetadata, bytes]]] = {}

    def broker(bid: int) -> None:
        rsm = load_remote_storage_manager(FILESYSTEM_RSM_CLASS, {"rsm.config.dir": tier})
        out = []
        for i in range(20):
            payload = os.urandom(4096 + i)
            md = _md(bid, i * 100, i * 100 + 99)
            rsm.copy_log_segment_data(md, _segment(tmp_path / f"b{bid}", i * 100, payload))
            out.append((md, payload))
        results[bid] = out

    threads = [threading.Thread(target=broker, args=(b,)) for b in (0, 1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    reader = load_remote_storage_manager(FILESYSTEM_RSM_CLASS, {"rsm.config.dir": tier})
    assert isinstance(reader, FileSystemRemoteStorageManager)
    for bid in (0, 1, 2):
        assert len(results[bid]) == 20
        for md, payload in results[bid]:
            with reader.fetch_log_segment(md, 0) as f:
                assert f.read() == payload
    names = [p.name for p in Path(tier).rglob("*")]
    assert not [n for n in names if n.endswith(".tmp")]
    assert len([n for n in names if n.endswith(".log")]) == 60
