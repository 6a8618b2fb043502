"""DeleteRecords' pure decisions (KIP-107; Kafka 3.7 ``Partition.deleteRecordsOnLeader``,
``Partition.lowWatermarkIfLeader`` and ``DelayedDeleteRecords``).

* The requested offset ``-1`` means the high watermark; any other offset below 0 or above the
  high watermark is OFFSET_OUT_OF_RANGE. The leader raises its log start offset at once.
* The **low watermark** of a partition is the lowest log start offset among its leader and the
  followers on live brokers; a follower's is the one its last fetch carried (unknown, -1, until
  its first fetch after this broker became leader, which holds the low watermark at -1). Followers
  learn the leader's log start offset from every fetch response and raise their own.
* The request is answered once the low watermark reaches the requested offset on every
  partition (every live replica deleted the records), with that low watermark; partitions still
  short of it when ``timeout_ms`` passes answer REQUEST_TIMED_OUT with low watermark -1 (the
  leader has already moved its own start; the followers follow on their next fetch).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from broker.replication.isr import FollowerState
from pyspark_log.wire.errors import ErrorCode

HIGH_WATERMARK = -1  # DeleteRecordsRequest.HIGH_WATERMARK: "delete everything below the high watermark"


def resolve_offset(requested: int, high_watermark: int) -> tuple[int, int]:
    """``(error code, offset to delete before)`` for a requested offset."""
    offset = high_watermark if requested == HIGH_WATERMARK else requested
    if offset < 0 or offset > high_watermark:
        return ErrorCode.OFFSET_OUT_OF_RANGE, -1
    return ErrorCode.NONE, offset


def low_watermark(leader_log_start: int, followers: Mapping[int, FollowerState], alive: Callable[[int], bool]) -> int:
    """The lowest log start offset of the leader and the followers whose brokers are alive."""
    low = leader_log_start
    for broker_id, state in followers.items():
        if alive(broker_id) and state.log_start_offset < low:
            low = state.log_start_offset
    return low
