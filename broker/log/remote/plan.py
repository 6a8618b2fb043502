"""Pure decisions of the remote-log tasks (KIP-405 "RLMTask" copy and local deletion), kept
apart from their driver so they are tested without files or clocks.

- :func:`effective_local_retention`: ``local.retention.ms`` / ``local.retention.bytes`` with
  Kafka's ``-2`` ("use ``retention.*``") resolved, checked as Kafka's ``LogConfig`` checks them.
- :func:`segments_to_copy`: rolled segments whose every offset is below the last stable
  offset and above what the tier already holds, oldest first (Kafka copies one segment at a
  time in this order; the active segment is never copied).
- :func:`local_segments_to_delete`: rolled segments that breach local retention *and* are
  already in the tier (Kafka's ``UnifiedLog`` deletes a tiered topic's local segment only when
  its last offset is at or below the highest offset copied).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

USE_RETENTION = -2


class InvalidLocalRetention(ValueError):
    """Kafka's ``ConfigException`` for a local retention larger than the total retention."""


@dataclass(frozen=True)
class LocalSegment:
    """What the planners need of a local segment: ``[base_offset, next_offset)``, its size and
    its largest record timestamp."""

    base_offset: int
    next_offset: int
    size_bytes: int
    max_timestamp_ms: int


def effective_local_retention(
    local_retention_ms: int, local_retention_bytes: int, retention_ms: int, retention_bytes: int
) -> tuple[int, int]:
    """``(local ms, local bytes)``: ``-2`` takes ``retention.*``; ``-1`` is unlimited. Raises
    :class:`InvalidLocalRetention` when a local value exceeds a limited total one (Kafka:
    "Value must not be -1 as retention.ms value is set as …" / "… cannot be more than …")."""
    ms = retention_ms if local_retention_ms == USE_RETENTION else local_retention_ms
    size = retention_bytes if local_retention_bytes == USE_RETENTION else local_retention_bytes
    for local, total, key in ((ms, retention_ms, "ms"), (size, retention_bytes, "bytes")):
        if local < -1:
            raise InvalidLocalRetention(f"local.retention.{key} must be -2, -1 or >= 0, not {local}")
        if total != -1 and (local == -1 or local > total):
            raise InvalidLocalRetention(
                f"local.retention.{key} ({local}) cannot be more than retention.{key} ({total})"
            )
    return ms, size


def segments_to_copy(
    segments: Sequence[LocalSegment], *, highest_copied_offset: int, last_stable_offset: int
) -> list[LocalSegment]:
    """Rolled segments (all but the last of ``segments``, which is the active one) not yet in
    the tier and wholly below ``last_stable_offset``, oldest first."""
    out = []
    for seg in segments[:-1]:
        if seg.next_offset > last_stable_offset:
            break
        if seg.next_offset - 1 > highest_copied_offset and seg.next_offset > seg.base_offset:
            out.append(seg)
    return out


def local_segments_to_delete(
    segments: Sequence[LocalSegment],
    *,
    highest_copied_offset: int,
    now_ms: int,
    local_retention_ms: int,
    local_retention_bytes: int,
) -> list[LocalSegment]:
    """Rolled segments, oldest first, that breach local retention (time: max timestamp older
    than ``local_retention_ms``; size: the local log stays at or above ``local_retention_bytes``
    without them) and whose last offset the tier already holds. Stops at the first segment
    that is kept, so the local log stays contiguous."""
    out = []
    total = sum(s.size_bytes for s in segments)
    for seg in segments[:-1]:
        expired = local_retention_ms >= 0 and now_ms - seg.max_timestamp_ms > local_retention_ms
        oversize = local_retention_bytes >= 0 and total - seg.size_bytes >= local_retention_bytes
        if not (expired or oversize) or seg.next_offset - 1 > highest_copied_offset:
            break
        out.append(seg)
        total -= seg.size_bytes
    return out
