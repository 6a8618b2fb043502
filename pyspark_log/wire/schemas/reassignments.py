"""AlterPartitionReassignments (45) and ListPartitionReassignments (46): move a partition's
replicas to other brokers, and list the moves in progress (KIP-455).

Facts: Kafka 4.1's ``AlterPartitionReassignmentsRequest/Response.json`` and
``ListPartitionReassignmentsRequest/Response.json``: every version flexible; Alter v1 adds
``allow_replication_factor_change`` (KIP-860, default true) to the request and echoes it in the
response. A partition's ``replicas`` null cancels its pending reassignment. List's ``topics`` null
lists every reassignment in progress.
"""

from __future__ import annotations

from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.dsl import api

ALTER_PARTITION_REASSIGNMENTS = api(
    ApiKey.ALTER_PARTITION_REASSIGNMENTS, "0-1", "0+",
    request="""
        timeout_ms                       int32   default=60000
        allow_replication_factor_change  bool    1+  default=true
        topics                           []
          name                           string
          partitions                     []
            partition_index              int32
            replicas                     []int32 null        # null: cancel
    """,
    response="""
        throttle_time_ms                 int32
        allow_replication_factor_change  bool    1+  default=true
        error_code                       int16
        error_message                    string  null
        responses                        []
          name                           string
          partitions                     []
            partition_index              int32
            error_code                   int16
            error_message                string  null
    """,
)  # fmt: skip

LIST_PARTITION_REASSIGNMENTS = api(
    ApiKey.LIST_PARTITION_REASSIGNMENTS, "0", "0+",
    request="""
        timeout_ms                       int32   default=60000
        topics                           []      null        # null: every reassignment
          name                           string
          partition_indexes              []int32
    """,
    response="""
        throttle_time_ms                 int32
        error_code                       int16
        error_message                    string  null
        topics                           []
          name                           string
          partitions                     []
            partition_index              int32
            replicas                     []int32
            adding_replicas              []int32
            removing_replicas            []int32
    """,
)  # fmt: skip

APIS = (ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS)
