"""pylog's own client against a real broker process: produce with every acks setting and codec,
consume back byte-identical and in order (Kafka documentation §3.3 "Producer Configs" (`acks`) acks; Kafka
documentation §4.4 "The Producer" and §3.3 "Producer Configs" batching and compression)."""

from __future__ import annotations

from typing import Any

import pytest

from pyspark_log.client import (
    AdminClient,
    Consumer,
    ConsumerRecord,
    NewTopic,
    Producer,
    RecordTooLargeError,
    TopicPartition,
)
from pyspark_log.embedded import EmbeddedBroker
from tests.waiting import Deadline

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def create(broker: EmbeddedBroker, name: str, partitions: int, **config: str) -> None:
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(name, partitions, 1, config=config)])


def consume_all(broker: EmbeddedBroker, tps: list[TopicPartition], expected: int, **cfg: Any) -> list[ConsumerRecord]:
    config = {"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest", **cfg}
    out: list[ConsumerRecord] = []
    with Consumer(config) as c:
        c.assign(tps)
        # Read to the end of every partition (not just to ``expected`` records), so a duplicate or
        # an extra record shows up in ``out`` instead of being left unread.
        ends = c.end_offsets(tps)

        def at_end() -> bool:
            return all(c.position(tp) >= ends[tp] for tp in tps)

        deadline = Deadline(30)
        while (len(out) < expected or not at_end()) and not deadline.expired():
            out += c.poll(timeout_ms=500)
        assert at_end(), {tp: (c.position(tp), ends[tp]) for tp in tps}
    return out


def records_to_send(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n):
        kind = i % 4
        out.append(
            {
                "value": None if kind == 3 else bytes([i % 256]) * (i * 37 % 3000),
                "key": None if kind in (1, 3) else f"key-{i % 9}".encode(),
                "headers": [("h1", f"{i}".encode()), ("h-null", None)] if kind == 2 else None,
                "timestamp_ms": 1_600_000_000_000 + i,
            }
        )
    return out


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_every_acks_and_codec_round_trips(broker: EmbeddedBroker, topic_name: str, acks: str, codec: str) -> None:
    create(broker, topic_name, 3)
    sent = records_to_send(120)
    config = {"bootstrap.servers": broker.bootstrap_servers, "acks": acks, "compression.type": codec, "linger.ms": 5}
    with Producer(config) as p:
        futs = [p.send(topic_name, **r) for r in sent]
        p.flush(timeout_ms=30_000)
        metas = [f.result(timeout=10) for f in futs]
    if acks == "0":
        assert {m.offset for m in metas} == {-1}
    got = consume_all(broker, [TopicPartition(topic_name, p) for p in range(3)], len(sent))
    assert len(got) == len(sent)
    by_partition: dict[int, list[ConsumerRecord]] = {}
    for r in got:
        by_partition.setdefault(r.partition, []).append(r)
    for part, recs in by_partition.items():
        assert [r.offset for r in recs] == list(range(len(recs)))
        expected = [s for s, m in zip(sent, metas, strict=True) if m.partition == part]
        assert [(r.key, r.value, r.timestamp) for r in recs] == [
            (s["key"], s["value"], s["timestamp_ms"]) for s in expected
        ]
        assert [r.headers for r in recs] == [tuple(s["headers"] or ()) for s in expected]
    if acks != "0":
        for s, m in zip(sent, metas, strict=True):
            match = [r for r in by_partition[m.partition] if r.offset == m.offset]
            assert match[0].value == s["value"]


def test_one_megabyte_values(broker: EmbeddedBroker, topic_name: str) -> None:
    create(broker, topic_name, 1, **{"max.message.bytes": str(3 << 20)})
    values = [bytes([i]) * (1 << 20) for i in range(3)] + [b"z" * 1_000_000]
    config = {"bootstrap.servers": broker.bootstrap_servers, "max.request.size": 3 << 20, "compression.type": "none"}
    with Producer(config) as p:
        for v in values:
            p.send(topic_name, v)
        p.flush()
        with pytest.raises(RecordTooLargeError):
            p.send(topic_name, b"x" * (4 << 20))
    got = consume_all(broker, [TopicPartition(topic_name, 0)], 4, **{"max.partition.fetch.bytes": 1 << 20})
    assert [r.value for r in got] == values


def test_many_partitions(broker: EmbeddedBroker, topic_name: str) -> None:
    create(broker, topic_name, 48)
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 10}) as p:
        futs = [p.send(topic_name, f"{i}".encode(), key=f"user-{i}".encode()) for i in range(960)]
        p.flush()
        parts = {f.result().partition for f in futs}
    assert len(parts) > 40
    got = consume_all(broker, [TopicPartition(topic_name, p) for p in range(48)], 960)
    assert sorted(int(r.value) for r in got) == list(range(960))  # type: ignore[arg-type]


def test_fetch_spans_many_segments(broker: EmbeddedBroker, topic_name: str) -> None:
    create(broker, topic_name, 1, **{"segment.bytes": "4096"})
    tp = TopicPartition(topic_name, 0)
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0, "batch.size": 600}) as p:
        for i in range(300):
            p.send(topic_name, f"record-{i:04d}".encode() * 20)
            if i % 50 == 0:
                p.flush()
        p.flush()
    segments = list((broker.data_dir / "logs" / f"{topic_name}-0").glob("*.log"))
    assert len(segments) > 3, segments
    got = consume_all(broker, [tp], 300, **{"max.partition.fetch.bytes": 8192})
    assert [r.offset for r in got] == list(range(300))
    assert [r.value for r in got] == [f"record-{i:04d}".encode() * 20 for i in range(300)]
    with Consumer({"bootstrap.servers": broker.bootstrap_servers}) as c:
        offset, chunks = 0, 0
        while offset < 300:
            raw = c.fetch_raw(tp, offset, 5000)
            assert raw.records, f"no data at {offset}"
            offset = raw.next_offset(offset)
            chunks += 1
        assert chunks > 3
        assert raw.high_watermark == 300


def test_seek_and_positions(broker: EmbeddedBroker, topic_name: str) -> None:
    create(broker, topic_name, 1)
    tp = TopicPartition(topic_name, 0)
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 20}) as p:
        for i in range(30):
            p.send(topic_name, f"{i}".encode())
        p.flush()
    with Consumer({"bootstrap.servers": broker.bootstrap_servers, "fetch.max.wait.ms": 100}) as c:
        c.assign([tp])
        assert c.position(tp) == 30  # auto.offset.reset=latest
        c.seek(tp, 17)  # lands inside a batch: earlier records of it are skipped
        recs: list[ConsumerRecord] = []
        while len(recs) < 13:
            recs += c.poll(timeout_ms=1000)
        assert [r.offset for r in recs] == list(range(17, 30))
        c.seek_to_beginning([tp])
        assert c.position(tp) == 0
