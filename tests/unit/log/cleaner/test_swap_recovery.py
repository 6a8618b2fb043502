"""Crash safety of the swap: a start-up after a crash at every step of ``.cleaned`` → ``.swap`` →
live leaves either the old segments or the cleaned ones for each range, and every key's latest
value (Kafka documentation §4.8 "Log Compaction": the last known value of each key is always kept; Kafka's
``LogLoader``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from broker.log.cleaner.recopy import CleanResult
from broker.log.cleaner.swap import complete_swaps, swap_path
from broker.log.log import Log
from broker.log.recovery import load_log
from broker.log.segment import LogSegment
from tests.unit.log.cleaner.helpers import as_pairs, clean_log, keyed, prepare, read_all
from tests.unit.log.helpers import FakeClock, make_log


def dirty_log(tmp_path: Path, clock: FakeClock) -> Log:
    log = make_log(tmp_path, clock, segment_bytes=300, cleanup_policy=("compact",))
    for r in range(8):
        for k in range(4):
            log.append(keyed((f"k{k}", f"v{r}-{k}")))
    log.flush()
    return log


def crash_and_load(log: Log, clock: FakeClock) -> Log:
    """A start-up after a crash (no clean shutdown, recovery point 0)."""
    return load_log(log.directory, log.topic, log.partition, log.config, clock)


def expected_after_clean(tmp_path: Path, clock: FakeClock) -> list[tuple[int, str, str | None]]:
    twin = dirty_log(tmp_path / "twin", clock)
    clean_log(twin, clock)
    return as_pairs(read_all(twin))


def files(log: Log, suffix: str) -> list[str]:
    return sorted(p.name for p in log.directory.iterdir() if p.name.endswith(suffix))


def rename_to_swap(log: Log, result: CleanResult) -> None:
    for group in result.groups:
        os.replace(group.path, swap_path(log.directory, group.base_offset))


def test_crash_before_the_swap_drops_cleaned_files(tmp_path: Path) -> None:
    """Step 1 (``.cleaned`` written, nothing renamed): the old segments stay, untouched."""
    clock = FakeClock()
    log = dirty_log(tmp_path, clock)
    before = as_pairs(read_all(log))
    prepare(log, clock)
    assert files(log, ".cleaned")
    loaded = crash_and_load(log, clock)
    assert not files(loaded, ".cleaned")
    assert as_pairs(read_all(loaded)) == before


def test_crash_after_renaming_to_swap_completes_the_swap(tmp_path: Path) -> None:
    """Step 2 done (every ``.swap`` durable), no old segment renamed: start-up installs them."""
    clock = FakeClock()
    log = dirty_log(tmp_path, clock)
    rename_to_swap(log, prepare(log, clock))
    loaded = crash_and_load(log, clock)
    assert not files(loaded, ".swap")
    assert as_pairs(read_all(loaded)) == expected_after_clean(tmp_path, clock)


def test_crash_with_only_some_files_renamed_to_swap(tmp_path: Path) -> None:
    """Inside step 2: each ``.swap`` replaces its own sources; the rest stay old. Every key keeps
    its latest value and offsets stay increasing."""
    clock = FakeClock()
    log = dirty_log(tmp_path, clock)
    latest = {k: v for _, k, v in as_pairs(read_all(log))}
    result = prepare(log, clock)
    assert len(result.groups) >= 1
    rename_to_swap(log, CleanResult(result.map_end_offset, result.groups[:1]))
    loaded = crash_and_load(log, clock)
    after = as_pairs(read_all(loaded))
    assert {k: v for _, k, v in after} == latest
    assert [p[0] for p in after] == sorted({p[0] for p in after})


@pytest.mark.parametrize("renamed", [1, "all"])
def test_crash_while_old_segments_are_renamed_for_deletion(tmp_path: Path, renamed: int | str) -> None:
    """Step 3, part way: some sources already ``*.deleted``, the ``.swap`` not yet live."""
    clock = FakeClock()
    log = dirty_log(tmp_path, clock)
    result = prepare(log, clock)
    rename_to_swap(log, result)
    sources = [s.segment for g in result.groups for s in g.sources]
    for segment in sources[: len(sources) if renamed == "all" else int(renamed)]:
        assert isinstance(segment, LogSegment)
        segment.rename_for_deletion()
    loaded = crash_and_load(log, clock)
    assert not files(loaded, ".swap")
    assert not files(loaded, ".deleted")
    assert as_pairs(read_all(loaded)) == expected_after_clean(tmp_path, clock)


def test_crash_after_the_swap_file_became_live_before_its_indexes(tmp_path: Path) -> None:
    """Step 3, after ``.swap`` → ``.log`` but before its indexes were built: recovery builds them."""
    clock = FakeClock()
    log = dirty_log(tmp_path, clock)
    result = prepare(log, clock)
    rename_to_swap(log, result)
    first = result.groups[0]
    for source in first.sources:
        assert isinstance(source.segment, LogSegment)
        source.segment.rename_for_deletion()
    os.replace(swap_path(log.directory, first.base_offset), log.directory / f"{first.base_offset:020d}.log")
    loaded = crash_and_load(log, clock)
    assert as_pairs(read_all(loaded)) == expected_after_clean(tmp_path, clock)


def test_start_up_after_a_finished_swap_changes_nothing(tmp_path: Path) -> None:
    clock = FakeClock()
    log = dirty_log(tmp_path, clock)
    clean_log(log, clock)
    expected = as_pairs(read_all(log))
    assert as_pairs(read_all(crash_and_load(log, clock))) == expected


def test_a_torn_swap_file_is_dropped_and_the_old_segments_stay(tmp_path: Path) -> None:
    clock = FakeClock()
    log = dirty_log(tmp_path, clock)
    before = as_pairs(read_all(log))
    result = prepare(log, clock)
    rename_to_swap(log, result)
    path = swap_path(log.directory, result.groups[0].base_offset)
    size = path.stat().st_size
    assert size > 10
    os.truncate(path, size - 5)
    for group in result.groups[1:]:
        swap_path(log.directory, group.base_offset).unlink()
    assert complete_swaps(log.directory) == []
    assert as_pairs(read_all(crash_and_load(log, clock))) == before
