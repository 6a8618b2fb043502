"""Topic and config administration: CreateTopics (19), DeleteTopics (20), CreatePartitions (37),
DescribeConfigs (32), IncrementalAlterConfigs (44), DescribeCluster (60).

Facts: Kafka 3.7 message schemas of the same names (KIP-4 admin protocol, KIP-339 incremental
alter configs, KIP-525 CreateTopics returning configs, KIP-516 topic ids, KIP-700 DescribeCluster,
KIP-919 endpoint type).
"""

from __future__ import annotations

from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.dsl import api

CREATE_TOPICS = api(
    ApiKey.CREATE_TOPICS, "0-7", "5+",
    request="""
        topics                    []
          name                    string
          num_partitions          int32                  # -1: the broker default (v4+)
          replication_factor      int16
          assignments             []
            partition_index       int32
            broker_ids            []int32
          configs                 []
            name                  string
            value                 string  null
        timeout_ms                int32   default=60000
        validate_only             bool    1+  default=false
    """,
    response="""
        throttle_time_ms          int32   2+
        topics                    []
          name                    string
          topic_id                uuid    7+
          error_code              int16
          error_message           string  1+  null
          topic_config_error_code int16   5+  tag=0
          num_partitions          int32   5+  default=-1
          replication_factor      int16   5+  default=-1
          configs                 []      5+  null
            name                  string  5+
            value                 string  5+  null
            read_only             bool    5+
            config_source         int8    5+  default=-1
            is_sensitive          bool    5+
    """,
)  # fmt: skip

DELETE_TOPICS = api(
    ApiKey.DELETE_TOPICS, "0-6", "4+",
    request="""
        topics                    []      6+
          name                    string  6+  null  default=null
          topic_id                uuid    6+
        topic_names               []string  0-5
        timeout_ms                int32
    """,
    response="""
        throttle_time_ms          int32   1+
        responses                 []
          name                    string  null=6+
          topic_id                uuid    6+
          error_code              int16
          error_message           string  5+  null  default=null
    """,
)  # fmt: skip

CREATE_PARTITIONS = api(
    ApiKey.CREATE_PARTITIONS, "0-3", "2+",
    request="""
        topics                    []
          name                    string
          count                   int32
          assignments             []      null
            broker_ids            []int32
        timeout_ms                int32
        validate_only             bool
    """,
    response="""
        throttle_time_ms          int32
        results                   []
          name                    string
          error_code              int16
          error_message           string  null  default=null
    """,
)  # fmt: skip

DESCRIBE_CONFIGS = api(
    ApiKey.DESCRIBE_CONFIGS, "0-4", "4+",
    request="""
        resources                 []
          resource_type           int8                   # 2 topic, 4 broker, 8 broker logger
          resource_name           string
          configuration_keys      []string  null
        include_synonyms          bool    1+  default=false
        include_documentation     bool    3+  default=false
    """,
    response="""
        throttle_time_ms          int32
        results                   []
          error_code              int16
          error_message           string  null
          resource_type           int8
          resource_name           string
          configs                 []
            name                  string
            value                 string  null
            read_only             bool
            is_default            bool    0
            config_source         int8    1+  default=-1
            is_sensitive          bool
            synonyms              []      1+
              name                string  1+
              value               string  1+  null
              source              int8    1+
            config_type           int8    3+  default=0
            documentation         string  3+  null
    """,
)  # fmt: skip

ALTER_CONFIGS = api(
    ApiKey.ALTER_CONFIGS, "0-2", "2+",
    request="""
        resources                 []
          resource_type           int8
          resource_name           string
          configs                 []
            name                  string
            value                 string  null
        validate_only             bool
    """,
    response="""
        throttle_time_ms          int32
        responses                 []
          error_code              int16
          error_message           string  null
          resource_type           int8
          resource_name           string
    """,
)  # fmt: skip

INCREMENTAL_ALTER_CONFIGS = api(
    ApiKey.INCREMENTAL_ALTER_CONFIGS, "0-1", "1+",
    request="""
        resources                 []
          resource_type           int8
          resource_name           string
          configs                 []
            name                  string
            config_operation      int8                   # 0 set, 1 delete, 2 append, 3 subtract
            value                 string  null
        validate_only             bool
    """,
    response="""
        throttle_time_ms          int32
        responses                 []
          error_code              int16
          error_message           string  null
          resource_type           int8
          resource_name           string
    """,
)  # fmt: skip

DESCRIBE_CLUSTER = api(
    ApiKey.DESCRIBE_CLUSTER, "0-1", "0+",
    request="""
        include_cluster_authorized_operations  bool
        endpoint_type             int8    1+  default=1  # 1 brokers, 2 controllers
    """,
    response="""
        throttle_time_ms          int32
        error_code                int16
        error_message             string  null  default=null
        endpoint_type             int8    1+  default=1
        cluster_id                string
        controller_id             int32   default=-1
        brokers                   []
          broker_id               int32
          host                    string
          port                    int32
          rack                    string  null  default=null
        cluster_authorized_operations  int32  default=-2147483648
    """,
)  # fmt: skip

APIS = (
    CREATE_TOPICS,
    DELETE_TOPICS,
    CREATE_PARTITIONS,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
    INCREMENTAL_ALTER_CONFIGS,
    DESCRIBE_CLUSTER,
)
