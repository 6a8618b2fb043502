"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31): Kafka 3.7's ``*Acls{Request,Response}.json``.

v0-3 each, flexible from v2 (v1 adds the resource pattern type, default LITERAL = 3; v3 only
adds the USER resource type). Codes: resource type 1 ANY, 2 TOPIC, 3 GROUP, 4 CLUSTER,
5 TRANSACTIONAL_ID; pattern type 1 ANY, 2 MATCH, 3 LITERAL, 4 PREFIXED; operation 1 ANY, 2 ALL,
3 READ ... 12 IDEMPOTENT_WRITE; permission 1 ANY, 2 DENY, 3 ALLOW.
"""

from __future__ import annotations

from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.dsl import api

DESCRIBE_ACLS = api(
    ApiKey.DESCRIBE_ACLS, "0-3", "2+",
    request="""
        resource_type_filter      int8
        resource_name_filter      string  null
        pattern_type_filter       int8    1+  default=3
        principal_filter          string  null
        host_filter               string  null
        operation                 int8
        permission_type           int8
    """,
    response="""
        throttle_time_ms          int32
        error_code                int16
        error_message             string  null
        resources                 []
          resource_type           int8
          resource_name           string
          pattern_type            int8    1+  default=3
          acls                    []
            principal             string
            host                  string
            operation             int8
            permission_type       int8
    """,
)  # fmt: skip

CREATE_ACLS = api(
    ApiKey.CREATE_ACLS, "0-3", "2+",
    request="""
        creations                 []
          resource_type           int8
          resource_name           string
          resource_pattern_type   int8    1+  default=3
          principal               string
          host                    string
          operation               int8
          permission_type         int8
    """,
    response="""
        throttle_time_ms          int32
        results                   []
          error_code              int16
          error_message           string  null
    """,
)  # fmt: skip

DELETE_ACLS = api(
    ApiKey.DELETE_ACLS, "0-3", "2+",
    request="""
        filters                   []
          resource_type_filter    int8
          resource_name_filter    string  null
          pattern_type_filter     int8    1+  default=3
          principal_filter        string  null
          host_filter             string  null
          operation               int8
          permission_type         int8
    """,
    response="""
        throttle_time_ms          int32
        filter_results            []
          error_code              int16
          error_message           string  null
          matching_acls           []
            error_code            int16
            error_message         string  null
            resource_type         int8
            resource_name         string
            pattern_type          int8    1+  default=3
            principal             string
            host                  string
            operation             int8
            permission_type       int8
    """,
)  # fmt: skip

APIS = (DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS)
