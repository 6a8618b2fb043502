"""``QuotaEnforcer`` in the ``Dispatcher`` (Kafka documentation §4.9 "Quotas" Enforcement, KIP-219): usage recorded per
group, ``throttle_time_ms`` in the response sent at once, a throttled Fetch without data, the
channel muted, replicas exempt."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from broker.api.dispatch import Dispatcher
from broker.api.quota_enforcement import QuotaEnforcer
from broker.network.connection import ConnectionContext
from broker.network.response import Response
from broker.quota.manager import ClientQuotas, QuotaConfig
from broker.security.listeners import ListenerPolicy
from pyspark_log.wire import ApiKey, decode_response, encode_request

RECORDS = b"r" * 50_000


def fetch_answer(_broker: Any, _request: Any) -> dict[str, Any]:
    partition = {"partition_index": 0, "error_code": 0, "high_watermark": 1, "records": RECORDS}
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [{"topic": "t", "partitions": [partition]}],
    }


def produce_answer(_broker: Any, _request: Any) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "responses": [{"name": "t", "partition_responses": []}]}


def busy_metadata(_broker: Any, _request: Any) -> dict[str, Any]:
    end = time.perf_counter() + 0.005  # 5 ms of the event loop
    while time.perf_counter() < end:
        pass
    return {"throttle_time_ms": 0, "brokers": [], "topics": []}


def setup(table: dict[Any, dict[str, float]]) -> tuple[Dispatcher, ClientQuotas]:
    quotas = ClientQuotas(lambda: table, QuotaConfig(3, 1000))
    handlers = {ApiKey.FETCH: fetch_answer, ApiKey.PRODUCE: produce_answer, ApiKey.METADATA: busy_metadata}
    broker = SimpleNamespace(api_versions=[], listener_policy=ListenerPolicy())
    return Dispatcher(broker, handlers, QuotaEnforcer(quotas, lambda: 1_000_000)), quotas  # type: ignore[arg-type]


def call(d: Dispatcher, api_key: int, version: int, body: dict[str, Any], client_id: str = "c") -> tuple[Any, Any]:
    ctx = ConnectionContext("127.0.0.1:1", "PLAINTEXT", 1)
    response = d.handle(encode_request(api_key, version, 7, client_id, body)[4:], ctx)
    assert isinstance(response, Response)
    return decode_response(api_key, version, response.to_bytes())[1], ctx


FETCH = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 10_000_000, "topics": []}


def test_kafka_doc_4_9_a_throttled_fetch_is_answered_at_once_without_data_and_the_channel_is_muted():
    """a throttled fetch answer carries no data."""
    d, quotas = setup({(("client-id", "c"),): {"consumer_byte_rate": 1000.0}})
    body, ctx = call(d, ApiKey.FETCH, 12, FETCH)
    assert body.throttle_time_ms > 0
    assert body.responses == []
    assert ctx.muted_until > time.monotonic()
    assert quotas.fetch.metrics(1_000_000)[0].usage_rate == 0  # a throttled Fetch's bytes do not count


def test_an_unthrottled_client_gets_its_data_and_no_delay():
    d, _ = setup({(("client-id", "c"),): {"consumer_byte_rate": 1000.0}})
    body, ctx = call(d, ApiKey.FETCH, 12, FETCH, client_id="other")
    assert body.throttle_time_ms == 0
    assert bytes(body.responses[0].partitions[0].records) == RECORDS
    assert ctx.muted_until == 0


def test_a_follower_fetch_is_exempt():
    d, _ = setup({(("client-id", None),): {"consumer_byte_rate": 1.0}})
    body, _ = call(d, ApiKey.FETCH, 12, {**FETCH, "replica_id": 2})
    assert body.throttle_time_ms == 0


def test_produce_keeps_its_answer_and_carries_the_throttle_time():
    d, quotas = setup({(("client-id", "c"),): {"producer_byte_rate": 10.0}})
    produce = {"acks": 1, "timeout_ms": 1000, "topic_data": []}
    body, ctx = call(d, ApiKey.PRODUCE, 9, produce)
    assert body.throttle_time_ms > 0
    assert body.responses[0].name == "t"
    assert ctx.muted_until > 0
    assert quotas.produce.metrics(1_000_000)[0].usage_rate > 0


def test_request_percentage_measures_event_loop_time_and_bounds_the_delay():
    """request_percentage: the share of the one event loop's time a group may use (Kafka: of one
    I/O or network thread); the delay is bounded at one window, as Kafka's request quota."""
    d, _ = setup({(("client-id", "c"),): {"request_percentage": 0.01}})
    body, _ = call(d, ApiKey.METADATA, 12, {"topics": []})
    assert body.throttle_time_ms == 1000


def test_fetch_max_bytes_is_capped_at_what_the_quota_lets_through_after_a_quiet_period():
    """Kafka's getMaxValueInQuotaWindow: quota × (quota.window.num - 1) windows (3 windows: 2 s)."""
    seen: list[int] = []

    def recording(_broker: Any, request: Any) -> dict[str, Any]:
        seen.append(request.body.max_bytes)
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": []}

    quotas = ClientQuotas(lambda: {(("client-id", "c"),): {"consumer_byte_rate": 1000.0}}, QuotaConfig(3, 1000))
    d = Dispatcher(
        SimpleNamespace(api_versions=[], listener_policy=ListenerPolicy()),
        {ApiKey.FETCH: recording},
        QuotaEnforcer(quotas, lambda: 0),
    )  # type: ignore[arg-type]
    call(d, ApiKey.FETCH, 12, FETCH)
    assert seen == [2000]


def test_user_quotas_match_the_connections_principal_once_there_is_one():
    """Until authentication exists every connection is ``ANONYMOUS``; a principal set on the
    connection (``User:alice``) selects the user entities of the precedence list."""
    d, _ = setup({(("user", "alice"),): {"producer_byte_rate": 10.0}})
    produce = {"acks": 1, "timeout_ms": 1000, "topic_data": []}
    body, _ = call(d, ApiKey.PRODUCE, 9, produce)
    assert body.throttle_time_ms == 0  # ANONYMOUS: alice's quota does not apply
    ctx = ConnectionContext("127.0.0.1:1", "PLAINTEXT", 2, attributes={"principal": "User:alice"})
    response = d.handle(encode_request(ApiKey.PRODUCE, 9, 7, "c", produce)[4:], ctx)
    assert isinstance(response, Response)
    assert decode_response(ApiKey.PRODUCE, 9, response.to_bytes())[1].throttle_time_ms > 0


def test_kip599_a_handlers_own_throttle_time_is_kept_and_mutes_the_channel():
    """KIP-599: a CreateTopics answer carries the controller mutation quota's throttle time; the
    enforcer keeps it (the largest of it and the request quota's) and mutes the channel for it."""
    quotas = ClientQuotas(dict, QuotaConfig(3, 1000))

    def mutation_throttled(_broker: Any, _request: Any) -> dict[str, Any]:
        return {"throttle_time_ms": 4000, "topics": []}

    broker = SimpleNamespace(api_versions=[], listener_policy=ListenerPolicy())
    handlers = {ApiKey.CREATE_TOPICS: mutation_throttled}
    d = Dispatcher(broker, handlers, QuotaEnforcer(quotas, lambda: 1_000_000))  # type: ignore[arg-type]
    body, ctx = call(d, ApiKey.CREATE_TOPICS, 7, {"topics": [], "timeout_ms": 1000, "validate_only": False})
    assert body.throttle_time_ms == 4000
    assert ctx.muted_until > time.monotonic() + 3
