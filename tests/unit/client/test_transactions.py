"""Transactional producer and read_committed consumer against the fake coordinator (KIP-98; Kafka
documentation §4.6 "Message Delivery Semantics", transactions: a transaction's messages succeed or fail
together)."""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Callable
from typing import Any

import pytest

from pyspark_log.client.consumer import AsyncConsumer
from pyspark_log.client.errors import (
    IllegalTransactionStateError,
    KafkaError,
    ProducerFencedError,
    TransactionAbortableError,
    UnsupportedFeatureError,
)
from pyspark_log.client.groups import ConsumerGroupMetadata
from pyspark_log.client.producer import AsyncProducer
from pyspark_log.client.transactions import TransactionHandle, complete_transaction_async
from pyspark_log.client.txn_manager import TxnState
from pyspark_log.client.types import TopicPartition
from pyspark_log.records.header import iter_batch_headers
from pyspark_log.wire import ApiKey, ErrorCode

from .fake_txn import FakeTxnCluster

Run = Callable[[Any], Any]
BASE = {"bootstrap.servers": "fake:9092", "linger.ms": 0, "retry.backoff.ms": 1, "retry.backoff.max.ms": 5}


def txn_producer(fake: FakeTxnCluster, tid: str = "tx-1", **extra: Any) -> AsyncProducer:
    return AsyncProducer({**BASE, "transactional.id": tid, **extra}, connector=fake.connector)


async def read_all(fake: FakeTxnCluster, isolation: str, topic: str = "t", partitions: int = 1) -> list[bytes]:
    config = {**BASE, "isolation.level": isolation, "auto.offset.reset": "earliest", "fetch.max.wait.ms": 5}
    out: list[bytes] = []
    async with AsyncConsumer(config, connector=fake.connector) as c:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        ends = await c.end_offsets(tps, isolation_level=isolation)
        while True:
            out.extend(r.value for r in await c.poll(timeout_ms=50) if r.value is not None)
            positions = [await c.position(tp) for tp in tps]
            if all(pos >= ends[tp] for pos, tp in zip(positions, tps, strict=True)):
                return out


def test_commit_and_abort_visibility_for_read_committed(run: Run) -> None:
    fake = FakeTxnCluster(1, topics={"t": 1})

    async def main() -> None:
        async with txn_producer(fake) as p:
            await p.init_transactions()
            p.begin_transaction()
            await p.send("t", b"c1", partition=0)
            await p.send("t", b"c2", partition=0)
            await p.commit_transaction()
            p.begin_transaction()
            await p.send_and_wait("t", b"a1", partition=0)
            unsent = await p.send("t", b"a2", partition=0)
            await p.abort_transaction()
            await asyncio.gather(unsent, return_exceptions=True)  # failed, or sent and aborted
            p.begin_transaction()
            await p.send("t", b"c3", partition=0)
            await p.commit_transaction()
        assert await read_all(fake, "read_committed") == [b"c1", b"c2", b"c3"]
        uncommitted = await read_all(fake, "read_uncommitted")
        assert uncommitted[:3] == [b"c1", b"c2", b"a1"]
        assert uncommitted[-1] == b"c3"
        kinds = [(k, getattr(r, "committed", None)) for k, _v, r in fake.requests if k in (ApiKey.END_TXN,)]
        assert [c for _k, c in kinds] == [True, False, True]

    run(main())


def test_partitions_are_added_before_their_first_batch_is_sent(run: Run) -> None:
    fake = FakeTxnCluster(1, topics={"t": 3})

    async def main() -> None:
        async with txn_producer(fake) as p:
            await p.init_transactions()
            p.begin_transaction()
            futs = [await p.send("t", b"v%d" % i, partition=i % 3) for i in range(9)]
            await p.commit_transaction()
            assert all(f.done() for f in futs)
        order = [k for k, _v, _r in fake.requests if k in (ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.PRODUCE)]
        assert order[0] == ApiKey.ADD_PARTITIONS_TO_TXN
        for part in range(3):
            hs = [next(iter_batch_headers(b))[1] for b in fake.logs[("t", part)].batches]
            assert hs[0].is_transactional
            assert not hs[0].is_control
            assert hs[-1].is_control

    run(main())


def test_send_offsets_to_transaction_commits_offsets_only_with_the_transaction(run: Run) -> None:
    fake = FakeTxnCluster(1, topics={"t": 1, "in": 1})

    async def main() -> None:
        async with txn_producer(fake) as p:
            await p.init_transactions()
            p.begin_transaction()
            await p.send("t", b"out", partition=0)
            await p.send_offsets_to_transaction({TopicPartition("in", 0): 5}, "g1")
            await p.abort_transaction()
            assert fake.committed == {}
            p.begin_transaction()
            await p.send_offsets_to_transaction({TopicPartition("in", 0): 7}, "g1")
            await p.commit_transaction()
        assert fake.committed == {("g1", "in", 0): 7}

    run(main())


