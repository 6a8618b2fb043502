"""KIP-595 Raft quorum RPCs: Vote (52), BeginQuorumEpoch (53), EndQuorumEpoch (54),
DescribeQuorum (55); KIP-853 dynamic quorum: AddRaftVoter (80), RemoveRaftVoter (81),
UpdateRaftVoter (82). Replication itself uses Fetch (``fetch.py``, Raft fields from v12).

Facts: Kafka 3.7 message schemas of the same names and KIP-595 ("A Raft Protocol for the
Metadata Quorum"); DescribeQuorum v1 adds replica fetch/caught-up timestamps (KIP-836). In Kafka
3.7 Vote/BeginQuorumEpoch/EndQuorumEpoch are served on the controller listener only.
DescribeQuorum v2 (KIP-853) adds error messages, each replica's directory id and the voters'
``Nodes`` with their listeners. The KIP-853 APIs are at Kafka 4.1.1's ranges (v0 each; the
schemas as Kafka 4.1.1's ``ApiMessageType`` prints them): AddRaftVoter and RemoveRaftVoter are
served by controllers and brokers, UpdateRaftVoter by controllers only.
"""

from __future__ import annotations

from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.dsl import api

VOTE = api(
    ApiKey.VOTE, "0", "0+",
    request="""
        cluster_id                string  null  default=null
        topics                    []
          topic_name              string
          partitions              []
            partition_index       int32
            candidate_epoch       int32
            candidate_id          int32
            last_offset_epoch     int32
            last_offset           int64
    """,
    response="""
        error_code                int16
        topics                    []
          topic_name              string
          partitions              []
            partition_index       int32
            error_code            int16
            leader_id             int32
            leader_epoch          int32
            vote_granted          bool
    """,
)  # fmt: skip

BEGIN_QUORUM_EPOCH = api(
    ApiKey.BEGIN_QUORUM_EPOCH, "0", "none",
    request="""
        cluster_id                string  null  default=null
        topics                    []
          topic_name              string
          partitions              []
            partition_index       int32
            leader_id             int32
            leader_epoch          int32
    """,
    response="""
        error_code                int16
        topics                    []
          topic_name              string
          partitions              []
            partition_index       int32
            error_code            int16
            leader_id             int32
            leader_epoch          int32
    """,
)  # fmt: skip

END_QUORUM_EPOCH = api(
    ApiKey.END_QUORUM_EPOCH, "0", "none",
    request="""
        cluster_id                string  null  default=null
        topics                    []
          topic_name              string
          partitions              []
            partition_index       int32
            leader_id             int32
            leader_epoch          int32
            preferred_successors  []int32
    """,
    response="""
        error_code                int16
        topics                    []
          topic_name              string
          partitions              []
            partition_index       int32
            error_code            int16
            leader_id             int32
            leader_epoch          int32
    """,
)  # fmt: skip

DESCRIBE_QUORUM = api(
    ApiKey.DESCRIBE_QUORUM, "0-2", "0+",
    structs={
        "ReplicaState": """
            replica_id                int32
            replica_directory_id      uuid    2+
            log_end_offset            int64
            last_fetch_timestamp      int64   1+  default=-1
            last_caught_up_timestamp  int64   1+  default=-1
        """
    },
    request="""
        topics                    []
          topic_name              string
          partitions              []
            partition_index       int32
    """,
    response="""
        error_code                int16
        error_message             string  2+  null  default=null
        topics                    []
          topic_name              string
          partitions              []
            partition_index       int32
            error_code            int16
            error_message         string  2+  null  default=null
            leader_id             int32
            leader_epoch          int32
            high_watermark        int64
            current_voters        []ReplicaState
            observers             []ReplicaState
        nodes                     []      2+
          node_id                 int32   2+
          listeners               []      2+
            name                  string  2+
            host                  string  2+
            port                  uint16  2+
    """,
)  # fmt: skip

_LISTENERS = """
        listeners                 []
          name                    string
          host                    string
          port                    uint16
"""

ADD_RAFT_VOTER = api(
    ApiKey.ADD_RAFT_VOTER, "0", "0+",
    request="""
        cluster_id                string  null  default=null
        timeout_ms                int32
        voter_id                  int32
        voter_directory_id        uuid
    """ + _LISTENERS,
    response="""
        throttle_time_ms          int32
        error_code                int16
        error_message             string  null  default=null
    """,
)  # fmt: skip

REMOVE_RAFT_VOTER = api(
    ApiKey.REMOVE_RAFT_VOTER, "0", "0+",
    request="""
        cluster_id                string  null  default=null
        voter_id                  int32
        voter_directory_id        uuid
    """,
    response="""
        throttle_time_ms          int32
        error_code                int16
        error_message             string  null  default=null
    """,
)  # fmt: skip

UPDATE_RAFT_VOTER = api(
    ApiKey.UPDATE_RAFT_VOTER, "0", "0+",
    request="""
        cluster_id                string  null  default=null
        current_leader_epoch      int32
        voter_id                  int32
        voter_directory_id        uuid
    """ + _LISTENERS + """
        kraft_version_feature     {}
          min_supported_version   int16
          max_supported_version   int16
    """,
    response="""
        throttle_time_ms          int32
        error_code                int16
        current_leader            {}      tag=0
          leader_id               int32   default=-1
          leader_epoch            int32   default=-1
          host                    string  default=""
          port                    int32   default=0
    """,
)  # fmt: skip

APIS = (
    VOTE, BEGIN_QUORUM_EPOCH, END_QUORUM_EPOCH, DESCRIBE_QUORUM, ADD_RAFT_VOTER, REMOVE_RAFT_VOTER, UPDATE_RAFT_VOTER,
)  # fmt: skip
