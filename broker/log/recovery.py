"""Open a partition directory at start-up: clean up, check, recover, and build its ``Log``.

Kafka documentation §5.4.4 "Guarantees": "on startup, a log recovery process is run that iterates over all messages in
the newest log segment and verifies that each message entry is valid ... If corruption is
detected, the log is truncated to the last valid offset." As in Kafka's ``LogLoader``:

1. a log-compaction swap that a crash interrupted is completed (``.swap`` files replace the
   segments they were cleaned from: ``broker.log.cleaner.swap.complete_swaps``); then stray files
   are removed: ``*.deleted`` (retention or a swap that had not finished), ``*.cleaned`` (a clean
   that was not swapped in), ``*.tmp``, and index files whose ``.log`` is gone;
2. after a clean shutdown every segment is trusted: only its index files are checked (sizes,
   last entries against the log) and the batches after the last index entry are scanned;
3. otherwise segments from the one holding the recovery point onwards are re-validated batch by
   batch (``LogSegment.recover``: framing, CRC-32C, increasing offsets); the first invalid batch
   and everything after it — including later segments — is cut. Nothing is fsynced during
   recovery: the recovered segments are marked dirty and the recovery point stays at the
   checkpoint, so the log's next flush makes them durable (a second crash before it simply
   recovers them again). Segments below the recovery point were fsynced before the crash and
   are trusted like in (2); one whose index fails its check is recovered too.

A batch that was flushed (below the recovery point) is never cut unless it no longer passes its
CRC.

4. the producer state (idempotence, transactions) is loaded from the newest snapshot at or below
   the first re-validated segment (after a clean shutdown: the log end) and rebuilt by replaying
   the batch headers after it; the ``.txnindex`` of every re-validated segment is rebuilt on the
   way. Snapshots past the (possibly cut) log end are deleted, so a kill -9 truncates the
   producer state along with the log; so are stray ones (not at a segment base, from earlier
   clean shutdowns) but the newest, as Kafka's ``removeStraySnapshots``.
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path

from broker.log.cleaner.swap import complete_swaps
from broker.log.config import Clock, LogConfig
from broker.log.errors import CorruptMessageError
from broker.log.files import fsync_dir
from broker.log.index_file import CorruptIndexError
from broker.log.log import Log
from broker.log.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS
from broker.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment
from broker.log.txn_index import TXN_INDEX_SUFFIX

log = logging.getLogger(__name__)

STRAY_SUFFIXES = (".deleted", ".cleaned", ".swap", ".tmp")


def load_log(
    directory: Path,
    topic: str,
    partition: int,
    config: LogConfig,
    clock: Clock,
    *,
    recovery_point: int = 0,
    log_start_offset: int = 0,
    clean_shutdown: bool = False,
    producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    on_segment: Callable[[int], None] | None = None,
) -> Log:
    """Open the log in ``directory`` (see the module docstring). Raises OSError on I/O errors.
    ``on_segment(bytes)`` is called after each segment is loaded or recovered (progress)."""
    now = clock()
    complete_swaps(directory)
    bases = _clean_directory(directory)
    segments = [LogSegment.open(directory, base, config, now) for base in bases]
    first_unflushed = len(segments) if clean_shutdown else max(bisect_right(bases, recovery_point) - 1, 0)
    kept: list[LogSegment] = []
    recovered: list[LogSegment] = []
    for i, segment in enumerate(segments):
        min_offset = kept[-1].next_offset if kept else segment.base_offset
        cut = 0
        if i < first_unflushed:
            try:
                segment.load_tail()
            except (CorruptIndexError, CorruptMessageError) as exc:
                log.warning("%s: %s; rebuilding from the log", segment.log_path, exc)
                cut = segment.recover(min_offset)
                segment.flush()  # below the recovery point: no later flush would cover it
                segment.flush_indexes()
                recovered.append(segment)
        else:
            cut = segment.recover(min_offset)
            recovered.append(segment)
        kept.append(segment)
        if on_segment is not None:
            on_segment(segment.size_bytes)
        if cut:
            log.warning("%s: cut %d invalid bytes at the end of %s", directory.name, cut, segment.log_path.name)
            for later in segments[i + 1 :]:
                log.warning("%s: deleting %s after the corruption", directory.name, later.log_path.name)
                later.delete_files()
            break
    if not kept:
        kept = [LogSegment.create(directory, max(log_start_offset, 0), config, now)]
    log_end = kept[-1].next_offset
    start = max(log_start_offset, kept[0].base_offset)
    if start > log_end:  # every batch is below the log start offset: start afresh there
        for segment in kept:
            segment.delete_files()
        kept = [LogSegment.create(directory, start, config, now)]
        recovered = []
        log_end = start
    fsync_dir(directory)
    active = kept[-1]
    active.verify_indexes()
    # Recovered segments are not fsynced yet: the recovery point stays where it was (the log's
    # next flush fsyncs from there on); after a clean shutdown everything was flushed.
    point = log_end if clean_shutdown else min(max(recovery_point, start), log_end)
    loaded = Log(
        directory, topic, partition, config, clock, kept, start, point,
        producer_id_expiration_ms=producer_id_expiration_ms,
    )  # fmt: skip
    snapshot_limit = min((s.base_offset for s in recovered), default=log_end)
    loaded.producer_state.rebuild(loaded.segments, snapshot_limit, clock(), recovered)
    loaded.producer_state.remove_stray_snapshots([s.base_offset for s in kept])
    for segment in recovered:
        if segment is not kept[-1]:
            segment.txn_index.flush()  # the active segment's is rebuilt by the next recovery
    return loaded


def _clean_directory(directory: Path) -> list[int]:
    """Remove stray files; return the base offsets of the ``.log`` files, sorted."""
    bases: set[int] = set()
    index_files: list[tuple[int, Path]] = []
    for entry in os.scandir(directory):
        if not entry.is_file():
            continue
        path = Path(entry.path)
        if entry.name.endswith(STRAY_SUFFIXES):
            log.info("removing stray file %s", path)
            path.unlink(missing_ok=True)
            continue
        stem, _, suffix = entry.name.partition(".")
        if len(stem) != 20 or not stem.isdigit():
            continue
        if "." + suffix == LOG_SUFFIX:
            bases.add(int(stem))
        elif "." + suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            index_files.append((int(stem), path))
    for base, path in index_files:
        if base not in bases:
            log.info("removing index file without a log %s", path)
            path.unlink(missing_ok=True)
    return sorted(bases)
