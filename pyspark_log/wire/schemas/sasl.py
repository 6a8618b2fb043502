"""SaslHandshake (17) and SaslAuthenticate (36): SASL authentication framed as Kafka requests.

Facts: Kafka 3.7 ``SaslHandshakeRequest/Response.json`` (v1, KIP-152: the tokens that follow go in
SaslAuthenticate requests instead of raw frames; never flexible) and
``SaslAuthenticateRequest/Response.json`` (KIP-152; v1 adds ``session_lifetime_ms``, KIP-368;
v2 is the first flexible version).
"""

from __future__ import annotations

from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.dsl import api

SASL_HANDSHAKE = api(
    ApiKey.SASL_HANDSHAKE, "0-1", "none",
    request="""
        mechanism                 string
    """,
    response="""
        error_code                int16
        mechanisms                []string
    """,
)  # fmt: skip

SASL_AUTHENTICATE = api(
    ApiKey.SASL_AUTHENTICATE, "0-2", "2+",
    request="""
        auth_bytes                bytes
    """,
    response="""
        error_code                int16
        error_message             string  null
        auth_bytes                bytes
        session_lifetime_ms       int64   1+  default=0
    """,
)  # fmt: skip


# DescribeUserScramCredentials (50) / AlterUserScramCredentials (51), KIP-554; Kafka 3.7's
# ``*UserScramCredentials{Request,Response}.json``: v0 only, flexible. Mechanism ids: 1
# SCRAM-SHA-256, 2 SCRAM-SHA-512.
DESCRIBE_USER_SCRAM_CREDENTIALS = api(
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, "0", "0+",
    request="""
        users                     []      null
          name                    string
    """,
    response="""
        throttle_time_ms          int32
        error_code                int16
        error_message             string  null
        results                   []
          user                    string
          error_code              int16
          error_message           string  null
          credential_infos        []
            mechanism             int8
            iterations            int32
    """,
)  # fmt: skip

ALTER_USER_SCRAM_CREDENTIALS = api(
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "0", "0+",
    request="""
        deletions                 []
          name                    string
          mechanism               int8
        upsertions                []
          name                    string
          mechanism               int8
          iterations              int32
          salt                    bytes
          salted_password         bytes
    """,
    response="""
        throttle_time_ms          int32
        results                   []
          user                    string
          error_code              int16
          error_message           string  null
    """,
)  # fmt: skip

APIS = (SASL_HANDSHAKE, SASL_AUTHENTICATE, DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS)
