"""KIP-932 share groups: ShareGroupHeartbeat (76), ShareGroupDescribe (77), ShareFetch (78) and
ShareAcknowledge (79), at Apache Kafka 4.1.1's ranges: v1 only for all four (v0 was 4.0's early
access and was removed in 4.1; ShareFetch v2, KIP-1206's acquire mode, is 4.2's).

Facts: Kafka 4.1.1's message schemas of the same names
(``clients/src/main/resources/common/message/Share*.json``; checked field by field against the
``SCHEMAS`` of the generated classes in ``kafka-clients-4.1.1.jar``). All flexible. The heartbeat
response's ``Assignment`` is a nullable struct; ShareFetch's ``Records`` a nullable record set.
DescribeShareGroupOffsets (90) and AlterShareGroupOffsets (91) v0, as 4.1.1 (KIP-932's admin
APIs behind ``kafka-share-groups --describe/--reset-offsets``).
Acknowledge types in ``AcknowledgeTypes``: 0 gap, 1 accept, 2 release, 3 reject.
"""

from __future__ import annotations

from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.dsl import api

_STRUCTS = {
    "TopicPartitions": """
        topic_id                  uuid
        partitions                []int32
    """,
    "AckPartitions": """
        partition_index           int32
        acknowledgement_batches   []
          first_offset            int64
          last_offset             int64
          acknowledge_types       []int8
    """,
    "NodeEndpoint": """
        node_id                   int32
        host                      string
        port                      int32
        rack                      string  null  default=null
    """,
    "LeaderIdAndEpoch": """
        leader_id                 int32   default=-1
        leader_epoch              int32   default=-1
    """,
}

SHARE_GROUP_HEARTBEAT = api(
    ApiKey.SHARE_GROUP_HEARTBEAT, "1", "0+",
    structs=_STRUCTS,
    request="""
        group_id                  string
        member_id                 string
        member_epoch              int32
        rack_id                   string  null  default=null
        subscribed_topic_names    []string  null  default=null
    """,
    response="""
        throttle_time_ms          int32
        error_code                int16
        error_message             string  null  default=null
        member_id                 string  null  default=null
        member_epoch              int32
        heartbeat_interval_ms     int32
        assignment                {}      null  default=null
          topic_partitions        []TopicPartitions
    """,
)  # fmt: skip

SHARE_GROUP_DESCRIBE = api(
    ApiKey.SHARE_GROUP_DESCRIBE, "1", "0+",
    request="""
        group_ids                 []string
        include_authorized_operations  bool
    """,
    response="""
        throttle_time_ms          int32
        groups                    []
          error_code              int16
          error_message           string  null  default=null
          group_id                string
          group_state             string
          group_epoch             int32
          assignment_epoch        int32
          assignor_name           string
          members                 []
            member_id             string
            rack_id               string  null  default=null
            member_epoch          int32
            client_id             string
            client_host           string
            subscribed_topic_names  []string
            assignment            {}
              topic_partitions    []
                topic_id          uuid
                topic_name        string
                partitions        []int32
          authorized_operations   int32   default=-2147483648
    """,
)  # fmt: skip

SHARE_FETCH = api(
    ApiKey.SHARE_FETCH, "1", "0+",
    structs=_STRUCTS,
    request="""
        group_id                  string  null  default=null
        member_id                 string  null
        share_session_epoch       int32
        max_wait_ms               int32
        min_bytes                 int32
        max_bytes                 int32   default=0x7fffffff
        max_records               int32
        batch_size                int32
        topics                    []
          topic_id                uuid
          partitions              []AckPartitions
        forgotten_topics_data     []TopicPartitions
    """,
    response="""
        throttle_time_ms          int32
        error_code                int16
        error_message             string  null  default=null
        acquisition_lock_timeout_ms  int32
        responses                 []
          topic_id                uuid
          partitions              []
            partition_index       int32
            error_code            int16
            error_message         string  null  default=null
            acknowledge_error_code  int16
            acknowledge_error_message  string  null  default=null
            current_leader        {}LeaderIdAndEpoch
            records               records  null
            acquired_records      []
              first_offset        int64
              last_offset         int64
              delivery_count      int16
        node_endpoints            []NodeEndpoint
    """,
)  # fmt: skip

SHARE_ACKNOWLEDGE = api(
    ApiKey.SHARE_ACKNOWLEDGE, "1", "0+",
    structs=_STRUCTS,
    request="""
        group_id                  string  null  default=null
        member_id                 string  null
        share_session_epoch       int32
        topics                    []
          topic_id                uuid
          partitions              []AckPartitions
    """,
    response="""
        throttle_time_ms          int32
        error_code                int16
        error_message             string  null  default=null
        responses                 []
          topic_id                uuid
          partitions              []
            partition_index       int32
            error_code            int16
            error_message         string  null  default=null
            current_leader        {}LeaderIdAndEpoch
        node_endpoints            []NodeEndpoint
    """,
)  # fmt: skip

DESCRIBE_SHARE_GROUP_OFFSETS = api(
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, "0", "0+",
    request="""
        groups                    []
          group_id                string
          topics                  []      null  default=null
            topic_name            string
            partitions            []int32
    """,
    response="""
        throttle_time_ms          int32
        groups                    []
          group_id                string
          topics                  []
            topic_name            string
            topic_id              uuid
            partitions            []
              partition_index     int32
              start_offset        int64
              leader_epoch        int32
              error_code          int16
              error_message       string  null  default=null
          error_code              int16
          error_message           string  null  default=null
    """,
)  # fmt: skip

ALTER_SHARE_GROUP_OFFSETS = api(
    ApiKey.ALTER_SHARE_GROUP_OFFSETS, "0", "0+",
    request="""
        group_id                  string
        topics                    []
          topic_name              string
          partitions              []
            partition_index       int32
            start_offset          int64
    """,
    response="""
        throttle_time_ms          int32
        error_code                int16
        error_message             string  null  default=null
        responses                 []
          topic_name              string
          topic_id                uuid
          partitions              []
            partition_index       int32
            error_code            int16
            error_message         string  null  default=null
    """,
)  # fmt: skip

APIS = (
    SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE, SHARE_FETCH, SHARE_ACKNOWLEDGE,
    DESCRIBE_SHARE_GROUP_OFFSETS, ALTER_SHARE_GROUP_OFFSETS,
)  # fmt: skip
