"""A whole clean of a real log: recopy and swap (Kafka documentation §4.8 "Log Compaction" "What guarantees
does log compaction
provide" and "Log Compaction Details")."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker.log.cleaner.cleaner import CLEANER_OFFSET_CHECKPOINT, LogCleaner
from broker.log.cleaner.config import CleanerConfig
from broker.log.cleaner.swap import install
from broker.log.config import LogConfig, LogManagerConfig
from broker.log.log import Log
from broker.log.manager import LogManager
from tests.unit.log.cleaner.helpers import as_pairs, clean_log, keyed, prepare, read_all
from tests.unit.log.helpers import FakeClock, make_log, reopen

DAY_MS = 86_400_000


def compacted(tmp_path: Path, clock: FakeClock, **config: object) -> Log:
    settings: dict[str, object] = {"segment_bytes": 300, "cleanup_policy": ("compact",), **config}
    return make_log(tmp_path, clock, **settings)


def overwrite(log: Log, rounds: int, keys: int = 4) -> dict[str, tuple[int, str]]:
    latest: dict[str, tuple[int, str]] = {}
    for r in range(rounds):
        for k in range(keys):
            info = log.append(keyed((f"k{k}", f"v{r}-{k}")))
            latest[f"k{k}"] = (info.first_offset, f"v{r}-{k}")
    return latest


def test_section_4_8_reader_from_the_start_sees_the_final_value_of_every_key(tmp_path: Path) -> None:
    """a consumer reading from the start sees at least the final state of every record, in write order and
    offsets never change."""
    clock = FakeClock()
    log = compacted(tmp_path, clock)
    overwrite(log, 10)
    before = as_pairs(read_all(log))
    segments_before = len(log.segments)
    active_base = log.segments.active.base_offset
    result = clean_log(log, clock)
    after = as_pairs(read_all(log))
    cleaned = [p for p in after if p[0] < active_base]
    # exactly the latest record per key of the cleaned range (the map covers the segments below
    # the active one), in offset order, offsets unchanged
    head = [p for p in before if p[0] < active_base]
    assert cleaned == [p for p in head if not any(q[1] == p[1] and q[0] > p[0] for q in head)]
    assert [p for p in after if p[0] >= active_base] == [p for p in before if p[0] >= active_base]
    assert {k: v for _, k, v in after} == {k: v for _, k, v in before}
    assert [p[0] for p in after] == sorted(p[0] for p in after)
    assert len(log.segments) < segments_before  # small cleaned segments were grouped
    assert result.map_end_offset == active_base
    assert log.log_end_offset == before[-1][0] + 1
    assert not list(tmp_path.rglob("*.cleaned"))
    assert not list(tmp_path.rglob("*.swap"))


def test_section_4_8_a_read_inside_a_removed_range_starts_at_the_next_kept_record(tmp_path: Path) -> None:
    """offsets 36, 37 and 38 are one position: a read from any of them returns the messages from 38 on."""
    clock = FakeClock()
    log = compacted(tmp_path, clock)
    overwrite(log, 10)
    clean_log(log, clock)
    kept = [r.offset for r in read_all(log)]
    gap = next(o for o in range(kept[-1]) if o not in kept)
    chunk = log.read(gap, 1 << 20)
    from pyspark_log.records.batch import decode_batches

    first = decode_batches(chunk.read_bytes())[0][1]
    assert next(r.offset for r in first if r.offset >= gap) == min(o for o in kept if o > gap)


def test_section_4_8_tombstone_kept_first_then_removed_after_delete_retention(tmp_path: Path) -> None:
    """a key with a null payload means delete that key; the delete marker itself is removed after a
    while to free space."""
    clock = FakeClock()
    log = compacted(tmp_path, clock, delete_retention_ms=DAY_MS)
    overwrite(log, 3)
    tomb = log.append(keyed(("k1", None))).first_offset
    overwrite(log, 2, keys=1)  # k0 only: k1 stays deleted
    log.roll()
    first = clean_log(log, clock)
    records = as_pairs(read_all(log))
    assert (tomb, "k1", None) in records  # the clean that first sees a tombstone keeps it
    assert [p for p in records if p[1] == "k1"] == [(tomb, "k1", None)]
    # ... and stamps its batch with a delete horizon (KIP-534), the record's timestamp unchanged
    [stamped] = [h for h in _headers(log) if h.base_offset <= tomb <= h.last_offset]
    assert stamped.has_delete_horizon
    assert stamped.base_timestamp == clock.now_ms + DAY_MS
    assert [r.timestamp for r in read_all(log) if r.offset == tomb] == [clock.now_ms]
    # before the horizon a clean keeps it; after it, the tombstone goes
    clock.advance(DAY_MS - 1)
    overwrite(log, 2, keys=1)
    log.roll()
    second = clean_log(log, clock, first_dirty=first.map_end_offset)
    assert (tomb, "k1", None) in as_pairs(read_all(log))
    clock.advance(2)
    overwrite(log, 2, keys=1)
    log.roll()
    clean_log(log, clock, first_dirty=second.map_end_offset)
    assert all(p[1] != "k1" for p in as_pairs(read_all(log)))


def test_full_offset_map_cleans_partially_up_to_the_last_offset_it_covered(tmp_path: Path) -> None:
    """A map that fills up stops at a batch boundary; the clean covers only that far, and the
    next clean continues from there."""
    clock = FakeClock()
    log = compacted(tmp_path, clock, segment_bytes=2000)
    for k in range(20):
        log.append(keyed((f"k{k}", "a")))
    for k in range(20):
        log.append(keyed((f"k{k}", "b")))
    log.roll()
    result = clean_log(log, clock, map_bytes=24 * 12)  # room for 10 keys at load factor 0.9
    assert result.map_end_offset == 10
    records = as_pairs(read_all(log))
    assert len(records) == 40  # keys k0..k9 in the map occur only at offsets 0..9: nothing superseded yet
    second = clean_log(log, clock, first_dirty=result.map_end_offset, map_bytes=24 * 12)
    assert second.map_end_offset == 20
    third = clean_log(log, clock, first_dirty=second.map_end_offset, map_bytes=24 * 12)
    assert third.map_end_offset == 30
    records = as_pairs(read_all(log))
    assert [p for p in records if p[1] in {f"k{k}" for k in range(10)}] == [(20 + k, f"k{k}", "b") for k in range(10)]


def test_null_key_records_are_dropped_by_the_cleaner(tmp_path: Path) -> None:
    clock = FakeClock()
    log = make_log(tmp_path, clock, segment_bytes=300)  # written before the topic became compacted
    log.append(keyed((None, "orphan"), ("k", "v")))
    log.roll()
    log.config = LogConfig(segment_bytes=300, cleanup_policy=("compact",))
    clean_log(log, clock)
    assert as_pairs(read_all(log)) == [(1, "k", "v")]


def test_aborted_transactions_removed_markers_kept_then_removed(tmp_path: Path) -> None:
    """Kafka's rules: records of aborted transactions go; a marker stays while data of its
    transaction was seen and its segment retains deletes; the last batch of a live producer
    stays (as a header) so its sequence state survives."""
    clock = FakeClock()
    log = compacted(tmp_path, clock, segment_bytes=100_000, delete_retention_ms=DAY_MS)
    txn = {"producer_id": 7, "producer_epoch": 0, "transactional": True}
    log.append(keyed(("a", "committed"), **txn, base_sequence=0))
    commit_offset = log.append_control_marker(7, 0, 0, commit=True)
    log.append(keyed(("a", "aborted"), **txn, base_sequence=1))
    abort_offset = log.append_control_marker(7, 0, 0, commit=False)
    log.append(keyed(("b", "x")))
    log.append(keyed(("b", "y")))
    log.roll()
    clean_log(log, clock)
    records = as_pairs(read_all(log))
    assert ("a", "aborted") not in [(k, v) for _, k, v in records]
    assert (0, "a", "committed") in records
    headers = _headers(log)
    assert commit_offset in [h.base_offset for h in headers if h.is_control]
    assert abort_offset in [h.base_offset for h in headers if h.is_control]  # its data was there
    # the aborted batch was producer 7's last data batch: kept with no records
    empty = [h for h in headers if h.producer_id == 7 and not h.is_control and h.records_count == 0]
    assert [h.base_offset for h in empty] == [abort_offset - 1]
    assert [t.last_offset for s in log.segments for t in s.txn_index.entries] == [abort_offset]
    # producer 7 goes on: the empty header is no longer its last batch, so this clean drops it
    # (and keeps the ABORT marker once more: data of its transaction was seen in this clean)
    log.append(keyed(("c", "new"), **txn, base_sequence=2))
    log.append_control_marker(7, 0, 0, commit=True)
    log.roll()
    second = clean_log(log, clock, first_dirty=log.segments[-2].base_offset)
    assert [h.base_offset for h in _headers(log) if h.producer_id == 7 and not h.is_control] == [0, 6]
    assert abort_offset in [h.base_offset for h in _headers(log) if h.is_control]
    # no data of its transaction left: the ABORT marker is removable, so this clean stamps it with
    # a delete horizon (KIP-534); the first COMMIT marker (its data still there) is not stamped
    log.append(keyed(("b", "z")))
    log.roll()
    third = clean_log(log, clock, first_dirty=second.map_end_offset)
    stamped = {h.base_offset: h.has_delete_horizon for h in _headers(log) if h.is_control}
    assert stamped[abort_offset]
    assert not stamped[commit_offset]
    # past the horizon the ABORT marker goes; the COMMIT marker stays
    clock.advance(DAY_MS + 1)
    log.append(keyed(("b", "zz")))
    log.roll()
    clean_log(log, clock, first_dirty=third.map_end_offset)
    controls = [h.base_offset for h in _headers(log) if h.is_control]
    assert abort_offset not in controls
    assert commit_offset in controls
    assert [t.last_offset for s in log.segments for t in s.txn_index.entries] == []
    reopened = reopen(log, clock)  # the producer state rebuilt from the cleaned log
    entry = reopened.producer_state.last_entry(7)
    assert entry is not None
    assert entry.last_seq == 2


def _headers(log: Log) -> list:  # type: ignore[type-arg]
    from broker.log.scan import iter_headers

    return [h for s in log.segments for _, h in iter_headers(s.fd, 0, s.size_bytes)]


def test_cleaned_log_recovers_after_a_crash(tmp_path: Path) -> None:
    clock = FakeClock()
    log = compacted(tmp_path, clock)
    overwrite(log, 8)
    clean_log(log, clock)
    expected = as_pairs(read_all(log))
    assert as_pairs(read_all(reopen(log, clock))) == expected


def test_a_log_changed_during_the_clean_drops_the_result(tmp_path: Path) -> None:
    """Coordination with the event loop: a truncation between the plan and the swap makes the
    swap refuse the cleaned files; the log is untouched."""
    clock = FakeClock()
    log = compacted(tmp_path, clock)
    overwrite(log, 8)
    result = prepare(log, clock)
    assert list(tmp_path.rglob("*.cleaned"))
    log.truncate_to(3)
    before = as_pairs(read_all(log))
    assert not install(log, result, clock())
    assert not list(tmp_path.rglob("*.cleaned"))
    assert as_pairs(read_all(log)) == before


def test_log_cleaner_task_cleans_the_dirtiest_log_and_checkpoints(tmp_path: Path) -> None:
    clock = FakeClock()
    manager = LogManager(LogManagerConfig(log_dirs=(str(tmp_path / "d"),)), clock=clock)
    manager.startup()
    compact = LogConfig(segment_bytes=300, cleanup_policy=("compact",))
    log = manager.get_or_create_log("c", 0, compact)
    plain = manager.get_or_create_log("p", 0, LogConfig(segment_bytes=300))
    overwrite(log, 10)
    overwrite(plain, 10)
    plain_before = as_pairs(read_all(plain))
    cleaner = LogCleaner(manager, CleanerConfig(threads=1, dedupe_buffer_size=24 * 4096), clock, processes=False)

    async def once() -> tuple[bool, bool]:
        return await cleaner.clean_once(), await cleaner.clean_once()

    first, second = asyncio.run(once())
    assert first
    assert not second
    assert len({k for _, k, _ in as_pairs(read_all(log))}) == 4
    assert as_pairs(read_all(plain)) == plain_before  # cleanup.policy=delete: never cleaned
    checkpoint = (tmp_path / "d" / CLEANER_OFFSET_CHECKPOINT).read_text().split()
    assert checkpoint[-1] == str(log.segments.active.base_offset)
    metrics = cleaner.metrics()
    assert metrics["cleaned-logs-total"] == 1
    assert metrics["uncleanable-partitions-count"] == 0
    manager.shutdown()


def test_indexes_written_by_the_worker_equal_a_rebuild_from_the_log(tmp_path: Path) -> None:
    """The cleaned segments' offset and time indexes (built while recopying) are what
    ``LogSegment.recover`` would build from their batches."""
    clock = FakeClock()
    log = compacted(tmp_path, clock, segment_bytes=4000, index_interval_bytes=50)
    overwrite(log, 30, keys=8)
    clean_log(log, clock)
    cleaned = [s for s in log.segments[:-1] if s.size_bytes]
    assert cleaned
    for segment in cleaned:
        written = (segment.offset_index.path.read_bytes(), segment.time_index.path.read_bytes())
        assert len(written[0]) > 0
        segment.recover(segment.base_offset)
        segment.flush_indexes()
        assert (segment.offset_index.path.read_bytes(), segment.time_index.path.read_bytes()) == written


def test_a_later_committed_transaction_of_a_producer_with_an_aborted_one_is_compacted(tmp_path: Path) -> None:
    clock = FakeClock()
    log = compacted(tmp_path, clock, segment_bytes=100_000)
    txn = {"producer_id": 9, "producer_epoch": 0, "transactional": True}
    log.append(keyed(("a", "1")))
    log.append(keyed(("a", "aborted"), **txn, base_sequence=0))
    log.append_control_marker(9, 0, 0, commit=False)
    log.append(keyed(("a", "2"), **txn, base_sequence=1))
    log.append_control_marker(9, 0, 0, commit=True)
    log.append(keyed(("z", "last"), producer_id=10, producer_epoch=0, base_sequence=0))
    log.roll()
    clean_log(log, clock)
    assert [(k, v) for _, k, v in as_pairs(read_all(log))] == [("a", "2"), ("z", "last")]


def test_compact_delete_policy_is_both_cleaned_and_retained(tmp_path: Path) -> None:
    """``cleanup.policy=compact,delete``: the cleaner compacts it and retention still deletes
    old segments."""
    clock = FakeClock()
    log = compacted(tmp_path, clock, cleanup_policy=("compact", "delete"), retention_ms=DAY_MS)
    overwrite(log, 6)
    clean_log(log, clock)
    assert len({k for _, k, _ in as_pairs(read_all(log))}) == 4
    clock.advance(2 * DAY_MS)
    overwrite(log, 1)
    assert log.delete_old_segments() > 0
    assert log.log_start_offset > 0


def test_a_corrupt_batch_makes_the_log_uncleanable_not_the_broker_fail(tmp_path: Path) -> None:
    clock = FakeClock()
    manager = LogManager(LogManagerConfig(log_dirs=(str(tmp_path / "d"),)), clock=clock)
    manager.startup()
    log = manager.get_or_create_log("c", 0, LogConfig(segment_bytes=300, cleanup_policy=("compact",)))
    overwrite(log, 10)
    first = log.segments[0]
    with first.log_path.open("r+b") as handle:  # flip a byte inside the first batch's records
        handle.seek(70)
        byte = handle.read(1)
        handle.seek(70)
        handle.write(bytes([byte[0] ^ 0xFF]))
    cleaner = LogCleaner(manager, CleanerConfig(dedupe_buffer_size=24 * 4096), clock, processes=False)
    assert asyncio.run(cleaner.clean_once())
    assert cleaner.metrics()["uncleanable-partitions-count"] == 1
    assert not asyncio.run(cleaner.clean_once())  # skipped from now on
    assert not list((tmp_path / "d").rglob("*.cleaned"))
    manager.shutdown()


def test_max_compaction_lag_rolls_the_active_segment(tmp_path: Path) -> None:
    clock = FakeClock()
    log = compacted(tmp_path, clock, segment_bytes=1 << 20, segment_ms=DAY_MS, max_compaction_lag_ms=60_000)
    log.append(keyed(("a", "1"), ts=clock()))
    clock.advance(60_001)
    log.append(keyed(("a", "2"), ts=clock()))
    assert len(log.segments) == 2