def test_group_metadata_needs_txn_offset_commit_v3_and_a_bare_group_id_does_not(run: Run) -> None:
    """KIP-447: a consumer's membership travels in TxnOffsetCommit v3+; a coordinator with older
    versions cannot check it, so the producer refuses (fatal, as Java's client) rather than send
    the offsets unchecked. A bare group id (no membership) still goes with v2."""
    fake = FakeTxnCluster(1, topics={"t": 1, "in": 1})
    fake.api_versions[ApiKey.TXN_OFFSET_COMMIT] = (0, 2)
    member = ConsumerGroupMetadata("g1", generation_id=4, member_id="m-1")
    assert member.has_membership
    assert not ConsumerGroupMetadata("g1").has_membership

    async def main() -> None:
        async with txn_producer(fake) as p:
            await p.init_transactions()
            p.begin_transaction()
            await p.send_offsets_to_transaction({TopicPartition("in", 0): 7}, ConsumerGroupMetadata("g1"))
            await p.commit_transaction()
            assert fake.committed == {("g1", "in", 0): 7}
            p.begin_transaction()
            with pytest.raises(UnsupportedFeatureError, match="TxnOffsetCommit < v3"):
                await p.send_offsets_to_transaction({TopicPartition("in", 0): 9}, member)

    run(main())


def test_a_second_producer_with_the_same_id_fences_the_first(run: Run) -> None:
    fake = FakeTxnCluster(1, topics={"t": 1})

    async def main() -> None:
        old = await txn_producer(fake).start()
        await old.init_transactions()
        old.begin_transaction()
        await (await old.send("t", b"zombie", partition=0))
        async with txn_producer(fake) as new:
            await new.init_transactions()  # aborts the open transaction of the old epoch
            with pytest.raises(ProducerFencedError):
                await old.commit_transaction()
            assert old.txn is not None
            assert old.txn.state is TxnState.FATAL_ERROR
            with pytest.raises(ProducerFencedError):
                await old.send("t", b"more", partition=0)
            new.begin_transaction()
            await new.send("t", b"fresh", partition=0)
            await new.commit_transaction()
        await old.close()
        assert await read_all(fake, "read_committed") == [b"fresh"]

    run(main())


