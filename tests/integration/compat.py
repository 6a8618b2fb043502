"""Shared parts of the client compatibility matrix (``test_compat_*.py``).

Each client gets a small adapter with the same shape, so every test file (and the cross-client
checks) speaks in the same terms:

- ``*_produce(bootstrap, topic, records, acks=, codec=, partition=)`` sends ``Rec`` s in order
  and returns the ``(partition, offset)`` each was acknowledged at (offset -1 under acks=0);
- ``*_consume(bootstrap, topic, count, partitions=)`` reads from the beginning until ``count``
  records arrived (or the deadline) and returns them as ``Got`` s.

Every wait is bounded (``TIMEOUT_S``) and polls; nothing sleeps for time.
"""

from __future__ import annotations

import asyncio
import random
import re
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark_log.embedded import EmbeddedBroker
from tests.on_disk import disk_batches, segment_files  # noqa: F401  (re-exported for the matrix tests)
from tests.waiting import Deadline, wait_until

BIG_VALUE_BYTES = 1 << 20
MAX_BYTES = 4 << 20  # broker message.max.bytes and client max request size: a 1 MiB value fits
BROKER_OVERRIDES = {"message.max.bytes": str(MAX_BYTES)}
SMALL_SEGMENT_OVERRIDES = {"log.segment.bytes": str(64 * 1024)}
CRASH_SAFE_OVERRIDES = {"log.flush.interval.messages": "1"}
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
ACKS = (0, 1, -1)
TIMEOUT_S = 20.0
KCAT = "/usr/bin/kcat"
# kcat's producer splits stdin at these; matrix values for kcat never contain them.
KCAT_KEY_DELIM = b"\x1f"
KCAT_MSG_DELIM = b"\x1e"

Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True, slots=True)
class Rec:
    """A record to send. ``timestamp_ms`` None lets the client stamp it."""

    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Got:
    """A record as a client consumed it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def matrix_records(
    seed: str, *, big: bool = True, base_ts_ms: int | None = None, binary_headers: bool = True,
    null_header: bool = False,
) -> list[Rec]:  # fmt: skip
    """Keys, null keys, headers (repeated names, empty and binary values), empty and null values,
    binary keys, and a 1 MiB incompressible value; timestamps set and strictly increasing.
    ``binary_headers=False`` keeps header values printable (kcat prints headers as text);
    ``null_header`` adds a header with a null value (kafka-python cannot send one)."""
    rnd = random.Random(seed)
    ts = (now_ms() - 60_000) if base_ts_ms is None else base_ts_ms
    safe = bytes(b for b in range(256) if b not in (KCAT_KEY_DELIM[0], KCAT_MSG_DELIM[0]))
    hvalue = bytes(range(256)) if binary_headers else b"text/plain; charset=utf-8"
    records = [
        Rec(b"key-0", b"plain value", (("h1", b"v1"), ("h2", b""), *((("null", None),) if null_header else ())), ts),
        Rec(None, b"null key", (), ts + 1),
        Rec(b"empty-value", b"", (("only", b"x"),), ts + 2),
        Rec(b"null-value", None, (), ts + 3),
        Rec(b"dup-headers", b"v", (("dup", b"1"), ("dup", b"2"), ("bin", hvalue)), ts + 4),
        Rec(safe, bytes(rnd.choice(safe) for _ in range(5000)), (), ts + 5),
        Rec(b"compressible", b"abc" * 20_000, (("n", b"60000"),), ts + 6),
    ]
    if big:
        records.append(Rec(b"big", rnd.randbytes(BIG_VALUE_BYTES), (("size", b"1MiB"),), ts + 7))
    records.append(Rec(b"last", b"after the big one", (), ts + 8))
    return records


def numbered_records(tag: str, start: int, count: int, *, value_bytes: int = 100) -> list[Rec]:
    """Records ``start .. start+count-1``: key ``<tag>-<i>``, a header, increasing timestamps."""
    ts = now_ms() - 10_000
    return [
        Rec(f"{tag}-{i}".encode(), (b"%d:" % i).ljust(value_bytes, b"."), (("n", b"%d" % i),), ts + i)
        for i in range(start, start + count)
    ]


# ListOffsets by timestamp: offsets 0-3 are sent as a batch each, 4-6 as one batch, with
# timestamps (ms after a base) out of order, so "the first offset whose timestamp is at or after
# T" differs from "the offset of the first timestamp after T" and must look inside a batch.
TIMESTAMP_BATCHES = ((10,), (30,), (20,), (40,), (50, 90, 60))
# delta -> expected offset (-1: no record at or after it)
TIMESTAMP_QUERIES = {0: 0, 10: 0, 15: 1, 25: 1, 31: 3, 45: 4, 55: 5, 61: 5, 90: 5, 91: -1}
MAX_TIMESTAMP = (5, 90)  # offset and delta of the largest timestamp


def timestamp_batches(base_ms: int) -> list[list[Rec]]:
    return [[Rec(b"ts", b"at +%d" % delta, (), base_ms + delta) for delta in batch] for batch in TIMESTAMP_BATCHES]


def expected(records: Sequence[Rec], acked: Sequence[tuple[int, int]]) -> list[Got]:
    """What a consumer must see for ``records`` acknowledged at ``acked`` (CreateTime)."""
    assert all(r.timestamp_ms is not None for r in records), "expected() needs explicit timestamps"
    return [
        Got(part, off, r.key, r.value, tuple(r.headers), r.timestamp_ms or 0)
        for r, (part, off) in zip(records, acked, strict=True)
    ]


def _short(value: object) -> str:
    if isinstance(value, bytes) and len(value) > 40:
        return f"<{len(value)} bytes {value[:16]!r}…>"
    return repr(value)


def assert_records(got: Sequence[Got], want: Sequence[Got], *, check_offsets: bool = True) -> None:
    """Field-by-field, in order; messages abbreviate large values."""
    assert len(got) == len(want), f"consumed {len(got)} records, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        for name in ("partition", "offset", "key", "value", "headers", "timestamp_ms"):
            if name == "offset" and not check_offsets:
                continue
            gv, wv = getattr(g, name), getattr(w, name)
            assert gv == wv, f"record {i} ({name}): got {_short(gv)}, expected {_short(wv)}"


def assert_contiguous(acked: Sequence[tuple[int, int]], *, start: int = 0, partition: int = 0) -> None:
    assert [p for p, _ in acked] == [partition] * len(acked), acked
    assert [o for _, o in acked] == list(range(start, start + len(acked))), acked


def cluster_id_of(broker: EmbeddedBroker) -> str:
    """The cluster id the broker printed in its ready line."""
    found = re.findall(r"pylog broker ready: .*cluster\.id=(\S+)", broker.output())
    assert found, broker.output()
    return found[-1]


def assert_codec_on_disk(broker: EmbeddedBroker, topic: str, codec: str, partition: int = 0) -> None:
    """The client really compressed: some stored batch uses ``codec`` (clients may skip a codec
    for a batch it does not shrink, never for all of them), and ``none`` means none at all."""
    used = {header.compression for header, _ in disk_batches(broker, topic, partition)}
    if codec == "none":
        assert used == {0}, used
    else:
        assert CODEC_IDS[codec] in used, f"no {codec} batch on disk; codecs used: {used}"
        assert used <= {0, CODEC_IDS[codec]}, used


# ---------------------------------------------------------------------------------------------
# confluent-kafka (librdkafka)
# ---------------------------------------------------------------------------------------------
def confluent_producer_config(bootstrap: str, *, acks: int = -1, codec: str = "none", **extra: Any) -> dict:
    return {
        "bootstrap.servers": bootstrap,
        "acks": str(acks),
        "compression.type": codec,
        "enable.idempotence": False,
        "message.max.bytes": MAX_BYTES,
        "linger.ms": 5,
        "message.timeout.ms": int(TIMEOUT_S * 1000),
        **extra,
    }


def confluent_send(producer: Any, topic: str, records: Sequence[Rec], *, partition: int | None = None) -> list:
    """Produce ``records`` on an existing producer; returns a list filled by delivery reports."""
    reports: list[Any] = [None] * len(records)

    def report(i: int) -> Callable[[Any, Any], None]:
        def on_delivery(err: Any, msg: Any) -> None:
            reports[i] = (err, msg.partition(), msg.offset())

        return on_delivery

    for i, rec in enumerate(records):
        kwargs: dict[str, Any] = {}
        if partition is not None:
            kwargs["partition"] = partition
        if rec.timestamp_ms is not None:
            kwargs["timestamp"] = rec.timestamp_ms
        producer.produce(
            topic, value=rec.value, key=rec.key, headers=list(rec.headers) or None, on_delivery=report(i), **kwargs
        )
        producer.poll(0)
    return reports


def confluent_wait(producer: Any, reports: list) -> list[tuple[int, int]]:
    assert producer.flush(TIMEOUT_S) == 0, "confluent producer did not deliver everything in time"
    assert all(r is not None for r in reports), reports
    errors = [r[0] for r in reports if r[0] is not None]
    assert not errors, f"delivery errors: {errors[:3]}"
    return [(p, o) for _, p, o in reports]


def confluent_produce(
    bootstrap: str, topic: str, records: Sequence[Rec], *, acks: int = -1, codec: str = "none",
    partition: int | None = None, **extra: Any,
) -> list[tuple[int, int]]:  # fmt: skip
    from confluent_kafka import Producer

    producer = Producer(confluent_producer_config(bootstrap, acks=acks, codec=codec, **extra))
    return confluent_wait(producer, confluent_send(producer, topic, records, partition=partition))


def confluent_consumer(bootstrap: str, **extra: Any) -> Any:
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "pylog-compat",  # required by the client; assign() sends no group requests
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
            **extra,
        }
    )


def confluent_consume(
    bootstrap: str, topic: str, count: int, *, partitions: Sequence[int] = (0,), start: int | None = None,
    timeout_s: float = TIMEOUT_S, **extra: Any,
) -> list[Got]:  # fmt: skip
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    consumer = confluent_consumer(bootstrap, **extra)
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING if start is None else start) for p in partitions])
        out: list[Got] = []
        deadline = Deadline(timeout_s)
        while len(out) < count and not deadline.expired():
            for msg in consumer.consume(num_messages=min(count - len(out), 1000), timeout=0.2):
                if msg.error():
                    raise AssertionError(f"confluent consumer error: {msg.error()}")
                out.append(
                    Got(msg.partition(), msg.offset(), msg.key(), msg.value(), tuple(msg.headers() or ()),
                        msg.timestamp()[1])
                )  # fmt: skip
        return out
    finally:
        consumer.close()


# ---------------------------------------------------------------------------------------------
# kafka-python
# ---------------------------------------------------------------------------------------------
def kp_producer(bootstrap: str, *, acks: int = -1, codec: str = "none", **extra: Any) -> Any:
    from kafka import KafkaProducer

    config: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "acks": "all" if acks == -1 else acks,
        "compression_type": None if codec == "none" else codec,
        "enable_idempotence": False,  # no InitProducerId on this broker yet
        "max_request_size": MAX_BYTES,
        "linger_ms": 5,
        "request_timeout_ms": int(TIMEOUT_S * 1000),
    }
    return KafkaProducer(**{**config, **extra})


def kp_produce(
    bootstrap: str, topic: str, records: Sequence[Rec], *, acks: int = -1, codec: str = "none",
    partition: int | None = None, **extra: Any,
) -> list[tuple[int, int]]:  # fmt: skip
    producer = kp_producer(bootstrap, acks=acks, codec=codec, **extra)
    try:
        futures = [
            producer.send(topic, value=r.value, key=r.key, headers=list(r.headers), partition=partition,
                          timestamp_ms=r.timestamp_ms)
            for r in records
        ]  # fmt: skip
        producer.flush(timeout=TIMEOUT_S)
        metas = [f.get(timeout=TIMEOUT_S) for f in futures]
        return [(m.partition, m.offset) for m in metas]
    finally:
        producer.close(timeout=5)


def kp_consumer(bootstrap: str, **extra: Any) -> Any:
    from kafka import KafkaConsumer

    config: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "group_id": None,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "fetch_max_wait_ms": 100,
        "request_timeout_ms": int(TIMEOUT_S * 1000),
    }
    return KafkaConsumer(**{**config, **extra})


def kp_consume(
    bootstrap: str, topic: str, count: int, *, partitions: Sequence[int] = (0,), start: int | None = None,
    timeout_s: float = TIMEOUT_S, **extra: Any,
) -> list[Got]:  # fmt: skip
    from kafka import TopicPartition

    consumer = kp_consumer(bootstrap, **extra)
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        for tp in tps:
            if start is None:
                consumer.seek_to_beginning(tp)
            else:
                consumer.seek(tp, start)
        out: list[Got] = []
        deadline = Deadline(timeout_s)
        while len(out) < count and not deadline.expired():
            for tp, msgs in consumer.poll(timeout_ms=200).items():
                out.extend(
                    Got(tp.partition, m.offset, m.key, m.value, tuple(m.headers or ()), m.timestamp) for m in msgs
                )
        return out
    finally:
        consumer.close()


# ---------------------------------------------------------------------------------------------
# aiokafka (async; the sync wrappers run a private event loop)
# ---------------------------------------------------------------------------------------------
def aio_producer(bootstrap: str, *, acks: int = -1, codec: str = "none", **extra: Any) -> Any:
    from aiokafka import AIOKafkaProducer

    config: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "acks": "all" if acks == -1 else acks,
        "compression_type": None if codec == "none" else codec,
        "enable_idempotence": False,
        "max_request_size": MAX_BYTES,
        "linger_ms": 5,
        "request_timeout_ms": int(TIMEOUT_S * 1000),
    }
    return AIOKafkaProducer(**{**config, **extra})


async def aio_produce_async(
    bootstrap: str, topic: str, records: Sequence[Rec], *, acks: int = -1, codec: str = "none",
    partition: int | None = None, **extra: Any,
) -> list[tuple[int, int]]:  # fmt: skip
    producer = aio_producer(bootstrap, acks=acks, codec=codec, **extra)
    await producer.start()
    try:
        futures = [
            await producer.send(topic, value=r.value, key=r.key, partition=partition, timestamp_ms=r.timestamp_ms,
                                headers=list(r.headers))
            for r in records
        ]  # fmt: skip
        metas = await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT_S)
        return [(m.partition, m.offset) if m is not None else (-1, -1) for m in metas]  # None under acks=0
    finally:
        await producer.stop()


def aio_consumer(bootstrap: str, **extra: Any) -> Any:
    from aiokafka import AIOKafkaConsumer

    config: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "group_id": None,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "fetch_max_wait_ms": 100,
        "request_timeout_ms": int(TIMEOUT_S * 1000),
    }
    return AIOKafkaConsumer(**{**config, **extra})


async def aio_consume_async(
    bootstrap: str, topic: str, count: int, *, partitions: Sequence[int] = (0,), start: int | None = None,
    timeout_s: float = TIMEOUT_S, **extra: Any,
) -> list[Got]:  # fmt: skip
    from aiokafka import TopicPartition

    consumer = aio_consumer(bootstrap, **extra)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        for tp in tps:
            if start is None:
                await consumer.seek_to_beginning(tp)
            else:
                consumer.seek(tp, start)
        out: list[Got] = []
        deadline = Deadline(timeout_s)
        while len(out) < count and not deadline.expired():
            for tp, msgs in (await consumer.getmany(timeout_ms=200)).items():
                out.extend(
                    Got(tp.partition, m.offset, m.key, m.value, tuple(m.headers or ()), m.timestamp) for m in msgs
                )
        return out
    finally:
        await consumer.stop()


def aio_produce(bootstrap: str, topic: str, records: Sequence[Rec], **kwargs: Any) -> list[tuple[int, int]]:
    return asyncio.run(aio_produce_async(bootstrap, topic, records, **kwargs))


def aio_consume(bootstrap: str, topic: str, count: int, **kwargs: Any) -> list[Got]:
    return asyncio.run(aio_consume_async(bootstrap, topic, count, **kwargs))


# ---------------------------------------------------------------------------------------------
# kcat (librdkafka 2.0 behind a CLI)
# ---------------------------------------------------------------------------------------------
_KCAT_FORMAT = "@%p|%o|%K|%S|%T|%h\n%k%s\n"


def kcat(*args: str, stdin: bytes | None = None, timeout_s: float = TIMEOUT_S) -> bytes:
    """Run kcat; raise with its stderr when it fails."""
    proc = subprocess.run([KCAT, *args], input=stdin, capture_output=True, timeout=timeout_s, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"kcat {' '.join(args)} exited {proc.returncode}: {proc.stderr.decode(errors='replace')}")
    return proc.stdout


def kcat_produce_args(bootstrap: str, topic: str, *, acks: int = -1, codec: str = "none",
                      partition: int | None = 0) -> list[str]:  # fmt: skip
    args = ["-P", "-b", bootstrap, "-t", topic, "-q"]
    args += ["-p", str(partition if partition is not None else -1)]
    args += ["-X", f"acks={acks}", "-X", f"compression.codec={codec}", "-X", f"message.max.bytes={MAX_BYTES}"]
    args += ["-X", "enable.idempotence=false", "-X", f"message.timeout.ms={int(TIMEOUT_S * 1000)}"]
    return args


def kcat_produce(
    bootstrap: str, topic: str, pairs: Sequence[tuple[bytes | None, bytes]], *, headers: Headers = (),
    acks: int = -1, codec: str = "none", partition: int | None = 0, empty_as_null: bool = False,
    extra: Sequence[str] = (),
) -> None:  # fmt: skip
    """Send (key, value) pairs through stdin, every one with ``headers``. A None key is sent
    without a key delimiter (kcat then sends a null key); ``empty_as_null`` is kcat's ``-Z``."""
    chunks = []
    for key, value in pairs:
        for part in (key or b"", value):
            assert KCAT_MSG_DELIM not in part, "a record holds kcat's message delimiter"
            assert KCAT_KEY_DELIM not in part, "a record holds kcat's key delimiter"
        chunks.append(value if key is None else key + KCAT_KEY_DELIM + value)
    args = kcat_produce_args(bootstrap, topic, acks=acks, codec=codec, partition=partition)
    args += ["-D", "\\x1e", "-K", "\\x1f", *extra]
    if empty_as_null:
        args.append("-Z")
    for name, value in headers:
        args += ["-H", f"{name}={value.decode()}"]
    kcat(*args, stdin=KCAT_MSG_DELIM.join(chunks) + KCAT_MSG_DELIM)


