"""Operator APIs: DeleteRecords (21), DescribeProducers (61), DescribeTransactions (65),
ListTransactions (66).

Facts: Kafka's message schemas of the same names (``DeleteRecordsRequest.json`` v0-v2, flexible
from v2; KIP-664 "Provide tooling to detect and abort hanging transactions" for 61/65/66, all
flexible from v0; KIP-994 adds ``duration_filter`` in ListTransactions v1, which Kafka 3.8
advertises and pylog serves too, see ``versions.py``).
"""

from __future__ import annotations

from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.dsl import api

DELETE_RECORDS = api(
    ApiKey.DELETE_RECORDS, "0-2", "2+",
    request="""
        topics                    []
          name                    string
          partitions              []
            partition_index       int32
            offset                int64                  # -1: the high watermark
        timeout_ms                int32
    """,
    response="""
        throttle_time_ms          int32
        topics                    []
          name                    string
          partitions              []
            partition_index       int32
            low_watermark         int64
            error_code            int16
    """,
)  # fmt: skip

DESCRIBE_PRODUCERS = api(
    ApiKey.DESCRIBE_PRODUCERS, "0", "0+",
    request="""
        topics                    []
          name                    string
          partition_indexes       []int32
    """,
    response="""
        throttle_time_ms          int32
        topics                    []
          name                    string
          partitions              []
            partition_index       int32
            error_code            int16
            error_message         string  null  default=null
            active_producers      []
              producer_id         int64
              producer_epoch      int32
              last_sequence       int32   default=-1
              last_timestamp      int64   default=-1
              coordinator_epoch   int32
              current_txn_start_offset  int64  default=-1
    """,
)  # fmt: skip

DESCRIBE_TRANSACTIONS = api(
    ApiKey.DESCRIBE_TRANSACTIONS, "0", "0+",
    request="""
        transactional_ids         []string
    """,
    response="""
        throttle_time_ms          int32
        transaction_states        []
          error_code              int16
          transactional_id        string
          transaction_state       string
          transaction_timeout_ms  int32
          transaction_start_time_ms  int64
          producer_id             int64
          producer_epoch          int16
          topics                  []
            topic                 string
            partitions            []int32
    """,
)  # fmt: skip

LIST_TRANSACTIONS = api(
    ApiKey.LIST_TRANSACTIONS, "0-1", "0+",
    request="""
        state_filters             []string
        producer_id_filters       []int64
        duration_filter           int64   1+  default=-1  # KIP-994: only those running longer (ms)
    """,
    response="""
        throttle_time_ms          int32
        error_code                int16
        unknown_state_filters     []string
        transaction_states        []
          transactional_id        string
          producer_id             int64
          transaction_state       string
    """,
)  # fmt: skip

APIS = (DELETE_RECORDS, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS)
