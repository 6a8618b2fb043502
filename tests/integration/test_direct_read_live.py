"""Direct segment reads beside a live broker: retention and the log cleaner change the files while
a task reads them (``pyspark_log.spark.direct_read``, no Spark needed: the driver's planning
and the task's read are called as the Spark source calls them).

* Retention deletes segments the reader has not opened yet: the segment it holds open stays
  readable (Kafka documentation §5.4.3 "Deletes": deletion does not block readers), and the rest of the range comes
  through the broker, which reports the deleted offsets as data loss (failOnDataLoss=false:
  skipped, exactly as the broker path skips them).
* The cleaner swaps segments (``.cleaned`` → ``.swap`` → live, old ones renamed ``.deleted``)
  while the reader is in the middle of the log: what it returns is a log the broker could have
  served — every record the broker serves after the clean is there, at its offset, and every
  record returned was produced at that offset (compaction only removes records; Kafka
  documentation §4.8: offsets never change).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyspark_log.client import (
    AdminClient,
    AlterConfigOp,
    ConfigResource,
    Consumer,
    NewTopic,
    Producer,
    ResourceType,
    TopicPartition,
)
from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.spark.client_access import open_access
from pyspark_log.spark.direct_read import plan_direct, read_direct
from pyspark_log.spark.options import parse_options
from pyspark_log.spark.planning import OffsetRange
from pyspark_log.spark.segment_reader import parse_properties, segment_bases
from tests.waiting import wait_until

OVERRIDES = {
    "log.retention.check.interval.ms": "200",
    "log.segment.delete.delay.ms": "0",
    "log.cleaner.backoff.ms": "100",
    "log.cleaner.dedupe.buffer.size": str(1 << 20),
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), overrides=OVERRIDES) as b:
        yield b


@pytest.fixture(scope="module")
def admin(broker: EmbeddedBroker) -> Iterator[AdminClient]:
    client = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    yield client
    client.close(timeout_ms=5_000)


def log_dir(broker: EmbeddedBroker) -> Path:
    return broker.data_dir / "logs"


def produce(broker: EmbeddedBroker, topic: str, records: list[tuple[bytes | None, bytes]]) -> list[int]:
    """Send each record in its own batch; returns their offsets."""
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    try:
        return [producer.send(topic, value, key=key).result(30).offset for key, value in records]
    finally:
        producer.close(timeout_ms=5_000)


def start_read(broker: EmbeddedBroker, topic: str, **extra: str) -> tuple[Iterator[object], int]:
    """Plan a files read of ``topic``-0 as the driver does; returns the task's batch iterator
    (not started) and the planned end."""
    node = parse_properties((log_dir(broker) / "meta.properties").read_text())["node.id"]
    raw = {
        "bootstrap.servers": broker.bootstrap_servers,
        "subscribe": topic,
        "readPath": "files",
        f"logDirs.{node}": str(log_dir(broker)),
        "kafka.max.partition.fetch.bytes": "256",  # many small chunks: the read spans the change
        **extra,
    }
    options = parse_options(raw, "batch")
    tp = TopicPartition(topic, 0)
    access = open_access(options)
    try:
        latest = access.latest_offsets([tp], options.isolation_level)
        earliest = access.earliest_offsets([tp])
        plan = plan_direct(options, access, latest)
    finally:
        access.close()
    return read_direct(options, open_access, OffsetRange(tp, earliest[tp], latest[tp]), plan[tp]), latest[tp]


def rows_of(batches: Iterator[object]) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    for batch in batches:
        data = batch.to_pydict()  # type: ignore[attr-defined]
        out.extend(zip(data["offset"], data["key"], data["value"], strict=True))
    return out


def test_retention_during_a_direct_read(broker: EmbeddedBroker, admin: AdminClient) -> None:
    topic = "direct-retention"
    admin.create_topics([NewTopic(topic, 1, 1, config={"segment.bytes": "1024"})])
    produce(broker, topic, [(None, f"r{i}-{'x' * 40}".encode()) for i in range(200)])
    directory = log_dir(broker) / f"{topic}-0"
    bases = segment_bases(os.listdir(directory))
    assert len(bases) > 5
    reader, end = start_read(broker, topic, failOnDataLoss="false")
    first = rows_of(iter([next(reader)]))  # segment 0 is open now
    assert first[0][0] == 0

    admin.incremental_alter_configs({ConfigResource(ResourceType.TOPIC, topic): [AlterConfigOp("retention.ms", "1")]})
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers})
    tp = TopicPartition(topic, 0)
    try:
        wait_until(
            lambda: consumer.beginning_offsets([tp])[tp] >= bases[-1], "retention to delete the segments", timeout_s=60
        )
        earliest = consumer.beginning_offsets([tp])[tp]
    finally:
        consumer.close(timeout_ms=5_000)
    assert not (directory / f"{bases[1]:020d}.log").exists()

    offsets = [o for o, _, _ in first + rows_of(reader)]
    # segment 0 from its open file, then (through the broker, the loss skipped) the retained log
    kept = [o for o in offsets if o < earliest]
    assert kept == list(range(len(kept)))
    assert len(kept) >= bases[1]
    assert [o for o in offsets if o >= earliest] == list(range(earliest, end))


def test_the_cleaner_swaps_segments_during_a_direct_read(broker: EmbeddedBroker, admin: AdminClient) -> None:
    topic = "direct-cleaner"
    config = {"cleanup.policy": "compact", "segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01"}
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])
    produced: dict[int, tuple[bytes, bytes]] = {}

    def write(round_: int) -> None:
        records = [(f"k{k}".encode(), f"{round_}-{k}-{'y' * 30}".encode()) for k in range(6)]
        if round_ < 8:
            records.append((f"once-{round_}".encode(), b"never overwritten"))  # survives every clean
        for offset, record in zip(produce(broker, topic, records), records, strict=True):
            produced[offset] = record

    for round_ in range(8):
        write(round_)
    directory = log_dir(broker) / f"{topic}-0"
    reader, end = start_read(broker, topic)
    seen = rows_of(iter([next(reader)]))  # the first segment is open now

    def inodes() -> dict[int, int]:
        out = {}
        for base in segment_bases(os.listdir(directory)):
            try:
                out[base] = (directory / f"{base:020d}.log").stat().st_ino
            except FileNotFoundError:
                continue
        return out

    before = inodes()
    for round_ in range(8, 16):
        write(round_)  # more dirty records of the same keys: the cleaner recopies the old segments
    wait_until(
        lambda: any(inodes().get(base) != ino for base, ino in before.items()),
        "the cleaner to swap a segment",
        timeout_s=60,
    )
    seen += rows_of(reader)

    offsets = [o for o, _, _ in seen]
    assert offsets == sorted(set(offsets))
    assert all(o < end for o in offsets)
    for offset, key, value in seen:
        assert produced[offset] == (key, value)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest"})
    tp = TopicPartition(topic, 0)
    try:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        served: set[int] = set()
        while consumer.position(tp) < end:
            served.update(r.offset for r in consumer.poll(1000) if r.offset < end)
    finally:
        consumer.close(timeout_ms=5_000)
    assert served  # the records of [0, end) the broker still serves after the clean ...
    assert len(served) < end  # ... fewer than were produced there (the cleaner removed some) ...
    assert served <= set(offsets)  # ... and every one of them was read from the files


def test_replicas_files_in_a_three_node_cluster(tmp_path: Path) -> None:
    """read_uncommitted may read any in-sync replica's files (below the high watermark they hold
    the leader's batches); read_committed reads only the leader's (a follower's ``.txnindex``
    may still miss a marker it has not fetched), so with only a follower mapped it reads through
    the broker (``auto``) or refuses at planning (``files``)."""
    from pyspark_log.embedded_cluster import EmbeddedCluster
    from pyspark_log.spark.specs import PylogOptionError

    topic = "direct-replicated"
    with EmbeddedCluster(tmp_path / "cluster", combined=True, brokers=(1, 2, 3)) as cluster:
        servers = cluster.bootstrap()
        admin = AdminClient({"bootstrap.servers": servers})
        try:
            admin.create_topics([NewTopic(topic, 1, 3, config={"segment.bytes": "2048"})])
        finally:
            admin.close(timeout_ms=5_000)
        wait_until(lambda: cluster.partitions(topic), "the topic in the metadata", timeout_s=60)
        producer = Producer({"bootstrap.servers": servers, "acks": "all", "linger.ms": 0})
        try:
            for i in range(120):
                producer.send(topic, f"rep-{i}".encode(), key=f"k{i % 5}".encode())
            producer.flush(60_000)
        finally:
            producer.close(timeout_ms=5_000)

        def whole() -> bool:
            view = cluster.partitions(topic).get(0)
            return view is not None and view.leader >= 0 and set(view.isr) == {1, 2, 3}

        wait_until(whole, "every replica in the ISR", timeout_s=60)
        view = cluster.partitions(topic)[0]
        follower = next(b for b in (1, 2, 3) if b != view.leader)
        tp = TopicPartition(topic, 0)

        def read_with(node_ids: tuple[int, ...], read_path: str, isolation: str) -> list[tuple[int, bytes]]:
            raw = {
                "bootstrap.servers": servers,
                "subscribe": topic,
                "readPath": read_path,
                "isolationLevel": isolation,
                **{f"logDirs.{n}": str(cluster.nodes[n].data_dir / "logs") for n in node_ids},
            }
            options = parse_options(raw, "batch")
            access = open_access(options)
            try:
                latest = access.latest_offsets([tp], options.isolation_level)
                plan = plan_direct(options, access, latest)[tp]
            finally:
                access.close()
            if isolation == "read_uncommitted":
                assert [b for b, _ in plan.replicas] == sorted(node_ids, key=lambda n: (n != view.leader, n))
            batches = read_direct(options, open_access, OffsetRange(tp, 0, latest[tp]), plan)
            return [(o, v) for o, _, v in rows_of(batches)]

        expected = [(i, f"rep-{i}".encode()) for i in range(120)]
        assert read_with((1, 2, 3), "files", "read_uncommitted") == expected
        assert read_with((follower,), "files", "read_uncommitted") == expected  # the follower's files
        assert read_with((follower,), "auto", "read_committed") == expected  # through the broker
        with pytest.raises(PylogOptionError, match=rf"led by broker {view.leader}, which has no logDirs"):
            read_with((follower,), "files", "read_committed")
