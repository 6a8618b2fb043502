"""AlterPartition (56): a partition leader asks the active controller to change the ISR (KIP-497).

The leader sends the ISR it wants with the leader epoch and partition epoch it knows; the
controller checks them against the metadata log, writes a ``PartitionChangeRecord`` and answers
with the partition's new state (its partition epoch bumped), or an error per partition. Brokers
send it to controllers only; clients never see it.

Facts: Kafka 3.7 ``AlterPartitionRequest/Response.json``. v1 adds ``leader_recovery_state``
(KIP-704), v2 names topics by id, v3 replaces ``new_isr`` by ``new_isr_with_epochs`` (KIP-903);
pylog declares v0-v3 (Kafka 3.7's range) and sends v2; a v3 request's ISR is read from
``new_isr_with_epochs`` (the broker epochs in it are not checked).
"""

from __future__ import annotations

from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.dsl import api

ALTER_PARTITION = api(
    ApiKey.ALTER_PARTITION, "0-3", "0+",
    request="""
        broker_id                 int32
        broker_epoch              int64   default=-1
        topics                    []
          topic_name              string  0-1
          topic_id                uuid    2+
          partitions              []
            partition_index       int32
            leader_epoch          int32
            new_isr               []int32 0-2
            new_isr_with_epochs   []      3+
              broker_id           int32   3+
              broker_epoch        int64   3+  default=-1
            leader_recovery_state int8    1+  default=0
            partition_epoch       int32
    """,
    response="""
        throttle_time_ms          int32
        error_code                int16
        topics                    []
          topic_name              string  0-1
          topic_id                uuid    2+
          partitions              []
            partition_index       int32
            error_code            int16
            leader_id             int32
            leader_epoch          int32
            isr                   []int32
            leader_recovery_state int8    1+  default=0
            partition_epoch       int32
    """,
)  # fmt: skip

APIS = (ALTER_PARTITION,)
