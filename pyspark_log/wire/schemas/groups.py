"""Consumer groups: FindCoordinator (10), JoinGroup (11), Heartbeat (12), LeaveGroup (13),
SyncGroup (14), DescribeGroups (15), ListGroups (16), DeleteGroups (42), and committed offsets:
OffsetCommit (8), OffsetFetch (9), OffsetDelete (47).

Facts: Kafka 3.7 message schemas of the same names (classic group protocol; KIP-345 static
members, KIP-394 member id required, KIP-429 cooperative, KIP-559 protocol type/name in
SyncGroup, KIP-699 batched FindCoordinator v4, KIP-709 batched OffsetFetch v8, KIP-800 reasons,
KIP-814 skip assignment, KIP-848 member epochs in OffsetCommit/OffsetFetch v9; ListGroups v5's
group types from Kafka 3.8+, KIP-848).
"""

from __future__ import annotations

from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.dsl import api

FIND_COORDINATOR = api(
    ApiKey.FIND_COORDINATOR, "0-4", "3+",
    request="""
        key                       string  0-3
        key_type                  int8    1+  default=0   # 0 group, 1 transaction
        coordinator_keys          []string  4+
    """,
    response="""
        throttle_time_ms          int32   1+
        error_code                int16   0-3
        error_message             string  1-3  null
        node_id                   int32   0-3
        host                      string  0-3
        port                      int32   0-3
        coordinators              []      4+
          key                     string  4+
          node_id                 int32   4+
          host                    string  4+
          port                    int32   4+
          error_code              int16   4+
          error_message           string  4+  null
    """,
)  # fmt: skip

JOIN_GROUP = api(
    ApiKey.JOIN_GROUP, "0-9", "6+",
    request="""
        group_id                  string
        session_timeout_ms        int32
        rebalance_timeout_ms      int32   1+  default=-1
        member_id                 string
        group_instance_id         string  5+  null  default=null
        protocol_type             string
        protocols                 []
          name                    string
          metadata                bytes
        reason                    string  8+  null  default=null
    """,
    response="""
        throttle_time_ms          int32   2+
        error_code                int16
        generation_id             int32   default=-1
        protocol_type             string  7+  null  default=null
        protocol_name             string  null=7+
        leader                    string
        skip_assignment           bool    9+  default=false
        member_id                 string
        members                   []
          member_id               string
          group_instance_id       string  5+  null  default=null
          metadata                bytes
    """,
)  # fmt: skip

HEARTBEAT = api(
    ApiKey.HEARTBEAT, "0-4", "4+",
    request="""
        group_id                  string
        generation_id             int32
        member_id                 string
        group_instance_id         string  3+  null  default=null
    """,
    response="""
        throttle_time_ms          int32   1+
        error_code                int16
    """,
)  # fmt: skip

LEAVE_GROUP = api(
    ApiKey.LEAVE_GROUP, "0-5", "4+",
    request="""
        group_id                  string
        member_id                 string  0-2
        members                   []      3+
          member_id               string  3+
          group_instance_id       string  3+  null  default=null
          reason                  string  5+  null  default=null
    """,
    response="""
        throttle_time_ms          int32   1+
        error_code                int16
        members                   []      3+
          member_id               string  3+
          group_instance_id       string  3+  null
          error_code              int16   3+
    """,
)  # fmt: skip

SYNC_GROUP = api(
    ApiKey.SYNC_GROUP, "0-5", "4+",
    request="""
        group_id                  string
        generation_id             int32
        member_id                 string
        group_instance_id         string  3+  null  default=null
        protocol_type             string  5+  null  default=null
        protocol_name             string  5+  null  default=null
        assignments               []
          member_id               string
          assignment              bytes
    """,
    response="""
        throttle_time_ms          int32   1+
        error_code                int16
        protocol_type             string  5+  null  default=null
        protocol_name             string  5+  null  default=null
        assignment                bytes
    """,
)  # fmt: skip

