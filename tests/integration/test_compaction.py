"""Log compaction against a real broker process with confluent-kafka (Kafka documentation §4.8 "Log
Compaction"; issue 13).

a consumer reading from the start sees at least the final state of every record, in write order, and offsets
never change. Keyed overwrites and tombstones go to a
compacted topic with small segments; once the cleaner reports the log clean (its
``cleaner-offset-checkpoint`` reaches the active segment), a consumer from offset 0 gets exactly
the latest record of every key, in offset order, at the offsets the producer was given. A
record without a key is refused with INVALID_RECORD (KIP-467).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from pyspark_log.embedded import EmbeddedBroker
from tests.integration.compat import (
    TIMEOUT_S,
    Rec,
    confluent_consume,
    confluent_consumer,
    confluent_producer_config,
    confluent_send,
    confluent_wait,
    disk_batches,
    kp_consume,
    kp_produce,
    segment_files,
)
from tests.waiting import Deadline, wait_until

SEGMENT_MS = 1500
CLEANER_OVERRIDES = {
    "log.cleaner.backoff.ms": "50",
    "log.cleaner.dedupe.buffer.size": str(1 << 20),
    "log.cleaner.min.cleanable.ratio": "0.01",
}


@pytest.fixture
def cleaning_broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path / "broker", overrides=CLEANER_OVERRIDES) as b:
        yield b


def create_compacted(broker: EmbeddedBroker, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    config = {"cleanup.policy": "compact", "segment.bytes": "4096", "segment.ms": str(SEGMENT_MS)}
    futures = admin.create_topics([NewTopic(topic, 1, 1, config=config)], operation_timeout=TIMEOUT_S)
    futures[topic].result(TIMEOUT_S)


def cleaned_up_to(broker: EmbeddedBroker, topic: str) -> int:
    """The first dirty offset the cleaner recorded for ``topic``-0 (−1: never cleaned)."""
    path = broker.data_dir / "logs" / "cleaner-offset-checkpoint"
    if not path.exists():
        return -1
    for line in path.read_text().splitlines()[2:]:
        name, partition, offset = line.split()
        if name == topic and partition == "0":
            return int(offset)
    return -1


def test_section_4_8_consumer_from_zero_gets_the_latest_value_of_every_key(
    cleaning_broker: EmbeddedBroker, topic_name: str
) -> None:
    broker = cleaning_broker
    create_compacted(broker, topic_name)
    producer = Producer(confluent_producer_config(broker.bootstrap_servers, **{"linger.ms": 0}))
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    produced_bytes = 0
    for round_ in range(12):
        records = [Rec(f"key-{k}".encode(), f"value-{round_}-{k}-".encode() + b"x" * 80) for k in range(20)]
        if round_ == 11:  # tombstones for five keys
            records = [Rec(f"key-{k}".encode(), None) for k in range(5)]
        acked = confluent_wait(producer, confluent_send(producer, topic_name, records))
        for rec, (_, offset) in zip(records, acked, strict=True):
            assert rec.key is not None
            produced_bytes += len(rec.key) + len(rec.value or b"")
            latest[rec.key] = (offset, rec.value)
    time.sleep(SEGMENT_MS / 1000 + 0.1)  # segment.ms: the next append rolls the active segment
    sentinel = confluent_wait(producer, confluent_send(producer, topic_name, [Rec(b"sentinel", b"s")]))[0][1]
    latest[b"sentinel"] = (sentinel, b"s")
    wait_until(lambda: cleaned_up_to(broker, topic_name) >= sentinel, "the cleaner", timeout_s=60)
    size_after = sum(p.stat().st_size for p in segment_files(broker, topic_name))
    assert size_after < produced_bytes / 3, (produced_bytes, size_after)  # the files shrank

    got = confluent_consume(broker.bootstrap_servers, topic_name, len(latest), timeout_s=TIMEOUT_S)
    want = sorted((offset, key, value) for key, (offset, value) in latest.items())
    assert [(g.offset, g.key, g.value) for g in got] == want
    # nothing more than that: the consumer is at the log end
    extra = confluent_consume(broker.bootstrap_servers, topic_name, 1, start=sentinel + 1, timeout_s=1)
    assert extra == []
    assert "log cleaning failed" not in broker.output()


def test_kip_467_null_key_refused_on_a_compacted_topic(cleaning_broker: EmbeddedBroker, topic_name: str) -> None:
    create_compacted(cleaning_broker, topic_name)
    producer = Producer(confluent_producer_config(cleaning_broker.bootstrap_servers, retries=0))
    reports = confluent_send(producer, topic_name, [Rec(None, b"no key")])
    assert producer.flush(TIMEOUT_S) == 0
    err = reports[0][0]
    assert err is not None
    assert err.code() == KafkaError.INVALID_RECORD, err
    # a keyed record still goes in
    assert confluent_wait(producer, confluent_send(producer, topic_name, [Rec(b"k", b"v")])) == [(0, 0)]


KILLS = 20


def consume_to_end(broker: EmbeddedBroker, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """``(offset, key, value)`` of every record of partition 0, up to the high watermark."""
    consumer = confluent_consumer(broker.bootstrap_servers)
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[tuple[int, bytes | None, bytes | None]] = []
        deadline = Deadline(TIMEOUT_S)
        while (not out or out[-1][0] < high - 1) and not deadline.expired():
            for msg in consumer.consume(num_messages=1000, timeout=0.2):
                assert msg.error() is None, msg.error()
                out.append((msg.offset(), msg.key(), msg.value()))
        return out
    finally:
        consumer.close()


def test_sigkill_while_cleaning_leaves_a_log_with_the_latest_value_of_every_key(tmp_path: Path) -> None:
    """Issue 13: "SIGKILL of the broker at random moments during cleaning (≥ 20 times) leaves a log
    that recovers and still holds the latest value of every key" — the crash-safe swap
    (``broker.log.cleaner.swap``) and start-up recovery at whatever step the kill hit."""
    rng = random.Random(13)
    overrides = {**CLEANER_OVERRIDES, "log.cleaner.backoff.ms": "10"}
    broker = EmbeddedBroker(tmp_path / "broker", overrides=overrides).start()
    try:
        topic = "compacted-kill"
        config = {"cleanup.policy": "compact", "segment.bytes": "2048"}
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic(topic, 1, 1, config=config)], operation_timeout=TIMEOUT_S)[topic].result(
            TIMEOUT_S
        )
        latest: dict[bytes, bytes] = {}
        cleaned = 0
        mid_clean = 0  # kills that left a clean's files behind (recovery had work to do)
        for kill in range(KILLS):
            producer = Producer(confluent_producer_config(broker.bootstrap_servers, **{"linger.ms": 0}))
            for round_ in range(3):
                records = [Rec(f"key-{k}".encode(), f"v{kill}-{round_}-{k}-".encode() + b"x" * 60) for k in range(15)]
                confluent_wait(producer, confluent_send(producer, topic, records))
                latest.update({r.key: r.value for r in records if r.key is not None and r.value is not None})
            del producer
            time.sleep(rng.uniform(0.0, 0.3))  # the cleaner works on the new segments meanwhile
            if kill % 5 == 4:  # some kills surely follow a clean (waited for as state: a busy machine)
                wait_until(
                    lambda past=cleaned: cleaned_up_to(broker, topic) > past,
                    "a recorded clean",
                    timeout_s=3 * TIMEOUT_S,
                )
            cleaned = max(cleaned, cleaned_up_to(broker, topic))
            broker.kill()
            leftovers = {p.suffix for p in (broker.data_dir / "logs" / f"{topic}-0").iterdir()}
            mid_clean += bool(leftovers & {".cleaned", ".swap"})
            broker.start()
            got = consume_to_end(broker, topic)
            assert {key: value for _, key, value in got} == latest, f"after kill {kill + 1}"
            offsets = [offset for offset, _, _ in got]
            assert offsets == sorted(set(offsets))
        assert cleaned > 0  # the kills did hit a cleaning broker
        print(f"{mid_clean} of {KILLS} kills interrupted a clean")
        assert "log cleaning failed" not in broker.output()
    finally:
        broker.close()


def test_internal_topics_are_compacted(cleaning_broker: EmbeddedBroker, topic_name: str) -> None:
    """``__consumer_offsets`` (and ``__transaction_state``, same code path) are created with
    ``cleanup.policy=compact``, so the cleaner keeps them to the live groups' offsets."""
    broker = cleaning_broker
    create_compacted(broker, topic_name)
    consumer = confluent_consumer(broker.bootstrap_servers, **{"group.id": "compaction-check"})
    try:
        consumer.commit(offsets=[TopicPartition(topic_name, 0, 0)], asynchronous=False)
    finally:
        consumer.close()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    resource = ConfigResource(ResourceType.TOPIC, "__consumer_offsets")
    configs = admin.describe_configs([resource])[resource].result(TIMEOUT_S)
    assert configs["cleanup.policy"].value == "compact"


