"""Log compaction on Apache Kafka 4.1.1 and pylog: the same keyed writes to a compacted topic,
read back once each broker's cleaner has run.

Each write is its own batch with a CreateTime five minutes after the previous one, so with
``segment.ms`` of one minute every write after the first rolls a new segment on both brokers
(the roll is by the batch timestamps, Kafka's ``LogSegment.shouldRoll``) and only the last write,
of a key written once, stays in the uncleanable active segment. Keys get several versions and a
tombstone as their last version (kept: ``delete.retention.ms`` is a day). The test polls each
broker until its log holds exactly the last version of every key (the cleaner's own timing
differs: ``log.cleaner.backoff.ms``), then compares the records, offsets and watermarks; a
difference would be a row of the table "Log compaction" in docs/compatibility.md.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from pyspark_log.records.batch import ProducerRecord, encode_batch
from tests.differential.conftest import Brokers
from tests.differential.documented import compare, table
from tests.differential.scenarios import (
    READ_UNCOMMITTED,
    create_ready_topic,
    list_offset,
    poll,
    produce,
    raw_log,
    unique,
)

HEADING = "Log compaction"
CONFIGS = {"cleanup.policy": "compact", "segment.ms": "60000", "min.cleanable.dirty.ratio": "0.01",
           "min.compaction.lag.ms": "0"}  # fmt: skip
ROUNDS, KEYS = 4, 3


def writes(base_ts: int) -> list[ProducerRecord]:
    out = []
    for r in range(ROUNDS):
        for k in range(KEYS):
            tombstone = k == 1 and r in (1, ROUNDS - 1)  # k1 ends deleted; an earlier tombstone too
            value = None if tombstone else f"round{r}".encode()
            out.append(ProducerRecord(f"k{k}".encode(), value, base_ts + len(out) * 300_000))
    out.append(ProducerRecord(b"end", b"active segment", base_ts + len(out) * 300_000))
    return out


def scenario(address: str, base_ts: int) -> dict[str, Any]:
    topic = unique("compacted")
    create_ready_topic(address, topic, configs=CONFIGS)
    for record in writes(base_ts):
        assert produce(address, topic, encode_batch([record])).error_code == 0

    def records() -> list[tuple[Any, ...]]:
        return [(r[0], r[2], r[3]) for r in raw_log(address, topic, READ_UNCOMMITTED)["records"]]

    written = records()
    last = {key: offset for offset, key, _ in written}
    cleaned = [r for r in written if last[r[1]] == r[0]]
    poll(f"{address} compacting {topic}", records, lambda now: now == cleaned, deadline_s=120)
    log = raw_log(address, topic, READ_UNCOMMITTED)
    return {
        "written": written,
        "cleaned": log["records"],
        "watermarks": (log["high_watermark"], log["last_stable_offset"], log["log_start_offset"]),
        "earliest_latest": tuple(list_offset(address, topic, ts).offset for ts in (-2, -1)),
    }


@pytest.fixture(scope="module")
def observed(brokers: Brokers) -> dict[str, dict[str, Any]]:
    base_ts = int(time.time() * 1000) - 3 * 3600 * 1000
    return {name: scenario(address, base_ts) for name, address in brokers.items()}


@pytest.mark.parametrize("aspect", ["written", "cleaned", "watermarks", "earliest_latest"])
def test_same_log_after_cleaning(observed: dict[str, dict[str, Any]], aspect: str) -> None:
    kafka, pylog = observed["kafka"][aspect], observed["pylog"][aspect]
    differs = {(aspect, "differs")} if kafka != pylog else set()
    documented = {tuple(row) for row in table(HEADING, 2) if row[0] == aspect}
    message = compare(HEADING, differs, documented)
    assert not message, f"{message}\nkafka: {kafka}\npylog: {pylog}"
