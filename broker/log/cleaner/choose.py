"""Which log to clean, and over which offsets: pure decisions over segment facts.

Kafka documentation §4.8 "Log Compaction" "Log Compaction Details" step 1: pick the log whose head is largest
relative to its tail. — the *dirty ratio*: bytes of the dirty head (segments at or after the log's first
dirty offset, i.e. not yet cleaned) over the bytes of the whole cleanable log. As in Kafka's
``LogCleanerManager.grabFilthiestCompactedLog``:

* only logs with ``cleanup.policy`` containing ``compact``;
* the cleanable part ends at the first *uncleanable* offset, rounded down to a segment base:
  the active segment is never compacted, nor anything at or
  after the last stable offset (an ongoing transaction) or the high watermark, nor a segment
  holding a record younger than ``min.compaction.lag.ms`` (the least time between writing a message and compacting it);
* a log is cleanable when its dirty ratio is at least ``min.cleanable.dirty.ratio``, or when
  its oldest dirty segment is older than ``max.compaction.lag.ms`` (the most time a written message waits
  before it may be compacted) and it has dirty bytes;
* the cleanable log with the highest ratio is chosen.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

NO_TIMESTAMP = -1


@dataclass(frozen=True, slots=True)
class SegmentFacts:
    """What the choice needs to know about one segment (the active one last)."""

    base_offset: int
    next_offset: int
    size_bytes: int
    max_timestamp_ms: int  # −1 when no batch carries a timestamp
    first_batch_timestamp_ms: int  # −1 likewise
    last_modified_ms: int


@dataclass(frozen=True, slots=True)
class LogFacts:
    """One compacted log as the cleaner sees it; ``key`` identifies it to the caller."""

    key: Hashable
    segments: tuple[SegmentFacts, ...]
    log_start_offset: int
    first_dirty_offset: int  # from the cleaner checkpoint (clamped into the log)
    last_stable_offset: int  # min(LSO, high watermark): nothing at or above it is cleaned
    min_cleanable_dirty_ratio: float
    min_compaction_lag_ms: int
    max_compaction_lag_ms: int


@dataclass(frozen=True, slots=True)
class Cleanable:
    """The cleanable range of one log: dirty head ``[first_dirty_offset, end_offset)``."""

    key: Hashable
    first_dirty_offset: int
    end_offset: int  # a segment base: the first uncleanable segment
    clean_bytes: int
    dirty_bytes: int
    overdue_ms: int  # how long past max.compaction.lag.ms the oldest dirty record is (0: not)

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


def _segment_time_ms(segment: SegmentFacts) -> int:
    """A segment's age reference (Kafka ``largestTimestamp``): its max timestamp, or its file's
    modification time when no batch has a timestamp."""
    return segment.max_timestamp_ms if segment.max_timestamp_ms >= 0 else segment.last_modified_ms


def cleanable_range(facts: LogFacts, now_ms: int) -> Cleanable:
    """The dirty head of ``facts`` that may be cleaned now (see the module docstring)."""
    segments = facts.segments
    first_dirty = min(max(facts.first_dirty_offset, facts.log_start_offset), segments[-1].next_offset)
    uncleanable = min(segments[-1].base_offset, facts.last_stable_offset)  # the active segment: never
    end = segments[-1].base_offset
    for segment in segments[:-1]:
        too_young = facts.min_compaction_lag_ms > 0 and _segment_time_ms(segment) > now_ms - facts.min_compaction_lag_ms
        if segment.next_offset > uncleanable or too_young:
            end = segment.base_offset
            break
    end = max(end, segments[0].base_offset)
    clean_bytes = dirty_bytes = 0
    oldest_dirty_ms: int | None = None
    for segment in segments:
        if segment.base_offset >= end:
            break
        if segment.next_offset <= first_dirty:
            clean_bytes += segment.size_bytes
        else:
            dirty_bytes += segment.size_bytes
            if oldest_dirty_ms is None:
                first = segment.first_batch_timestamp_ms
                oldest_dirty_ms = first if first >= 0 else segment.last_modified_ms
    overdue = 0
    if oldest_dirty_ms is not None and facts.max_compaction_lag_ms < now_ms:
        overdue = max(0, now_ms - facts.max_compaction_lag_ms - oldest_dirty_ms)
    return Cleanable(facts.key, first_dirty, max(end, first_dirty), clean_bytes, dirty_bytes, overdue)


def is_cleanable(facts: LogFacts, cleanable: Cleanable) -> bool:
    """Dirty bytes to clean, and the ratio reached or the max compaction lag passed."""
    if cleanable.dirty_bytes <= 0 or cleanable.end_offset <= cleanable.first_dirty_offset:
        return False
    return cleanable.overdue_ms > 0 or cleanable.dirty_ratio >= facts.min_cleanable_dirty_ratio


def choose_log(candidates: Sequence[LogFacts], now_ms: int) -> Cleanable | None:
    """The cleanable log with the highest dirty ratio (None when none is cleanable)."""
    best: Cleanable | None = None
    for facts in candidates:
        if not facts.segments:
            continue
        found = cleanable_range(facts, now_ms)
        if is_cleanable(facts, found) and (best is None or found.dirty_ratio > best.dirty_ratio):
            best = found
    return best


def starts_new_group(  # noqa: PLR0917 - the facts of the decision
    group_bytes: int, group_base: int, source_bytes: int, source_next_offset: int, max_bytes: int, max_offset_span: int
) -> bool:
    """Whether the next source segment goes into a new cleaned segment rather than the current
    one: the current one's *written* size plus the source's whole size would pass ``max_bytes``
    (``segment.bytes``), or its offsets would not fit one segment (``next_offset − 1 − base >
    max_offset_span``). Kafka groups by the sources' sizes before cleaning; grouping by what was
    written merges the small segments of earlier cleans in the same pass."""
    return group_bytes + source_bytes > max_bytes or source_next_offset - 1 - group_base > max_offset_span
