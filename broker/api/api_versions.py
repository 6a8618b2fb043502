"""ApiVersions (18): the API keys and version ranges this broker serves.

The ranges are those of one real Kafka release (``pyspark_log.wire.versions``), limited to the
APIs this broker has handlers for; kafka-python infers the broker version from them. A connection
on a listener that is not the controller listener is not told about the controller-only APIs
(``broker.security.listeners``). An unsupported ApiVersions version is answered by the dispatcher
(KIP-511 fallback).
"""

from __future__ import annotations

from typing import Any

from broker.api.context import Broker, Request
from pyspark_log.wire.api_keys import ApiKey

# not advertised when ``consumer`` is left out of group.coordinator.rebalance.protocols (as Kafka)
KIP848_APIS = frozenset({ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE})


def handle_api_versions(broker: Broker, request: Request) -> Any:
    entries = broker.listener_policy.api_versions(request.connection.listener, broker.api_versions)
    consumer = broker.groups.consumer if broker.groups is not None else None
    if consumer is not None and not consumer.config.enabled:  # group.coordinator.rebalance.protocols=classic
        entries = [e for e in entries if e["api_key"] not in KIP848_APIS]
    return {"error_code": 0, "api_keys": entries, "throttle_time_ms": 0}
