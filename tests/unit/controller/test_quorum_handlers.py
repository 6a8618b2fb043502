"""The handlers a quorum node adds (``broker.api.broker_registration``): a forwarded admin request
runs with ``forwarded_request`` set (so it makes at most one hop), others run as before; and
BrokerRegistration / BrokerHeartbeat answer from the QuorumController."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

from broker.api.broker_registration import quorum_handlers
from broker.api.context import Request
from broker.controller.forwarding import FORWARD_CLIENT_ID, forwarded_request
from broker.network.connection import ConnectionContext
from pyspark_log.wire import ApiKey
from pyspark_log.wire.errors import ErrorCode
from pyspark_log.wire.headers import RequestHeader
from pyspark_log.wire.message import Message
from tests.unit.controller.fake_quorum import FakeQuorum, controller


def make_request(api_key: int, client_id: str | None, body: dict[str, Any] | None = None) -> Request:
    return Request(RequestHeader(api_key, 0, 1, client_id), Message(body or {}), ConnectionContext("peer", "L", 1))


def test_forwarded_admin_requests_run_marked_and_others_unmarked():
    seen: list[bool] = []

    def create_topics(broker, request):
        seen.append(forwarded_request.get())
        return {"ok": True}

    handlers = quorum_handlers({ApiKey.CREATE_TOPICS: create_topics})
    assert handlers[ApiKey.CREATE_TOPICS](None, make_request(ApiKey.CREATE_TOPICS, "rdkafka")) == {"ok": True}
    result = handlers[ApiKey.CREATE_TOPICS](None, make_request(ApiKey.CREATE_TOPICS, FORWARD_CLIENT_ID))
    assert asyncio.run(result) == {"ok": True}
    assert seen == [False, True]
    assert not forwarded_request.get()
    assert {ApiKey.BROKER_REGISTRATION, ApiKey.BROKER_HEARTBEAT} <= set(handlers)


def test_registration_and_heartbeat_answer_from_the_controller():
    async def run():
        quorum = FakeQuorum()
        quorum.elect(1)
        broker = SimpleNamespace(controller=controller(quorum, 1, broker=False))
        handlers = quorum_handlers({})
        body = {
            "broker_id": 4,
            "cluster_id": "cid",
            "incarnation_id": uuid.uuid4(),
            "listeners": [Message(name="PLAINTEXT", host="127.0.0.1", port=9004, security_protocol=0)],
            "features": [],
            "rack": None,
        }
        answer = await handlers[ApiKey.BROKER_REGISTRATION](broker, make_request(62, "b", body))
        assert answer["error_code"] == 0
        epoch = answer["broker_epoch"]
        assert broker.controller.image().brokers[4].port == 9004
        beat = {"broker_id": 4, "broker_epoch": epoch, "current_metadata_offset": 0, "want_fence": False}
        answer = await handlers[ApiKey.BROKER_HEARTBEAT](
            broker, make_request(63, "b", {**beat, "want_shut_down": False})
        )
        assert (answer["error_code"], answer["is_fenced"], answer["should_shut_down"]) == (0, False, False)
        stale = {**beat, "broker_epoch": epoch - 1, "want_shut_down": False}
        answer = await handlers[ApiKey.BROKER_HEARTBEAT](broker, make_request(63, "b", stale))
        assert answer["error_code"] == ErrorCode.STALE_BROKER_EPOCH
        other = {**body, "cluster_id": "other"}
        answer = await handlers[ApiKey.BROKER_REGISTRATION](broker, make_request(62, "b", other))
        assert answer["error_code"] == ErrorCode.INCONSISTENT_CLUSTER_ID
        quorum.elect(2)
        answer = await handlers[ApiKey.BROKER_REGISTRATION](broker, make_request(62, "b", body))
        assert answer["error_code"] == ErrorCode.NOT_CONTROLLER

    asyncio.run(run())
