"""Log directories: AlterReplicaLogDirs (34) and DescribeLogDirs (35).

Facts: Kafka 3.7 ``DescribeLogDirsRequest.json`` / ``DescribeLogDirsResponse.json`` (KIP-113
log dirs, KIP-482 flexible from v2, v3 top-level ``ErrorCode``, KIP-827 v4 ``TotalBytes`` and
``UsableBytes`` per dir). A null ``topics`` asks for every partition of the broker.
"""

from __future__ import annotations

from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.dsl import api

DESCRIBE_LOG_DIRS = api(
    ApiKey.DESCRIBE_LOG_DIRS, "0-4", "2+",
    request="""
        topics                    []      null           # null: every topic
          topic                   string
          partitions              []int32
    """,
    response="""
        throttle_time_ms          int32
        error_code                int16   3+
        results                   []
          error_code              int16                  # KAFKA_STORAGE_ERROR: the dir is offline
          log_dir                 string
          topics                  []
            name                  string
            partitions            []
              partition_index     int32
              partition_size      int64
              offset_lag          int64
              is_future_key       bool
          total_bytes             int64   4+  default=-1
          usable_bytes            int64   4+  default=-1
    """,
)  # fmt: skip

# Kafka 4.1 ``AlterReplicaLogDirsRequest.json``: v1 as v0 (KIP-113), flexible from v2 (KIP-482)
ALTER_REPLICA_LOG_DIRS = api(
    ApiKey.ALTER_REPLICA_LOG_DIRS, "0-2", "2+",
    request="""
        dirs                      []
          path                    string                 # an absolute log dir path
          topics                  []
            name                  string
            partitions            []int32
    """,
    response="""
        throttle_time_ms          int32
        results                   []
          topic_name              string
          partitions              []
            partition_index       int32
            error_code            int16
    """,
)  # fmt: skip

APIS = (ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS)
