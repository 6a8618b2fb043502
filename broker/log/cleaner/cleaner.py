"""``LogCleaner``: the background log cleaner of a broker (Kafka documentation §4.8 "Log Compaction" "Log
Compaction Details").

the cleaner is a pool of background threads that recopy segment files — ``log.cleaner.threads``
worker coroutines on the event loop, each cleaning one log at a time in a worker process
(``worker.py``: a process, not a thread, so the cleaner's Python work never holds the broker's
GIL). One round of a worker coroutine:

1. on the loop: choose the compacted log with the highest dirty ratio that is cleanable and not
   being cleaned by another worker (``choose.py``), and take a ``CleaningPlan`` of it (its
   segment files below the cleanable end, its aborted transactions, the last batch of each live
   producer);
2. in the worker process: build the offset map and write the ``.cleaned`` files (``recopy.py``),
   throttled by ``log.cleaner.io.max.bytes.per.second`` (shared evenly by the workers);
3. on the loop: swap them in (``swap.py``) in one synchronous step — unless the log changed
   meanwhile — and record the new first dirty offset in the log dir's
   ``cleaner-offset-checkpoint`` (Kafka's file and format).

When no log needs cleaning a worker sleeps ``log.cleaner.backoff.ms``. A log whose clean fails
(unreadable batch, I/O error, a first batch larger than the whole map) is *uncleanable* until
restart and counted in ``uncleanable-partitions-count``; the broker goes on. Shutdown (task
cancelled) sets the workers' stop flag, which they check between batches, and waits for them.

Metrics (Kafka's names, ``metrics()``): ``max-dirty-percent``, ``max-clean-time-secs``,
``max-compaction-delay-secs``, ``uncleanable-partitions-count``, ``cleaner-recopy-percent``,
and ``cleaned-logs-total`` (pylog's: completed cleans).
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from broker.log.checkpoint import read_checkpoint, write_checkpoint
from broker.log.cleaner.choose import Cleanable, LogFacts, SegmentFacts, choose_log, cleanable_range
from broker.log.cleaner.config import CleanerConfig
from broker.log.cleaner.recopy import CleaningAborted, CleaningPlan, CleanResult, SourceSegment
from broker.log.cleaner.swap import install, sources_unchanged
from broker.log.cleaner.worker import CleanJob, init_worker, run_job
from broker.log.config import Clock
from broker.log.log import Log
from broker.log.manager import LogManager

log = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"

TopicPartition = tuple[str, int]


class LogCleaner:
    """Cleans the compacted logs of ``logs`` in the background (``run``); see the module docstring."""

    def __init__(self, logs: LogManager, config: CleanerConfig, clock: Clock, *, processes: bool = True) -> None:
        """``processes``: clean in worker processes (the broker); False runs the same jobs in
        threads of the loop's default executor (tests)."""
        self.logs = logs
        self.config = config
        self._clock = clock
        self._processes = processes
        self._pool: ProcessPoolExecutor | None = None
        self._stop: Any = None
        self._in_progress: set[TopicPartition] = set()
        self._uncleanable: set[TopicPartition] = set()
        self._checkpoints: dict[Path, dict[TopicPartition, int]] = {}
        self.cleaned_logs_total = 0
        self.max_clean_time_s = 0.0
        self.max_dirty_percent = 0.0
        self.max_compaction_delay_s = 0.0
        self.recopy_percent = 0.0

    # -- the background task ---------------------------------------------------------------------
    async def run(self) -> None:
        """The cleaner task: ``log.cleaner.threads`` workers until cancelled (returns at once
        when ``log.cleaner.enable`` is false)."""
        if not self.config.enable:
            return
        try:
            await asyncio.gather(*(self._worker() for _ in range(self.config.threads)))
        finally:
            self._shutdown_pool()

    def _shutdown_pool(self) -> None:
        """Stop the workers between batches and wait for them (their files are then closed)."""
        if self._stop is not None:
            self._stop.set()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    async def _worker(self) -> None:
        while True:
            try:
                worked = await self.clean_once()
            except Exception:  # a bug in choosing or planning: log it, keep the broker and the task
                log.exception("log cleaner round failed")
                worked = False
            if not worked:
                await asyncio.sleep(self.config.backoff_ms / 1000)

    async def clean_once(self) -> bool:
        """Choose, clean and swap one log; False when no log needed cleaning."""
        chosen = self._choose()
        if chosen is None:
            return False
        target, cleanable = chosen
        key = (target.topic, target.partition)
        self._in_progress.add(key)
        started = time.monotonic()
        try:
            await self._clean(target, self._plan(target, cleanable))
        finally:
            self._in_progress.discard(key)
        self.max_clean_time_s = time.monotonic() - started
        return True

    async def _clean(self, target: Log, plan: CleaningPlan) -> None:
        config = self.config
        job = CleanJob(
            plan.detached(), config.map_bytes_per_thread, config.io_buffer_load_factor,
            config.io_max_bytes_per_second / config.threads,
        )  # fmt: skip
        if self._processes and self._pool is None:  # on the first clean: no processes for no compacted log
            context = multiprocessing.get_context("spawn")
            self._stop = context.Event()
            self._pool = ProcessPoolExecutor(
                config.threads, mp_context=context, initializer=init_worker, initargs=(self._stop,)
            )
        try:
            result = await asyncio.get_running_loop().run_in_executor(self._pool, run_job, job)
            _reattach(plan, result)
            self._finish(target, plan, result)
        except asyncio.CancelledError:
            self._shutdown_pool()
            raise
        except CleaningAborted:
            return
        except BrokenProcessPool:  # a worker died (killed, out of memory): new workers next time
            log.exception("%s: a log cleaner worker process died; the partition is uncleanable", target.name)
            self._uncleanable.add((target.topic, target.partition))
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
        except Exception:  # a bad batch or an I/O error must not stop the broker: skip this log
            if target.closed or not sources_unchanged(target, plan.sources):  # retention, a truncation, a move
                log.info("%s: the log changed while it was cleaned; cleaning again later", target.name)
            else:
                log.exception("%s: log cleaning failed; the partition is uncleanable until restart", target.name)
                self._uncleanable.add((target.topic, target.partition))

    def _finish(self, target: Log, plan: CleaningPlan, result: CleanResult) -> None:
        key = (target.topic, target.partition)
        if target.closed:  # deleted, or replaced by its copy in another log dir (AlterReplicaLogDirs)
            log.info("%s: the log closed while it was cleaned; the result is dropped", target.name)
            return
        if result.map_end_offset <= plan.first_dirty_offset:
            log.warning("%s: the offset map cannot hold the first dirty batch; uncleanable", target.name)
            self._uncleanable.add(key)
            return
        if not install(target, result, self._clock()):
            log.info("%s: the log changed while it was cleaned; the result is dropped", target.name)
            return
        self._set_first_dirty(target, result.map_end_offset)
        self.cleaned_logs_total += 1
        self.recopy_percent = 100.0 * result.bytes_written / result.bytes_read if result.bytes_read else 0.0
        log.info(
            "%s: cleaned to offset %d: read %d bytes, wrote %d, kept %d of %d records, %d keys",
            target.name, result.map_end_offset, result.bytes_read, result.bytes_written,
            result.records_kept, result.records_read, result.map_entries,
        )  # fmt: skip

    # -- choosing and planning (on the loop) ------------------------------------------------------
    def _choose(self) -> tuple[Log, Cleanable] | None:
        now = self._clock()
        candidates: dict[TopicPartition, Log] = {}
        facts: list[LogFacts] = []
        max_ratio = 0.0
        max_delay = 0
        for current in self.logs.logs():
            key = (current.topic, current.partition)
            if not current.config.compact_enabled or current.closed or current.failure is not None:
                continue
            if key in self._uncleanable or key in self._in_progress:
                continue
            item = self._facts(current)
            found = cleanable_range(item, now)
            max_ratio = max(max_ratio, found.dirty_ratio)
            max_delay = max(max_delay, found.overdue_ms)
            candidates[key] = current
            facts.append(item)
        self.max_dirty_percent = 100.0 * max_ratio
        self.max_compaction_delay_s = max_delay / 1000
        best = choose_log(facts, now)
        if best is None:
            return None
        assert isinstance(best.key, tuple)
        return candidates[best.key], best

    def _facts(self, current: Log) -> LogFacts:
        return log_facts(current, self._first_dirty(current), self.logs.high_watermark_of(current))

    def _plan(self, target: Log, cleanable: Cleanable) -> CleaningPlan:
        return make_plan(target, cleanable, self._clock())

    # -- the cleaner checkpoint ------------------------------------------------------------------
    def _checkpoint(self, target: Log) -> dict[TopicPartition, int]:
        log_dir = target.directory.parent
        found = self._checkpoints.get(log_dir)
        if found is None:
            found = self._checkpoints[log_dir] = read_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT)
        return found

    def _first_dirty(self, target: Log) -> int:
        """The checkpointed first dirty offset, clamped into the log (Kafka resets it to the log
        start offset when it lies outside)."""
        offset = self._checkpoint(target).get((target.topic, target.partition), target.log_start_offset)
        if offset < target.log_start_offset or offset > target.log_end_offset:
            return target.log_start_offset
        return offset

    def _set_first_dirty(self, target: Log, offset: int) -> None:
        offsets = self._checkpoint(target)
        offsets[(target.topic, target.partition)] = offset
        live = {(lg.topic, lg.partition) for lg in self.logs.logs()}
        for stale in [tp for tp in offsets if tp not in live]:
            del offsets[stale]
        try:
            write_checkpoint(target.directory.parent / CLEANER_OFFSET_CHECKPOINT, offsets)
        except OSError as exc:  # harmless: the next start-up cleans from the log start again
            log.warning("cannot write %s: %s", CLEANER_OFFSET_CHECKPOINT, exc)

    # -- metrics ---------------------------------------------------------------------------------
    def uncleanable_by_dir(self) -> dict[Path, int]:
        """``uncleanable-partitions-count`` per log dir (every log dir, zero included)."""
        counts = dict.fromkeys(self.logs.log_dirs, 0)
        for topic, partition in self._uncleanable:
            found = self.logs.get_log(topic, partition)
            if found is not None:
                parent = found.directory.parent
                counts[parent] = counts.get(parent, 0) + 1
        return counts

    def metrics(self) -> dict[str, float | int]:
        """Kafka's ``LogCleaner`` / ``LogCleanerManager`` gauges (module docstring)."""
        return {
            "max-dirty-percent": self.max_dirty_percent,
            "max-clean-time-secs": self.max_clean_time_s,
            "max-compaction-delay-secs": self.max_compaction_delay_s,
            "uncleanable-partitions-count": len(self._uncleanable),
            "cleaner-recopy-percent": self.recopy_percent,
            "cleaned-logs-total": self.cleaned_logs_total,
        }