def test_kafka_python_reads_a_compacted_log_and_gets_invalid_record_for_a_null_key(
    cleaning_broker: EmbeddedBroker, topic_name: str
) -> None:
    """The same guarantees seen by kafka-python: after cleaning, exactly the latest record per key
    at its original offset (compacted batches hold fewer records than their offset range)."""
    from kafka.errors import InvalidRecordError

    broker = cleaning_broker
    create_compacted(broker, topic_name)
    latest: dict[bytes, tuple[int, bytes]] = {}
    for round_ in range(8):
        records = [Rec(f"k{k}".encode(), f"r{round_}-{k}-".encode() + b"y" * 100) for k in range(10)]
        for rec, (_, offset) in zip(records, kp_produce(broker.bootstrap_servers, topic_name, records), strict=True):
            assert rec.key is not None
            assert rec.value is not None
            latest[rec.key] = (offset, rec.value)
    time.sleep(SEGMENT_MS / 1000 + 0.1)
    sentinel = kp_produce(broker.bootstrap_servers, topic_name, [Rec(b"sentinel", b"s")])[0][1]
    latest[b"sentinel"] = (sentinel, b"s")
    wait_until(lambda: cleaned_up_to(broker, topic_name) >= sentinel, "the cleaner", timeout_s=60)
    got = kp_consume(broker.bootstrap_servers, topic_name, len(latest))
    assert [(g.offset, g.key, g.value) for g in got] == sorted((o, k, v) for k, (o, v) in latest.items())
    with pytest.raises(InvalidRecordError):
        kp_produce(broker.bootstrap_servers, topic_name, [Rec(None, b"no key")], retries=0)


