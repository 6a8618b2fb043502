"""Fetch long-poll (``broker.api.fetch``): an append between the handler's first read and the
start of its wait must end the wait.

Kafka documentation §4.3 "Efficiency" / Kafka ``DelayedFetch``: a fetch with fewer than ``min_bytes`` available "waits
until enough data arrives or max_wait_ms passes". ``handle_fetch`` reads once synchronously and
returns a coroutine for the wait, which the transport starts on a later event-loop iteration;
an append in between wakes nobody (no waiter is registered yet), so the coroutine must read
again before it waits. No clock is involved: the test checks that the long poll finishes within
one event-loop step of being started, which it can only do without waiting.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any

from broker.api.context import Request
from broker.api.fetch import handle_fetch
from broker.network.connection import ConnectionContext
from pyspark_log.wire import ApiKey, decode_request, encode_request
from tests.waiting import wait_until_async

TOPIC = "t"


class FakeReplicas:
    """One partition in memory: ``read`` returns what was appended after ``offset``;
    ``wait_for_data`` registers a waiter that ``append`` wakes (as ``ReplicaManager`` does)."""

    def __init__(self) -> None:
        self.records: list[bytes] = []
        self.waiters: list[asyncio.Future[None]] = []
        self.waits = 0

    def append(self, data: bytes) -> None:
        self.records.append(data)
        for waiter in self.waiters:
            if not waiter.done():
                waiter.set_result(None)
        self.waiters.clear()

    def read(self, topic: str, partition: int, offset: int, max_bytes: int, **_: Any) -> Any:
        data = b"".join(self.records[offset:])
        end = len(self.records)
        return SimpleNamespace(
            records=data, high_watermark=end, last_stable_offset=end, log_start_offset=0, diverging_epoch=None
        )

    async def wait_for_data(
        self, partitions: Iterable[tuple[str, int]], max_wait_ms: int, *, follower: bool = False
    ) -> None:
        assert not follower  # these requests come from a consumer
        self.waits += 1
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiters.append(waiter)
        try:
            await asyncio.wait_for(waiter, max_wait_ms / 1000)
        except TimeoutError:
            pass


def _fetch_request(max_wait_ms: int) -> Request:
    partition = {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
    body = {"max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20, "topics": [
        {"topic": TOPIC, "partitions": [partition]}]}  # fmt: skip
    header, decoded = decode_request(encode_request(ApiKey.FETCH, 12, 1, "test", body)[4:])
    return Request(header, decoded, ConnectionContext("peer", "PLAINTEXT", 1))


def test_append_before_the_long_poll_starts_is_not_slept_through() -> None:
    replicas = FakeReplicas()
    broker: Any = SimpleNamespace(
        replicas=replicas, image=lambda: SimpleNamespace(topic_ids={}), raft=None, replication_throttles=None
    )

    async def scenario() -> tuple[bool, Any]:
        pending = handle_fetch(broker, _fetch_request(max_wait_ms=60_000))
        assert inspect.isawaitable(pending), "nothing to read yet: the handler must long-poll"
        replicas.append(b"batch")  # lands before the transport starts the long poll
        task = asyncio.ensure_future(pending)
        await asyncio.sleep(0)  # one step of the task
        done = task.done()
        task.cancel()
        return done, task.result() if done else None

    done, body = asyncio.run(scenario())
    assert done, "the long poll waited although data had arrived before it started"
    assert replicas.waits == 0
    assert bytes(body["responses"][0]["partitions"][0]["records"]) == b"batch"


def test_long_poll_still_waits_when_nothing_arrives_and_wakes_on_append() -> None:
    replicas = FakeReplicas()
    broker: Any = SimpleNamespace(
        replicas=replicas, image=lambda: SimpleNamespace(topic_ids={}), raft=None, replication_throttles=None
    )

    async def scenario() -> Any:
        task = asyncio.ensure_future(handle_fetch(broker, _fetch_request(max_wait_ms=60_000)))
        await wait_until_async(lambda: replicas.waits >= 1, what="the fetch to park")
        assert not task.done()
        assert replicas.waits == 1
        replicas.append(b"later")
        return await task

    body = asyncio.run(scenario())
    assert bytes(body["responses"][0]["partitions"][0]["records"]) == b"later"
