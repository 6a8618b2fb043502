"""AsyncConsumer against the fake cluster: assignment, positions, poll, offset lookups,
out-of-range handling and the raw range reader."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from pyspark_log.client.consumer import AsyncConsumer
from pyspark_log.client.errors import ClientClosedError, OffsetOutOfRangeError, UnknownTopicOrPartitionError
from pyspark_log.client.types import OffsetAndTimestamp, TopicPartition
from pyspark_log.records import compression
from pyspark_log.records.batch import ProducerRecord, encode_batch
from pyspark_log.records.control import ControlType, encode_control_batch
from pyspark_log.records.header import iter_batch_headers
from pyspark_log.wire import ApiKey, ErrorCode

from .fake_broker import FakeCluster

Run = Callable[[Any], Any]
TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def fill(fake: FakeCluster, tp: TopicPartition, n: int, *, per_batch: int = 3, ts0: int = 1000) -> None:
    i = 0
    while i < n:
        recs = [
            ProducerRecord(f"k{j}".encode(), f"{tp.partition}-{j}".encode(), ts0 + j)
            for j in range(i, min(n, i + per_batch))
        ]
        fake.append(tp.topic, tp.partition, encode_batch(recs, codec=compression.LZ4))
        i += per_batch


def consumer(fake: FakeCluster, **cfg: Any) -> AsyncConsumer:
    config = {
        "bootstrap.servers": "fake:9092",
        "fetch.max.wait.ms": 20,
        "retry.backoff.ms": 1,
        "retry.backoff.max.ms": 5,
    }
    config.update({k.replace("_", "."): v for k, v in cfg.items()})
    return AsyncConsumer(config, connector=fake.connector)


async def poll_n(c: AsyncConsumer, n: int, timeout_s: float = 5) -> list[Any]:
    out: list[Any] = []
    async with asyncio.timeout(timeout_s):
        while len(out) < n:
            out += await c.poll(100)
    return out


def test_poll_returns_every_record_in_order_per_partition(run: Run) -> None:
    fake = FakeCluster(2, topics={"t": 2})
    fill(fake, TP0, 10)
    fill(fake, TP1, 7)

    async def main() -> None:
        async with consumer(fake, auto_offset_reset="earliest", max_poll_records=4) as c:
            c.assign([TP0, TP1])
            recs = await poll_n(c, 17)
            assert len(recs) == 17
            for tp, n in ((TP0, 10), (TP1, 7)):
                mine = [r for r in recs if r.topic_partition == tp]
                assert [r.offset for r in mine] == list(range(n))
                assert [r.value for r in mine] == [f"{tp.partition}-{j}".encode() for j in range(n)]
            assert await c.position(TP0) == 10
            assert c.highwater(TP0) == 10
            assert await c.poll(50) == []

    run(main())


def test_latest_by_default_then_new_records(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 1})
    fill(fake, TP0, 5)

    async def main() -> None:
        async with consumer(fake) as c:
            c.assign([TP0])
            assert await c.position(TP0) == 5
            assert await c.poll(50) == []
            fill(fake, TP0, 2, ts0=9)
            recs = await poll_n(c, 2)
            assert [r.offset for r in recs] == [5, 6]

    run(main())


def test_seek_and_seek_to_beginning_and_end(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 1})
    fill(fake, TP0, 9)

    async def main() -> None:
        async with consumer(fake) as c:
            c.assign([TP0])
            c.seek(TP0, 4)  # mid-batch: the batch [3, 6) comes back whole, 3 is skipped
            recs = await poll_n(c, 5)
            assert [r.offset for r in recs] == [4, 5, 6, 7, 8]
            c.seek_to_beginning()
            assert [r.offset for r in await poll_n(c, 9)] == list(range(9))
            c.seek_to_end([TP0])
            assert await c.position(TP0) == 9

    run(main())


def test_offset_lookups(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 2})
    fill(fake, TP0, 6, ts0=100)

    async def main() -> None:
        async with consumer(fake) as c:
            assert await c.beginning_offsets([TP0, TP1]) == {TP0: 0, TP1: 0}
            assert await c.end_offsets([TP0, TP1]) == {TP0: 6, TP1: 0}
            found = await c.offsets_for_times({TP0: 103, TP1: 0})
            assert found[TP0] == OffsetAndTimestamp(3, 103, None)
            assert found[TP1] is None
            assert (await c.offsets_for_times({TP0: 10_000}))[TP0] is None
            missing = TopicPartition("nope", 0)
            with pytest.raises(UnknownTopicOrPartitionError):
                await c.end_offsets([missing])
            assert await c.end_offsets([missing, TP0], skip_missing=True) == {TP0: 6}
            assert await c.end_offsets([TopicPartition("t", 7)], skip_missing=True) == {}
            assert await c.list_topics() == {"t": [0, 1]}

    run(main())


def test_out_of_range_with_reset_none_raises_with_reset_earliest_recovers(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 1})
    fill(fake, TP0, 3)

    async def main() -> None:
        async with consumer(fake, auto_offset_reset="none") as c:
            c.assign([TP0])
            with pytest.raises(OffsetOutOfRangeError, match="seek"):
                await c.poll(1000)
            c.seek(TP0, 50)
            with pytest.raises(OffsetOutOfRangeError) as info:
                await c.poll(1000)
            assert info.value.partitions == {TP0: 50}
            assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
            c.seek(TP0, 1)
            assert [r.offset for r in await poll_n(c, 2)] == [1, 2]
        async with consumer(fake, auto_offset_reset="earliest") as c:
            c.assign([TP0])
            c.seek(TP0, 50)
            assert [r.offset for r in await poll_n(c, 3)] == [0, 1, 2]

    run(main())


def test_control_batches_and_gaps_are_skipped(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 1})
    txn = encode_batch([ProducerRecord(None, b"in-txn", 1)], producer_id=9, producer_epoch=0, transactional=True)
    fake.append("t", 0, txn)
    fake.append("t", 0, encode_control_batch(ControlType.COMMIT, 9, 0, 0, 2))
    fake.append("t", 0, encode_batch([ProducerRecord(None, b"after", 3)]))

    async def main() -> None:
        async with consumer(fake, auto_offset_reset="earliest", isolation_level="read_committed") as c:
            c.assign([TP0])
            recs = await poll_n(c, 2)
            assert [(r.offset, r.value) for r in recs] == [(0, b"in-txn"), (2, b"after")]
            assert await c.position(TP0) == 3

    run(main())


def test_leader_move_is_followed(run: Run) -> None:
    fake = FakeCluster(2, topics={"t": 1})
    fill(fake, TP0, 3)

    async def main() -> None:
        async with consumer(fake, auto_offset_reset="earliest") as c:
            c.assign([TP0])
            await poll_n(c, 3)
            fake.leaders[("t", 0)] = 1
            fill(fake, TP0, 2, ts0=50)
            # the fake serves fetches from any node; the metadata refresh after errors and
            # the max-age timer keep the consumer going either way
            assert [r.offset for r in await poll_n(c, 2)] == [3, 4]

    run(main())


def test_pause_and_resume(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 2})
    fill(fake, TP0, 3)
    fill(fake, TP1, 3)

    async def main() -> None:
        async with consumer(fake, auto_offset_reset="earliest") as c:
            c.assign([TP0, TP1])
            c.pause([TP1])
            recs = await poll_n(c, 3)

            def fetches() -> list[Any]:
                return [req for key, _, req in fake.requests if key == ApiKey.FETCH]

            # keep polling until two more fetches were answered: TP1 had every chance to arrive
            seen = len(fetches())
            async with asyncio.timeout(10):
                while len(fetches()) < seen + 2:
                    recs += await c.poll(10)
            assert {r.partition for r in recs} == {0}
            assert not [p for req in fetches() for t in req.topics for p in t.partitions if p.partition == 1]
            c.resume([TP1])
            assert {r.partition for r in await poll_n(c, 3)} == {1}

    run(main())


def test_offsets_and_fetches_of_a_newly_tracked_topic_skip_the_refresh_spacing(run: Run) -> None:
    """Right after a metadata refresh (here: list_topics), the first ListOffsets or Fetch of a topic
    the client did not track yet refreshes at once, as the Java client's
    ``requestUpdateForNewTopics``, instead of waiting ``retry.backoff.ms`` (the Spark source's
    first ListOffsets of a query waited 100 ms for it)."""
    fake = FakeCluster(1, topics={"t": 1, "u": 1})
    fill(fake, TP0, 3)

    async def main() -> None:
        async with consumer(fake, retry_backoff_ms=60_000, retry_backoff_max_ms=60_000) as c:
            async with asyncio.timeout(10):  # far below the 60 s spacing
                assert await c.list_topics() == {"t": [0], "u": [0]}
                assert await c.end_offsets([TP0]) == {TP0: 3}
                assert await c.list_topics() == {"t": [0], "u": [0]}
                raw = await c.fetch_raw(TopicPartition("u", 0), 0, 1 << 20)
                assert raw.records == b""

    run(main())


def test_fetch_raw_returns_whole_batches_and_offsets(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 1})
    fill(fake, TP0, 9)

    async def main() -> None:
        async with consumer(fake) as c:
            raw = await c.fetch_raw(TP0, 4, 1)  # smaller than a batch: still one whole batch
            records, hw, lso, log_start, aborted = raw
            headers = [h for _, h in iter_batch_headers(records)]
            assert [h.base_offset for h in headers] == [3]
            assert (hw, lso, log_start, aborted) == (9, 9, 0, [])
            assert raw.next_offset(4) == 6
            everything = await c.fetch_raw(TP0, 0, 1 << 20)
            assert everything.next_offset(0) == 9
            empty = await c.fetch_raw(TP0, 9, 1 << 20)
            assert empty.records == b""
            assert empty.next_offset(9) == 9
            with pytest.raises(OffsetOutOfRangeError):
                await c.fetch_raw(TP0, 99, 1 << 20)
            with pytest.raises(UnknownTopicOrPartitionError):
                await c.fetch_raw(TopicPartition("nope", 0), 0, 1 << 20)

    run(main())


def test_fetch_raw_asks_again_after_a_throttled_fetch_without_data(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka documentation §4.9 "Quotas": a throttled fetch answer carries no data — a throttled Fetch carries no
    partitions (as Kafka's throttled response); fetch_raw waits out the throttle and asks again."""
    fake = FakeCluster(1, topics={"t": 1})
    fill(fake, TP0, 3)
    original = fake.handle
    fetches: list[int] = []

    def throttle_first_fetch(node: int, api_key: int, version: int, req: Any) -> dict[str, Any] | None:
        if api_key == ApiKey.FETCH:
            fetches.append(version)
            if len(fetches) == 1:
                return {"throttle_time_ms": 50, "error_code": 0, "session_id": 0, "responses": []}
        return original(node, api_key, version, req)

    monkeypatch.setattr(fake, "handle", throttle_first_fetch)

    async def main() -> None:
        async with consumer(fake) as c:
            raw = await c.fetch_raw(TP0, 0, 1 << 20)
            assert raw.next_offset(0) == 3

    run(main())
    assert len(fetches) == 2


