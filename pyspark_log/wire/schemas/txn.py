"""Idempotent and transactional producers: InitProducerId (22), AddPartitionsToTxn (24),
AddOffsetsToTxn (25), EndTxn (26), WriteTxnMarkers (27), TxnOffsetCommit (28).

Facts: Kafka 3.7 message schemas of the same names (KIP-98 transactions, KIP-360 producer epoch
bump in InitProducerId v3, KIP-447 group metadata in TxnOffsetCommit v3, KIP-890 batched
broker-to-broker AddPartitionsToTxn v4 whose v3-and-below fields keep Kafka's names).
"""

from __future__ import annotations

from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.dsl import api

INIT_PRODUCER_ID = api(
    ApiKey.INIT_PRODUCER_ID, "0-4", "2+",
    request="""
        transactional_id          string  null
        transaction_timeout_ms    int32
        producer_id               int64   3+  default=-1
        producer_epoch            int16   3+  default=-1
    """,
    response="""
        throttle_time_ms          int32
        error_code                int16
        producer_id               int64   default=-1
        producer_epoch            int16
    """,
)  # fmt: skip

_ADD_PARTITIONS_STRUCTS = {
    "Topic": """
        name                      string
        partitions                []int32
    """,
    "TopicResult": """
        name                      string
        results_by_partition      []
          partition_index         int32
          partition_error_code    int16
    """,
}

ADD_PARTITIONS_TO_TXN = api(
    ApiKey.ADD_PARTITIONS_TO_TXN, "0-4", "3+",
    structs=_ADD_PARTITIONS_STRUCTS,
    request="""
        transactions              []      4+
          transactional_id        string  4+
          producer_id             int64   4+
          producer_epoch          int16   4+
          verify_only             bool    4+  default=false
          topics                  []Topic 4+
        v3_and_below_transactional_id  string  0-3
        v3_and_below_producer_id       int64   0-3
        v3_and_below_producer_epoch    int16   0-3
        v3_and_below_topics            []Topic 0-3
    """,
    response="""
        throttle_time_ms          int32
        error_code                int16   4+
        results_by_transaction    []      4+
          transactional_id        string  4+
          topic_results           []TopicResult  4+
        results_by_topic_v3_and_below  []TopicResult  0-3
    """,
)  # fmt: skip

ADD_OFFSETS_TO_TXN = api(
    ApiKey.ADD_OFFSETS_TO_TXN, "0-3", "3+",
    request="""
        transactional_id          string
        producer_id               int64
        producer_epoch            int16
        group_id                  string
    """,
    response="""
        throttle_time_ms          int32
        error_code                int16
    """,
)  # fmt: skip

END_TXN = api(
    ApiKey.END_TXN, "0-3", "3+",
    request="""
        transactional_id          string
        producer_id               int64
        producer_epoch            int16
        committed                 bool
    """,
    response="""
        throttle_time_ms          int32
        error_code                int16
    """,
)  # fmt: skip

WRITE_TXN_MARKERS = api(
    ApiKey.WRITE_TXN_MARKERS, "0-1", "1+",
    request="""
        markers                   []
          producer_id             int64
          producer_epoch          int16
          transaction_result      bool                   # true: commit
          topics                  []
            name                  string
            partition_indexes     []int32
          coordinator_epoch       int32
    """,
    response="""
        markers                   []
          producer_id             int64
          topics                  []
            name                  string
            partitions            []
              partition_index     int32
              error_code          int16
    """,
)  # fmt: skip

TXN_OFFSET_COMMIT = api(
    ApiKey.TXN_OFFSET_COMMIT, "0-3", "3+",
    request="""
        transactional_id          string
        group_id                  string
        producer_id               int64
        producer_epoch            int16
        generation_id             int32   3+  default=-1
        member_id                 string  3+  default=""
        group_instance_id         string  3+  null  default=null
        topics                    []
          name                    string
          partitions              []
            partition_index       int32
            committed_offset      int64
            committed_leader_epoch  int32  2+  default=-1
            committed_metadata    string  null
    """,
    response="""
        throttle_time_ms          int32
        topics                    []
          name                    string
          partitions              []
            partition_index       int32
            error_code            int16
    """,
)  # fmt: skip

APIS = (
    INIT_PRODUCER_ID,
    ADD_PARTITIONS_TO_TXN,
    ADD_OFFSETS_TO_TXN,
    END_TXN,
    WRITE_TXN_MARKERS,
    TXN_OFFSET_COMMIT,
)
