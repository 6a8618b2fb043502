"""ElectLeaders (43): elect the preferred replica, or an out-of-sync one, as partition leader.

Kafka documentation §4.7 "Replication" "balance of leadership": an admin (``pylog leader-election``, Kafka's
``kafka-leader-election``) asks the controller to move leadership back to each partition's
preferred (first) replica, or — unclean — to give a partition without a live leader the first
live replica. ``topic_partitions`` null means every partition of the cluster.

Facts: Kafka 3.7 ``ElectLeadersRequest/Response.json`` (KIP-183 ElectPreferredLeaders as v0,
KIP-460 election types): v1 adds ``election_type`` (0 preferred, 1 unclean) and the response's
top-level ``error_code``; v2 is the first flexible version.
"""

from __future__ import annotations

from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.dsl import api

ELECT_LEADERS = api(
    ApiKey.ELECT_LEADERS, "0-2", "2+",
    request="""
        election_type             int8    1+                  # 0 PREFERRED, 1 UNCLEAN
        topic_partitions          []      null                # null: every partition
          topic                   string
          partitions              []int32
        timeout_ms                int32   default=60000
    """,
    response="""
        throttle_time_ms          int32
        error_code                int16   1+
        replica_election_results  []
          topic                   string
          partition_result        []
            partition_id          int32
            error_code            int16
            error_message         string  null
    """,
)  # fmt: skip

APIS = (ELECT_LEADERS,)
