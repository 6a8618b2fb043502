"""KRaft broker lifecycle RPCs: BrokerRegistration (62) and BrokerHeartbeat (63) (KIP-631).

A broker registers with the active controller once per process life (a new incarnation id) and
then heartbeats with the broker epoch it was given; the controller fences a broker whose
heartbeats stop. Brokers send these to the controllers only; clients never see them.

Facts: Kafka 3.7 message schemas of the same names. pylog declares version 0 of each (Kafka 3.7
has BrokerRegistration 0-3 adding the ZK-migration flag, log dirs and the previous broker epoch,
and BrokerHeartbeat 0-1 adding offline log dirs, none of which pylog has).
"""

from __future__ import annotations

from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.dsl import api

BROKER_REGISTRATION = api(
    ApiKey.BROKER_REGISTRATION, "0", "0+",
    request="""
        broker_id                 int32
        cluster_id                string
        incarnation_id            uuid
        listeners                 []
          name                    string
          host                    string
          port                    uint16
          security_protocol       int16
        features                  []
          name                    string
          min_supported_version   int16
          max_supported_version   int16
        rack                      string  null
    """,
    response="""
        throttle_time_ms          int32
        error_code                int16
        broker_epoch              int64   default=-1
    """,
)  # fmt: skip

BROKER_HEARTBEAT = api(
    ApiKey.BROKER_HEARTBEAT, "0", "0+",
    request="""
        broker_id                 int32
        broker_epoch              int64   default=-1
        current_metadata_offset   int64
        want_fence                bool
        want_shut_down            bool
    """,
    response="""
        throttle_time_ms          int32
        error_code                int16
        is_caught_up              bool    default=false
        is_fenced                 bool    default=true
        should_shut_down          bool
    """,
)  # fmt: skip

# UnregisterBroker (64): Kafka 4.1's ``UnregisterBrokerRequest/Response.json`` (KIP-631), v0 only, flexible.
UNREGISTER_BROKER = api(
    ApiKey.UNREGISTER_BROKER, "0", "0+",
    request="""
        broker_id                        int32
    """,
    response="""
        throttle_time_ms                 int32
        error_code                       int16
        error_message                    string  null
    """,
)  # fmt: skip

APIS = (BROKER_REGISTRATION, BROKER_HEARTBEAT, UNREGISTER_BROKER)
