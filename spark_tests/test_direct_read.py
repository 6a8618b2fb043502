"""Direct segment reads (``readPath=files|auto``, ``logDirs.<brokerId>``): Spark tasks read the
broker's segment files and return row for row what the broker path returns.

One broker for the module, its topics written once: every codec with headers, transactions
with aborts (two producers interleaved), a compacted topic with gaps (the cleaner has run), a
topic mid-retention (its first segments deleted). Both read paths run in the same session on the
same planned offsets, under read_committed and read_uncommitted. Then: ``auto`` falls back per
partition where files are not visible or belong to another broker, ``files`` refuses; a
``load_to_delta`` and a stream with ``readPath=files``; and a direct read that completes from the files after
the broker was killed in the middle of it (its offsets were planned before).
"""

from __future__ import annotations

import shutil
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pyspark_log.client import Producer
from pyspark_log.embedded import EmbeddedBroker
from pyspark_log.records.columnar import decode_arrow
from pyspark_log.spark.segment_reader import FilesUnavailable, PartitionFiles, parse_properties
from spark_tests.conftest import BROKER_OVERRIDES
from spark_tests.helpers import Kafka, read, stream, to_memory, wait_until
from tests.waiting import Deadline

pytestmark = pytest.mark.timeout(600)

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
ROW = ("topic", "partition", "offset", "key", "value", "timestamp", "timestampType", "headers")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    overrides = {**BROKER_OVERRIDES, "log.cleaner.backoff.ms": "200"}
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), python=sys.executable, overrides=overrides) as b:
        yield b


def log_dir(broker: EmbeddedBroker) -> Path:
    return broker.data_dir / "logs"


def node_id(broker: EmbeddedBroker) -> int:
    return int(parse_properties((log_dir(broker) / "meta.properties").read_text())["node.id"])


def records_in_files(directory: Path, end: int) -> int:
    """Records the partition's files hold below ``end`` (read without Spark)."""
    return sum(
        decode_arrow(c.records, topic="t", partition=0, start_offset=c.position, end_offset=end).batch.num_rows
        for c in PartitionFiles(directory).read(0, end, read_committed=False)
    )


@pytest.fixture(scope="module")
def topics(broker: EmbeddedBroker, kafka: Kafka) -> str:
    """Write the module's topics once; returns their common prefix (for subscribePattern)."""
    servers = kafka.servers
    kafka.create("dr-codecs", len(CODECS), **{"segment.bytes": "4096"})
    for partition, codec in enumerate(CODECS):
        config = {"bootstrap.servers": servers, "compression.type": codec, "linger.ms": 5, "batch.size": 2048}
        producer = Producer(config)
        try:
            futures = []
            for i in range(300):
                headers = [("h", f"{codec}-{i}".encode()), ("n", None)] if i % 3 else None
                key = None if i % 7 == 0 else f"k{i % 11}".encode()
                value = None if i % 13 == 0 else f"{codec}-{i}-{'x' * (i % 50)}".encode()
                futures.append(producer.send("dr-codecs", value, key=key, headers=headers, partition=partition))
            producer.flush(30_000)
            for future in futures:
                future.result(30)
        finally:
            producer.close(timeout_ms=5_000)

    kafka.create("dr-txn", 2, **{"segment.bytes": "2048"})
    producers = [
        Producer({"bootstrap.servers": servers, "transactional.id": f"dr-txn-{n}", "linger.ms": 0}) for n in range(2)
    ]
    try:
        for p in producers:
            p.init_transactions()
        for round_ in range(12):
            for n, p in enumerate(producers):
                p.begin_transaction()
                for i in range(5):
                    p.send("dr-txn", f"t{n}-r{round_}-{i}".encode(), partition=i % 2)
                kafka.produce("dr-txn", [f"plain-{n}-{round_}"], partition=round_ % 2)
            for n, p in enumerate(producers):
                p.flush(30_000)  # in the log before the marker: an abort would drop unsent records
                if (round_ + n) % 3 == 0:
                    p.abort_transaction()
                else:
                    p.commit_transaction()
    finally:
        for p in producers:
            p.close(timeout_ms=5_000)

    kafka.create(
        "dr-compact",
        1,
        **{"cleanup.policy": "compact", "segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01"},
    )
    produced = 0
    for round_ in range(10):
        produced += len(kafka.produce("dr-compact", [f"r{round_}-{'y' * 40}"] * 1, key=f"k{round_ % 4}"))
        for k in range(8):
            kafka.produce("dr-compact", [f"r{round_}-{k}-{'y' * 40}"], key=f"k{k}")
            produced += 1
    compact_dir = log_dir(broker) / "dr-compact-0"

    def cleaned() -> bool:
        try:
            return records_in_files(compact_dir, produced) < produced - 20
        except FilesUnavailable:  # read during the cleaner's swap: a segment vanished; look again
            return False

    wait_until(cleaned, 120, "the cleaner to leave gaps")

    kafka.create("dr-retention", 1, **{"segment.bytes": "1024", "retention.bytes": "3000"})
    kafka.produce("dr-retention", [f"ret-{i}-{'z' * 30}" for i in range(200)], batch=False)
    retention_dir = log_dir(broker) / "dr-retention-0"

    def retention_settled() -> bool:
        # the produce ran while retention passes did: wait until no segment is over retention.bytes
        # any more (Kafka's rule: the oldest goes while the rest still hold retention.bytes), so no
        # later pass moves the log start between the two reads of the test
        sizes = [f.stat().st_size for f in sorted(retention_dir.glob("*.log"))]
        return kafka.earliest("dr-retention") > 0 and bool(sizes) and sum(sizes) - sizes[0] < 3000

    wait_until(retention_settled, 60, "retention to delete the first segments and settle")
    return "dr-"


