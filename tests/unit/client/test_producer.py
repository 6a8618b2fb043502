"""AsyncProducer against the in-memory fake cluster: partitioning, acks, retries, timeouts,
back-pressure, flush/close and the sender's failure path (Kafka documentation §4.4 "The Producer" and §3.3
"Producer Configs", Kafka documentation §3.3 "Producer Configs" (`acks`))."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from typing import Any

import pytest

from pyspark_log.client.errors import (
    BufferExhaustedError,
    ClientClosedError,
    KafkaTimeoutError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
    UnsupportedFeatureError,
)
from pyspark_log.client.partitioner import partition_for_key
from pyspark_log.client.producer import AsyncProducer
from pyspark_log.client.types import RecordMetadata
from pyspark_log.wire import ApiKey, ErrorCode, KafkaError

from .fake_broker import FakeCluster

Run = Callable[[Any], Any]


def producer(fake: FakeCluster, **cfg: Any) -> AsyncProducer:
    config = {"bootstrap.servers": "fake:9092", "linger.ms": 0, "retry.backoff.ms": 1, "retry.backoff.max.ms": 5}
    config.update({k.replace("_", "."): v for k, v in cfg.items()})
    return AsyncProducer(config, connector=fake.connector)


def test_keyed_records_follow_murmur2_and_keep_order(run: Run) -> None:
    fake = FakeCluster(2, topics={"t": 5})

    async def main() -> None:
        async with producer(fake, linger_ms=2) as p:
            futs = [await p.send("t", f"v{i}".encode(), key=f"k{i % 7}".encode()) for i in range(70)]
            metas: list[RecordMetadata] = await asyncio.gather(*futs)
        for i, m in enumerate(metas):
            assert m.partition == partition_for_key(f"k{i % 7}".encode(), 5)
        for part in range(5):
            got = [r.value for r in fake.records("t", part)]
            assert got == [f"v{i}".encode() for i in range(70) if metas[i].partition == part]
            offsets = [m.offset for m in metas if m.partition == part]
            assert offsets == list(range(len(offsets)))

    run(main())


def test_null_keys_stick_to_one_partition_per_batch(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 4})

    async def main() -> None:
        async with producer(fake, linger_ms=50, batch_size=400) as p:
            futs = [await p.send("t", b"x" * 50) for _ in range(40)]
            metas = await asyncio.gather(*futs)
        parts = [m.partition for m in metas]
        runs = sum(1 for a, b in itertools.pairwise(parts) if a != b) + 1
        assert runs < 20  # sticky: long runs, not round robin
        assert len(set(parts)) > 1  # but it does move on as batches fill

    run(main())


def test_explicit_partition_headers_timestamp_and_acks(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 3})

    async def main() -> None:
        async with producer(fake, acks="1") as p:
            m = await p.send_and_wait(
                "t", "héllo", key="k", headers={"h": "v", "n": None}, partition=2, timestamp_ms=42
            )
            assert m == RecordMetadata("t", 2, 0, 42)
            with pytest.raises(UnknownTopicOrPartitionError):
                await p.send("t", b"x", partition=3)
        (rec,) = fake.records("t", 2)
        assert (rec.key, rec.value, rec.timestamp) == (b"k", "héllo".encode(), 42)
        assert rec.headers == (("h", b"v"), ("n", None))
        produce_acks = {req.acks for k, _v, req in fake.requests if k == ApiKey.PRODUCE}
        assert produce_acks == {1}

    run(main())


def test_acks_zero_completes_with_offset_minus_one(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 1})

    async def main() -> None:
        async with producer(fake, acks=0) as p:
            m = await p.send_and_wait("t", b"x")
            assert m.offset == -1
        assert fake.logs[("t", 0)].next_offset == 1

    run(main())


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_codec_round_trips(run: Run, codec: str) -> None:
    fake = FakeCluster(1, topics={"t": 1})

    async def main() -> None:
        async with producer(fake, compression_type=codec, linger_ms=5) as p:
            futs = [await p.send("t", bytes([i]) * 100, key=b"k") for i in range(20)]
            await asyncio.gather(*futs)
        assert [r.value for r in fake.records("t", 0)] == [bytes([i]) * 100 for i in range(20)]

    run(main())


def test_leader_move_refreshes_metadata_and_retries(run: Run) -> None:
    fake = FakeCluster(2, topics={"t": 1})

    async def main() -> None:
        async with producer(fake) as p:
            await p.send_and_wait("t", b"first")
            fake.leaders[("t", 0)] = 1  # the old leader now answers NOT_LEADER_OR_FOLLOWER
            m = await p.send_and_wait("t", b"second")
            assert m.offset == 1
        assert [r.value for r in fake.records("t", 0)] == [b"first", b"second"]
        produce_codes = [k for k, _v, _r in fake.requests if k == ApiKey.PRODUCE]
        assert len(produce_codes) >= 3

    run(main())


def test_retriable_error_is_retried_until_success(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 1})
    fake.produce_errors[("t", 0)].extend([ErrorCode.NOT_ENOUGH_REPLICAS] * 3)

    async def main() -> None:
        async with producer(fake) as p:
            assert (await p.send_and_wait("t", b"x")).offset == 0

    run(main())


def test_retries_zero_fails_on_the_first_retriable_error(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 1})
    fake.produce_errors[("t", 0)].append(ErrorCode.NOT_ENOUGH_REPLICAS)

    async def main() -> None:
        async with producer(fake, retries=0) as p:
            with pytest.raises(KafkaError) as info:
                await p.send_and_wait("t", b"x")
            assert info.value.code == ErrorCode.NOT_ENOUGH_REPLICAS

    run(main())


def test_non_retriable_error_fails_the_future_and_calls_back(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 1})
    fake.produce_errors[("t", 0)].append(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    seen: list[tuple[object, object]] = []

    async def main() -> None:
        async with producer(fake) as p:
            fut = await p.send("t", b"x", on_delivery=lambda m, e: seen.append((m, e)))
            with pytest.raises(KafkaError, match="TOPIC_AUTHORIZATION_FAILED"):
                await fut

    run(main())
    assert seen[0][0] is None
    assert isinstance(seen[0][1], KafkaError)


def test_delivery_timeout_bounds_retries(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 1})
    fake.produce_errors[("t", 0)].extend([ErrorCode.NOT_ENOUGH_REPLICAS] * 10_000)

    async def main() -> None:
        async with producer(fake, delivery_timeout_ms=100, request_timeout_ms=50) as p:
            with pytest.raises(KafkaError) as info:
                await p.send_and_wait("t", b"x")
            assert info.value.code in (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT)

    run(main())


def test_message_too_large_splits_the_batch(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 1})
    fake.produce_errors[("t", 0)].append(ErrorCode.MESSAGE_TOO_LARGE)

    async def main() -> None:
        async with producer(fake, linger_ms=20) as p:
            futs = [await p.send("t", f"{i}".encode()) for i in range(6)]
            metas = await asyncio.gather(*futs)
        assert sorted(m.offset for m in metas) == list(range(6))
        assert [r.value for r in fake.records("t", 0)] == [f"{i}".encode() for i in range(6)]

    run(main())


def test_broken_connection_during_produce_is_retried(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 1})

    async def main() -> None:
        async with producer(fake) as p:
            await p.send_and_wait("t", b"a")
            fake.drop_next_produce = 1
            m = await p.send_and_wait("t", b"b")
            assert m.offset >= 1  # at-least-once: the dropped attempt may have been stored

    run(main())


def test_record_too_large_raises_at_send(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 1})

    async def main() -> None:
        async with producer(fake, max_request_size=1000) as p:
            with pytest.raises(RecordTooLargeError, match=r"max\.request\.size"):
                await p.send("t", b"x" * 2000)
            with pytest.raises(TypeError, match="serialize"):
                await p.send("t", 12345)

    run(main())


def test_buffer_memory_back_pressure_then_timeout(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 1})

    async def main() -> None:
        async with producer(fake, buffer_memory=500, max_block_ms=50, linger_ms=0) as p:
            await p.send_and_wait("t", b"learn the metadata")
            fake.response_delay_s = 0.3
            first = await p.send("t", b"x" * 300)
            with pytest.raises(BufferExhaustedError):
                await p.send("t", b"y" * 300)
            await first
            assert p.pool.available_bytes == 500
            await (await p.send("t", b"z" * 300))

    run(main())


def test_unknown_topic_times_out_after_max_block(run: Run) -> None:
    fake = FakeCluster(1, topics={})
    fake.auto_create = False

    async def main() -> None:
        async with producer(fake, max_block_ms=100) as p:
            with pytest.raises(KafkaTimeoutError, match="not present in metadata"):
                await p.send("missing", b"x")

    run(main())


def test_auto_created_topic(run: Run) -> None:
    fake = FakeCluster(1, topics={})

    async def main() -> None:
        async with producer(fake) as p:
            assert (await p.send_and_wait("fresh", b"x", key=b"k")).offset == 0
            assert await p.partitions_for("fresh") == [0, 1, 2]

    run(main())


def test_flush_waits_for_lingering_records_and_close_delivers(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 1})

    async def main() -> None:
        p = await producer(fake, linger_ms=60_000).start()
        futs = [await p.send("t", b"x") for _ in range(5)]
        await p.flush(5000)
        assert all(f.done() for f in futs)
        late = await p.send("t", b"late")
        await p.close()
        assert (await late).offset == 5
        with pytest.raises(ClientClosedError):
            await p.send("t", b"after close")

    run(main())


def test_close_with_timeout_fails_what_cannot_be_delivered(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 1})

    async def main() -> None:
        p = await producer(fake).start()
        await p.send_and_wait("t", b"learn the metadata")
        fake.refuse.add(0)
        for conn in list(p.cluster._conns.values()):
            conn.close()
        fut = await p.send("t", b"x")
        await p.close(timeout_ms=100)
        with pytest.raises(ClientClosedError):
            await fut

    run(main())


def test_when_the_sender_dies_everyone_waiting_fails(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 1})

    async def main() -> None:
        async with producer(fake, linger_ms=60_000) as p:
            fut = await p.send("t", b"x")

            def boom(*a: object) -> None:
                raise RuntimeError("bug in the sender")

            p.accumulator.ready = boom  # type: ignore[method-assign]
            p.sender.wakeup()  # type: ignore[union-attr]
            with pytest.raises(ClientClosedError, match="bug in the sender"):
                await fut
            with pytest.raises(ClientClosedError, match="failed"):
                await p.send("t", b"y")

    run(main())


def test_idempotence_left_unset_falls_back_when_the_broker_lacks_init_producer_id(
    run: Run, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeCluster(1, topics={"t": 1})

    async def main() -> None:
        with caplog.at_level(logging.WARNING, logger="pyspark_log.client.producer"):
            async with producer(fake) as p:
                assert (await p.send_and_wait("t", b"x")).offset == 0
                assert not p.idempotent
        assert "InitProducerId" in caplog.text

    run(main())


def test_explicit_idempotence_or_transactions_need_init_producer_id(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 1})

    async def main() -> None:
        with pytest.raises(UnsupportedFeatureError, match=r"enable.idempotence=true needs InitProducerId"):
            await producer(fake, enable_idempotence=True).start()
        with pytest.raises(UnsupportedFeatureError, match=r"transactional.id needs InitProducerId"):
            await producer(fake, transactional_id="tx").start()

    run(main())


def test_send_before_start_is_an_error(run: Run) -> None:
    async def main() -> None:
        with pytest.raises(ClientClosedError, match="not started"):
            await producer(FakeCluster()).send("t", b"x")

    run(main())
