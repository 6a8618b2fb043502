"""pylog's client and confluent-kafka (librdkafka) read each other's records through a real
pylog broker; group offsets committed by pylog's admin are visible (when the broker has groups)."""

from __future__ import annotations

import confluent_kafka as ck
import pytest

from pyspark_log.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from pyspark_log.embedded import EmbeddedBroker
from tests.waiting import Deadline


def make_topic(broker: EmbeddedBroker, name: str, partitions: int = 2) -> None:
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as a:
        a.create_topics([NewTopic(name, partitions, 1)])


@pytest.mark.parametrize("codec", ["gzip", "lz4", "zstd", "snappy"])
def test_confluent_reads_what_pylog_wrote(broker: EmbeddedBroker, topic_name: str, codec: str) -> None:
    make_topic(broker, topic_name)
    sent = [(f"k{i % 5}".encode(), f"value-{i}".encode() * (i % 7 + 1), [("h", f"{i}".encode())]) for i in range(60)]
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "compression.type": codec}) as p:
        for key, value, headers in sent:
            p.send(topic_name, value, key=key, headers=headers)
        p.flush()
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "interop", "enable.auto.commit": False})
    try:
        c.assign([ck.TopicPartition(topic_name, p, 0) for p in range(2)])
        got = []
        deadline = Deadline(30)
        while len(got) < len(sent) and not deadline.expired():
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append((msg.key(), msg.value(), msg.headers()))
    finally:
        c.close()
    assert sorted(got) == sorted((k, v, h) for k, v, h in sent)


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_third_party_consumers_read_send_records_with_and_without_keys(
    broker: EmbeddedBroker, topic_name: str, codec: str
) -> None:
    """Plain ``send()`` calls (the lanes: keyed rows, and rows without keys for the sticky
    partitioner, in alternating runs) read back by confluent-kafka and kafka-python: null keys
    stay null, every partition holds its records in the order they were sent."""
    import kafka

    make_topic(broker, topic_name, partitions=3)
    sent = [(None if (i // 40) % 2 else f"k{i % 11}".encode(), f"value-{i}".encode()) for i in range(400)]
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "compression.type": codec}) as p:
        futures = [p.send(topic_name, value, key) for key, value in sent]
        p.flush()
        metas = [f.result(timeout=30) for f in futures]
    # each future has its record's fields, as a RecordFuture has (read from its batch)
    assert [(f.key, f.value, f.headers) for f in futures] == [(k, v, ()) for k, v in sent]
    where = {(m.partition, m.offset): i for i, m in enumerate(metas)}
    assert len(where) == len(sent)
    for partition in range(3):  # offsets rise with the order of the send() calls
        order = [where[k] for k in sorted(k for k in where if k[0] == partition)]
        assert order == sorted(order)
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "interop", "enable.auto.commit": False})
    try:
        c.assign([ck.TopicPartition(topic_name, p, 0) for p in range(3)])
        got: list[tuple[int, int, bytes | None, bytes, int]] = []
        deadline = Deadline(30)
        while len(got) < len(sent) and not deadline.expired():
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append((msg.partition(), msg.offset(), msg.key(), msg.value(), msg.timestamp()[1]))
    finally:
        c.close()
    assert sorted((k or b"", v) for _p, _o, k, v, _t in got) == sorted((k or b"", v) for k, v in sent)
    for partition, offset, key, value, stamp in got:  # each record where its future said, key kept
        assert sent[where[(partition, offset)]] == (key, value)
        assert futures[where[(partition, offset)]].timestamp == stamp
    kp = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest")
    try:
        kp.assign([kafka.TopicPartition(topic_name, p) for p in range(3)])
        read: list[tuple[bytes | None, bytes]] = []
        deadline = Deadline(30)
        while len(read) < len(sent) and not deadline.expired():
            for records in kp.poll(timeout_ms=500).values():
                read += [(r.key, r.value) for r in records]
    finally:
        kp.close()
    assert sorted((k or b"", v) for k, v in read) == sorted((k or b"", v) for k, v in sent)
    assert sum(k is None for k, _v in read) == sum(k is None for k, _v in sent)


def test_pylog_reads_what_confluent_wrote(broker: EmbeddedBroker, topic_name: str) -> None:
    make_topic(broker, topic_name)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap_servers, "compression.type": "lz4", "linger.ms": 5})
    for i in range(50):
        p.produce(topic_name, value=f"v{i}".encode(), key=f"k{i}".encode(), headers=[("n", f"{i}".encode())])
    assert p.flush(30) == 0
    with Consumer({"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest"}) as c:
        c.assign([TopicPartition(topic_name, p) for p in range(2)])
        got = []
        deadline = Deadline(30)
        while len(got) < 50 and not deadline.expired():
            got += c.poll(timeout_ms=500)
    assert sorted((r.key, r.value, r.headers) for r in got) == sorted(
        (f"k{i}".encode(), f"v{i}".encode(), (("n", f"{i}".encode()),)) for i in range(50)
    )


def test_group_offsets_round_trip(broker: EmbeddedBroker, topic_name: str) -> None:
    make_topic(broker, topic_name)
    offsets = {TopicPartition(topic_name, 0): 3, TopicPartition(topic_name, 1): 0}
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as a:
        # the client retries COORDINATOR_NOT_AVAILABLE while __consumer_offsets is created and loaded
        a.alter_consumer_group_offsets("pylog-group", offsets, timeout_ms=30_000)
        got = a.list_consumer_group_offsets("pylog-group")
    assert {tp: om.offset for tp, om in got.items()} == offsets