def log_facts(current: Log, first_dirty_offset: int, high_watermark: int | None = None) -> LogFacts:
    """What ``choose.py`` needs of ``current`` (on the loop: reads the segments' state)."""
    config = current.config
    stable = current.first_unstable_offset()
    limit = current.log_end_offset if stable is None else stable
    if high_watermark is not None:
        limit = min(limit, high_watermark)
    segments = tuple(
        SegmentFacts(
            s.base_offset, s.next_offset, s.size_bytes, s.max_timestamp_ms, s.first_batch_timestamp_ms,
            s.last_modified_ms(),
        )
        for s in current.segments
    )  # fmt: skip
    return LogFacts(
        key=(current.topic, current.partition),
        segments=segments,
        log_start_offset=current.log_start_offset,
        first_dirty_offset=first_dirty_offset,
        last_stable_offset=limit,
        min_cleanable_dirty_ratio=config.min_cleanable_dirty_ratio,
        min_compaction_lag_ms=config.min_compaction_lag_ms,
        max_compaction_lag_ms=config.max_compaction_lag_ms,
    )


def make_plan(target: Log, cleanable: Cleanable, now_ms: int) -> CleaningPlan:
    """The ``CleaningPlan`` of ``cleanable`` (on the loop): duplicated descriptors of the
    segments below its end, the aborted transactions there, the live producers' last batches."""
    sources = [
        SourceSegment(s.base_offset, s.next_offset, s.size_bytes, s.last_modified_ms(), s.log_path, s)
        for s in target.segments
        if s.base_offset < cleanable.end_offset
    ]
    producers = frozenset(
        (pid, entry.last_offset) for pid, entry in target.producer_state.producers.items() if entry.last_offset >= 0
    )
    return CleaningPlan(
        directory=target.directory,
        name=target.name,
        sources=sources,
        first_dirty_offset=cleanable.first_dirty_offset,
        end_offset=cleanable.end_offset,
        aborted=target.segments.collect_aborted_transactions(sources[0].base_offset, cleanable.end_offset),
        producer_last_batches=producers,
        now_ms=now_ms,
        delete_retention_ms=target.config.delete_retention_ms,
        segment_bytes=target.config.segment_bytes,
        index_interval_bytes=target.config.index_interval_bytes,
        segment_index_bytes=target.config.segment_index_bytes,
    )


def _reattach(plan: CleaningPlan, result: CleanResult) -> None:
    """Give the result's groups the loop-side sources (with their ``LogSegment`` objects)."""
    by_base = {source.base_offset: source for source in plan.sources}
    for group in result.groups:
        group.sources = [by_base[source.base_offset] for source in group.sources]