def test_closed_consumer_refuses_calls(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 1})

    async def main() -> None:
        c = await consumer(fake).start()
        await c.close()
        with pytest.raises(ClientClosedError):
            await c.poll(0)

    run(main())


def test_when_the_fetcher_dies_poll_raises_instead_of_hanging(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 1})

    async def main() -> None:
        async with consumer(fake, auto_offset_reset="earliest") as c:
            c.assign([TP0])

            def boom() -> float:
                raise RuntimeError("bug in the fetcher")

            c.fetcher._send_fetches = boom  # type: ignore[method-assign]
            c.fetcher._wakeup.set()
            with pytest.raises(ClientClosedError, match="bug in the fetcher"):
                await c.poll(5000)

    run(main())


def test_commit_and_committed_with_manual_assignment(run: Run) -> None:
    fake = FakeCluster(1, topics={"t": 2})
    fill(fake, TP0, 4)

    async def main() -> None:
        async with consumer(fake, group_id="g", auto_offset_reset="earliest") as c:
            c.assign([TP0, TP1])
            await poll_n(c, 4)
            await c.position(TP1)
            await c.commit()
            assert fake.committed == {("g", "t", 0): 4, ("g", "t", 1): 0}
            await c.commit({TP1: 2})
            got = await c.committed([TP0, TP1, TopicPartition("t", 5)])
            assert {tp: (om.offset if om else None) for tp, om in got.items()} == {
                TP0: 4,
                TP1: 2,
                TopicPartition("t", 5): None,
            }
        async with consumer(fake) as c:
            with pytest.raises(ValueError, match=r"group\.id"):
                await c.commit({TP0: 1})

    run(main())