def rows(df: Any) -> list[tuple[Any, ...]]:
    out = []
    for r in df.collect():
        headers = None if r["headers"] is None else tuple((h["key"], h["value"]) for h in r["headers"])
        out.append((*(r[c] for c in ROW[:-1]), headers))
    return sorted(out, key=lambda t: (t[0], t[1], t[2]))


def direct_options(broker: EmbeddedBroker, read_path: str = "files", directory: Path | None = None) -> dict[str, str]:
    return {"readPath": read_path, f"logDirs.{node_id(broker)}": str(directory or log_dir(broker))}


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_files_return_the_rows_the_broker_returns(
    spark, broker: EmbeddedBroker, kafka: Kafka, topics: str, isolation: str
) -> None:
    common = {"subscribePattern": f"{topics}.*", "includeHeaders": "true", "isolationLevel": isolation}
    by_broker = rows(read(spark, kafka.servers, **common))
    by_files = rows(read(spark, kafka.servers, **common, **direct_options(broker), minPartitions="6"))
    assert len(by_files) == len(by_broker)
    assert by_files == by_broker
    per_topic = {t: sum(1 for r in by_broker if r[0] == t) for t in ("dr-codecs", "dr-txn", "dr-compact")}
    assert per_topic["dr-codecs"] == 300 * len(CODECS)
    assert by_broker[0][2] >= 0
    retained = [r for r in by_broker if r[0] == "dr-retention"]
    assert retained
    assert retained[0][2] > 0  # mid-retention: the log starts above 0
    txn_values = {bytes(r[4]).decode() for r in by_broker if r[0] == "dr-txn"}
    aborted = {f"t{n}-r{r}-0" for r in range(12) for n in range(2) if (r + n) % 3 == 0}
    if isolation == "read_committed":
        assert not txn_values & aborted
    else:
        assert aborted <= txn_values


def test_auto_falls_back_per_partition_and_files_refuses(
    spark, broker: EmbeddedBroker, kafka: Kafka, topics: str, tmp_path: Path
) -> None:
    """A mapped directory that shows only partition 0 of dr-txn: ``auto`` reads partition 0 from
    files and partition 1 through the broker; ``files`` fails naming the partition. A directory
    whose meta.properties names another broker is never read."""
    partial = tmp_path / "partial"
    partial.mkdir()
    shutil.copy(log_dir(broker) / "meta.properties", partial / "meta.properties")
    (partial / "dr-txn-0").symlink_to(log_dir(broker) / "dr-txn-0")
    common = {"subscribe": "dr-txn", "includeHeaders": "true"}
    expected = rows(read(spark, kafka.servers, **common))
    assert rows(read(spark, kafka.servers, **common, **direct_options(broker, "auto", partial))) == expected
    with pytest.raises(Exception, match=r"readPath=files: the files of dr-txn-1 are not visible"):
        read(spark, kafka.servers, **common, **direct_options(broker, "files", partial)).collect()

    other = tmp_path / "other"
    shutil.copytree(log_dir(broker) / "dr-txn-0", other / "dr-txn-0")
    props = (log_dir(broker) / "meta.properties").read_text().replace(f"node.id={node_id(broker)}", "node.id=999")
    (other / "meta.properties").write_text(props)
    assert rows(read(spark, kafka.servers, **common, **direct_options(broker, "auto", other))) == expected