def test_an_abortable_error_is_recovered_by_abort(run: Run) -> None:
    fake = FakeTxnCluster(1, topics={"t": 1})

    async def main() -> None:
        async with txn_producer(fake) as p:
            await p.init_transactions()
            p.begin_transaction()
            fake.txn_errors[ApiKey.ADD_PARTITIONS_TO_TXN].append(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            fut = await p.send("t", b"x", partition=0)
            with pytest.raises(KafkaError):
                await fut
            with pytest.raises(TransactionAbortableError):
                await p.commit_transaction()
            with pytest.raises(TransactionAbortableError):
                await p.send("t", b"y", partition=0)
            await p.abort_transaction()
            p.begin_transaction()
            await p.send("t", b"z", partition=0)
            await p.commit_transaction()
        assert await read_all(fake, "read_committed") == [b"z"]

    run(main())


def test_a_failed_batch_makes_abort_bump_the_epoch(run: Run) -> None:
    fake = FakeTxnCluster(1, topics={"t": 1})

    async def main() -> None:
        async with txn_producer(fake) as p:
            await p.init_transactions()
            p.begin_transaction()
            await p.send_and_wait("t", b"ok", partition=0)
            fake.produce_errors[("t", 0)].append(ErrorCode.INVALID_RECORD)
            with pytest.raises(KafkaError):
                await p.send_and_wait("t", b"bad", partition=0)
            with pytest.raises(TransactionAbortableError):
                await p.commit_transaction()
            await p.abort_transaction()
            assert p.txn is not None
            assert p.txn.producer_epoch == 1
            p.begin_transaction()
            await p.send_and_wait("t", b"after", partition=0)
            await p.commit_transaction()
        bumps = [r for k, v, r in fake.requests if k == ApiKey.INIT_PRODUCER_ID and r.producer_id >= 0]
        assert len(bumps) == 1
        assert await read_all(fake, "read_committed") == [b"after"]

    run(main())


def test_illegal_calls_raise(run: Run) -> None:
    fake = FakeTxnCluster(1, topics={"t": 1})

    async def main() -> None:
        async with txn_producer(fake) as p:
            with pytest.raises(IllegalTransactionStateError):
                p.begin_transaction()
            await p.init_transactions()
            with pytest.raises(IllegalTransactionStateError, match="begin_transaction"):
                await p.send("t", b"x")
            with pytest.raises(IllegalTransactionStateError):
                await p.commit_transaction()
            p.begin_transaction()
            with pytest.raises(IllegalTransactionStateError):
                p.begin_transaction()
            await p.abort_transaction()  # an empty transaction: no EndTxn needed
        assert not [k for k, _v, _r in fake.requests if k == ApiKey.END_TXN]
        async with AsyncProducer(BASE, connector=fake.connector) as plain:
            with pytest.raises(IllegalTransactionStateError, match=r"no transactional\.id"):
                await plain.init_transactions()

    run(main())


def test_prepare_then_complete_from_elsewhere(run: Run) -> None:
    fake = FakeTxnCluster(1, topics={"t": 1})

    async def main() -> None:
        handles = []
        for i, value in enumerate((b"kept", b"dropped")):
            async with txn_producer(fake, tid=f"task-{i}") as p:
                await p.init_transactions()
                p.begin_transaction()
                await p.send("t", value, partition=0)
                handle = await p.prepare_transaction()
                with pytest.raises(IllegalTransactionStateError):
                    await p.send("t", b"late", partition=0)
                with pytest.raises(IllegalTransactionStateError):
                    await p.commit_transaction()
            handles.append(pickle.loads(pickle.dumps(handle)))
        assert all(t.state == "Ongoing" for t in fake.txns.values())  # close left them open
        await complete_transaction_async(BASE, handles[0], True, connector=fake.connector)
        await complete_transaction_async(BASE, handles[1], False, connector=fake.connector)
        await complete_transaction_async(BASE, handles[0], True, connector=fake.connector)  # retry: ok
        with pytest.raises(KafkaError, match="INVALID_TXN_STATE"):
            await complete_transaction_async(BASE, handles[1], True, connector=fake.connector)
        stale = TransactionHandle("task-0", handles[0].producer_id, handles[0].producer_epoch - 1)
        with pytest.raises(ProducerFencedError):
            await complete_transaction_async(BASE, stale, True, connector=fake.connector)
        await complete_transaction_async(BASE, TransactionHandle("x", 1, 0, empty=True), True)
        assert await read_all(fake, "read_committed") == [b"kept"]

    run(main())


def test_close_aborts_an_open_transaction(run: Run) -> None:
    fake = FakeTxnCluster(1, topics={"t": 1})

    async def main() -> None:
        async with txn_producer(fake) as p:
            await p.init_transactions()
            p.begin_transaction()
            await p.send_and_wait("t", b"x", partition=0)
        assert fake.txns["tx-1"].state == "CompleteAbort"

    run(main())


def test_coordinator_errors_are_retried(run: Run) -> None:
    fake = FakeTxnCluster(1, topics={"t": 1})

    async def main() -> None:
        async with txn_producer(fake) as p:
            fake.txn_errors[ApiKey.INIT_PRODUCER_ID].extend(
                [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR]
            )
            await p.init_transactions()
            p.begin_transaction()
            fake.txn_errors[ApiKey.ADD_PARTITIONS_TO_TXN].append(ErrorCode.CONCURRENT_TRANSACTIONS)
            fake.txn_errors[ApiKey.END_TXN].append(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            await p.send("t", b"x", partition=0)
            await p.commit_transaction()
        assert await read_all(fake, "read_committed") == [b"x"]

    run(main())


def test_a_timed_out_commit_can_be_called_again(run: Run) -> None:
    fake = FakeTxnCluster(1, topics={"t": 1})

    async def main() -> None:
        async with txn_producer(fake) as p:
            await p.init_transactions()
            p.begin_transaction()
            await p.send("t", b"x", partition=0)
            fake.response_delay_s = 0.2
            with pytest.raises(KafkaError, match="call it again"):
                await p.commit_transaction(timeout_ms=1)
            with pytest.raises(IllegalTransactionStateError):
                await p.abort_transaction()
            fake.response_delay_s = 0.0
            await p.commit_transaction()
            assert p.txn is not None
            assert p.txn.state is TxnState.READY

    run(main())


def test_read_committed_stops_at_the_last_stable_offset(run: Run) -> None:
    fake = FakeTxnCluster(1, topics={"t": 1})

    async def main() -> None:
        async with txn_producer(fake) as p:
            await p.init_transactions()
            p.begin_transaction()
            await p.send_and_wait("t", b"open", partition=0)
            assert await read_all(fake, "read_committed") == []
            assert await read_all(fake, "read_uncommitted") == [b"open"]
            await p.commit_transaction()
        assert await read_all(fake, "read_committed") == [b"open"]

    run(main())


def test_transactional_sync_facade(run: Run) -> None:
    from pyspark_log.client.sync import Producer

    fake = FakeTxnCluster(1, topics={"t": 1})
    with Producer({**BASE, "transactional.id": "sync"}, connector=fake.connector) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("t", b"s1", partition=0)
        p.commit_transaction()
        p.begin_transaction()
        p.send("t", b"s2", partition=0)
        handle = p.prepare_transaction()
    assert handle.transactional_id == "sync"
    assert not handle.empty
    assert asyncio.run(read_all(fake, "read_committed")) == [b"s1"]
