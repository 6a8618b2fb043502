"""Progress of loading (recovering) the logs at start-up, reported every few seconds.

Kafka's ``LogManager`` logs how far log loading got per log dir (``Recovering segment ...``,
``Loaded N logs ...``). pylog measures the whole start-up load up front — partitions, segment
files and their bytes in every log dir (one ``scandir`` per partition directory) — and then,
as segments and partitions finish loading, logs a line at most every ``interval_ms`` of a
monotonic clock (never one per segment)::

    log recovery: 120/2000 partitions, 340/5000 segments, 1.2 GB/40.0 GB (3%), ETA 35 s

with the counts as structured fields too (``broker.logging_setup``). A load that takes less than
``interval_ms`` prints no progress line, only the final ``log recovery done`` line. The object
stays readable (``partitions_done`` ...) for metrics.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"


def partition_files(directory: Path) -> tuple[int, int]:
    """``(segment files, their bytes)`` in one partition directory (0, 0 if unreadable)."""
    segments = size = 0
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if entry.name.endswith(LOG_SUFFIX) and entry.is_file():
                    segments += 1
                    size += entry.stat().st_size
    except OSError:
        return 0, 0
    return segments, size


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


class RecoveryProgress:
    """Counts of the start-up log load: ``measure`` first, then ``segment_done`` after each
    segment and ``partition_done`` after each partition (which settles the partition's counts to
    what ``measure`` found, so deleted corrupt segments do not skew them), ``finish`` at the end.
    A progress line is due at most every ``interval_ms``; ``clock`` is monotonic seconds
    (injected for tests)."""

    def __init__(self, *, interval_ms: int = 5000, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s = max(0, interval_ms) / 1000
        self._clock = clock
        self.partitions_total = self.segments_total = self.bytes_total = 0
        self.partitions_done = self.segments_done = self.bytes_done = 0
        self._settled = (0, 0)  # segments and bytes of the partitions done
        self._measured: dict[Path, tuple[int, int]] = {}
        self.started_at = clock()
        self._last_report = self.started_at
        self.finished = False

    def measure(self, partition_dirs: Iterable[Path]) -> None:
        """Add the partitions about to load to the totals."""
        for directory in partition_dirs:
            segments, size = self._measured[directory] = partition_files(directory)
            self.partitions_total += 1
            self.segments_total += segments
            self.bytes_total += size
        self.started_at = self._last_report = self._clock()

    def segment_done(self, size_bytes: int) -> None:
        """One segment of the partition being loaded is done."""
        self.segments_done += 1
        self.bytes_done += size_bytes
        self._maybe_report()

    def partition_done(self, directory: Path) -> None:
        """One partition loaded."""
        segments, size = self._measured.get(directory) or partition_files(directory)
        self._settled = (self._settled[0] + segments, self._settled[1] + size)
        self.segments_done, self.bytes_done = self._settled
        self.partitions_done += 1
        if self.partitions_done < self.partitions_total:
            self._maybe_report()

    def _maybe_report(self) -> None:
        now = self._clock()
        if now - self._last_report >= self.interval_s:
            self._last_report = now
            self._report(now)

    def eta_s(self, now: float) -> float | None:
        """Seconds left at the rate so far (by bytes, or partitions when the logs are empty)."""
        elapsed = now - self.started_at
        done, total = (self.bytes_done, self.bytes_total) if self.bytes_total else (
            self.partitions_done, self.partitions_total)  # fmt: skip
        if done <= 0 or elapsed <= 0:
            return None
        return max(0.0, (total - done) * elapsed / done)

    def _fields(self) -> dict[str, int]:
        return {
            "partitions_done": self.partitions_done, "partitions_total": self.partitions_total,
            "segments_done": self.segments_done, "segments_total": self.segments_total,
            "bytes_done": self.bytes_done, "bytes_total": self.bytes_total,
        }  # fmt: skip

    def _report(self, now: float) -> None:
        eta = self.eta_s(now)
        percent = 100 * self.bytes_done // self.bytes_total if self.bytes_total else 100 * self.partitions_done // max(
            1, self.partitions_total)  # fmt: skip
        log.info(
            "log recovery: %d/%d partitions, %d/%d segments, %s/%s (%d%%), ETA %s",
            self.partitions_done, self.partitions_total, self.segments_done, self.segments_total,
            _size(self.bytes_done), _size(self.bytes_total), percent, "unknown" if eta is None else f"{eta:.0f} s",
            extra={"fields": {**self._fields(), "eta_s": None if eta is None else round(eta, 1)}},
        )  # fmt: skip

    def finish(self) -> None:
        """The load is over: one summary line."""
        self.finished = True
        elapsed = self._clock() - self.started_at
        log.info(
            "log recovery done: %d partitions, %d segments, %s in %.1f s",
            self.partitions_done, self.segments_done, _size(self.bytes_done), elapsed,
            extra={"fields": {**self._fields(), "elapsed_s": round(elapsed, 3)}},
        )  # fmt: skip
