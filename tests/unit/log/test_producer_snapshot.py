"""Producer-state snapshots and their rebuild at start-up (``<offset>.snapshot``; KIP-98).

Issue #5: "Producer state is snapshotted with segments and rebuilt on start-up, so deduplication
survives a broker restart and kill -9." A snapshot is written when a segment rolls and on a clean
close; start-up loads the newest one at or below the first re-validated segment and replays the
batch headers after it; a crash's truncation truncates the producer state too.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from broker.log.producer_state import (
    BatchMetadata,
    CorruptSnapshotError,
    ProducerStateEntry,
    decode_snapshot,
    encode_snapshot,
)
from broker.log.segment import LOG_SUFFIX, segment_file_name
from tests.unit.log.helpers import FakeClock, batch, make_log, reopen

PID = 7


def pbatch(seq: int, count: int = 1, *, epoch: int = 0, value_bytes: int = 10, tag: int = 0) -> bytes:
    return batch(count, producer_id=PID, producer_epoch=epoch, base_sequence=seq, value_bytes=value_bytes, tag=tag)


def snapshots(directory: Path) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in directory.glob("*.snapshot"))


def test_snapshot_round_trip_keeps_every_field() -> None:
    entries = [
        ProducerStateEntry(
            1, 3, tuple(BatchMetadata(i * 2, i * 2 + 1, 10 + i, 11 + i, 1000 + i) for i in range(5)), 4, 12, 1004
        ),
        ProducerStateEntry(2**62, 0, (), -1, -1, -1),
    ]
    assert decode_snapshot(encode_snapshot(entries)) == entries
    assert decode_snapshot(encode_snapshot([])) == []


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d[:-1],  # truncated
        lambda d: d + b"\0",  # trailing byte
        lambda d: d[:10] + bytes([d[10] ^ 1]) + d[11:],  # flipped bit: CRC mismatch
        lambda d: b"\0\x09" + d[2:],  # unknown version
        lambda d: b"",
    ],
)
def test_damaged_snapshot_is_rejected(damage: object) -> None:
    data = encode_snapshot([ProducerStateEntry(1, 0, (BatchMetadata(0, 0, 0, 0, 5),), -1, -1, 5)])
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(damage(data))  # type: ignore[operator]


def test_roll_writes_a_snapshot_at_the_new_base_and_clean_close_at_the_end(tmp_path: Path) -> None:
    clock = FakeClock()
    log = make_log(tmp_path, clock)
    log.append(pbatch(0, 3))
    log.roll()
    assert snapshots(log.directory) == [3]
    log.append(pbatch(3, 2))
    log.close()
    assert snapshots(log.directory) == [3, 5]


def test_dedup_survives_a_clean_restart(tmp_path: Path) -> None:
    clock = FakeClock()
    log = make_log(tmp_path, clock)
    for seq in range(5):
        log.append(pbatch(seq, tag=seq))
    log.close()
    log = reopen(log, clock, clean=True, recovery_point=5)
    assert log.append(pbatch(2, tag=2)).first_offset == 2
    assert log.log_end_offset == 5
    assert log.append(pbatch(5)).first_offset == 5


def test_dedup_survives_a_crash_and_is_rebuilt_from_batch_headers(tmp_path: Path) -> None:
    """kill -9: no clean-close snapshot; the state comes from the roll snapshot plus a replay of
    the active segment's headers (the batches cached before the roll come from the snapshot)."""
    clock = FakeClock()
    log = make_log(tmp_path, clock)
    for seq in range(3):
        log.append(pbatch(seq, tag=seq))
    log.roll()
    for seq in range(3, 5):
        log.append(pbatch(seq, tag=seq))
    log.close(flush=False)  # a crash: nothing more is written
    assert snapshots(log.directory) == [3]
    log = reopen(log, clock, recovery_point=0)
    for seq in range(5):  # every one of the last five is still a duplicate
        assert log.append(pbatch(seq, tag=seq)).first_offset == seq
    assert log.log_end_offset == 5


def test_rebuild_without_any_snapshot_replays_the_whole_log(tmp_path: Path) -> None:
    clock = FakeClock()
    log = make_log(tmp_path, clock)
    for seq in range(4):
        log.append(pbatch(seq))
    log.close(flush=False)
    assert snapshots(log.directory) == []
    log = reopen(log, clock)
    entry = log.producer_state.last_entry(PID)
    assert entry is not None
    assert entry.last_seq == 3
    assert [b.first_offset for b in entry.batches] == [0, 1, 2, 3]


def test_corrupt_snapshot_is_ignored_and_the_state_rebuilt(tmp_path: Path) -> None:
    clock = FakeClock()
    log = make_log(tmp_path, clock)
    log.append(pbatch(0, 2))
    log.roll()
    log.append(pbatch(2, 2))
    log.close()
    path = log.directory / "00000000000000000004.snapshot"
    path.write_bytes(path.read_bytes()[:-3])
    log = reopen(log, clock, clean=True, recovery_point=4)
    assert not path.exists(), "a corrupt snapshot is deleted"
    entry = log.producer_state.last_entry(PID)
    assert entry is not None
    assert entry.last_seq == 3  # from the snapshot at 2 and a replay of [2, 4)
    assert log.append(pbatch(0, 2)).first_offset == 0


