"""A full disk, for real: the broker's only log dir on a 12 MB tmpfs (issue 17 "Disk full and disk
errors are visible": "measured on a 12 MB filesystem, a full disk answers KAFKA_STORAGE_ERROR per
produce and loses nothing acknowledged (good), but the broker logs nothing ... Log one ERROR per
failing dir naming the path and the OS error (not one per request), count it in /metrics
(Kafka's OfflineLogDirectoryCount and per-dir state), show it in DescribeLogDirs, and recover by
itself when space returns if the log is still consistent").

confluent-kafka produces 64 KiB records one at a time (acks=all, no retries) until the disk is
full; a filler file made before the broker started is then removed, and the dir must come back
by itself. Needs root for ``mount -t tmpfs``; skipped otherwise (the unit tests in
``tests/unit/log/test_log_dir_health.py`` inject the same OS error at the I/O boundary).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from pyspark_log.embedded import EmbeddedBroker
from tests.waiting import wait_until

RECORD_BYTES = 64 * 1024
FS_SIZE = "12m"
TOPIC = "full-disk"


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={FS_SIZE}", "tmpfs", str(mount)], check=False)
    if done.returncode != 0:
        pytest.skip("mount -t tmpfs is not permitted here")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def metrics(broker: EmbeddedBroker) -> str:
    port = re.search(r"metrics served at http://[^:]+:(\d+)/metrics", broker.output())
    assert port, broker.output()
    with urllib.request.urlopen(f"http://127.0.0.1:{port.group(1)}/metrics", timeout=10) as answer:
        return str(answer.read().decode())


def log_dirs(broker: EmbeddedBroker) -> dict[str, object]:
    argv = [sys.executable, "-m", "pyspark_log.cli", "log-dirs", "--describe", "--output", "json"]
    proc = subprocess.run(
        [*argv, "--bootstrap-server", broker.bootstrap_servers], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    [log_dir] = json.loads(proc.stdout)["brokers"][0]["logDirs"]
    return dict(log_dir)


def produce_one(producer: Producer, value: bytes) -> tuple[KafkaError | None, int]:
    outcome: list[tuple[KafkaError | None, int]] = []
    producer.produce(TOPIC, value=value, partition=0, on_delivery=lambda err, msg: outcome.append((err, msg.offset())))
    producer.flush(30)
    assert outcome, "the delivery report came within the flush"
    return outcome[0]


def test_full_disk_is_logged_once_counted_described_and_recovered(small_fs: Path) -> None:
    data_dir = small_fs / "logs"
    filler = small_fs / "filler"
    filler.write_bytes(b"\0" * (4 * 1024 * 1024))
    overrides = {"metrics.port": "0", "log.dir.failure.probe.interval.ms": "200", "num.partitions": "1"}
    with EmbeddedBroker(small_fs, overrides=overrides, log_path=small_fs.parent / "broker.out") as broker:
        conf = {"bootstrap.servers": broker.bootstrap_servers, "acks": "all", "retries": 0, "linger.ms": 0}
        producer = Producer({**conf, "message.timeout.ms": 20000})
        acknowledged: dict[int, bytes] = {}
        failures: list[KafkaError] = []
        for i in range(400):  # 400 x 64 KiB > 12 MB: the disk fills well before the end
            value = i.to_bytes(4, "big") * (RECORD_BYTES // 4)
            err, offset = produce_one(producer, value)
            if err is None:
                acknowledged[offset] = value
            else:
                failures.append(err)
                if len(failures) == 5:  # several requests on a full disk
                    break
        assert len(failures) == 5, "the disk never filled"
        assert all(f.code() == KafkaError.KAFKA_STORAGE_ERROR for f in failures), failures

        errors = [line for line in broker.output().splitlines() if " ERROR " in line]
        assert len(errors) == 1, errors  # one per dir, not one per request
        assert str(data_dir) in errors[0], errors[0]
        assert "No space left on device" in errors[0], errors[0]
        text = metrics(broker)
        assert "kafka_log_logmanager_offlinelogdirectorycount 1" in text
        assert f'kafka_log_logmanager_logdirectoryoffline{{logdirectory="{data_dir}"}} 1' in text
        offline = log_dirs(broker)
        assert offline["logDir"] == str(data_dir)
        assert offline["error"] == "KAFKA_STORAGE_ERROR"
        assert offline["partitions"] == []

        filler.unlink()  # space returns; the broker must notice by itself
        wait_until(lambda: log_dirs(broker)["error"] is None, "the log dir back online")
        assert "kafka_log_logmanager_offlinelogdirectorycount 0" in metrics(broker)
        assert any("back online" in line for line in broker.output().splitlines())
        err, offset = produce_one(producer, b"after")
        assert err is None, err
        acknowledged[offset] = b"after"
        [part] = log_dirs(broker)["partitions"]  # type: ignore[misc]
        on_disk = sum(f.stat().st_size for f in (data_dir / f"{TOPIC}-0").glob("*.log"))
        assert part["size"] == on_disk

        consumer = Consumer(
            {"bootstrap.servers": broker.bootstrap_servers, "group.id": "check", "enable.auto.commit": False}
        )
        try:
            consumer.assign([TopicPartition(TOPIC, 0, 0)])
            seen: dict[int, bytes] = {}

            def drained() -> bool:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    seen[msg.offset()] = msg.value()
                return max(acknowledged) in seen

            wait_until(drained, "every acknowledged record read back", timeout_s=60)
        finally:
            consumer.close()
        assert {o: seen.get(o) for o in acknowledged} == acknowledged, "nothing acknowledged is lost"
        assert sorted(seen) == list(range(len(seen))), "offsets stay contiguous"
