"""The same records through confluent-kafka (librdkafka) into Apache Kafka 4.1.1 and pylog, read
back at the field level: offsets, keys, values (null too), headers, timestamps, the codec of each
record's batch (none, gzip, snappy, lz4, zstd), transaction markers (commit and abort control
batches), the aborted-transaction index, the watermarks (high watermark, last stable offset, log
start offset), ListOffsets (-2 earliest, -1 latest, -1 read_committed, -3 max timestamp, by
timestamp) and what read_committed and read_uncommitted consumers receive.

Both brokers must agree; a difference would be a row of the table "Produce and fetch" in
docs/compatibility.md (there is none). Producer ids and marker timestamps (broker clocks) are not
compared.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.differential.conftest import Brokers
from tests.differential.documented import compare, table
from tests.differential.scenarios import (
    DEADLINE_S,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    create_ready_topic,
    list_offset,
    poll,
    raw_log,
    unique,
)
from tests.waiting import Deadline

HEADING = "Produce and fetch"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def send(producer: Producer, topic: str, rows: list[tuple[Any, ...]]) -> None:
    for key, value, headers, timestamp in rows:
        producer.produce(topic, key=key, value=value, headers=headers, timestamp=timestamp, partition=0)


def records_for(tag: str, base_ts: int, first: int, n: int) -> list[tuple[Any, ...]]:
    """``n`` records: keys and values with a null key and a null value among them, headers
    (one with a null value), timestamps ``base_ts + 1000 * i``."""
    out = []
    for i in range(first, first + n):
        key = None if i % 4 == 1 else f"{tag}-k{i}".encode()
        value = None if i % 4 == 2 else f"{tag}-v{i}-".encode() * 20
        headers = [("h", f"{i}".encode()), ("empty", None)] if i % 2 else []
        out.append((key, value, headers, base_ts + 1000 * i))
    return out


def offsets(address: str, topic: str, base_ts: int) -> dict[str, Any]:
    queries = {
        "earliest": (-2, READ_UNCOMMITTED), "latest": (-1, READ_UNCOMMITTED), "latest_committed": (-1, READ_COMMITTED),
        "by_ts_first": (base_ts, READ_UNCOMMITTED), "by_ts_middle": (base_ts + 2500, READ_UNCOMMITTED),
        "by_ts_after_all": (base_ts + 10**8, READ_UNCOMMITTED),
    }  # fmt: skip
    out = {}
    for name, (timestamp, isolation) in queries.items():
        p = list_offset(address, topic, timestamp, isolation_level=isolation)
        out[name] = (p.error_code, p.offset, p.timestamp if timestamp >= 0 else None)
    return out


def max_timestamp(address: str, topic: str) -> tuple[int, int]:
    p = list_offset(address, topic, -3)
    return p.error_code, p.offset


def consume(address: str, topic: str, isolation: str, expected: int) -> list[tuple[Any, ...]]:
    """What a confluent-kafka consumer with ``isolation.level`` receives from offset 0: up to
    ``expected`` records, or what came within the deadline (a shortfall shows in the comparison)."""
    consumer = Consumer({
        "bootstrap.servers": address, "group.id": unique("g"), "isolation.level": isolation,
        "enable.auto.commit": False, "enable.partition.eof": False,
    })  # fmt: skip
    got: list[tuple[Any, ...]] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = Deadline(DEADLINE_S)
        while len(got) < expected and not deadline.expired():
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            got.append((msg.offset(), msg.key(), msg.value(), tuple(msg.headers() or ()), msg.timestamp()))
    finally:
        consumer.close()
    return got


def scenario(address: str, base_ts: int) -> dict[str, Any]:
    topic = unique("pf")
    create_ready_topic(address, topic)
    seen: dict[str, Any] = {}
    n = 0
    for codec in CODECS:
        producer = Producer({"bootstrap.servers": address, "compression.type": codec, "enable.idempotence": True,
                             "linger.ms": 5})  # fmt: skip
        send(producer, topic, records_for(codec, base_ts, n, 3))
        n += 3
        assert producer.flush(60) == 0
    txn = Producer({"bootstrap.servers": address, "transactional.id": unique("tx"), "compression.type": "lz4"})
    txn.init_transactions(60)
    for outcome, count in (("commit", 2), ("abort", 2), ("commit", 1), ("open", 1)):
        txn.begin_transaction()
        send(txn, topic, records_for(outcome, base_ts, n, count))
        n += count
        if outcome == "commit":
            txn.commit_transaction(60)
        elif outcome == "abort":
            assert txn.flush(60) == 0  # sent first: an abort purges records still queued in the client
            txn.abort_transaction(60)
        else:
            assert txn.flush(60) == 0
            seen["open_txn"] = {
                "read_committed": raw_log(address, topic, READ_COMMITTED),
                "offsets": offsets(address, topic, base_ts),
            }
            txn.abort_transaction(60)
    # EndTxn is answered once the coordinator logged PrepareAbort; the markers follow (in both)
    poll(
        "the last abort marker",
        lambda: raw_log(address, topic, READ_UNCOMMITTED),
        lambda log: log["records"][-1][1] == "control" and log["last_stable_offset"] == log["high_watermark"],
    )
    seen["read_uncommitted"] = raw_log(address, topic, READ_UNCOMMITTED)
    seen["read_committed"] = raw_log(address, topic, READ_COMMITTED)
    seen["offsets"] = offsets(address, topic, base_ts)
    seen["max_timestamp"] = max_timestamp(address, topic)
    data = [r for r in seen["read_uncommitted"]["records"] if r[1] != "control"]
    # a record's tag (its transaction's outcome) opens its key or, for a null key, its value
    committed = [r for r in data if not (r[2] or r[3]).startswith((b"abort-", b"open-"))]
    seen["consumer_read_uncommitted"] = consume(address, topic, "read_uncommitted", len(data))
    seen["consumer_read_committed"] = consume(address, topic, "read_committed", len(committed))
    return seen


@pytest.fixture(scope="module")
def observed(brokers: Brokers) -> dict[str, dict[str, Any]]:
    base_ts = (int(time.time()) - 600) * 1000
    return {name: scenario(address, base_ts) for name, address in brokers.items()}


ASPECTS = ("read_uncommitted", "read_committed", "open_txn", "offsets", "max_timestamp",
           "consumer_read_uncommitted", "consumer_read_committed")  # fmt: skip


@pytest.mark.parametrize("aspect", ASPECTS)
def test_same_records_offsets_and_watermarks(observed: dict[str, dict[str, Any]], aspect: str) -> None:
    kafka, pylog = observed["kafka"][aspect], observed["pylog"][aspect]
    differs = {(aspect, "differs")} if kafka != pylog else set()
    documented = {tuple(row) for row in table(HEADING, 2) if row[0] == aspect}
    message = compare(HEADING, differs, documented)
    assert not message, f"{message}\n{difference(kafka, pylog)}"


def difference(kafka: Any, pylog: Any, path: str = "") -> str:
    """Where two observations part: the first differing entry of each dict key / list index."""
    if isinstance(kafka, dict) and isinstance(pylog, dict):
        return "\n".join(
            difference(kafka.get(k), pylog.get(k), f"{path}.{k}") for k in kafka.keys() | pylog.keys()
            if kafka.get(k) != pylog.get(k)
        )  # fmt: skip
    if isinstance(kafka, list) and isinstance(pylog, list):
        for i, (a, b) in enumerate(zip(kafka, pylog, strict=False)):
            if a != b:
                return f"{path}[{i}]: kafka {a} / pylog {b}"
        tails = f"{kafka[len(pylog) :]} / {pylog[len(kafka) :]}"
        return f"{path}: kafka {len(kafka)} entries / pylog {len(pylog)}; tails {tails}"
    return f"{path}: kafka {kafka} / pylog {pylog}"


def test_the_scenario_covers_codecs_markers_and_an_open_transaction(observed: dict[str, dict[str, Any]]) -> None:
    """What the comparison above rests on, seen on Kafka: every codec, both markers, an aborted
    transaction in read_committed's index, and the LSO below the high watermark while open."""
    kafka = observed["kafka"]
    rows = kafka["read_uncommitted"]["records"]
    assert {r[1] for r in rows} == {*CODECS, "control"}
    assert {r[2] for r in rows if r[1] == "control"} == {0, 1}  # abort and commit markers
    assert len(kafka["read_committed"]["aborted_first_offsets"]) == 2
    open_txn = kafka["open_txn"]["read_committed"]
    assert open_txn["last_stable_offset"] < open_txn["high_watermark"]
    assert len(kafka["consumer_read_committed"]) < len(kafka["consumer_read_uncommitted"])
