"""A pylog KIP-630 snapshot file read by Apache Kafka 4.1.1's ``kafka-dump-log``.

KIP-630 "Snapshot Format": a ``<endOffset>-<epoch>.checkpoint`` file of record batches framed by
a SnapshotHeader and a SnapshotFooter control record. Kafka's DumpLogSegments must read the
file pylog writes, find every batch's CRC valid and decode both control records. (pylog's
metadata record values are its own encoding, so ``--cluster-metadata-decoder`` is not used;
see docs/compatibility.md.)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from broker.raft.snapshot import SnapshotId, encode_snapshot
from broker.raft.store import write_snapshot
from tests.apache_kafka import KafkaUnavailable, kafka_libs, kafka_tool


def test_kafka_dump_log_reads_pylog_snapshot(tmp_path: Path) -> None:
    try:
        kafka_libs()
    except KafkaUnavailable as exc:
        pytest.skip(f"Apache Kafka is not available: {exc}")
    sid = SnapshotId(30, 2)
    records = [b'{"n":%d}' % i for i in range(25)]
    path = write_snapshot(tmp_path, sid, encode_snapshot(sid, records, 123, timestamp_ms=1000, max_batch_records=10))
    assert path.name == "00000000000000000030-0000000002.checkpoint"
    done = kafka_tool("kafka-dump-log", "--files", str(path), "--print-data-log")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert re.search(r"SnapshotHeader \{\"version\":0,\"lastContainedLogTimestamp\":123\}", out), out
    assert 'SnapshotFooter {"version":0}' in out
    valid = re.findall(r"isvalid: (\w+)", out)
    assert valid == ["true"] * 5
    for i in range(25):
        assert f'payload: {{"n":{i}}}' in out
