"""FetchSnapshot (59): a replica behind the leader's log start fetches the leader's KIP-630
snapshot in chunks.

Facts: Kafka 4.1 ``FetchSnapshotRequest/Response.json``: versions 0-1, flexible from v0; v1 adds
the fetching replica's directory id (request, tagged) and the leader's endpoints (response,
tagged; KIP-853). ``bytes`` is raw (not necessarily aligned on a batch boundary).
"""

from __future__ import annotations

from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.dsl import api

FETCH_SNAPSHOT = api(
    ApiKey.FETCH_SNAPSHOT, "0-1", "0+",
    request="""
        cluster_id                string  null  tag=0  default=null
        replica_id                int32   default=-1
        max_bytes                 int32   default=0x7fffffff
        topics                    []
          name                    string
          partitions              []
            partition             int32
            current_leader_epoch  int32
            snapshot_id           {}
              end_offset          int64
              epoch               int32
            position              int64
            replica_directory_id  uuid    1+  tag=0
    """,
    response="""
        throttle_time_ms          int32
        error_code                int16
        topics                    []
          name                    string
          partitions              []
            index                 int32
            error_code            int16
            snapshot_id           {}
              end_offset          int64
              epoch               int32
            current_leader        {}      tag=0
              leader_id           int32   default=-1
              leader_epoch        int32   default=-1
            size                  int64
            position              int64
            unaligned_records     records
        node_endpoints            []      1+  tag=0
          node_id                 int32   1+
          host                    string  1+
          port                    uint16  1+
    """,
)  # fmt: skip

APIS = (FETCH_SNAPSHOT,)
