"""KIP-848 consumer groups: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69).

Facts: Apache Kafka 4.1's message schemas of the same names
(``clients/src/main/resources/common/message/ConsumerGroup*.json``): ConsumerGroupHeartbeat v1
adds ``SubscribedTopicRegex`` and has the consumer generate its own member id (KIP-1082);
ConsumerGroupDescribe v1 adds the member's ``MemberType`` (KIP-1099). Both are flexible from v0.
The heartbeat response's ``Assignment`` is a nullable struct (an int8 marker on the wire).
"""

from __future__ import annotations

from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.dsl import api

CONSUMER_GROUP_HEARTBEAT = api(
    ApiKey.CONSUMER_GROUP_HEARTBEAT, "0-1", "0+",
    structs={
        "TopicPartitions": """
            topic_id                uuid
            partitions              []int32
        """,
    },
    request="""
        group_id                  string
        member_id                 string
        member_epoch              int32
        instance_id               string  null  default=null
        rack_id                   string  null  default=null
        rebalance_timeout_ms      int32   default=-1
        subscribed_topic_names    []string  null  default=null
        subscribed_topic_regex    string  1+  null  default=null
        server_assignor           string  null  default=null
        topic_partitions          []TopicPartitions  null  default=null
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

_DESCRIBE_STRUCTS = {
    "Assignment": """
        topic_partitions          []
          topic_id                uuid
          topic_name              string
          partitions              []int32
    """,
}

CONSUMER_GROUP_DESCRIBE = api(
    ApiKey.CONSUMER_GROUP_DESCRIBE, "0-1", "0+",
    structs=_DESCRIBE_STRUCTS,
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
            instance_id           string  null  default=null
            rack_id               string  null  default=null
            member_epoch          int32
            client_id             string
            client_host           string
            subscribed_topic_names  []string
            subscribed_topic_regex  string  null  default=null
            assignment            {}Assignment
            target_assignment     {}Assignment
            member_type           int8    1+  default=-1
          authorized_operations   int32   default=-2147483648
    """,
)  # fmt: skip

APIS = (CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE)
