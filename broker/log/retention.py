"""Which old segments to delete: a pure function of the segments' facts, the config and the time.

Kafka documentation §5.4.3 "Deletes": "data is deleted one log segment at a time"; by time "a segment is deleted
when the retention time is greater than the largest timestamp recorded in the segment file";
by size "segments are deleted, oldest first, until the rest of the partition is under the
configured size". As in Kafka (``UnifiedLog.deleteOldSegments``) three passes run in order —
``retention.ms``, ``retention.bytes``, then segments wholly below the log start offset (after
DeleteRecords) — each deleting a prefix of the segments, only segments whose every offset is
below the high watermark, and never an empty active segment. When every segment is deletable,
the log rolls first so that an (empty) active segment remains.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from broker.log.config import LogConfig


@dataclass(frozen=True, slots=True)
class SegmentFacts:
    """What retention needs to know of one segment."""

    base_offset: int
    next_offset: int
    size_bytes: int
    max_timestamp_ms: int  # -1 when no batch carries a timestamp
    last_modified_ms: int  # the file's mtime, used when there is no timestamp


@dataclass(frozen=True, slots=True)
class RetentionDecision:
    count: int  # delete the ``count`` oldest segments
    reason: str  # "retention.ms", "retention.bytes", "log-start-offset" or "" when count == 0


def segments_to_delete(
    segments: Sequence[SegmentFacts],
    config: LogConfig,
    now_ms: int,
    log_start_offset: int,
    high_watermark: int,
) -> RetentionDecision:
    """How many of the oldest ``segments`` (oldest first, the last one active) to delete now."""
    if config.delete_enabled and config.retention_ms >= 0:
        count = _prefix(segments, high_watermark, lambda i, s: _expired(s, config, now_ms))
        if count:
            return RetentionDecision(count, "retention.ms")
    if config.delete_enabled and config.retention_bytes >= 0:
        excess = [sum(s.size_bytes for s in segments) - config.retention_bytes]

        def over_size(i: int, s: SegmentFacts) -> bool:
            if excess[0] - s.size_bytes < 0:
                return False
            excess[0] -= s.size_bytes
            return True

        count = _prefix(segments, high_watermark, over_size)
        if count:
            return RetentionDecision(count, "retention.bytes")
    count = _prefix(
        segments,
        high_watermark,
        lambda i, s: i + 1 < len(segments) and segments[i + 1].base_offset <= log_start_offset,
    )
    return RetentionDecision(count, "log-start-offset" if count else "")


def _expired(segment: SegmentFacts, config: LogConfig, now_ms: int) -> bool:
    largest = segment.max_timestamp_ms if segment.max_timestamp_ms > 0 else segment.last_modified_ms
    return now_ms - largest > config.retention_ms


def _prefix(
    segments: Sequence[SegmentFacts], high_watermark: int, predicate: Callable[[int, SegmentFacts], bool]
) -> int:
    """Length of the longest prefix of deletable segments (Kafka ``deletableSegments``)."""
    count = 0
    for i, segment in enumerate(segments):
        is_last = i + 1 == len(segments)
        upper = segment.next_offset if is_last else segments[i + 1].base_offset
        if is_last and segment.size_bytes == 0:
            break
        if upper > high_watermark or not predicate(i, segment):
            break
        count += 1
    return count
