"""``Dispatcher``: header decode, version checks, handler call, response encode (docs/architecture.md ("Kafka
error codes for bad input, assertions for invariants"): a client never sees a traceback, the broker never dies
on bad input)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from broker.api.dispatch import Dispatcher
from broker.network.connection import CloseConnection, ConnectionContext
from broker.network.response import Response
from broker.security.listeners import ListenerPolicy
from pyspark_log.wire import ApiKey, decode_response, encode_request
from pyspark_log.wire.errors import ErrorCode
from pyspark_log.wire.versions import SUPPORTED_VERSIONS

CTX = ConnectionContext("127.0.0.1:5000", "PLAINTEXT", 1)


def topics_answer(_broker: Any, _request: Any) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "topics": []}


def failing(_broker: Any, _request: Any) -> dict[str, Any]:
    raise RuntimeError("a bug")


async def later(_broker: Any, _request: Any) -> dict[str, Any]:
    await asyncio.sleep(0)
    return {"throttle_time_ms": 0, "topics": []}


def dispatcher(policy: ListenerPolicy | None = None, **handlers: Any) -> Dispatcher:
    table = {ApiKey.API_VERSIONS: lambda b, _r: {"error_code": 0, "api_keys": b.api_versions}}
    table.update({ApiKey[name]: handler for name, handler in handlers.items()})
    broker = SimpleNamespace(api_versions=[], listener_policy=policy or ListenerPolicy())
    return Dispatcher(broker, table)  # type: ignore[arg-type]


def frame(api_key: int, version: int, body: dict[str, Any], correlation_id: int = 7) -> bytes:
    return encode_request(api_key, version, correlation_id, "test", body)[4:]


def answer(response: Response, api_key: int, version: int) -> Any:
    correlation_id, body = decode_response(api_key, version, response.to_bytes())
    assert correlation_id == 7
    return body


def test_api_versions_lists_exactly_the_served_apis_at_kafka_3_7_ranges():
    d = dispatcher(DELETE_TOPICS=topics_answer)
    body = answer(d.handle(frame(ApiKey.API_VERSIONS, 3, {}), CTX), ApiKey.API_VERSIONS, 3)
    served = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    assert served == {
        ApiKey.API_VERSIONS: SUPPORTED_VERSIONS[ApiKey.API_VERSIONS],
        ApiKey.DELETE_TOPICS: SUPPORTED_VERSIONS[ApiKey.DELETE_TOPICS],
    }


def test_an_unknown_api_versions_version_gets_the_kip_511_fallback():
    raw = bytearray(frame(ApiKey.API_VERSIONS, 3, {}))
    raw[2:4] = (99).to_bytes(2, "big")  # api_version 99
    body = answer(dispatcher().handle(bytes(raw), CTX), ApiKey.API_VERSIONS, 0)
    assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [k.api_key for k in body.api_keys] == [ApiKey.API_VERSIONS]


@pytest.mark.parametrize(
    "data",
    [
        frame(ApiKey.DELETE_TOPICS, 4, {"topic_names": [], "timeout_ms": 1}),  # not served here
        frame(ApiKey.METADATA, 9, {"topics": []}),  # not served either
        b"\x00\x14\x00",  # cut short inside the header
        frame(ApiKey.API_VERSIONS, 3, {})[:-3],  # body cut short
    ],
)
def test_requests_that_cannot_be_answered_close_the_connection(data: bytes):
    with pytest.raises(CloseConnection):
        dispatcher().handle(data, CTX)


def test_an_unsupported_version_of_a_served_api_closes_the_connection():
    raw = bytearray(frame(ApiKey.DELETE_TOPICS, 4, {"topic_names": [], "timeout_ms": 1}))
    raw[2:4] = (40).to_bytes(2, "big")
    with pytest.raises(CloseConnection):
        dispatcher(DELETE_TOPICS=topics_answer).handle(bytes(raw), CTX)


def test_a_failing_handler_closes_only_its_connection():
    d = dispatcher(DELETE_TOPICS=failing, CREATE_TOPICS=topics_answer)
    with pytest.raises(CloseConnection, match="internal error"):
        d.handle(frame(ApiKey.DELETE_TOPICS, 4, {"topic_names": [], "timeout_ms": 1}), CTX)
    body = {"topics": [], "timeout_ms": 1, "validate_only": False}
    assert answer(d.handle(frame(ApiKey.CREATE_TOPICS, 5, body), CTX), ApiKey.CREATE_TOPICS, 5).topics == []


def test_an_awaitable_handler_is_answered_when_it_completes():
    d = dispatcher(DELETE_TOPICS=later)
    pending = d.handle(frame(ApiKey.DELETE_TOPICS, 4, {"topic_names": [], "timeout_ms": 1}), CTX)
    assert not isinstance(pending, Response)
    response = asyncio.run(pending)  # type: ignore[arg-type]
    assert answer(response, ApiKey.DELETE_TOPICS, 4).responses == []


def test_a_handler_that_returns_none_sends_nothing():
    d = dispatcher(DELETE_TOPICS=lambda _b, _r: None)
    assert d.handle(frame(ApiKey.DELETE_TOPICS, 4, {"topic_names": [], "timeout_ms": 1}), CTX) is None


def test_a_controller_only_request_on_a_client_listener_closes_the_connection():
    """Issue #15: with a controller listener, Vote is served there only (KIP-631)."""
    vote = {
        "cluster_id": "c",
        "topics": [
            {
                "topic_name": "__cluster_metadata",
                "partitions": [
                    {
                        "partition_index": 0,
                        "candidate_epoch": 9,
                        "candidate_id": 2,
                        "last_offset_epoch": 0,
                        "last_offset": 0,
                    }
                ],
            }
        ],
    }
    d = dispatcher(ListenerPolicy(frozenset({"CONTROLLER"})), VOTE=topics_answer)
    with pytest.raises(CloseConnection, match="only on the controller listener"):
        d.handle(frame(ApiKey.VOTE, 0, vote), CTX)
    served = d.handle(frame(ApiKey.VOTE, 0, vote), ConnectionContext("127.0.0.1:5001", "CONTROLLER", 2))
    assert served is not None
