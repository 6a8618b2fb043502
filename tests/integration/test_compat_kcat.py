"""kcat (librdkafka 2.0 behind a CLI, /usr/bin/kcat) against a real pylog broker process.

kcat produces from stdin (records split at \\x1e, key and value at \\x1f; the same ``-H``
headers on every record of one run) or a whole file as one record, and consumes with a
length-prefixed ``-f`` format, so binary keys and values round-trip. It cannot set timestamps
or administer topics, and ``-L`` prints no cluster id: those parts use confluent-kafka to set
up, and kcat to read.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from pyspark_log.embedded import EmbeddedBroker
from tests.integration.compat import (
    ACKS,
    BIG_VALUE_BYTES,
    BROKER_OVERRIDES,
    CODECS,
    CRASH_SAFE_OVERRIDES,
    KCAT_KEY_DELIM,
    KCAT_MSG_DELIM,
    SMALL_SEGMENT_OVERRIDES,
    TIMEOUT_S,
    TIMESTAMP_QUERIES,
    Got,
    Headers,
    aio_consume,
    assert_codec_on_disk,
    assert_records,
    confluent_consume,
    confluent_producer_config,
    confluent_send,
    confluent_wait,
    kcat,
    kcat_consume,
    kcat_produce,
    kcat_produce_file,
    kcat_query_offset,
    kp_consume,
    now_ms,
    segment_files,
    timestamp_batches,
)

HEADERS: Headers = (("h1", b"v1"), ("dup", b"1"), ("dup", b"2"), ("empty", b""))
_SAFE = bytes(b for b in range(256) if b not in (KCAT_KEY_DELIM[0], KCAT_MSG_DELIM[0]))


# kafka-python loads its schemas with importlib.resources APIs deprecated in 3.11
pytestmark = pytest.mark.filterwarnings(r"ignore:.*is deprecated\. Use files\(\) instead:DeprecationWarning")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path_factory.mktemp("kcat"), overrides=BROKER_OVERRIDES) as b:
        yield b


@pytest.fixture(scope="module")
def admin(broker: EmbeddedBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def _metadata(bootstrap: str, topic: str | None = None) -> dict:
    args = ["-L", "-J", "-b", bootstrap, "-m", str(int(TIMEOUT_S))]
    if topic is not None:
        args += ["-t", topic]
    return json.loads(kcat(*args))


def _pairs(seed: str) -> list[tuple[bytes | None, bytes]]:
    """Keys, a null key, an empty key, an empty value, binary keys/values, a compressible value."""
    rnd = random.Random(seed)
    return [
        (b"key-0", b"plain value"),
        (None, b"null key"),
        (b"", b"empty key"),
        (b"empty-value", b""),
        (bytes(rnd.choice(_SAFE) for _ in range(200)), bytes(rnd.choice(_SAFE) for _ in range(5000))),
        (b"compressible", b"abc" * 20_000),
    ]


def _check(
    got: Sequence[Got], pairs: Sequence[tuple[bytes | None, bytes | None]], headers: Headers, *,
    start: int = 0, partition: int = 0, since_ms: int, until_ms: int, check_offsets: bool = True,
) -> None:  # fmt: skip
    """kcat lets librdkafka stamp CreateTime: check it lies in the window, then every field."""
    assert len(got) == len(pairs), f"consumed {len(got)} records, expected {len(pairs)}"
    for g in got:
        assert since_ms <= g.timestamp_ms <= until_ms, g.timestamp_ms
    want = [
        Got(partition, start + i, key, value, headers, g.timestamp_ms)
        for i, ((key, value), g) in enumerate(zip(pairs, got, strict=True))
    ]
    assert_records(got, want, check_offsets=check_offsets)


# -- metadata --------------------------------------------------------------------------------------
def test_metadata_lists_brokers_topics_and_partitions(
    broker: EmbeddedBroker, admin: AdminClient, topic_name: str
) -> None:
    admin.create_topics([NewTopic(topic_name, 3, 1)])[topic_name].result(TIMEOUT_S)
    md = _metadata(broker.bootstrap_servers)
    assert md["controllerid"] == 1
    assert md["brokers"] == [{"id": 1, "name": f"127.0.0.1:{broker.port}"}]
    [topic] = [t for t in md["topics"] if t["topic"] == topic_name]
    assert "error" not in topic
    assert [(p["partition"], p["leader"], p["replicas"], p["isrs"]) for p in topic["partitions"]] == [
        (i, 1, [{"id": 1}], [{"id": 1}]) for i in range(3)
    ]


# -- produce / consume matrix ----------------------------------------------------------------------
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("acks", ACKS)
def test_produce_consume_roundtrip(
    broker: EmbeddedBroker, topic_name: str, tmp_path: Path, acks: int, codec: str
) -> None:
    since = now_ms()
    pairs = _pairs(topic_name)
    kcat_produce(broker.bootstrap_servers, topic_name, pairs, headers=HEADERS, acks=acks, codec=codec)
    nulls: list[tuple[bytes | None, bytes]] = [(b"null-value", b""), (b"", b"null key via -Z")]
    kcat_produce(broker.bootstrap_servers, topic_name, nulls, acks=acks, codec=codec, empty_as_null=True)
    big = tmp_path / "big.bin"
    big.write_bytes(random.Random(codec).randbytes(BIG_VALUE_BYTES))
    kcat_produce_file(broker.bootstrap_servers, topic_name, big, key=b"big", acks=acks, codec=codec)
    until = now_ms()

    got = kcat_consume(broker.bootstrap_servers, topic_name, len(pairs) + 3)
    # arrival for acks=0, offsets too for acks 1/all
    _check(got[: len(pairs)], pairs, HEADERS, since_ms=since, until_ms=until, check_offsets=acks != 0)
    want_nulls = [(b"null-value", None), (None, b"null key via -Z")]
    _check(got[len(pairs) : -1], want_nulls, (), start=len(pairs), since_ms=since, until_ms=until)
    _check(got[-1:], [(b"big", big.read_bytes())], (), start=len(pairs) + 2, since_ms=since, until_ms=until)
    assert kcat_query_offset(broker.bootstrap_servers, topic_name, 0, -1) == len(pairs) + 3
    assert_codec_on_disk(broker, topic_name, codec)


# -- ListOffsets -----------------------------------------------------------------------------------
def test_list_offsets_earliest_latest_and_by_timestamp(broker: EmbeddedBroker, topic_name: str) -> None:
    base = now_ms() - 100_000
    producer = Producer(confluent_producer_config(broker.bootstrap_servers, **{"linger.ms": 100}))
    for batch in timestamp_batches(base):
        confluent_wait(producer, confluent_send(producer, topic_name, batch))
    bootstrap = broker.bootstrap_servers
    assert kcat_query_offset(bootstrap, topic_name, 0, -2) == 0  # earliest
    assert kcat_query_offset(bootstrap, topic_name, 0, -1) == 7  # latest
    answers = {delta: kcat_query_offset(bootstrap, topic_name, 0, base + delta) for delta in TIMESTAMP_QUERIES}
    assert answers == TIMESTAMP_QUERIES
    # reading from an offset found by time
    got = kcat_consume(bootstrap, topic_name, 2, offset=str(TIMESTAMP_QUERIES[55]))
    assert [(g.offset, g.timestamp_ms - base) for g in got] == [(5, 90), (6, 60)]


# -- auto-create -----------------------------------------------------------------------------------
def test_auto_create_on_metadata_and_produce(broker: EmbeddedBroker, topic_name: str) -> None:
    md = _metadata(broker.bootstrap_servers, f"{topic_name}-md")
    [topic] = md["topics"]
    assert topic["topic"] == f"{topic_name}-md"
    assert "error" not in topic
    assert [p["partition"] for p in topic["partitions"]] == [0]

    since = now_ms()
    kcat_produce(broker.bootstrap_servers, f"{topic_name}-p", [(b"k", b"v")])
    _check(kcat_consume(broker.bootstrap_servers, f"{topic_name}-p", 1), [(b"k", b"v")], (), since_ms=since,
           until_ms=now_ms())  # fmt: skip
    names = {t["topic"] for t in _metadata(broker.bootstrap_servers)["topics"]}
    assert {f"{topic_name}-md", f"{topic_name}-p"} <= names


# -- many partitions ---------------------------------------------------------------------------------
def test_many_partitions_spread_by_key(broker: EmbeddedBroker, admin: AdminClient, topic_name: str) -> None:
    partitions = 32
    admin.create_topics([NewTopic(topic_name, partitions, 1)])[topic_name].result(TIMEOUT_S)
    pairs: list[tuple[bytes | None, bytes]] = [(f"user-{i % 64}".encode(), b"value-%d" % i) for i in range(320)]
    kcat_produce(broker.bootstrap_servers, topic_name, pairs, partition=None, extra=["-X", "linger.ms=20"])
    got = kcat_consume(broker.bootstrap_servers, topic_name, len(pairs), partition=None)
    assert len(got) == len(pairs)
    by_key: dict[bytes | None, set[int]] = defaultdict(set)
    per_partition: dict[int, list[Got]] = defaultdict(list)
    for g in got:
        by_key[g.key].add(g.partition)
        per_partition[g.partition].append(g)
    assert all(len(parts) == 1 for parts in by_key.values()), "a key landed in two partitions"
    assert len(per_partition) >= 20, f"keys spread over only {len(per_partition)} partitions"
    for part, records in per_partition.items():
        records.sort(key=lambda g: g.offset)
        assert [g.offset for g in records] == list(range(len(records))), part
        sent = [value for key, value in pairs if key in {g.key for g in records}]
        assert [g.value for g in records] == sent, f"partition {part} holds other records or another order"
        assert kcat_query_offset(broker.bootstrap_servers, topic_name, part, -1) == len(records)


# -- fetches across segments -------------------------------------------------------------------------
@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_fetch_spans_many_segments(tmp_path: Path, codec: str) -> None:
    with EmbeddedBroker(tmp_path / "broker", overrides=SMALL_SEGMENT_OVERRIDES) as small:
        topic = "spanning"
        rnd = random.Random(codec)
        pairs: list[tuple[bytes | None, bytes]] = [
            (b"k%d" % i, bytes(rnd.choice(_SAFE) for _ in range(4000)) + b"." * 4000) for i in range(300)
        ]
        since = now_ms()
        kcat_produce(small.bootstrap_servers, topic, pairs, codec=codec, extra=["-X", "batch.size=32768"])
        until = now_ms()
        assert len(segment_files(small, topic)) >= 15  # >= 1.2 MB stored in 64 KiB segments
        assert_codec_on_disk(small, topic, codec)
        got = kcat_consume(small.bootstrap_servers, topic, len(pairs))
        _check(got, pairs, (), since_ms=since, until_ms=until)
        tail = kcat_consume(small.bootstrap_servers, topic, 100, offset="200")
        _check(tail, pairs[200:], (), start=200, since_ms=since, until_ms=until)


# -- cross-client ------------------------------------------------------------------------------------
@pytest.mark.parametrize("reader", ["confluent", "kafka-python", "aiokafka"])
def test_other_clients_read_what_kcat_wrote(broker: EmbeddedBroker, topic_name: str, reader: str) -> None:
    pairs = _pairs(topic_name)
    since = now_ms()
    kcat_produce(broker.bootstrap_servers, topic_name, pairs[:3], headers=HEADERS, codec="zstd")
    kcat_produce(broker.bootstrap_servers, topic_name, pairs[3:], headers=HEADERS, codec="gzip")
    until = now_ms()
    consume = {"confluent": confluent_consume, "kafka-python": kp_consume, "aiokafka": aio_consume}[reader]
    _check(consume(broker.bootstrap_servers, topic_name, len(pairs)), pairs, HEADERS, since_ms=since, until_ms=until)


# -- restarts ----------------------------------------------------------------------------------------
def _numbered(tag: str, start: int, count: int) -> list[tuple[bytes | None, bytes]]:
    return [(f"{tag}-{i}".encode(), b"value-%d" % i) for i in range(start, start + count)]


def test_clean_restart_keeps_everything(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "broker", overrides=BROKER_OVERRIDES) as b:
        since = now_ms()
        sent = _numbered("a", 0, 30)
        kcat_produce(b.bootstrap_servers, "restart", sent)
        b.restart()
        more = _numbered("b", 30, 30)
        kcat_produce(b.bootstrap_servers, "restart", more)
        b.restart()
        _check(kcat_consume(b.bootstrap_servers, "restart", 60), sent + more, (), since_ms=since, until_ms=now_ms())


def test_crash_loses_nothing_acknowledged(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "broker", overrides={**BROKER_OVERRIDES, **CRASH_SAFE_OVERRIDES}) as b:
        since = now_ms()
        sent: list[tuple[bytes | None, bytes]] = []
        for round_ in range(3):
            batch = _numbered(f"r{round_}", len(sent), 25)
            kcat_produce(b.bootstrap_servers, "crash", batch, codec="snappy")  # exits 0 once all are acked
            sent += batch
            b.kill()
            b.start()
        _check(kcat_consume(b.bootstrap_servers, "crash", len(sent)), sent, (), since_ms=since, until_ms=now_ms())