DESCRIBE_GROUPS = api(
    ApiKey.DESCRIBE_GROUPS, "0-5", "5+",
    request="""
        groups                    []string
        include_authorized_operations  bool  3+
    """,
    response="""
        throttle_time_ms          int32   1+
        groups                    []
          error_code              int16
          group_id                string
          group_state             string
          protocol_type           string
          protocol_data           string
          members                 []
            member_id             string
            group_instance_id     string  4+  null  default=null
            client_id             string
            client_host           string
            member_metadata       bytes
            member_assignment     bytes
          authorized_operations   int32   3+  default=-2147483648
    """,
)  # fmt: skip

LIST_GROUPS = api(
    ApiKey.LIST_GROUPS, "0-5", "3+",
    request="""
        states_filter             []string  4+
        types_filter              []string  5+   # KIP-848 (Kafka 3.8+): classic, consumer
    """,
    response="""
        throttle_time_ms          int32   1+
        error_code                int16
        groups                    []
          group_id                string
          protocol_type           string
          group_state             string  4+
          group_type              string  5+
    """,
)  # fmt: skip

DELETE_GROUPS = api(
    ApiKey.DELETE_GROUPS, "0-2", "2+",
    request="""
        groups_names              []string
    """,
    response="""
        throttle_time_ms          int32
        results                   []
          group_id                string
          error_code              int16
    """,
)  # fmt: skip

OFFSET_COMMIT = api(
    ApiKey.OFFSET_COMMIT, "0-9", "8+",
    request="""
        group_id                  string
        generation_id_or_member_epoch  int32  1+  default=-1
        member_id                 string  1+
        group_instance_id         string  7+  null  default=null
        retention_time_ms         int64   2-4  default=-1
        topics                    []
          name                    string
          partitions              []
            partition_index       int32
            committed_offset      int64
            committed_leader_epoch  int32  6+  default=-1
            commit_timestamp      int64   1   default=-1
            committed_metadata    string  null
    """,
    response="""
        throttle_time_ms          int32   3+
        topics                    []
          name                    string
          partitions              []
            partition_index       int32
            error_code            int16
    """,
)  # fmt: skip

OFFSET_FETCH = api(
    ApiKey.OFFSET_FETCH, "0-9", "6+",
    request="""
        group_id                  string  0-7
        topics                    []      0-7  null=2-7      # null: all topics (v2+)
          name                    string  0-7
          partition_indexes       []int32 0-7
        groups                    []      8+
          group_id                string  8+
          member_id               string  9+  null  default=null
          member_epoch            int32   9+  default=-1
          topics                  []      8+  null
            name                  string  8+
            partition_indexes     []int32 8+
        require_stable            bool    7+  default=false
    """,
    response="""
        throttle_time_ms          int32   3+
        topics                    []      0-7
          name                    string  0-7
          partitions              []      0-7
            partition_index       int32   0-7
            committed_offset      int64   0-7
            committed_leader_epoch  int32  5-7  default=-1
            metadata              string  0-7  null
            error_code            int16   0-7
        error_code                int16   2-7  default=0
        groups                    []      8+
          group_id                string  8+
          topics                  []      8+
            name                  string  8+
            partitions            []      8+
              partition_index     int32   8+
              committed_offset    int64   8+
              committed_leader_epoch  int32  8+  default=-1
              metadata            string  8+  null
              error_code          int16   8+
          error_code              int16   8+  default=0
    """,
)  # fmt: skip

OFFSET_DELETE = api(
    ApiKey.OFFSET_DELETE, "0", "none",
    request="""
        group_id                  string
        topics                    []
          name                    string
          partitions              []
            partition_index       int32
    """,
    response="""
        error_code                int16
        throttle_time_ms          int32
        topics                    []
          name                    string
          partitions              []
            partition_index       int32
            error_code            int16
    """,
)  # fmt: skip

APIS = (
    FIND_COORDINATOR,
    JOIN_GROUP,
    HEARTBEAT,
    LEAVE_GROUP,
    SYNC_GROUP,
    DESCRIBE_GROUPS,
    LIST_GROUPS,
    DELETE_GROUPS,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    OFFSET_DELETE,
)
