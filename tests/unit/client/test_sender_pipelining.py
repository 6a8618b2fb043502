"""The sender keeps requests in flight while batches are sendable (Kafka's ``Sender``: "if some
partitions are already ready to be sent, the select time would be 0"): one wake-up with several
full batches queued fills ``max.in.flight.requests.per.connection`` requests at once, instead of
one request per wake-up (a drain takes at most one batch per partition)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from pyspark_log.client.accumulator import RecordAccumulator
from pyspark_log.client.backoff import ExponentialBackoff
from pyspark_log.client.clock import ManualClock
from pyspark_log.client.sender import Sender
from pyspark_log.client.types import TopicPartition
from pyspark_log.records.batch import ProducerRecord
from pyspark_log.wire import Message

pytestmark = pytest.mark.unit

TP = TopicPartition("t", 0)


class Leaders:
    def leader_for(self, tp: TopicPartition) -> int:
        return 0


class HeldConnection:
    """Takes Produce requests and answers none until ``release``."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.answer = asyncio.Event()

    async def request(self, api_key: int, body: dict[str, Any], **_: Any) -> Message:
        self.requests.append(body)
        await self.answer.wait()
        (topic,) = body["topic_data"]
        (part,) = topic["partition_data"]
        return Message(
            responses=[
                Message(
                    name=topic["name"],
                    partition_responses=[
                        Message(
                            index=part["index"],
                            error_code=0,
                            base_offset=0,
                            log_append_time_ms=-1,
                            log_start_offset=0,
                            record_errors=[],
                            error_message=None,
                        )
                    ],
                )
            ],
            throttle_time_ms=0,
        )


class Cluster:
    def __init__(self, conn: HeldConnection) -> None:
        self.metadata = Leaders()
        self.conn = conn

    def add_listener(self, fn: Any) -> None:
        pass

    def connection_if_ready(self, node: int) -> HeldConnection:
        return self.conn

    def request_update(self) -> None:
        pass


def test_one_wakeup_fills_every_in_flight_slot(run: Callable[..., Any]) -> None:
    async def scenario() -> None:
        conn = HeldConnection()
        acc = RecordAccumulator(batch_size_bytes=200, linger_ms=10_000, retry_backoff=ExponentialBackoff(1, 1))
        for i in range(8):  # 8 batches of one 150-byte record each
            acc.append(TP, ProducerRecord(None, b"%d" % i * 150, 0), None, 0.0)
        sender = Sender(
            cluster=Cluster(conn),  # type: ignore[arg-type]
            accumulator=acc,
            clock=ManualClock(),
            acks=1,
            retries=0,
            request_timeout_ms=1000,
            delivery_timeout_ms=60_000,
            max_request_bytes=200,  # one batch per request
            max_in_flight=5,
            on_fatal=lambda exc: None,
        )
        sender.start()
        try:
            sender.wakeup()
            for _ in range(200):  # a bounded number of loop turns; no response has come
                if len(conn.requests) >= 5:
                    break
                await asyncio.sleep(0)
            assert len(conn.requests) == 5
            assert sender.in_flight_requests == 5
            conn.answer.set()
            for _ in range(400):
                if len(conn.requests) == 8 and not acc.incomplete():
                    break
                await asyncio.sleep(0)
            assert len(conn.requests) == 8  # the last 3 once slots freed (their batches had successors)
            assert not acc.incomplete()
        finally:
            await sender.stop()

    run(scenario())
