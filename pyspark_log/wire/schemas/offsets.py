"""ListOffsets (2) and OffsetForLeaderEpoch (23): offsets by timestamp and epoch end offsets.

Facts: Kafka 3.7 ``ListOffsetsRequest/Response.json`` (v0 returns a list of old-style offsets,
v1 a single offset with its timestamp, v2 isolation level, v4 leader epochs (KIP-320), v6
flexible, v7 MAX_TIMESTAMP (-3, KIP-734), v8 EARLIEST_LOCAL (-4, KIP-405) — the last two are
timestamp values, not fields) and ``OffsetForLeaderEpochRequest/Response.json`` (KIP-101/320).
"""

from __future__ import annotations

from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.dsl import api

LIST_OFFSETS = api(
    ApiKey.LIST_OFFSETS, "0-8", "6+",
    request="""
        replica_id                int32
        isolation_level           int8    2+
        topics                    []
          name                    string
          partitions              []
            partition_index       int32
            current_leader_epoch  int32   4+  default=-1
            timestamp             int64
            max_num_offsets       int32   0   default=1
    """,
    response="""
        throttle_time_ms          int32   2+
        topics                    []
          name                    string
          partitions              []
            partition_index       int32
            error_code            int16
            old_style_offsets     []int64 0
            timestamp             int64   1+  default=-1
            offset                int64   1+  default=-1
            leader_epoch          int32   4+  default=-1
    """,
)  # fmt: skip

OFFSET_FOR_LEADER_EPOCH = api(
    ApiKey.OFFSET_FOR_LEADER_EPOCH, "0-4", "4+",
    request="""
        replica_id                int32   3+  default=-2
        topics                    []
          topic                   string
          partitions              []
            partition             int32
            current_leader_epoch  int32   2+  default=-1
            leader_epoch          int32
    """,
    response="""
        throttle_time_ms          int32   2+
        topics                    []
          topic                   string
          partitions              []
            error_code            int16
            partition             int32
            leader_epoch          int32   1+  default=-1
            end_offset            int64   default=-1
    """,
)  # fmt: skip

APIS = (LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH)
