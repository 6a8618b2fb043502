"""Fetch (1): read record batches; also the KIP-595 Raft replication RPC.

Facts: Kafka 3.7 ``FetchRequest/Response.json``. v3 max_bytes, v4 isolation level and aborted
transactions, v5 log start offset, v7 fetch sessions (KIP-227: session id/epoch, forgotten
topics), v9 current leader epoch (KIP-320), v11 rack id and preferred read replica (KIP-392), v12
flexible with the Raft fields (cluster id, last fetched epoch, diverging epoch, current leader,
snapshot id; KIP-595), v13 topic ids replace names (KIP-516), v15 replica state (KIP-903), v16
node endpoints (KIP-951), v17 the fetching replica's directory id (KIP-853, a tagged field; pylog
declares v17 for its Raft replication in a dynamic quorum, ApiVersions still advertises 0-16).
``records`` stays raw bytes (a memoryview on decode).
"""

from __future__ import annotations

from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.dsl import api

FETCH = api(
    ApiKey.FETCH, "0-17", "12+",
    request="""
        cluster_id                string  12+  null  tag=0  default=null
        replica_id                int32   0-14  default=-1
        replica_state             {}      15+  tag=1
          replica_id              int32   15+  default=-1
          replica_epoch           int64   15+  default=-1
        max_wait_ms               int32
        min_bytes                 int32
        max_bytes                 int32   3+  default=0x7fffffff
        isolation_level           int8    4+  default=0
        session_id                int32   7+  default=0
        session_epoch             int32   7+  default=-1
        topics                    []
          topic                   string  0-12
          topic_id                uuid    13+
          partitions              []
            partition             int32
            current_leader_epoch  int32   9+  default=-1
            fetch_offset          int64
            last_fetched_epoch    int32   12+  default=-1
            log_start_offset      int64   5+  default=-1
            partition_max_bytes   int32
            replica_directory_id  uuid    17+  tag=0
        forgotten_topics_data     []      7+
          topic                   string  7-12
          topic_id                uuid    13+
          partitions              []int32 7+
        rack_id                   string  11+  default=""
    """,
    response="""
        throttle_time_ms          int32   1+
        error_code                int16   7+
        session_id                int32   7+  default=0
        responses                 []
          topic                   string  0-12
          topic_id                uuid    13+
          partitions              []
            partition_index       int32
            error_code            int16
            high_watermark        int64
            last_stable_offset    int64   4+  default=-1
            log_start_offset      int64   5+  default=-1
            diverging_epoch       {}      12+  tag=0
              epoch               int32   12+  default=-1
              end_offset          int64   12+  default=-1
            current_leader        {}      12+  tag=1
              leader_id           int32   12+  default=-1
              leader_epoch        int32   12+  default=-1
            snapshot_id           {}      12+  tag=2
              end_offset          int64   default=-1
              epoch               int32   default=-1
            aborted_transactions  []      4+  null
              producer_id         int64   4+
              first_offset        int64   4+
            preferred_read_replica  int32  11+  default=-1
            records               records  null
        node_endpoints            []      16+  tag=0
          node_id                 int32   16+
          host                    string  16+
          port                    int32   16+
          rack                    string  16+  null  default=null
    """,
)  # fmt: skip

APIS = (FETCH,)
