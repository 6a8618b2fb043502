"""Swap cleaned segments into a log, crash-safely (Kafka ``UnifiedLog.replaceSegments``).

Kafka documentation §4.8 "Log Compaction" step 3: cleaned segments replace the originals at once, so the extra
disk needed is one segment. The sequence, each step durable before the next:

1. a cleaner worker writes ``<base>.log.cleaned`` (and its indexes) and fsyncs it (``recopy.py``);
2. on the event loop, ``install`` checks that the log still holds exactly the source segments
   (same objects, same sizes; else the result is dropped), renames every ``.cleaned`` to
   ``<base>.log.swap`` and fsyncs the directory — from here the swap is decided;
3. per cleaned file: the source segments' files are renamed to ``*.deleted`` (readers holding a
   ``FileSlice`` keep their descriptors), ``.swap`` is renamed to ``<base>.log`` and the offset
   and time indexes the worker wrote (``<base>.index.cleaned``, ``.timeindex.cleaned``) to
   theirs (only their last entries are checked: ``LogSegment.load_tail``), its ``.txnindex`` is
   written, its modification time set to the newest source's (retention and
   ``delete.retention.ms`` keep their clocks), and the ``Log`` swaps the segment objects
   (``Log.replace_segments``); then the directory is fsynced. It all runs in one synchronous
   call on the loop, so no append or read sees a half-swapped log.

At start-up ``complete_swaps`` (called by ``broker.log.recovery``) finishes step 3 for every
``.swap`` file left by a crash: the live segments it replaces — the one at its base offset and
those starting inside its offset range — are deleted and it is renamed to ``.log`` (its indexes
are then rebuilt by recovery). ``*.cleaned`` files (a crash before step 2, or the indexes of a
swap that recovery completes) and ``*.deleted`` ones are removed by recovery as strays. A crash
at any point leaves either the old segments or the cleaned ones for every range, never both:
each cleaned file alone is a valid replacement of its sources, and a source that survives next
to it holds only offsets past its end.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from broker.log.cleaner.recopy import SWAP_SUFFIX, CleanedGroup, CleanResult, SourceSegment
from broker.log.errors import CorruptMessageError
from broker.log.files import fsync_dir
from broker.log.index_file import CorruptIndexError
from broker.log.scan import iter_headers
from broker.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment, segment_file_name
from broker.log.txn_index import TXN_INDEX_SUFFIX

if TYPE_CHECKING:
    from broker.log.log import Log

log = logging.getLogger(__name__)

_INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


def swap_path(directory: Path, base_offset: int) -> Path:
    return directory / (segment_file_name(base_offset, LOG_SUFFIX) + SWAP_SUFFIX)


def sources_unchanged(target: Log, sources: list[SourceSegment]) -> bool:
    """Whether the log still holds ``sources`` as consecutive segments, unchanged (same objects,
    sizes and next offsets, not renamed for deletion) and none of them active."""
    if target.closed or target.failure is not None:
        return False
    segments = target.segments
    position = {id(s): i for i, s in enumerate(segments)}
    indexes = [position.get(id(source.segment)) for source in sources]
    if not indexes or any(i is None for i in indexes):
        return False
    first = indexes[0]
    assert first is not None
    if indexes != list(range(first, first + len(indexes))) or first + len(indexes) >= len(segments):
        return False
    for source in sources:
        segment = segments[position[id(source.segment)]]
        changed = segment.size_bytes != source.size_bytes or segment.next_offset != source.next_offset
        if changed or segment.renamed_for_deletion:
            return False
    return True


def still_current(target: Log, result: CleanResult) -> bool:
    """Whether the log still holds every group's sources unchanged (``sources_unchanged``)."""
    return all(sources_unchanged(target, group.sources) for group in result.groups)


def install(target: Log, result: CleanResult, now_ms: int) -> bool:
    """Steps 2-3 of the module docstring. Returns False (files dropped) when the log changed
    since the plan was taken. An I/O error after step 2 takes the log offline (its start-up
    recovery completes the swap) and is raised as KafkaStorageError."""
    if not result.groups:
        return True
    if not still_current(target, result):
        result.discard_files()
        return False
    directory = target.directory
    for group in result.groups:
        os.replace(group.path, swap_path(directory, group.base_offset))
    fsync_dir(directory)
    try:
        for group in result.groups:
            _replace(target, group, now_ms)
        fsync_dir(directory)
    except OSError as exc:
        raise target._fail("swapping cleaned segments in", exc) from exc
    return True


def _replace(target: Log, group: CleanedGroup, now_ms: int) -> None:
    directory = target.directory
    old = [source.segment for source in group.sources]
    for segment in old:
        assert isinstance(segment, LogSegment)
        segment.rename_for_deletion()
    live = directory / segment_file_name(group.base_offset, LOG_SUFFIX)
    os.replace(swap_path(directory, group.base_offset), live)
    mtime_ns = group.last_modified_ms * 1_000_000
    os.utime(live, ns=(mtime_ns, mtime_ns))
    for cleaned, name in zip(group.index_paths, (INDEX_SUFFIX, TIME_INDEX_SUFFIX), strict=True):
        os.replace(cleaned, directory / segment_file_name(group.base_offset, name))
    segment = LogSegment.open(directory, group.base_offset, target.config, now_ms)
    try:
        segment.load_tail()  # the worker built the indexes: only their last entries are checked
    except (CorruptIndexError, CorruptMessageError) as exc:
        log.warning("%s: %s; rebuilding the cleaned segment's indexes", target.name, exc)
        segment.rebuild_indexes()
        segment.on_become_inactive()
    for txn in group.aborted:
        segment.txn_index.append(txn)
    segment.flush_indexes()
    target.replace_segments([s for s in old if isinstance(s, LogSegment)], segment, now_ms)


def complete_swaps(directory: Path) -> list[int]:
    """Start-up: finish every swap a crash interrupted (module docstring); returns their bases.
    A ``.swap`` file whose batches do not parse is deleted (the old segments stay)."""
    swaps: list[int] = []
    bases: list[int] = []
    suffix = LOG_SUFFIX + SWAP_SUFFIX
    for entry in os.scandir(directory):
        stem = entry.name[:20]
        if not stem.isdigit():
            continue
        if entry.name == stem + suffix:
            swaps.append(int(stem))
        elif entry.name == stem + LOG_SUFFIX:
            bases.append(int(stem))
    done: list[int] = []
    for base in sorted(swaps):
        path = swap_path(directory, base)
        end = _end_offset(path, base)
        if end is None:
            log.warning("%s: unreadable, the cleaned segment is dropped", path)
            path.unlink()
            continue
        for other in bases:
            if other == base or base <= other < end:
                for name in (LOG_SUFFIX, *_INDEX_SUFFIXES):
                    (directory / segment_file_name(other, name)).unlink(missing_ok=True)
        for name in _INDEX_SUFFIXES:
            (directory / segment_file_name(base, name)).unlink(missing_ok=True)
        os.replace(path, directory / segment_file_name(base, LOG_SUFFIX))
        log.info("%s: completed the swap of the cleaned segment at %d", directory.name, base)
        done.append(base)
    if swaps:
        fsync_dir(directory)
    return done


def _end_offset(path: Path, base: int) -> int | None:
    """One past the last offset of the batches in ``path`` (``base`` when empty); None if torn."""
    fd = os.open(path, os.O_RDONLY)
    try:
        end = base
        for _, header in iter_headers(fd, 0, os.fstat(fd).st_size):
            end = header.next_offset
        return end
    except CorruptMessageError:
        return None
    finally:
        os.close(fd)
