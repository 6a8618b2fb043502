"""DescribeLogDirs (35) and ``pylog log-dirs --describe`` against a real broker with two log dirs.

Issue 17 "Done when": "DescribeLogDirs sizes match the files on disk". Sizes are compared with
the ``.log`` files of each partition directory (Kafka's ``PartitionSize`` is the log's size, the
sum of its segment files), read after the produces were acknowledged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyspark_log.client import AdminClient, NewTopic, Producer
from pyspark_log.embedded import EmbeddedBroker

with warnings.catch_warnings():  # kafka-python loads its schemas with importlib APIs deprecated in 3.11
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient

pytestmark = pytest.mark.filterwarnings(r"ignore:.*is deprecated\. Use files\(\) instead:DeprecationWarning")

PARTITIONS = 4


@pytest.fixture(scope="module")
def two_dir_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedBroker, list[Path]]]:
    root = tmp_path_factory.mktemp("log-dirs")
    dirs = [root / "dir-a", root / "dir-b"]
    overrides = {"log.dirs": ",".join(map(str, dirs)), "log.segment.bytes": "4096"}
    with EmbeddedBroker(root, overrides=overrides) as b:
        yield b, dirs


def sizes_on_disk(dirs: list[Path], topic: str) -> dict[tuple[str, int], tuple[str, int]]:
    """(topic, partition) -> (log dir, bytes of its .log segment files)."""
    out = {}
    for d in dirs:
        for p in range(PARTITIONS):
            pdir = d / f"{topic}-{p}"
            if pdir.is_dir():
                out[(topic, p)] = (str(d), sum(f.stat().st_size for f in pdir.glob("*.log")))
    return out


def produce(broker: EmbeddedBroker, topic: str) -> None:
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    try:
        for i in range(300):  # several segments per partition at segment.bytes=4096
            producer.send(topic, value=os.urandom(20 + i % 50), partition=i % PARTITIONS)
        producer.flush(30_000)
    finally:
        producer.close()


def test_describe_log_dirs_sizes_match_files_kafka_python(
    two_dir_broker: tuple[EmbeddedBroker, list[Path]], topic_name: str
) -> None:
    broker, dirs = two_dir_broker
    produce(broker, topic_name)
    expected = sizes_on_disk(dirs, topic_name)
    assert len(expected) == PARTITIONS
    assert {d for d, _ in expected.values()} == set(map(str, dirs)), "partitions spread over both dirs"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        answers = admin.describe_log_dirs()
        filtered = admin.describe_log_dirs(topic_partitions={topic_name: [1, 3]})
    finally:
        admin.close()
    named = {
        (t["name"], p["partition_index"])
        for a in filtered
        for r in a["log_dirs"]
        for t in r["topics"]
        for p in t["partitions"]
    }
    assert named == {(topic_name, 1), (topic_name, 3)}, "a request naming partitions gets only those"
    seen = {}
    assert [a["broker"] for a in answers] == [1]
    for answer in answers:
        for result in answer["log_dirs"]:
            assert result["error_code"] == 0
            assert result["total_bytes"] > 0, "v4 (KIP-827) carries the filesystem's size"
            assert 0 <= result["usable_bytes"] <= result["total_bytes"]
            for topic in result["topics"]:
                if topic["name"] != topic_name:
                    continue
                for part in topic["partitions"]:
                    seen[(topic_name, part["partition_index"])] = (result["log_dir"], part["partition_size"])
                    assert part["offset_lag"] == 0
                    assert part["is_future_key"] is False
    assert seen == expected


def pylog_cli(broker: EmbeddedBroker, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pyspark_log.cli", *args, "--bootstrap-server", broker.bootstrap_servers]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def test_cli_log_dirs_describe(two_dir_broker: tuple[EmbeddedBroker, list[Path]], topic_name: str) -> None:
    broker, dirs = two_dir_broker
    produce(broker, topic_name)
    expected = sizes_on_disk(dirs, topic_name)
    proc = pylog_cli(broker, "log-dirs", "--describe", "--topic-list", topic_name)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "Querying brokers for log directories information"
    assert lines[1] == "Received log directory information from brokers 1"
    doc = json.loads(lines[2])
    assert doc["version"] == 1
    [only] = doc["brokers"]
    assert only["broker"] == 1
    assert sorted(d["logDir"] for d in only["logDirs"]) == sorted(str(d) for d in dirs)
    seen = {}
    for log_dir in only["logDirs"]:
        assert log_dir["error"] is None
        for part in log_dir["partitions"]:
            topic, _, index = part["partition"].rpartition("-")
            assert topic == topic_name, "--topic-list filters the other topics out"
            assert part["offsetLag"] == 0
            assert part["isFuture"] is False
            seen[(topic, int(index))] = (log_dir["logDir"], part["size"])
    assert seen == expected

    as_json = pylog_cli(broker, "log-dirs", "--describe", "--broker-list", "1", "--output", "json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["brokers"][0]["broker"] == 1

    usage = pylog_cli(broker, "log-dirs", "--broker-list", "x")
    assert usage.returncode == 2
    assert usage.stderr.startswith("pylog: ")
    assert "--describe" in usage.stderr
