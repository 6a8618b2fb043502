"""Client quotas: DescribeClientQuotas (48), AlterClientQuotas (49).

Facts: Kafka 3.7 message schemas of the same names (KIP-546). An entity is a list of
(entity_type, entity_name) pairs, entity_name null for the default entity of that type; a value
is a float64. Kafka's ``Values`` is ``quota_values`` here (``values`` would shadow a dict
method; the wire form is positional). DescribeClientQuotas
match_type: 0 exact name, 1 default entity, 2 any entity.
"""

from __future__ import annotations

from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.dsl import api

DESCRIBE_CLIENT_QUOTAS = api(
    ApiKey.DESCRIBE_CLIENT_QUOTAS, "0-1", "1+",
    request="""
        components                []
          entity_type             string
          match_type              int8
          match                   string  null
        strict                    bool
    """,
    response="""
        throttle_time_ms          int32
        error_code                int16
        error_message             string  null
        entries                   []      null
          entity                  []
            entity_type           string
            entity_name           string  null
          quota_values            []
            key                   string
            value                 float64
    """,
)  # fmt: skip

ALTER_CLIENT_QUOTAS = api(
    ApiKey.ALTER_CLIENT_QUOTAS, "0-1", "1+",
    request="""
        entries                   []
          entity                  []
            entity_type           string
            entity_name           string  null
          ops                     []
            key                   string
            value                 float64
            remove                bool
        validate_only             bool
    """,
    response="""
        throttle_time_ms          int32
        entries                   []
          error_code              int16
          error_message           string  null
          entity                  []
            entity_type           string
            entity_name           string  null
    """,
)  # fmt: skip

APIS = (DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS)