def test_load_to_delta_reads_files_when_configured(
    spark, broker: EmbeddedBroker, kafka: Kafka, topics: str, tmp_path: Path
) -> None:
    from deltalake import DeltaTable

    from pyspark_log.delta import load_to_delta

    options = {"bootstrap.servers": kafka.servers, "subscribe": "dr-codecs", **direct_options(broker)}
    result = load_to_delta(spark, options, tmp_path / "table", app_id="direct", engine="delta-rs")
    assert result.rows == 300 * len(CODECS)
    table = DeltaTable(str(tmp_path / "table")).to_pyarrow_table(columns=["partition", "offset", "value"])
    expected = rows(read(spark, kafka.servers, subscribe="dr-codecs", includeHeaders="true"))
    assert sorted((r["partition"], r["offset"], r["value"]) for r in table.to_pylist()) == [
        (r[1], r[2], r[4]) for r in expected
    ]


def test_a_stream_reads_files_too(spark, broker: EmbeddedBroker, kafka: Kafka, topics: str, tmp_path: Path) -> None:
    """``readStream`` with ``readPath=files`` (Trigger.AvailableNow, small micro-batches): the
    same rows as a batch read through the broker."""
    common = {"subscribe": "dr-txn", "includeHeaders": "true"}
    expected = rows(read(spark, kafka.servers, **common))
    df = stream(
        spark, kafka.servers, **common, **direct_options(broker), startingOffsets="earliest", maxOffsetsPerTrigger="50"
    )
    query, name = to_memory(df, tmp_path / "chk", trigger={"availableNow": True})
    try:
        assert query.awaitTermination(180)
        assert query.exception() is None
    finally:
        query.stop()
    assert rows(spark.table(name)) == expected


def test_a_direct_read_completes_from_files_after_the_broker_is_killed(spark, tmp_path: Path) -> None:
    """The driver plans the offsets with the broker; the tasks then need only the files. Each
    task holds its first batch until the broker has been killed (a marker file the test writes
    after ``kill``; the tasks poll for it), so every task reads on with the broker dead; the
    job still returns every record."""
    started, killed = tmp_path / "started", tmp_path / "killed"
    with EmbeddedBroker(tmp_path / "broker", python=sys.executable, overrides=BROKER_OVERRIDES) as doomed:
        kafka = Kafka(doomed)
        try:
            kafka.create("dr-kill", 4, **{"segment.bytes": "65536"})
            values = kafka.produce_spread("dr-kill", 4, 4_000, "kill-" + "w" * 60)
        finally:
            kafka.close()
        df = read(spark, doomed.bootstrap_servers, subscribe="dr-kill", minPartitions="8", **direct_options(doomed))

        def gate(batches: Iterator[Any]) -> Iterator[Any]:
            import os
            import time

            first = True
            for batch in batches:
                if first:
                    started.touch()
                    deadline = Deadline(120)
                    while not os.path.exists(killed) and not deadline.expired():
                        time.sleep(0.05)
                    first = False
                yield batch

        result: dict[str, Any] = {}

        def run() -> None:
            try:
                result["count"] = df.mapInArrow(gate, df.schema).count()
            except Exception as exc:  # reported by the assertion below
                result["error"] = exc

        worker = threading.Thread(target=run)
        worker.start()
        try:
            wait_until(lambda: started.exists() or result, 120, "a task to read its first batch")
            doomed.kill()
            assert not doomed.running
        finally:
            killed.touch()
            worker.join(300)
        assert "error" not in result, result.get("error")
        assert result["count"] == len(values)
