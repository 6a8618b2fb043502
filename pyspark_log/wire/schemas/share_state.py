"""KIP-932's persister RPCs, between a share-partition's leader (or the group coordinator) and the
share coordinator that leads the ``__share_group_state`` partition of the share-partition:
InitializeShareGroupState (83), ReadShareGroupState (84), WriteShareGroupState (85),
DeleteShareGroupState (86) and ReadShareGroupStateSummary (87), v0 only and flexible, as Apache
Kafka 4.1.1 serves them.

Facts: Kafka 4.1.1's message schemas of the same names (checked field by field against the
``SCHEMAS`` of the generated ``*RequestData``/``*ResponseData`` classes in
``kafka-clients-4.1.1.jar``). ``state_batches`` carry Kafka's ``RecordState`` ids (0 available,
2 acknowledged, 4 archived) and delivery counts.
"""

from __future__ import annotations

from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.dsl import api

_STRUCTS = {
    "StateBatch": """
        first_offset              int64
        last_offset               int64
        delivery_state            int8
        delivery_count            int16
    """,
    "PartitionResult": """
        partition                 int32
        error_code                int16
        error_message             string  null  default=null
    """,
}
_RESULTS = """
        results                   []
          topic_id                uuid
          partitions              []PartitionResult
"""

INITIALIZE_SHARE_GROUP_STATE = api(
    ApiKey.INITIALIZE_SHARE_GROUP_STATE, "0", "0+",
    structs=_STRUCTS,
    request="""
        group_id                  string
        topics                    []
          topic_id                uuid
          partitions              []
            partition             int32
            state_epoch           int32
            start_offset          int64
    """,
    response=_RESULTS,
)  # fmt: skip

READ_SHARE_GROUP_STATE = api(
    ApiKey.READ_SHARE_GROUP_STATE, "0", "0+",
    structs=_STRUCTS,
    request="""
        group_id                  string
        topics                    []
          topic_id                uuid
          partitions              []
            partition             int32
            leader_epoch          int32
    """,
    response="""
        results                   []
          topic_id                uuid
          partitions              []
            partition             int32
            error_code            int16
            error_message         string  null  default=null
            state_epoch           int32
            start_offset          int64
            state_batches         []StateBatch
    """,
)  # fmt: skip

WRITE_SHARE_GROUP_STATE = api(
    ApiKey.WRITE_SHARE_GROUP_STATE, "0", "0+",
    structs=_STRUCTS,
    request="""
        group_id                  string
        topics                    []
          topic_id                uuid
          partitions              []
            partition             int32
            state_epoch           int32
            leader_epoch          int32
            start_offset          int64
            state_batches         []StateBatch
    """,
    response=_RESULTS,
)  # fmt: skip

DELETE_SHARE_GROUP_STATE = api(
    ApiKey.DELETE_SHARE_GROUP_STATE, "0", "0+",
    structs=_STRUCTS,
    request="""
        group_id                  string
        topics                    []
          topic_id                uuid
          partitions              []
            partition             int32
    """,
    response=_RESULTS,
)  # fmt: skip

READ_SHARE_GROUP_STATE_SUMMARY = api(
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, "0", "0+",
    structs=_STRUCTS,
    request="""
        group_id                  string
        topics                    []
          topic_id                uuid
          partitions              []
            partition             int32
            leader_epoch          int32
    """,
    response="""
        results                   []
          topic_id                uuid
          partitions              []
            partition             int32
            error_code            int16
            error_message         string  null  default=null
            state_epoch           int32
            leader_epoch          int32
            start_offset          int64
    """,
)  # fmt: skip

APIS = (
    INITIALIZE_SHARE_GROUP_STATE, READ_SHARE_GROUP_STATE, WRITE_SHARE_GROUP_STATE, DELETE_SHARE_GROUP_STATE,
    READ_SHARE_GROUP_STATE_SUMMARY,
)  # fmt: skip
