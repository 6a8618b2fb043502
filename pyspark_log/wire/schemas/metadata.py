"""ApiVersions (18) and Metadata (3): what a client asks first on every connection.

Facts: Kafka 3.7 message schemas ``ApiVersionsRequest/Response.json`` (KIP-511 client software
name and version from v3; KIP-584 features as tagged fields) and ``MetadataRequest/Response.json``
(KIP-516 topic ids from v10; cluster authorized operations dropped from v11).
"""

from __future__ import annotations

from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.dsl import api

API_VERSIONS = api(
    ApiKey.API_VERSIONS, "0-3", "3+",
    request="""
        client_software_name      string  3+
        client_software_version   string  3+
    """,
    response="""
        error_code                int16
        api_keys                  []
          api_key                 int16
          min_version             int16
          max_version             int16
        throttle_time_ms          int32   1+
        supported_features        []      3+  tag=0
          name                    string  3+
          min_version             int16   3+
          max_version             int16   3+
        finalized_features_epoch  int64   3+  tag=1  default=-1
        finalized_features        []      3+  tag=2
          name                    string  3+
          max_version_level       int16   3+
          min_version_level       int16   3+
        zk_migration_ready        bool    3+  tag=3  default=false
    """,
)  # fmt: skip

METADATA = api(
    ApiKey.METADATA, "0-12", "9+",
    request="""
        topics                    []      null=1+          # null: all topics (v1+); v0 [] = all
          topic_id                uuid    10+
          name                    string  null=10+
        allow_auto_topic_creation bool    4+  default=true
        include_cluster_authorized_operations  bool  8-10
        include_topic_authorized_operations    bool  8+
    """,
    response="""
        throttle_time_ms          int32   3+
        brokers                   []
          node_id                 int32
          host                    string
          port                    int32
          rack                    string  1+  null  default=null
        cluster_id                string  2+  null  default=null
        controller_id             int32   1+  default=-1
        topics                    []
          error_code              int16
          name                    string  null=12+
          topic_id                uuid    10+
          is_internal             bool    1+  default=false
          partitions              []
            error_code            int16
            partition_index       int32
            leader_id             int32
            leader_epoch          int32   7+  default=-1
            replica_nodes         []int32
            isr_nodes             []int32
            offline_replicas      []int32 5+
          topic_authorized_operations  int32  8+  default=-2147483648
        cluster_authorized_operations  int32  8-10  default=-2147483648
    """,
)  # fmt: skip

APIS = (API_VERSIONS, METADATA)
