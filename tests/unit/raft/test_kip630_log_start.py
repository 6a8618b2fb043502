"""KIP-630 log start offset: the in-memory log and the file on disk once a snapshot covers a
prefix ("Snapshot Format", "Deleting Snapshots and Log Segments"). The driver's side runs over
loopback sockets: tests/integration/test_kip630_raft_driver.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.raft.log import Entry, LeaderChange, OffsetAndEpoch, RaftLog
from broker.raft.store import MetadataLog, log_file_name


def sample() -> list[Entry]:
    return [
        Entry(0, 1, LeaderChange(1, (1,), (1,))),
        Entry(1, 1, b"a"),
        Entry(2, 2, b"b"),
        Entry(3, 2, b"c"),
        Entry(4, 3, b"d"),
    ]


def test_released_payloads_keep_offsets_epochs_and_control_records() -> None:
    """The driver releases the payloads it delivered (the bytes stay in the log file): what
    the core asks of the log afterwards is unchanged; a truncation below the released range
    lets new entries there keep their payloads until released again."""
    log = RaftLog(sample())
    before = (log.epoch_cache(), log.end_offset_for_epoch(2), log.truncation_offset_for(2, 10))
    log.release_payloads(4)
    assert [e.payload for e in log.entries()] == [LeaderChange(1, (1,), (1,)), b"", b"", b"", b"d"]
    assert [(e.offset, e.epoch) for e in log.entries()] == [(e.offset, e.epoch) for e in sample()]
    assert (log.epoch_cache(), log.end_offset_for_epoch(2), log.truncation_offset_for(2, 10)) == before
    log.release_payloads(99)  # capped at the log end
    assert log.entry(4).payload == b""
    log.truncate_to(2)
    log.append([Entry(2, 4, b"x"), Entry(3, 4, b"y")])
    assert [e.payload for e in log.read(2, 2)] == [b"x", b"y"]
    log.release_payloads(3)
    assert [e.payload for e in log.read(2, 2)] == [b"", b"y"]
    log.delete_prefix(3, 4)
    log.release_payloads(4)
    assert log.entries() == [Entry(3, 4, b"")]


def test_raft_log_prefix_deletion_keeps_offsets_and_epochs() -> None:
    log = RaftLog(sample())
    log.delete_prefix(3, 2)
    assert (log.start_offset, log.end_offset) == (3, 5)
    assert [e.offset for e in log.entries()] == [3, 4]
    assert log.entry(4).payload == b"d"
    assert log.read(3, 10)[0].payload == b"c"
    with pytest.raises(ValueError):
        log.read(2, 1)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(2, 4)
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(3, 5)
    log.truncate_to(3)  # down to the start: the snapshot's epoch remains the last epoch
    assert log.end_offset_and_epoch() == OffsetAndEpoch(2, 3)
    log.append([Entry(3, 4, b"x")])
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(2, 3)


def test_raft_log_built_from_a_snapshot_and_a_tail() -> None:
    log = RaftLog([Entry(10, 5, b"t")], start_offset=10, start_epoch=4)
    assert log.end_offset_and_epoch() == OffsetAndEpoch(5, 11)
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(4, 10)
    empty = RaftLog((), start_offset=10, start_epoch=4)
    assert empty.end_offset_and_epoch() == OffsetAndEpoch(4, 10)


def test_metadata_log_prefix_deletion_renames_the_file_and_survives_reopen(tmp_path: Path) -> None:
    store = MetadataLog(tmp_path, lambda: 1_700_000_000_000)
    store.open()
    store.append(sample())
    store.flush()
    store.delete_prefix(3)
    assert [p.name for p in tmp_path.glob("*.log")] == [log_file_name(3)]
    assert store.end_offset == 5
    store.close()
    again = MetadataLog(tmp_path, lambda: 0)
    assert [e.offset for e in again.open()] == [3, 4]
    assert again.start_offset == 3
    again.truncate(4)
    again.append([Entry(4, 4, b"z")])
    again.close()
    (tmp_path / log_file_name(0)).write_bytes(b"stale leftover of an interrupted replacement")
    third = MetadataLog(tmp_path, lambda: 0)
    assert [e.payload for e in third.open()] == [b"c", b"z"]
    assert not (tmp_path / log_file_name(0)).exists()
    third.close()