def test_kip_534_tombstone_batches_get_a_delete_horizon_and_clients_read_their_timestamps(
    cleaning_broker: EmbeddedBroker, topic_name: str
) -> None:
    """KIP-534: the clean that first keeps a tombstone stamps its batch's delete horizon (the
    ``hasDeleteHorizonMs`` attribute, baseTimestamp = clean time + ``delete.retention.ms``); the
    records' timestamps are unchanged for confluent-kafka and kafka-python readers."""
    broker = cleaning_broker
    create_compacted(broker, topic_name)
    producer = Producer(confluent_producer_config(broker.bootstrap_servers, **{"linger.ms": 0}))
    base_ts = (int(time.time()) - 600) * 1000
    records = [Rec(f"k{k}".encode(), b"v" * 50, timestamp_ms=base_ts + k) for k in range(20)]
    records += [Rec(f"k{k}".encode(), None, timestamp_ms=base_ts + 100 + k) for k in range(5)]  # tombstones
    confluent_wait(producer, confluent_send(producer, topic_name, records))
    time.sleep(SEGMENT_MS / 1000 + 0.1)  # segment.ms: the next append rolls the active segment
    sentinel = confluent_wait(producer, confluent_send(producer, topic_name, [Rec(b"sentinel", b"s")]))[0][1]
    wait_until(lambda: cleaned_up_to(broker, topic_name) >= sentinel, "the cleaner", timeout_s=60)

    stamped = [h for h, recs in disk_batches(broker, topic_name) if any(r.value is None for r in recs)]
    assert stamped, "no tombstone batch on disk"
    assert all(h.has_delete_horizon for h in stamped)
    day_ms = 86_400_000  # delete.retention.ms default
    assert all(h.base_timestamp > time.time() * 1000 + day_ms - 120_000 for h in stamped)

    want = {(f"k{k}".encode(), None if k < 5 else b"v" * 50, base_ts + (100 + k if k < 5 else k)) for k in range(20)}
    got = confluent_consume(broker.bootstrap_servers, topic_name, 21, timeout_s=TIMEOUT_S)
    assert {(g.key, g.value, g.timestamp_ms) for g in got if g.key != b"sentinel"} == want
    got_kp = kp_consume(broker.bootstrap_servers, topic_name, 21)
    assert {(g.key, g.value, g.timestamp_ms) for g in got_kp if g.key != b"sentinel"} == want
