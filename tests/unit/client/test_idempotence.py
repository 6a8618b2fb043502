"""The idempotent producer against the fake cluster's producer-state model (KIP-98; Kafka documentation §3.3
"Producer Configs", `enable.idempotence`: the broker stores a message only if its sequence number is exactly
one more than the last one it has)."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from typing import Any

import pytest

from pyspark_log.client import config as cfg
from pyspark_log.client.accumulator import RecordAccumulator
from pyspark_log.client.backoff import ExponentialBackoff
from pyspark_log.client.errors import ClientClosedError, ConfigError, ProducerFencedError
from pyspark_log.client.producer import AsyncProducer
from pyspark_log.client.txn_manager import TransactionManager
from pyspark_log.client.types import TopicPartition
from pyspark_log.records.batch import ProducerRecord
from pyspark_log.records.header import NO_SEQUENCE, iter_batch_headers
from pyspark_log.wire import ApiKey, ErrorCode

from .fake_txn import FakeTxnCluster

Run = Callable[[Any], Any]
TP = TopicPartition("t", 0)


def producer(fake: FakeTxnCluster, **extra: Any) -> AsyncProducer:
    config = {"bootstrap.servers": "fake:9092", "linger.ms": 0, "retry.backoff.ms": 1, "retry.backoff.max.ms": 5}
    config.update({k.replace("_", "."): v for k, v in extra.items()})
    return AsyncProducer(config, connector=fake.connector)


def headers(fake: FakeTxnCluster, topic: str = "t", partition: int = 0) -> list[Any]:
    return [next(iter_batch_headers(b))[1] for b in fake.logs[(topic, partition)].batches]


def values(fake: FakeTxnCluster, topic: str = "t", partition: int = 0) -> list[bytes | None]:
    return [r.value for r in fake.records(topic, partition)]


# -- config ------------------------------------------------------------------------------------


def _resolve(**extra: Any) -> bool:
    user = {"bootstrap.servers": "x"} | {k.replace("_", "."): v for k, v in extra.items()}
    return cfg.resolve_idempotence(cfg.parse(cfg.PRODUCER, user, "producer"))


def test_idempotence_is_on_by_default_and_off_quietly_for_conflicting_settings() -> None:
    assert _resolve()
    assert not _resolve(acks=1)
    assert not _resolve(retries=0)
    assert not _resolve(max_in_flight_requests_per_connection=6)
    assert not _resolve(enable_idempotence=False)


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ({"acks": "1"}, "set acks=all"),
        ({"retries": 0}, "retries must be > 0"),
        ({"max.in.flight.requests.per.connection": 6}, "set it to 5 or less"),
    ],
)
def test_explicit_idempotence_with_conflicting_settings_is_a_config_error(extra: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(match)):
        AsyncProducer({"bootstrap.servers": "x", "enable.idempotence": True, **extra})
    with pytest.raises(ConfigError, match=r"transactional\.id"):
        AsyncProducer({"bootstrap.servers": "x", "transactional.id": "tx", **extra})


def test_transactional_id_without_idempotence_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"transactional\.id needs enable\.idempotence=true"):
        AsyncProducer({"bootstrap.servers": "x", "transactional.id": "tx", "enable.idempotence": False})


# -- sequence numbers ----------------------------------------------------------------------------


def test_sequences_are_assigned_when_a_batch_is_drained_not_when_appended() -> None:
    txn = TransactionManager()
    txn.set_producer_id_and_epoch(7, 3)
    acc = RecordAccumulator(batch_size_bytes=200, linger_ms=0, retry_backoff=ExponentialBackoff(1, 5), sequencer=txn)

    class Leaders:
        def leader_for(self, tp: TopicPartition) -> int:
            return 0

    for i in range(6):
        acc.append(TP, ProducerRecord(None, b"v" * 60 + bytes([i]), 0), None, 0.0)
    queued = list(acc._queues[TP])
    assert len(queued) > 2
    assert all(b.base_sequence == NO_SEQUENCE for b in queued)
    first = acc.drain(Leaders(), [0], 10**6, 0.0)[0]
    assert [(b.producer_id, b.producer_epoch, b.base_sequence) for b in first] == [(7, 3, 0)]
    assert all(b.base_sequence == NO_SEQUENCE for b in acc._queues[TP])
    second = acc.drain(Leaders(), [0], 10**6, 0.0)[0]
    assert second[0].base_sequence == len(first[0].records)
    assert txn.in_flight_count(TP) == 2


def test_batches_carry_producer_id_and_consecutive_sequences(run: Run) -> None:
    fake = FakeTxnCluster(1, topics={"t": 1})

    async def main() -> None:
        async with producer(fake, linger_ms=1, batch_size=300) as p:
            assert p.idempotent
            futs = [await p.send("t", b"%03d" % i + b"x" * 40, partition=0) for i in range(40)]
            await asyncio.gather(*futs)
        hs = headers(fake)
        assert len(hs) > 3
        assert {h.producer_id for h in hs} == {fake.next_producer_id}
        expected = 0
        for h in hs:
            assert h.base_sequence == expected
            expected += h.last_offset_delta + 1
        assert values(fake) == [b"%03d" % i + b"x" * 40 for i in range(40)]

    run(main())


def test_a_retry_after_a_lost_response_is_not_written_twice(run: Run) -> None:
    fake = FakeTxnCluster(1, topics={"t": 1})

    async def main() -> None:
        async with producer(fake) as p:
            await p.send_and_wait("t", b"first", partition=0)
            fake.drop_next_produce = 1  # written, then the connection breaks before the answer
            meta = await p.send_and_wait("t", b"second", partition=0)
            assert meta.offset == 1
        assert values(fake) == [b"first", b"second"]
        assert fake.duplicates == 1

    run(main())


def test_retries_keep_order_with_five_requests_in_flight(run: Run) -> None:
    fake = FakeTxnCluster(1, topics={"t": 1})
    fake.response_delay_s = 0.005

    async def main() -> None:
        async with producer(fake, batch_size=120, linger_ms=0) as p:
            fake.produce_errors[("t", 0)].extend([ErrorCode.NOT_LEADER_OR_FOLLOWER])
            futs = [await p.send("t", b"%03d" % i + b"y" * 50, partition=0) for i in range(30)]
            metas = await asyncio.gather(*futs)
        assert values(fake) == [b"%03d" % i + b"y" * 50 for i in range(30)]
        assert [m.offset for m in metas] == list(range(30))

    run(main())


def test_a_real_sequence_gap_bumps_the_epoch_locally_and_restarts_at_zero(run: Run) -> None:
    fake = FakeTxnCluster(1, topics={"t": 1})

    async def main() -> None:
        async with producer(fake) as p:
            await p.send_and_wait("t", b"a", partition=0)
            fake.produce_errors[("t", 0)].append(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
            await p.send_and_wait("t", b"b", partition=0)
            await p.send_and_wait("t", b"c", partition=0)
            assert p.txn is not None
            assert p.txn.producer_epoch == 1
        assert values(fake) == [b"a", b"b", b"c"]
        assert [(h.producer_epoch, h.base_sequence) for h in headers(fake)] == [(0, 0), (1, 0), (1, 1)]
        init_calls = [r for k, _v, r in fake.requests if k == ApiKey.INIT_PRODUCER_ID]
        assert len(init_calls) == 1  # the idempotent producer bumps without a round trip

    run(main())


def test_unknown_producer_id_after_retention_bumps_the_epoch(run: Run) -> None:
    fake = FakeTxnCluster(1, topics={"t": 1})

    async def main() -> None:
        async with producer(fake) as p:
            await p.send_and_wait("t", b"a", partition=0)
            fake.producers.clear()  # the broker lost the state (log start moved past it)
            fake.logs[("t", 0)].log_start = 1
            fake.produce_errors[("t", 0)].append(ErrorCode.UNKNOWN_PRODUCER_ID)
            await p.send_and_wait("t", b"b", partition=0)
        assert values(fake) == [b"a", b"b"]
        assert headers(fake)[-1].producer_epoch == 1

    run(main())


def test_duplicate_sequence_number_counts_as_success(run: Run) -> None:
    fake = FakeTxnCluster(1, topics={"t": 1})

    async def main() -> None:
        async with producer(fake) as p:
            fake.produce_errors[("t", 0)].append(ErrorCode.DUPLICATE_SEQUENCE_NUMBER)
            meta = await p.send_and_wait("t", b"a", partition=0)
            assert meta.offset == -1
            assert (await p.send_and_wait("t", b"b", partition=0)).offset == 0

    run(main())


def test_a_fenced_epoch_is_fatal(run: Run, caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeTxnCluster(1, topics={"t": 1})

    async def main() -> None:
        async with producer(fake) as p:
            fake.produce_errors[("t", 0)].append(ErrorCode.INVALID_PRODUCER_EPOCH)
            with pytest.raises(ProducerFencedError):
                await p.send_and_wait("t", b"a", partition=0)
            with pytest.raises(ProducerFencedError):
                await p.send("t", b"b", partition=0)

    with caplog.at_level(logging.ERROR):
        run(main())


def test_a_non_retriable_rejection_restarts_later_batches_in_a_new_epoch(run: Run) -> None:
    fake = FakeTxnCluster(1, topics={"t": 1})

    async def main() -> None:
        async with producer(fake) as p:
            fake.produce_errors[("t", 0)].append(ErrorCode.CORRUPT_MESSAGE + 1000)  # unknown: not retriable
            with pytest.raises(Exception, match="UNKNOWN_SERVER_ERROR"):
                await p.send_and_wait("t", b"lost", partition=0)
            assert (await p.send_and_wait("t", b"next", partition=0)).offset == 0
        assert values(fake) == [b"next"]

    run(main())


def test_idempotent_producer_closes_cleanly(run: Run) -> None:
    fake = FakeTxnCluster(1, topics={"t": 1})

    async def main() -> None:
        p = await producer(fake).start()
        await p.close()
        with pytest.raises(ClientClosedError):
            await p.send("t", b"x")

    run(main())


def test_a_request_whose_connection_broke_before_it_was_sent_is_retried_in_order(run: Callable[..., Any]) -> None:
    """Sequences must reach the broker in order (KIP-98). A Produce request drained for a
    connection that broke before its task ran is failed like an in-flight request on a broken
    connection (its batch goes back to the head of its queue, sequence kept), never sent later
    on a new connection where batches drained after it could overtake it."""
    from pyspark_log.client.clock import ManualClock
    from pyspark_log.client.sender import Sender

    class Cluster:
        metadata = None
        connects = 0

        def add_listener(self, fn: Any) -> None:
            pass

        def connection_if_ready(self, node: int) -> None:
            return None  # broke since the drain

        async def connection(self, node: int) -> Any:
            Cluster.connects += 1
            raise AssertionError("must not wait for a new connection")

        def request_update(self) -> None:
            pass

    class Leaders:
        def leader_for(self, tp: TopicPartition) -> int:
            return 0

    async def scenario() -> None:
        txn = TransactionManager(None, 60000)
        txn.set_producer_id_and_epoch(7, 0)
        acc = RecordAccumulator(
            batch_size_bytes=1024, linger_ms=0, retry_backoff=ExponentialBackoff(1, 1), sequencer=txn
        )
        acc.append(TP, ProducerRecord(None, b"v", 0), None, 0.0)
        sender = Sender(
            cluster=Cluster(),  # type: ignore[arg-type]
            accumulator=acc,
            clock=ManualClock(),
            acks=-1,
            retries=5,
            request_timeout_ms=1000,
            delivery_timeout_ms=60000,
            max_request_bytes=1 << 20,
            max_in_flight=5,
            on_fatal=lambda exc: None,
            txn=txn,
        )
        (batch,) = acc.drain(Leaders(), [0], 1 << 20, 0.0)[0]
        assert batch.base_sequence == 0
        sender._in_flight[0] = 1
        await sender._produce(0, [batch])
        assert Cluster.connects == 0
        assert list(acc._queues[TP]) == [batch]
        assert (batch.attempts, batch.base_sequence, batch.done) == (1, 0, False)

    run(scenario())
