"""The ElectLeaders handler (``broker.api.elect_leaders``): per-version request and response
shapes around ``MetadataController.elect_leaders``, and controller failures as errors."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from broker.api.context import Request
from broker.api.elect_leaders import handle_elect_leaders
from broker.controller.errors import MetadataError
from broker.controller.partition_changes import ElectionResult, ElectionType
from broker.network.connection import ConnectionContext
from pyspark_log.wire import ApiKey
from pyspark_log.wire.errors import ErrorCode
from pyspark_log.wire.headers import RequestHeader
from pyspark_log.wire.message import Message


class FakeController:
    def __init__(self, fail: int | None = None) -> None:
        self.calls: list[tuple[ElectionType, Any]] = []
        self.fail = fail

    async def elect_leaders(self, election_type, partitions):
        self.calls.append((election_type, partitions))
        if self.fail is not None:
            raise MetadataError(self.fail, "no active controller")
        return {key: ElectionResult(ErrorCode.NONE) for key in partitions or [("t", 0)]}


def call(controller: FakeController, version: int, body: dict[str, Any]) -> dict[str, Any]:
    header = RequestHeader(ApiKey.ELECT_LEADERS, version, 1, "c")
    request = Request(header, Message(body), ConnectionContext("p", "L", 1))
    return asyncio.run(handle_elect_leaders(SimpleNamespace(controller=controller), request))


def named(*pairs: tuple[str, list[int]]) -> list[Message]:
    return [Message(topic=t, partitions=ps) for t, ps in pairs]


def test_named_partitions_are_elected_and_grouped_by_topic():
    fake = FakeController()
    wanted = named(("t", [0, 1, 0]), ("u", [2]))
    answer = call(fake, 2, {"election_type": 1, "topic_partitions": wanted, "timeout_ms": 1})
    assert fake.calls == [(ElectionType.UNCLEAN, [("t", 0), ("t", 1), ("u", 2)])]
    assert answer["error_code"] == 0
    results = answer["replica_election_results"]
    assert [(r["topic"], [p["partition_id"] for p in r["partition_result"]]) for r in results] == [
        ("t", [0, 1]),
        ("u", [2]),
    ]


def test_v0_is_always_preferred_and_null_means_all():
    fake = FakeController()
    call(fake, 0, {"election_type": 1, "topic_partitions": None, "timeout_ms": 1})
    assert fake.calls == [(ElectionType.PREFERRED, None)]


def test_an_unknown_election_type_is_invalid_request():
    fake = FakeController()
    answer = call(fake, 1, {"election_type": 7, "topic_partitions": named(("t", [0])), "timeout_ms": 1})
    assert fake.calls == []
    assert answer["replica_election_results"][0]["partition_result"][0]["error_code"] == ErrorCode.INVALID_REQUEST


def test_controller_failure_is_top_level_from_v1_and_per_partition_in_v0():
    answer = call(FakeController(ErrorCode.NOT_CONTROLLER), 2, {"election_type": 0, "topic_partitions": None})
    assert (answer["error_code"], answer["replica_election_results"]) == (ErrorCode.NOT_CONTROLLER, [])
    answer = call(FakeController(ErrorCode.REQUEST_TIMED_OUT), 0, {"topic_partitions": named(("t", [3]))})
    assert answer["replica_election_results"][0]["partition_result"][0]["error_code"] == ErrorCode.REQUEST_TIMED_OUT