def test_crash_truncation_truncates_the_producer_state(tmp_path: Path) -> None:
    """A torn last batch is cut by recovery, and the producer state forgets it: the producer's
    retry of that batch is written (it was never acknowledged as stored)."""
    clock = FakeClock()
    log = make_log(tmp_path, clock)
    log.append(pbatch(0))
    log.append(pbatch(1))
    log.close()  # clean: a snapshot at 2
    log = reopen(log, clock, clean=True, recovery_point=2)
    log.append(pbatch(2, value_bytes=500))
    log.close(flush=False)
    segment = log.directory / segment_file_name(0, LOG_SUFFIX)
    os.truncate(segment, segment.stat().st_size - 100)  # tear the last batch
    log = reopen(log, clock, recovery_point=2)
    assert log.log_end_offset == 2
    entry = log.producer_state.last_entry(PID)
    assert entry is not None
    assert entry.last_seq == 1
    info = log.append(pbatch(2, value_bytes=500))
    assert (info.first_offset, log.log_end_offset) == (2, 3)


def test_snapshots_past_the_log_end_are_deleted_at_start_up(tmp_path: Path) -> None:
    clock = FakeClock()
    log = make_log(tmp_path, clock)
    log.append(pbatch(0, 3))
    log.close()
    assert snapshots(log.directory) == [3]
    real = log.directory / "00000000000000000003.snapshot"
    (log.directory / "00000000000000000009.snapshot").write_bytes(real.read_bytes())
    log = reopen(log, clock, clean=True, recovery_point=3)
    assert snapshots(log.directory) == [3]


def test_truncation_reloads_the_producer_state(tmp_path: Path) -> None:
    clock = FakeClock()
    log = make_log(tmp_path, clock)
    for seq in range(3):
        log.append(pbatch(seq))
    log.roll()
    for seq in range(3, 6):
        log.append(pbatch(seq))
    log.truncate_to(4)
    entry = log.producer_state.last_entry(PID)
    assert entry is not None
    assert entry.last_seq == 3
    assert log.append(pbatch(4)).first_offset == 4
    log.truncate_to(2)
    assert snapshots(log.directory) == []
    entry = log.producer_state.last_entry(PID)
    assert entry is not None
    assert entry.last_seq == 1


def test_snapshots_are_deleted_with_their_segments(tmp_path: Path) -> None:
    clock = FakeClock()
    log = make_log(tmp_path, clock)
    for seq in range(3):
        log.append(pbatch(seq))
        log.roll()
    assert snapshots(log.directory) == [1, 2, 3]
    log.delete_records_before(2)
    assert log.log_start_offset == 2
    assert snapshots(log.directory) == [2, 3]
    entry = log.producer_state.last_entry(PID)
    assert entry is not None, "deleting a producer's batches does not forget the producer"
    assert entry.last_seq == 2


def test_producer_whose_segments_are_gone_survives_a_restart_through_a_later_snapshot(tmp_path: Path) -> None:
    clock = FakeClock()
    log = make_log(tmp_path, clock)
    log.append(pbatch(0))
    log.roll()
    log.append(batch(1))
    log.roll()
    log.delete_records_before(2)
    log.close(flush=False)
    log = reopen(log, clock)
    assert log.producer_state.last_entry(PID) is not None
    assert log.append(pbatch(0)).first_offset == 0


def test_retention_deletes_every_snapshot_below_the_first_segment(tmp_path: Path) -> None:
    """Clean-shutdown snapshots sit inside segments (at the log end then); deleting segments
    deletes every snapshot below the new first segment, not only those at deleted bases
    (Kafka ``deleteSnapshotsBefore``)."""
    clock = FakeClock()
    log = make_log(tmp_path, clock)
    log.append(pbatch(0))
    log.append(pbatch(1))
    log.close()  # snapshot at 2, inside segment 0
    log = reopen(log, clock, clean=True)
    log.append(pbatch(2))
    log.roll()  # snapshot at 3
    log.append(batch(1))
    log.roll()  # snapshot at 4
    assert snapshots(log.directory) == [2, 3, 4]
    log.delete_records_before(3)
    assert [s.base_offset for s in log.segments] == [3, 4]
    assert snapshots(log.directory) == [3, 4]
    assert log.producer_state.last_entry(PID) is not None


def test_start_up_removes_stray_snapshots_but_the_newest(tmp_path: Path) -> None:
    """Kafka ``removeStraySnapshots``: at start-up, snapshots not at a segment base (left by
    clean shutdowns) are deleted, except the newest one when it lies past the last segment base;
    many restarts do not pile them up."""
    clock = FakeClock()
    log = make_log(tmp_path, clock)
    for seq in range(4):
        log.append(pbatch(seq))
        log.close()
        log = reopen(log, clock, clean=True)
    assert snapshots(log.directory) == [4]
    log.roll()  # snapshot at 4 is now a segment base
    log.append(pbatch(4))
    log.close()
    log = reopen(log, clock, clean=True)
    assert snapshots(log.directory) == [4, 5]
    log.append(batch(1))
    log.roll()  # base 6
    log.close(flush=False)  # a crash: no snapshot at the end
    log = reopen(log, clock)
    assert snapshots(log.directory) == [4, 6], "the stray at 5 is below the last base 6"
    assert log.append(pbatch(4)).first_offset == 4, "the producer state was still rebuilt"


def test_producers_expired_while_down_are_not_loaded_from_a_snapshot(tmp_path: Path) -> None:
    """Kafka ``loadFromSnapshot`` skips producers idle for ``producer.id.expiration.ms`` without an
    ongoing transaction; one with an ongoing transaction stays."""
    clock = FakeClock()
    log = make_log(tmp_path, clock)
    log.append(pbatch(0))
    log.append(batch(1, producer_id=8, producer_epoch=0, base_sequence=0, transactional=True))
    log.close()
    clock.advance(86_400_000)  # the default producer.id.expiration.ms
    log = reopen(log, clock, clean=True)
    assert set(log.producer_state.producers) == {8}
    assert log.append(pbatch(5)).first_offset == 2, "an unknown producer may start at any sequence"
