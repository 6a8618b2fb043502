"""KIP-595 Raft quorum RPCs: Vote (52), BeginQuorumEpoch (53), EndQuorumEpoch (54),
DescribeQuorum (55). Replication itself uses Fetch (``fetch.py``, Raft fields from v12).

Facts: Kafka 3.7 message schemas of the same names and KIP-595 ("A Raft Protocol for the
Metadata Quorum"); DescribeQuorum v1 adds replica fetch/caught-up timestamps (KIP-836). In Kafka
3.7 Vote/BeginQuorumEpoch/EndQuorumEpoch are served on the controller listener only.
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
    ApiKey.DESCRIBE_QUORUM, "0-1", "0+",
    structs={
        "ReplicaState": """
            replica_id                int32
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
        topics                    []
          topic_name              string
          partitions              []
            partition_index       int32
            error_code            int16
            leader_id             int32
            leader_epoch          int32
            high_watermark        int64
            current_voters        []ReplicaState
            observers             []ReplicaState
    """,
)  # fmt: skip

APIS = (VOTE, BEGIN_QUORUM_EPOCH, END_QUORUM_EPOCH, DESCRIBE_QUORUM)