def kcat_produce_file(
    bootstrap: str, topic: str, path: Path, *, key: bytes | None = None, acks: int = -1, codec: str = "none",
    partition: int | None = 0,
) -> None:  # fmt: skip
    """Send the whole file as one message (binary-safe)."""
    args = kcat_produce_args(bootstrap, topic, acks=acks, codec=codec, partition=partition)
    if key is not None:
        args += ["-k", key.decode()]
    kcat(*args, str(path))


def parse_kcat_output(data: bytes) -> list[Got]:
    """Parse ``_KCAT_FORMAT`` output (lengths make it binary-safe)."""
    out: list[Got] = []
    pos = 0
    while pos < len(data):
        assert data[pos : pos + 1] == b"@", f"kcat output out of step at byte {pos}: {data[pos : pos + 40]!r}"
        eol = data.index(b"\n", pos)
        part, offset, klen, vlen, ts, hdrs = data[pos + 1 : eol].decode().split("|", 5)
        pos = eol + 1
        k, v = int(klen), int(vlen)
        key = None if k < 0 else data[pos : pos + k]
        pos += max(k, 0)
        value = None if v < 0 else data[pos : pos + v]
        pos += max(v, 0)
        assert data[pos : pos + 1] == b"\n", "kcat record not terminated"
        pos += 1
        headers = tuple((name, val.encode()) for name, _, val in (h.partition("=") for h in hdrs.split(",") if hdrs))
        out.append(Got(int(part), int(offset), key, value, headers, int(ts)))
    return out


