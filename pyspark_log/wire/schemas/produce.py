"""Produce (0): append record batches to partitions.

Facts: Kafka 3.7 ``ProduceRequest/Response.json``. v3 adds the transactional id (and record
batch v2), v5 the log start offset, v8 per-batch record errors (KIP-467), v9 is flexible, v10 adds
the KIP-951 leader-discovery tagged fields (current leader, node endpoints). ``records`` stays raw
RecordBatch bytes here; ``pyspark_log.records`` reads them.
"""

from __future__ import annotations

from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.dsl import api

PRODUCE = api(
    ApiKey.PRODUCE, "0-10", "9+",
    request="""
        transactional_id          string  3+  null  default=null
        acks                      int16
        timeout_ms                int32
        topic_data                []
          name                    string
          partition_data          []
            index                 int32
            records               records  null
    """,
    response="""
        responses                 []
          name                    string
          partition_responses     []
            index                 int32
            error_code            int16
            base_offset           int64
            log_append_time_ms    int64   2+  default=-1
            log_start_offset      int64   5+  default=-1
            record_errors         []      8+
              batch_index         int32   8+
              batch_index_error_message  string  8+  null  default=null
            error_message         string  8+  null  default=null
            current_leader        {}      10+  tag=0
              leader_id           int32   10+  default=-1
              leader_epoch        int32   10+  default=-1
        throttle_time_ms          int32   1+  default=0
        node_endpoints            []      10+  tag=0
          node_id                 int32   10+
          host                    string  10+
          port                    int32   10+
          rack                    string  10+  null  default=null
    """,
)  # fmt: skip

APIS = (PRODUCE,)
