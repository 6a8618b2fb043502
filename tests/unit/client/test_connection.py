"""BrokerConnection: framing, pipelining, KIP-511 ApiVersions fallback, failure of all waiters."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from pyspark_log.client.connection import BrokerConnection, client_range
from pyspark_log.client.errors import BrokerConnectionError, KafkaTimeoutError, ProtocolError, UnsupportedFeatureError
from pyspark_log.wire import ApiKey
from tests.waiting import wait_until_async

from .fake_broker import FakeCluster

Run = Callable[[Any], Any]


def conn_to(fake: FakeCluster, node: int = 0, **kw: Any) -> BrokerConnection:
    return BrokerConnection("fake", 9092 + node, node_id=node, client_id="test", connector=fake.connector, **kw)


def test_negotiates_the_highest_common_version(run: Run) -> None:
    fake = FakeCluster()
    fake.api_versions[ApiKey.METADATA] = (0, 7)

    async def main() -> None:
        c = conn_to(fake)
        await c.connect(1000)
        assert c.ready
        assert c.version_for(ApiKey.METADATA) == 7
        assert c.version_for(ApiKey.FETCH) == 12  # the client stops before topic ids
        assert c.version_for(ApiKey.PRODUCE) == client_range(ApiKey.PRODUCE)[1]  # type: ignore[index]
        assert not c.supports(ApiKey.INIT_PRODUCER_ID)
        with pytest.raises(UnsupportedFeatureError, match="InitProducerId"):
            c.version_for(ApiKey.INIT_PRODUCER_ID)
        resp = await c.request(ApiKey.METADATA, {"topics": []})
        assert resp is not None
        assert resp.cluster_id == "fake-cluster"
        assert fake.requests[-1][1] == 7
        c.close()

    run(main())


def test_kip511_retries_api_versions_with_the_brokers_version(run: Run) -> None:
    fake = FakeCluster()
    fake.max_api_versions_version = 1

    async def main() -> None:
        c = conn_to(fake)
        await c.connect(1000)
        assert c.ready
        api_versions_requests = [v for k, v, _ in fake.requests if k == ApiKey.API_VERSIONS]
        assert api_versions_requests == [1]  # v3 was refused before decoding, then v1 answered
        c.close()

    run(main())


def test_pipelined_requests_get_their_own_responses(run: Run) -> None:
    fake = FakeCluster(topics={"a": 1, "b": 2})

    async def main() -> None:
        c = conn_to(fake, max_in_flight=3)
        await c.connect(1000)
        replies = await asyncio.gather(*(c.request(ApiKey.METADATA, {"topics": [{"name": n}]}) for n in "ab" * 5))
        assert [r.topics[0].name for r in replies if r] == list("ab" * 5)
        assert [len(r.topics[0].partitions) for r in replies if r] == [1, 2] * 5
        c.close()

    run(main())


def test_a_broken_connection_fails_every_waiter(run: Run) -> None:
    fake = FakeCluster()

    async def main() -> None:
        c = conn_to(fake, max_in_flight=5)
        await c.connect(1000)
        fake.response_delay_s = 60  # the replies would come long after the broker went away
        closed: list[object] = []
        c.on_close = lambda conn, exc: closed.append(exc)
        waiters = [asyncio.ensure_future(c.request(ApiKey.METADATA, {"topics": []})) for _ in range(3)]
        await wait_until_async(lambda: len(c._in_flight) == 3, what="three requests written and awaiting replies")
        c._writer.close()  # type: ignore[union-attr]  # the broker goes away
        results = await asyncio.gather(*waiters, return_exceptions=True)
        assert all(isinstance(r, BrokerConnectionError) for r in results)
        assert c.closed
        assert len(closed) == 1
        with pytest.raises(BrokerConnectionError):
            await c.request(ApiKey.METADATA, {"topics": []})

    run(main())


def test_request_timeout_closes_the_connection(run: Run) -> None:
    fake = FakeCluster()

    async def main() -> None:
        c = conn_to(fake, request_timeout_ms=200)
        await c.connect(1000)
        fake.response_delay_s = 5
        with pytest.raises(KafkaTimeoutError, match="Metadata request"):
            await c.request(ApiKey.METADATA, {"topics": []}, timeout_ms=30)
        assert c.closed

    run(main())


def test_connect_refused_is_a_connection_error(run: Run) -> None:
    fake = FakeCluster()
    fake.refuse.add(0)

    async def main() -> None:
        c = conn_to(fake)
        with pytest.raises(BrokerConnectionError, match="cannot connect"):
            await c.connect(1000)
        assert c.closed

    run(main())


def test_a_response_nobody_asked_for_is_a_protocol_error(run: Run) -> None:
    fake = FakeCluster()

    async def main() -> None:
        c = conn_to(fake)
        await c.connect(1000)
        errors: list[object] = []
        c.on_close = lambda conn, exc: errors.append(exc)
        c._writer.reader.feed_data(b"\x00\x00\x00\x04\x00\x00\x00\x63")  # type: ignore[union-attr]
        await wait_until_async(lambda: c.closed, what="the connection to close on the stray response")
        assert c.closed
        assert isinstance(errors[0], ProtocolError)

    run(main())


def test_acks0_style_request_returns_without_response(run: Run) -> None:
    fake = FakeCluster(topics={"t": 1})

    async def main() -> None:
        c = conn_to(fake)
        await c.connect(1000)
        from pyspark_log.records.batch import ProducerRecord, encode_batch

        body = {
            "acks": 0,
            "timeout_ms": 1000,
            "topic_data": [
                {
                    "name": "t",
                    "partition_data": [{"index": 0, "records": encode_batch([ProducerRecord(None, b"x", 1)])}],
                }
            ],
        }
        assert await c.request(ApiKey.PRODUCE, body, expect_response=False) is None
        assert c.in_flight_count == 0
        resp = await c.request(ApiKey.METADATA, {"topics": []})  # the stream stays in sync
        assert resp is not None
        assert fake.logs[("t", 0)].next_offset == 1
        c.close()

    run(main())


def test_kip219_a_throttled_response_holds_back_the_next_request(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka documentation §4.9 "Quotas": a client that gets a non-zero throttle time sends the broker no more
    requests for that long — the next request leaves no earlier than the end of
    the throttle time the broker gave."""
    fake = FakeCluster()
    arrivals: list[float] = []
    original = fake.handle

    def throttling(node: int, api_key: int, version: int, req: Any) -> dict[str, Any] | None:
        arrivals.append(asyncio.get_running_loop().time())
        body = original(node, api_key, version, req)
        if body is not None and api_key == ApiKey.METADATA and len(arrivals) == 2:
            body["throttle_time_ms"] = 200
        return body

    monkeypatch.setattr(fake, "handle", throttling)

    async def main() -> tuple[float, int]:
        c = conn_to(fake)
        await c.connect(1000)  # ApiVersions: arrival 1
        await c.request(ApiKey.METADATA, {"topics": []})  # arrival 2, answered with 200 ms throttle
        until = c.throttled_until
        await c.request(ApiKey.METADATA, {"topics": []})  # arrival 3
        c.close()
        return until, c.throttle_time_ms_total

    until, total = run(main())
    assert total == 200
    assert arrivals[2] >= until