def kcat_consume(
    bootstrap: str, topic: str, count: int, *, partition: int | None = 0, offset: str = "beginning",
    timeout_s: float = TIMEOUT_S, extra: Sequence[str] = (),
) -> list[Got]:  # fmt: skip
    """Read ``count`` records from one partition (None: all of them), retrying until they are
    all there. ``extra``: more kcat arguments (``-X security.protocol=ssl``, ...)."""
    deadline = Deadline(timeout_s)
    where = [] if partition is None else ["-p", str(partition)]
    while True:
        raw = kcat(
            "-C", "-b", bootstrap, "-t", topic, *where, "-o", offset, "-e", "-q",
            "-c", str(count), "-f", _KCAT_FORMAT, "-X", f"fetch.message.max.bytes={MAX_BYTES}", *extra,
            timeout_s=timeout_s,
        )  # fmt: skip
        got = parse_kcat_output(raw)
        if len(got) >= count or deadline.expired():
            return got


def kcat_query_offset(bootstrap: str, topic: str, partition: int, timestamp: int) -> int:
    """ListOffsets through ``kcat -Q``: -1 latest, -2 earliest, else the first offset at/after T."""
    raw = kcat("-Q", "-b", bootstrap, "-t", f"{topic}:{partition}:{timestamp}").decode()
    match = re.search(rf"\[{partition}\]\s+offset\s+(-?\d+)", raw)
    assert match, raw
    return int(match.group(1))


def pylog_round_trip(config: dict[str, Any], topic: str, values: Sequence[bytes], *, what: str) -> None:
    """pylog's own producer sends ``values`` (keyed by index) to ``topic`` under ``config`` (a
    security set-up, say), each acknowledged at offsets 0..n-1; a group consumer with the same
    ``config`` then reads exactly those values back in order."""
    from pyspark_log.client import Consumer, Producer

    producer = Producer(config)
    try:
        futures = [producer.send(topic, key=b"%d" % i, value=v) for i, v in enumerate(values)]
        producer.flush(30_000)
        assert [f.result(timeout=30).offset for f in futures] == list(range(len(values)))
    finally:
        producer.close()
    consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    got: list[bytes] = []
    try:
        consumer.subscribe([topic])

        def polled() -> bool:
            got.extend(r.value for r in consumer.poll(500))
            return len(got) >= len(values)

        wait_until(polled, what=what)
    finally:
        consumer.close()
    assert got == list(values)
